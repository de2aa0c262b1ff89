//! Command line: the flags, their defaults and help text.

use keepalive_server::tls::client::{TlsTarget, Trust};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use keepalive_server::config::parse_duration;

/// Idle keep-alive soak: RSS per idle connection and close lateness.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
pub struct Args {
    /// Server address to connect to (also passed as --listen to a server started with --server-bin, unless the server args set it).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,

    /// Number of keep-alive connections to open.
    #[arg(short = 'n', long, default_value_t = 2000)]
    pub connections: usize,

    /// Connections opened at a time; the next batch waits for this one's responses.
    #[arg(long, default_value_t = 200)]
    pub batch: usize,

    /// Idle timeout the server should close at (its --keep-alive-timeout plus --keep-alive-buffer).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub expect_timeout: Duration,

    /// Past expect-timeout + grace, a connection counts as not closed.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub grace: Duration,

    /// Quiet time after the last response before the "after" RSS sample.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    pub settle: Duration,

    /// PID of an already running server (for its RSS).
    #[arg(long, conflicts_with = "server_bin")]
    pub pid: Option<u32>,

    /// Start this server binary (with the args after `--`), measure it, stop it.
    #[arg(long)]
    pub server_bin: Option<PathBuf>,

    /// Where the started server's output goes [default: discarded].
    #[arg(long, requires = "server_bin")]
    pub server_log: Option<PathBuf>,

    /// Write the lateness histogram here as SVG.
    #[arg(long)]
    pub svg: Option<PathBuf>,

    /// Write one CSV row per connection here: its timestamps in ms since the
    /// first connect, and its lateness.
    #[arg(long)]
    pub csv: Option<PathBuf>,

    /// Print the report as JSON instead of plain text.
    #[arg(long)]
    pub json: bool,

    /// Also count the server threads' context switches over this long while
    /// idle with no connections: before the soak and after it.
    #[arg(long, value_parser = parse_duration)]
    pub idle_check: Option<Duration>,

    /// Speak TLS to the server (its certificate is not verified: a soak
    /// measures its own server); start it with --tls-cert and --tls-key.
    #[arg(long)]
    pub tls: bool,

    /// Arguments for the server started with --server-bin.
    #[arg(last = true)]
    pub server_args: Vec<String>,
}

impl Args {
    /// With `--tls`: how to speak TLS to the server.
    pub fn tls_target(&self) -> Result<Option<TlsTarget>, String> {
        self.tls
            .then(|| TlsTarget::new(&self.addr.ip().to_string(), &Trust::Insecure))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Args;

    /// Each flag's help is its own (a doc line once slid from the
    /// server's arguments onto `--tls`).
    #[test]
    fn tls_and_the_server_arguments_have_their_own_help() {
        let command = Args::command();
        let help = |id: &str| {
            let arg = command.get_arguments().find(|a| a.get_id() == id).unwrap();
            arg.get_help().map(ToString::to_string).unwrap_or_default()
        };
        assert!(help("tls").starts_with("Speak TLS"), "{}", help("tls"));
        assert!(!help("tls").contains("--server-bin"), "{}", help("tls"));
        assert!(help("server_args").contains("--server-bin"));
    }
}
