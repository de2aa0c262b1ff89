//! The subcommands as the server's own command line knows them. `main`
//! runs each before the server's flags are parsed; they are named here so
//! that `--help` lists them, `help [SUBCOMMAND]` answers, and a typo
//! (`prob`) is pointed to the right one by clap's suggestions.

use std::ffi::OsString;

use clap::{Arg, Command};

/// Each subcommand's name and one line about it. A new subcommand
/// dispatched in `main` belongs here too.
pub const SUBCOMMANDS: &[(&str, &str)] = &[
    (
        "probe",
        "Measure another server's keep-alive behaviour: what it advertises, when it really \
         closes idle connections, and the pool idle timeout that is safe in front of it",
    ),
    (
        "lab",
        "Run a command (a test suite) against the keep-alive lab and fail when a client's \
         pool would race the server's idle close (the CI guard; its base URL in KAS_LAB_URL)",
    ),
];

/// `command` with the subcommands listed (each takes any arguments: it is
/// never parsed here) and clap's `help` subcommand.
pub(super) fn with_subcommands(command: Command) -> Command {
    command.subcommands(SUBCOMMANDS.iter().map(|&(name, about)| {
        Command::new(name).about(about).disable_help_flag(true).arg(
            Arg::new("args")
                .num_args(0..)
                .trailing_var_arg(true)
                .allow_hyphen_values(true),
        )
    }))
}

/// `help SUBCOMMAND ...` as `SUBCOMMAND --help`, so that each subcommand
/// answers with its own help; any other arguments as they are.
pub fn help_as_flag(mut args: Vec<OsString>) -> Vec<OsString> {
    let named = |at: usize, name: &str| args.get(at).is_some_and(|arg| arg == name);
    if named(1, "help") && SUBCOMMANDS.iter().any(|&(name, _)| named(2, name)) {
        args.remove(1);
        args.truncate(2);
        args.push("--help".into());
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn help_with_a_subcommand_becomes_its_help_flag() {
        assert_eq!(
            help_as_flag(os(&["kas", "help", "probe", "x"])),
            os(&["kas", "probe", "--help"])
        );
        for unchanged in [
            &["kas", "help"][..],
            &["kas", "help", "nope"],
            &["kas", "probe", "help"],
        ] {
            assert_eq!(help_as_flag(os(unchanged)), os(unchanged));
        }
    }
}
