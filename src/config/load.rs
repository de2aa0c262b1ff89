//! Where option values come from, in order of precedence: flags, `KAS_*`
//! environment variables, the `--config` TOML file, defaults.
//!
//! clap parses the flags alone (its own environment lookup is switched
//! off, so an error can name the variable the user really set); each
//! variable and then each file key that no flag set is checked on its own,
//! so a bad value is reported as the variable's or the file's, and then
//! passed on as if it were a flag. The origin of every value is kept for
//! `--check`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, Command, CommandFactory, FromArgMatches};

use super::Config;
use super::values::parse_bool;

/// The largest config file read.
pub const MAX_CONFIG_FILE: u64 = 1 << 20;

/// Where an option's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Default,
    Flag,
    /// The environment variable, by name.
    Env(String),
    /// The `--config` file.
    File,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::Flag => f.write_str("flag"),
            Origin::Env(name) => f.write_str(name),
            Origin::File => f.write_str("config file"),
        }
    }
}

/// Each option's origin, by key; a key not in the map has its default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origins(BTreeMap<String, Origin>);

impl Origins {
    pub fn of(&self, key: &str) -> &Origin {
        self.0.get(key).unwrap_or(&Origin::Default)
    }

    fn set(&mut self, key: &str, origin: Origin) {
        self.0.insert(key.to_owned(), origin);
    }
}

/// The command line parser: the documented command without clap's own
/// environment lookup (see the module doc).
pub(super) fn parser() -> Command {
    documented().mut_args(|arg| arg.env(None))
}

/// The command as `--help` shows it: the server's flags, with their
/// variables, and the subcommands.
fn documented() -> Command {
    super::subcommands::with_subcommands(Config::command())
}

/// Parses `args` (program name first), the `KAS_*` environment and the
/// `--config` file into a [`Config`]; an error names the flag, variable or
/// file key at fault and exits with status 2.
pub(super) fn load(args: Vec<OsString>) -> Result<Config, clap::Error> {
    let documented = documented();
    let parser = parser();
    let matches = match parser.clone().try_get_matches_from(&args) {
        Ok(matches) => matches,
        // Rendered by the documented command, so `--help` shows the variables.
        Err(e) if !e.use_stderr() => {
            return Err(documented.try_get_matches_from(&args).err().unwrap_or(e));
        }
        Err(e) => return Err(e),
    };
    if let Some(name) = matches.subcommand_name() {
        // `main` runs a subcommand only in first place.
        return Err(usage_error(format!(
            "`{name}` must come first, before any option: keepalive-server {name} [ARGS]"
        )));
    }
    let mut layered = Layered {
        parser: &parser,
        extra: Vec::new(),
        origins: Origins::default(),
    };
    for arg in documented.get_arguments() {
        let id = arg.get_id().as_str();
        if matches.value_source(id) == Some(ValueSource::CommandLine) {
            layered.origins.set(id, Origin::Flag);
        } else if let Some(var) = arg.get_env() {
            layered.take_env(arg, &var.to_string_lossy())?;
        }
    }
    let config_path = matches
        .get_one::<PathBuf>("config")
        .cloned()
        .or_else(|| std::env::var_os("KAS_CONFIG").map(PathBuf::from))
        .filter(|path| !path.as_os_str().is_empty());
    if let Some(path) = &config_path {
        layered.take_file(&documented, path)?;
    }
    let Layered { extra, origins, .. } = layered;
    let mut all = args;
    all.extend(extra);
    let matches = parser.try_get_matches_from(all)?;
    let mut config = Config::from_arg_matches(&matches)?;
    config.origins = origins;
    controls_yield_to_the_service(&mut config);
    super::credentials::find_tls_files_in(&mut config, super::credentials::directory().as_deref());
    super::consistency::check(&config).map_err(usage_error)?;
    config.tls = super::consistency::load_tls(&config).map_err(usage_error)?;
    Ok(config)
}

/// Values from the environment and the file, as extra arguments.
struct Layered<'a> {
    parser: &'a Command,
    extra: Vec<OsString>,
    origins: Origins,
}

impl Layered<'_> {
    /// `KAS_<NAME>`, if set and not empty.
    fn take_env(&mut self, arg: &Arg, var: &str) -> Result<(), clap::Error> {
        let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
            return Ok(());
        };
        let value = value
            .into_string()
            .map_err(|_| usage_error(format!("environment variable {var}: not valid UTF-8")))?;
        self.push(arg, &value).map_err(|reason| {
            usage_error(format!(
                "environment variable {var}: invalid value '{value}': {reason}"
            ))
        })?;
        self.origins
            .set(arg.get_id().as_str(), Origin::Env(var.into()));
        Ok(())
    }

    /// Every key of the TOML file that no flag or variable set.
    fn take_file(&mut self, documented: &Command, path: &Path) -> Result<(), clap::Error> {
        let shown = path.display();
        let text = read_config_file(path).map_err(usage_error)?;
        let table: toml::Table = text
            .parse()
            .map_err(|e| usage_error(format!("config file {shown}: {e}")))?;
        for (key, value) in table {
            let arg = documented
                .get_arguments()
                .find(|arg| arg.get_id() == key.as_str() && in_file(arg))
                .ok_or_else(|| usage_error(format!("config file {shown}: unknown key `{key}`")))?;
            if self.origins.of(&key) != &Origin::Default {
                continue;
            }
            let text = match &value {
                toml::Value::String(text) => text.clone(),
                toml::Value::Integer(_) | toml::Value::Boolean(_) => value.to_string(),
                other => {
                    return Err(usage_error(format!(
                        "config file {shown}: `{key}` must be a string, an integer or a boolean, not {other}"
                    )));
                }
            };
            self.push(arg, &text).map_err(|reason| {
                usage_error(format!(
                    "config file {shown}: invalid value {value} for `{key}`: {reason}"
                ))
            })?;
            self.origins.set(&key, Origin::File);
        }
        Ok(())
    }

    /// Checks `text` as `arg`'s value on its own, then keeps it as a flag.
    fn push(&mut self, arg: &Arg, text: &str) -> Result<(), String> {
        let flag = format!("--{}", arg.get_long().unwrap_or_default());
        if matches!(arg.get_action(), ArgAction::SetTrue) {
            if parse_bool(text)? {
                self.extra.push(flag.into());
            }
            return Ok(());
        }
        let single = format!("{flag}={text}");
        self.parser
            .clone()
            .try_get_matches_from(["keepalive-server", single.as_str()])
            .map_err(|e| {
                std::error::Error::source(&e)
                    .map_or_else(|| e.kind().to_string(), ToString::to_string)
            })?;
        self.extra.push(single.into());
        Ok(())
    }
}

/// Whether `arg` may be set in the config file: every option but the file
/// itself and the one-shot actions.
/// In front of a service (`--upstream`) the query controls are off unless
/// `test_controls` was set: their names (`after=`, `max=`, `close=`) are
/// common query parameters of a real API (a cursor, a page size), which
/// the controls would take from the service or refuse with a 400. The
/// server flags (`--advertise`, `--idle-close`, `--keep-alive-timeout`,
/// `--max-requests-per-socket`) set the same for every connection.
fn controls_yield_to_the_service(config: &mut Config) {
    if config.upstream.is_some() && config.origins.of("test_controls") == &Origin::Default {
        config.test_controls = false;
    }
}

pub(super) fn in_file(arg: &Arg) -> bool {
    arg.get_long().is_some()
        && !matches!(
            arg.get_id().as_str(),
            "config" | "check" | "help" | "version"
        )
}

/// Reads a config file: a regular file of at most [`MAX_CONFIG_FILE`]
/// bytes, opened without blocking (a FIFO or a device is refused before
/// anything is read).
pub fn read_config_file(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot read config file {shown}: {e}"))?;
    let metadata = file
        .metadata()
        .map_err(|e| format!("cannot read config file {shown}: {e}"))?;
    let kind = metadata.file_type();
    let not_regular = if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        None
    };
    if let Some(what) = not_regular {
        return Err(format!("config file {shown} is {what}, not a regular file"));
    }
    let too_large = || format!("config file {shown} is larger than 1MiB");
    if metadata.len() > MAX_CONFIG_FILE {
        return Err(too_large());
    }
    let mut text = String::new();
    (&mut file)
        .take(MAX_CONFIG_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read config file {shown}: {e}"))?;
    if text.len() as u64 > MAX_CONFIG_FILE {
        return Err(too_large());
    }
    Ok(text)
}

/// A configuration error: clap prints it as `error: ...` and exits 2.
fn usage_error(message: String) -> clap::Error {
    clap::Error::raw(ErrorKind::InvalidValue, format!("{message}\n"))
}
