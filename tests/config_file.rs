//! The `--config` TOML layer and the command line, against the built binary:
//! file settings apply, precedence is flag > KAS_* > file > default, bad
//! files exit 2 naming the problem, and `--help`/`--version` say what they should.

mod common_ops;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common_ops::{Client, Running, command, repo_path, run_to_exit};

const EXIT_WITHIN: Duration = Duration::from_secs(20);

/// A TOML file in a fresh temporary directory (removed when dropped).
struct TempFile {
    dir: PathBuf,
    path: PathBuf,
}

impl TempFile {
    fn new(name: &str, contents: &str) -> TempFile {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kas-config-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap();
        TempFile { dir, path }
    }

    fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts the binary on port 0 with `args` and returns the `Keep-Alive`
/// header of its answer to `GET /`.
fn keep_alive_header(mut command: Command) -> String {
    command.args(["--listen", "127.0.0.1:0", "--workers", "1"]);
    let server = Running::start(command);
    let mut client = Client::connect(server.addr);
    let response = client.request("/");
    assert_eq!(response.status, 200);
    response
        .header("keep-alive")
        .unwrap_or_else(|| panic!("no Keep-Alive header: {response:?}"))
        .to_owned()
}

/// Runs the binary expecting it to refuse to start: exit 2, and the stderr.
fn refuses(command: Command) -> String {
    let (status, _, stderr) = run_to_exit(command, EXIT_WITHIN);
    assert_eq!(status.code(), Some(2), "status {status}, stderr: {stderr}");
    stderr
}

#[test]
fn file_settings_are_applied() {
    let file = TempFile::new(
        "server.toml",
        "# comments are fine\nkeep_alive_timeout = \"5s\"\nkeep_alive_buffer = \"250ms\"\n\
         max_requests_per_socket = 3\naccess_log = true\n",
    );
    let header = keep_alive_header(command(&["--config", file.arg()]));
    assert_eq!(header, "timeout=5, max=3");
}

#[test]
fn default_without_a_file() {
    assert_eq!(keep_alive_header(command(&[])), "timeout=65");
}

#[test]
fn precedence_is_flag_then_env_then_file_then_default() {
    let file = TempFile::new("server.toml", "keep_alive_timeout = \"5s\"\n");
    assert_eq!(
        keep_alive_header(command(&["--config", file.arg()])),
        "timeout=5"
    );

    let mut env = command(&["--config", file.arg()]);
    env.env("KAS_KEEP_ALIVE_TIMEOUT", "7s");
    assert_eq!(keep_alive_header(env), "timeout=7");

    let mut flag = command(&["--config", file.arg(), "--keep-alive-timeout", "9s"]);
    flag.env("KAS_KEEP_ALIVE_TIMEOUT", "7s");
    assert_eq!(keep_alive_header(flag), "timeout=9");

    // The file can come from KAS_CONFIG too.
    let mut via_env = command(&[]);
    via_env.env("KAS_CONFIG", file.arg());
    assert_eq!(keep_alive_header(via_env), "timeout=5");
}

#[test]
fn a_flag_overrides_one_file_key_and_keeps_the_rest() {
    let file = TempFile::new(
        "server.toml",
        "keep_alive_timeout = \"5s\"\nmax_requests_per_socket = 4\n",
    );
    let header = keep_alive_header(command(&[
        "--config",
        file.arg(),
        "--max-requests-per-socket",
        "0",
    ]));
    assert_eq!(header, "timeout=5");
}

#[test]
fn a_misspelt_key_exits_2_naming_it() {
    let file = TempFile::new("server.toml", "keep_alive_timout = \"5s\"\n");
    let stderr = refuses(command(&[
        "--config",
        file.arg(),
        "--listen",
        "127.0.0.1:0",
    ]));
    assert!(stderr.contains("keep_alive_timout"), "{stderr}");
    assert!(stderr.contains("unknown key"), "{stderr}");
}

#[test]
fn a_bad_value_in_the_file_exits_2_naming_key_and_file() {
    for (contents, key) in [
        ("keep_alive_timeout = \"soon\"\n", "keep_alive_timeout"),
        ("max_body_size = \"12 parsecs\"\n", "max_body_size"),
        ("max_connections = -3\n", "max_connections"),
        ("listen = \"nowhere\"\n", "listen"),
        ("keep_alive_timeout = 5.5\n", "keep_alive_timeout"),
        ("access_log = \"yes\"\n", "access_log"),
    ] {
        let file = TempFile::new("server.toml", contents);
        let mut cmd = command(&["--config", file.arg()]);
        if key != "listen" {
            // (a --listen flag would override the file's bad listen)
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        let stderr = refuses(cmd);
        assert!(stderr.contains(key), "{contents:?}: {stderr}");
        assert!(stderr.contains(file.arg()), "{contents:?}: {stderr}");
        assert!(
            stderr.contains("config file"),
            "{contents:?} blamed on something else: {stderr}"
        );
    }
}

#[test]
fn bad_toml_exits_2() {
    let file = TempFile::new("server.toml", "keep_alive_timeout = \n");
    let stderr = refuses(command(&[
        "--config",
        file.arg(),
        "--listen",
        "127.0.0.1:0",
    ]));
    assert!(stderr.contains(file.arg()), "{stderr}");
}

#[test]
fn a_missing_file_exits_2() {
    let stderr = refuses(command(&[
        "--config",
        "/nonexistent/kas/server.toml",
        "--listen",
        "127.0.0.1:0",
    ]));
    assert!(stderr.contains("/nonexistent/kas/server.toml"), "{stderr}");
}

#[test]
fn shipped_config_starts_the_server_unchanged() {
    let path = repo_path("config/server.toml");
    assert!(path.exists(), "{} is missing", path.display());
    let mut cmd = command(&["--config", path.to_str().unwrap()]);
    cmd.args(["--listen", "127.0.0.1:0"]);
    let server = Running::start(cmd);
    let mut client = Client::connect(server.addr);
    let response = client.request("/");
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"Hello, World!");
    assert_eq!(response.header("keep-alive"), Some("timeout=65"));
}

#[test]
fn version_prints_the_version() {
    let (status, stdout, _) = run_to_exit(command(&["--version"]), EXIT_WITHIN);
    assert!(status.success());
    assert_eq!(
        stdout.trim(),
        format!("keepalive-server {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn help_explains_every_timeout_in_one_line() {
    let (status, stdout, _) = run_to_exit(command(&["--help"]), EXIT_WITHIN);
    assert!(status.success());
    let lines: Vec<&str> = stdout.lines().collect();
    for flag in [
        "--keep-alive-timeout",
        "--keep-alive-buffer",
        "--timeout",
        "--headers-timeout",
        "--request-timeout",
        "--shutdown-timeout",
    ] {
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("{flag} ")))
            .unwrap_or_else(|| panic!("{flag} not in --help:\n{stdout}"));
        let explanation = lines.get(at + 1).map_or("", |l| l.trim());
        assert!(
            explanation.len() > 20 && !explanation.starts_with("--"),
            "{flag} is not explained: {explanation:?}"
        );
        assert!(
            explanation.contains("[default:"),
            "{flag}: no default shown: {explanation:?}"
        );
    }
}
