//! The `lab` subcommand's command line: every server flag (the server's
//! own [`Config`], flattened in), the guard's `--json`, `--fail-on`,
//! `--real-close` and `--allow-no-clients`, the other hop's
//! `--lb-idle-timeout`, `--lb` and `--lb-margin` (which need the server's
//! `--upstream`), and the COMMAND after `--`.
//!
//! clap checks the whole line once, with the subcommand's help and usage. The
//! server's configuration is then loaded as the server loads its own
//! ([`Config::load_from`]: flags, then `KAS_*` variables, then the
//! `--config` file), from the flags before `--` less the guard's, with
//! what the guard needs added: a free port on loopback unless `--listen`
//! is given, the test controls on unless `--test-controls` is given, and
//! a window as long as any run, so the verdicts cover the whole run; the
//! peer observer tells clients apart by User-Agent as well as by address;
//! and, unless `--real-close` is given, the shadow deadline
//! ([`SHADOW_MIN`]).

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::{Arg, ArgMatches, Command, CommandFactory, ValueEnum};

use crate::config::{Config, parse_duration};
use crate::probe::cli::positive_duration;
use crate::probe::lb_hop::{Front, Preset};

const USAGE: &str = "keepalive-server lab [SERVER FLAGS] [--json FILE] [--fail-on race|at-risk|inconclusive] [--real-close] [--allow-no-clients] [--upstream URL --lb-idle-timeout DURATION|--lb PRESET [--lb-margin DURATION]] -- COMMAND [ARGS...]";

const ABOUT: &str = "\
The keep-alive race guard: runs COMMAND (a test suite) against the keep-alive lab, then judges \
every client that connected over the whole run and fails when one would race the server at the \
idle boundary.";

const AFTER_HELP: &str = "\
The server starts with the lab's test controls on, listening on a free port on 127.0.0.1 unless \
--listen is given (KAS_LISTEN, KAS_TEST_CONTROLS and their --config keys do not apply); every \
other server flag, KAS_* variable and --config key does. COMMAND runs with \
KAS_LAB_URL set to the server's base URL (http://127.0.0.1:PORT/, or https:// with --tls-cert) \
and its environment otherwise unchanged; its standard streams pass through. When it ends, the \
guard waits for what the server can still learn (at most 2.5 s), prints a table of the \
clients (address and User-Agent, verdict, requests, lost requests, near misses, advice) on \
stderr, and with --json writes the same to FILE.

The shadow deadline: an idle connection whose timer runs out is not closed but kept open as long \
again (at least 2 s more); a request that reuses it then is served and counted as one \
production would have lost (`race`), and a client that opens a new connection instead shows \
its own limit is shorter. A client whose limit the run did not show against the deadline is \
`inconclusive`, with the pause that would settle it. --real-close closes at the deadline \
instead, and counts the requests that really meet the close.

Exit status (the table's last line says the same, in one sentence): COMMAND's own when it \
failed; otherwise 3 when no client connected (nothing was judged: point the client under test \
at KAS_LAB_URL), unless --allow-no-clients; otherwise 1 when a client is `race`, or `at risk` \
under the default --fail-on at-risk, or `inconclusive` under --fail-on inconclusive; otherwise \
4 when the service behind the lab closes idle connections before the balancer would \
(--lb-idle-timeout), or its check was cut short (inconclusive: not a pass); otherwise 0. 2: a usage error. 126/127: COMMAND could not be run (not executable / not found). SIGINT or \
SIGTERM stops COMMAND too: 128 + the signal.

Server flags set what the query controls set per connection, for every connection: \
--advertise none (no Keep-Alive field, as a production server or load balancer that \
advertises nothing), --idle-close rst (the idle close is a reset).

The other hop (--upstream URL with --lb-idle-timeout or --lb): while COMMAND runs, the guard \
checks the service itself, as keepalive-server probe --lb-idle-timeout does: once it accepts a \
connection (COMMAND may start it), a few connections of the guard's own, straight to it, are \
held idle until the balancer's timeout plus the margin. When COMMAND ends the guard waits for \
the check while its idle connections stay open; a service that stops first (COMMAND's own) \
cuts the check short: inconclusive, not a pass (exit 4, said as such), unless it had already \
closed one too soon. To check a 60 s balancer, start the service outside COMMAND (the guard \
then waits for the check) or let the suite run past the timeout. The table shows the service apart \
from the clients, and names its own setting to change.

In CI: keepalive-server lab --keep-alive-timeout 5s -- npm test";

/// Which verdict fails the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum FailOn {
    /// Only lost requests fail; `at risk` is reported and passes.
    Race,
    /// Lost requests and clients at risk fail.
    #[default]
    AtRisk,
    /// Those, and clients whose limit the run did not show.
    Inconclusive,
}

impl FailOn {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FailOn::Race => "race",
            FailOn::AtRisk => "at-risk",
            FailOn::Inconclusive => "inconclusive",
        }
    }
}

/// The shortest shadow deadline: an idle connection is kept past its
/// deadline as long again, and at least this long (see
/// `Settings::shadow_ms`).
pub const SHADOW_MIN: std::time::Duration = std::time::Duration::from_secs(2);

/// What the guard runs: the server's configuration, what it writes, and
/// the command.
#[derive(Debug)]
pub struct GuardArgs {
    pub config: Config,
    /// Where the JSON report goes, if anywhere.
    pub json: Option<PathBuf>,
    pub fail_on: FailOn,
    /// Close idle connections at the deadline (no shadow deadline).
    pub real_close: bool,
    /// A run no client reached passes.
    pub allow_no_clients: bool,
    /// The front the service behind `--upstream` is checked against (the
    /// other hop), if asked.
    pub front: Option<Front>,
    /// The program and its arguments (never empty).
    pub command: Vec<OsString>,
}

/// The guard's own flags that take a value: not passed to the server.
const GUARD_FLAGS: [&str; 5] = ["json", "fail-on", "lb-idle-timeout", "lb", "lb-margin"];
/// The guard's own switches: not passed to the server.
const GUARD_SWITCHES: [&str; 2] = ["real-close", "allow-no-clients"];

/// The window the guard judges on: longer than any run (the loop clock
/// starts at zero, so the whole run falls in it); the longest allowed.
const WHOLE_RUN: &str = "365days";

/// The `lab` subcommand's command line, as `--help` shows it.
pub fn command() -> Command {
    Config::command()
        .name("keepalive-server lab")
        .bin_name("keepalive-server lab")
        .about(ABOUT)
        .override_usage(USAGE)
        .after_help(AFTER_HELP)
        .disable_version_flag(true)
        // Only their flags change these two: the guard's own defaults win
        // over KAS_LISTEN, KAS_TEST_CONTROLS and the --config file (see
        // `server_args`), so the help names no variable for them.
        .mut_arg("listen", |arg| {
            arg.default_value("127.0.0.1:0")
                .env(None)
                .help("Address to listen on [default: a free port on 127.0.0.1; KAS_LISTEN and a --config file's listen do not apply]")
        })
        .mut_arg("test_controls", |arg| {
            arg.env(None).help(
                "Obey the keep-alive lab's query controls (ka=, advertise=, close=, after=, max=): on or off \
                 [KAS_TEST_CONTROLS and a --config file's test_controls do not apply]",
            )
        })
        .mut_arg("check", |arg| arg.hide(true))
        .mut_arg("peers_window", |arg| arg.hide(true))
        .arg(
            Arg::new("json")
                .long("json")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Also write the clients' verdicts to FILE as JSON")
                .help_heading("Guard"),
        )
        .arg(
            Arg::new("fail_on")
                .long("fail-on")
                .value_name("race|at-risk|inconclusive")
                .value_parser(clap::builder::EnumValueParser::<FailOn>::new())
                .default_value("at-risk")
                .help("The verdict that fails the run: race (lost requests only), at-risk (also clients that would race), or inconclusive (also clients whose limit the run did not show)")
                .help_heading("Guard"),
        )
        .arg(
            Arg::new("real_close")
                .long(GUARD_SWITCHES[0])
                .action(clap::ArgAction::SetTrue)
                .help("Close idle connections at the deadline and count the requests that meet the close, instead of the shadow deadline")
                .help_heading("Guard"),
        )
        .arg(
            Arg::new("allow_no_clients")
                .long(GUARD_SWITCHES[1])
                .action(clap::ArgAction::SetTrue)
                .help("Pass a run in which no client connected to the lab (by default it exits 3: nothing was judged)")
                .help_heading("Guard"),
        )
        .arg(
            Arg::new("lb_idle_timeout")
                .long("lb-idle-timeout")
                .value_name("DURATION")
                .value_parser(positive_duration)
                .help("The other hop: the idle timeout of what pools connections in front of the --upstream service in production (a load balancer, nginx's upstream keepalive_timeout). While COMMAND runs, the guard holds its own idle connections to the service (straight, not through the lab) this long plus --lb-margin, and exits 4 if the service closes one sooner, naming its setting; it wins over --lb")
                .help_heading("The other hop"),
        )
        .arg(
            Arg::new("lb")
                .long("lb")
                .value_name("PRESET")
                .value_parser(clap::builder::EnumValueParser::<Preset>::new())
                .help("The other hop by a front's documented idle timeout for its backends: aws-alb (60 s), gcp (600 s), nginx (60 s); sources in keepalive-server probe --help")
                .help_heading("The other hop"),
        )
        .arg(
            Arg::new("lb_margin")
                .long("lb-margin")
                .value_name("DURATION")
                .value_parser(parse_duration)
                .help("How much longer than the balancer the service must keep an idle connection [default: 10% of the balancer's timeout, at least 100ms and at most 5s]")
                .help_heading("The other hop"),
        )
        .arg(
            Arg::new("command")
                .value_name("COMMAND")
                .num_args(1..)
                .last(true)
                .required(true)
                .value_parser(clap::value_parser!(OsString))
                .help("The command to run against the lab (its base URL in KAS_LAB_URL), after --"),
        )
}

/// Parses what follows `lab` (`args` starts with the program name): a
/// usage error (exit status 2) names the flag, variable or file key.
pub fn parse(args: Vec<OsString>) -> Result<GuardArgs, clap::Error> {
    let cmd = command();
    let matches = cmd
        .clone()
        .try_get_matches_from(&args)
        .map_err(|error| with_dashes_tip(error, &args))?;
    for refused in ["check", "peers_window"] {
        if matches.value_source(refused) == Some(clap::parser::ValueSource::CommandLine) {
            let flag = refused.replace('_', "-");
            return Err(cmd.clone().error(
                ErrorKind::ArgumentConflict,
                format!("--{flag} has no meaning here: the guard judges the whole run"),
            ));
        }
    }
    let json = matches.get_one::<PathBuf>("json").cloned();
    let fail_on = *matches.get_one::<FailOn>("fail_on").expect("has a default");
    let real_close = matches.get_flag("real_close");
    let allow_no_clients = matches.get_flag("allow_no_clients");
    let command: Vec<OsString> = matches
        .get_many::<OsString>("command")
        .expect("required")
        .cloned()
        .collect();
    let front = Front::from_flags(
        matches
            .get_one::<std::time::Duration>("lb_idle_timeout")
            .copied(),
        matches.get_one::<Preset>("lb").copied(),
        matches.get_one::<std::time::Duration>("lb_margin").copied(),
    );
    let mut config = Config::load_from(server_args(&args[1..], &matches))?;
    if let Some(refused) = other_hop_refused(&matches, front, &config) {
        return Err(cmd
            .clone()
            .error(ErrorKind::MissingRequiredArgument, refused));
    }
    config.clients_by_agent = true;
    config.shadow = (!real_close).then_some(SHADOW_MIN);
    Ok(GuardArgs {
        config,
        json,
        fail_on,
        real_close,
        allow_no_clients,
        front,
        command,
    })
}

/// Why the other hop's flags cannot be taken as given: the check needs
/// the service (`--upstream`), and `--lb-margin` needs a balancer.
fn other_hop_refused(
    matches: &ArgMatches,
    front: Option<Front>,
    config: &Config,
) -> Option<String> {
    let given = |id: &str| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    let flag = match (given("lb_idle_timeout"), given("lb")) {
        (true, _) => "--lb-idle-timeout",
        (false, true) => "--lb",
        (false, false) if given("lb_margin") => {
            return Some("--lb-margin needs --lb-idle-timeout or --lb: the margin is beyond a balancer's idle timeout".into());
        }
        (false, false) => return None,
    };
    (front.is_some() && config.upstream.is_none()).then(|| {
        format!(
            "{flag} checks the service behind the lab: give the service with --upstream URL \
             (e.g. --upstream http://127.0.0.1:8000 {flag} ...)"
        )
    })
}

/// A usage error on a line with no `--`, such as `lab pytest`, tells
/// where COMMAND goes (unless clap already has a tip of its own).
fn with_dashes_tip(mut error: clap::Error, args: &[OsString]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    let dashes = args.iter().any(|arg| arg == "--");
    let about_the_line = matches!(
        error.kind(),
        ErrorKind::UnknownArgument | ErrorKind::MissingRequiredArgument
    );
    if !dashes && about_the_line && error.get(ContextKind::Suggested).is_none() {
        let tip = "COMMAND goes after --: keepalive-server lab --keep-alive-timeout 5s -- npm test";
        error.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![tip.into()]),
        );
    }
    error
}

/// The server's command line: the flags before `--` less the guard's,
/// then what the guard needs that the user did not set.
fn server_args(args: &[OsString], matches: &ArgMatches) -> Vec<OsString> {
    let mut server: Vec<OsString> = vec!["keepalive-server".into()];
    server.extend(server_flags(args));
    let given = |id: &str| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    if !given("listen") {
        server.push("--listen=127.0.0.1:0".into());
    }
    if !given("test_controls") {
        server.push("--test-controls=on".into());
    }
    server.push(format!("--peers-window={WHOLE_RUN}").into());
    server
}

/// The flags before `--`, without the guard's own (`--json FILE`,
/// `--json=FILE`, and the same for `--fail-on`). A server flag's value is
/// kept with it whatever it looks like (`--access-log --json` logs to a
/// file named `--json`).
fn server_flags(args: &[OsString]) -> Vec<OsString> {
    let takes_value: Vec<String> = Config::command()
        .get_arguments()
        .filter(|arg| arg.get_action().takes_values())
        .filter_map(|arg| arg.get_long().map(str::to_owned))
        .collect();
    let mut kept = Vec::new();
    let mut tokens = args.iter();
    while let Some(token) = tokens.next() {
        if token == "--" {
            break;
        }
        let text = token.to_string_lossy();
        let Some(long) = text.strip_prefix("--") else {
            kept.push(token.clone());
            continue;
        };
        let (name, inline_value) = match long.split_once('=') {
            Some((name, _)) => (name, true),
            None => (long, false),
        };
        if GUARD_SWITCHES.contains(&name) && !inline_value {
            continue;
        }
        let guard = GUARD_FLAGS.contains(&name);
        let value = (!inline_value && (guard || takes_value.iter().any(|t| t == name)))
            .then(|| tokens.next())
            .flatten();
        if !guard {
            kept.push(token.clone());
            kept.extend(value.cloned());
        }
    }
    kept
}

/// The program COMMAND names, for messages.
pub fn program(command: &[OsString]) -> &OsStr {
    command.first().map_or(OsStr::new(""), OsString::as_os_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    fn parsed(args: &[&str]) -> Result<GuardArgs, clap::Error> {
        let mut all = vec!["keepalive-server lab"];
        all.extend_from_slice(args);
        parse(os(&all))
    }

    #[test]
    fn the_guards_flags_are_not_the_servers() {
        let flags = server_flags(&os(&[
            "--json",
            "out.json",
            "--keep-alive-timeout",
            "1s",
            "--fail-on=race",
            "--real-close",
            "--allow-no-clients",
            "--lb-idle-timeout",
            "2s",
            "--lb=aws-alb",
            "--lb-margin",
            "1s",
            "--access-log",
            "--json",
            "--workers=1",
            "--",
            "--json",
        ]));
        assert_eq!(
            flags,
            os(&[
                "--keep-alive-timeout",
                "1s",
                "--access-log",
                "--json",
                "--workers=1"
            ])
        );
    }

    #[test]
    fn defaults_listen_on_a_free_loopback_port_with_controls_on() {
        let args = parsed(&["--keep-alive-timeout", "1s", "--", "true", "-x"]).unwrap();
        assert_eq!(args.config.listen, "127.0.0.1:0".parse().unwrap());
        assert!(args.config.test_controls);
        assert_eq!(args.config.keep_alive_timeout.as_millis(), 1000);
        assert_eq!(args.fail_on, FailOn::AtRisk);
        assert_eq!(args.json, None);
        assert!(!args.real_close);
        assert!(!args.allow_no_clients);
        assert_eq!(args.config.settings().shadow_ms, Some(2000));
        assert_eq!(args.command, os(&["true", "-x"]));
    }

    #[test]
    fn guard_flags_and_an_explicit_listen_are_taken() {
        let args = parsed(&[
            "--fail-on",
            "race",
            "--json=out.json",
            "--listen",
            "127.0.0.1:0",
            "--test-controls=off",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .unwrap();
        assert_eq!(args.fail_on, FailOn::Race);
        assert_eq!(args.json, Some(PathBuf::from("out.json")));
        assert!(!args.config.test_controls);
        assert_eq!(args.command, os(&["sh", "-c", "exit 3"]));
    }

    #[test]
    fn what_the_controls_say_is_taken_as_server_flags() {
        use crate::config::{Advertised, IdleClose};
        let args = parsed(&["--advertise", "none", "--idle-close=rst", "--", "true"]).unwrap();
        assert_eq!(args.config.advertise, Advertised::Nothing);
        assert_eq!(args.config.idle_close, IdleClose::Rst);
        assert_eq!(args.config.settings().keep_alive_advertised_secs, None);
        let error = parsed(&["--advertise", "never", "--", "true"]).expect_err("bad");
        assert_eq!(error.exit_code(), 2);
    }

    #[test]
    fn the_other_hop_needs_the_upstream() {
        let args = parsed(&[
            "--upstream",
            "http://127.0.0.1:9",
            "--lb-idle-timeout",
            "2s",
            "--",
            "true",
        ])
        .unwrap();
        let front = args.front.expect("a front");
        assert_eq!(front.idle_timeout, std::time::Duration::from_secs(2));
        assert_eq!(front.margin, std::time::Duration::from_millis(200));
        let args = parsed(&[
            "--upstream=http://127.0.0.1:9",
            "--lb",
            "aws-alb",
            "--",
            "true",
        ]);
        assert_eq!(args.unwrap().front.unwrap().threshold().as_secs(), 65);
        for bad in [
            &["--lb-idle-timeout", "2s", "--", "true"][..],
            &["--lb", "nginx", "--", "true"],
            &[
                "--upstream",
                "http://127.0.0.1:9",
                "--lb-margin",
                "1s",
                "--",
                "true",
            ],
            &[
                "--upstream",
                "http://127.0.0.1:9",
                "--lb-idle-timeout",
                "0",
                "--",
                "true",
            ],
        ] {
            let error = parsed(bad).expect_err("a usage error");
            assert_eq!(error.exit_code(), 2, "{bad:?}: {error}");
        }
        let text = parsed(&["--lb-idle-timeout", "2s", "--", "true"])
            .expect_err("no upstream")
            .render()
            .to_string();
        assert!(text.contains("--upstream URL"), "{text}");
        assert_eq!(parsed(&["--", "true"]).unwrap().front, None);
    }

    #[test]
    fn real_close_turns_the_shadow_deadline_off() {
        let args = parsed(&[
            "--real-close",
            "--allow-no-clients",
            "--fail-on=inconclusive",
            "--",
            "true",
        ])
        .unwrap();
        assert!(args.real_close);
        assert!(args.allow_no_clients);
        assert_eq!(args.config.settings().shadow_ms, None);
        assert_eq!(args.fail_on, FailOn::Inconclusive);
    }

    #[test]
    fn usage_errors_exit_2() {
        for bad in [
            &["true"][..],
            &["--"],
            &["--fail-on", "never", "--", "true"],
            &["--keep-alive-timeout", "soon", "--", "true"],
            &["--peers-window", "1m", "--", "true"],
            &["--check", "--", "true"],
        ] {
            let error = parsed(bad).expect_err("a usage error");
            assert_eq!(error.exit_code(), 2, "{bad:?}: {error}");
        }
    }

    #[test]
    fn help_names_no_variable_the_guard_overrides() {
        let help = command().render_long_help().to_string();
        assert!(!help.contains("[env: KAS_LISTEN"), "{help}");
        assert!(!help.contains("[env: KAS_TEST_CONTROLS"), "{help}");
        assert!(help.contains("[env: KAS_KEEP_ALIVE_TIMEOUT"), "{help}");
    }

    #[test]
    fn a_line_without_dashes_is_told_where_command_goes() {
        for bad in [&["pytest", "-q"][..], &[], &["--keep-alive-timeout", "1s"]] {
            let error = parsed(bad).expect_err("a usage error");
            assert_eq!(error.exit_code(), 2);
            let text = error.render().to_string();
            assert!(text.contains("COMMAND goes after --"), "{bad:?}: {text}");
        }
        let error = parsed(&["--bogus", "--", "true"]).expect_err("a usage error");
        let text = error.render().to_string();
        assert!(!text.contains("COMMAND goes after --"), "{text}");
    }

    #[test]
    fn help_shows_the_synopsis_and_the_variable() {
        let help = command().render_long_help().to_string();
        assert!(help.contains(USAGE), "{help}");
        assert!(help.contains("KAS_LAB_URL"), "{help}");
        assert!(help.contains("--keep-alive-timeout"), "{help}");
    }
}
