//! The `--config` TOML layer and the command line, against the built binary:
//! file settings apply, precedence is flag > KAS_* > file > default, bad
//! files exit 2 naming the problem, and `--help`/`--version` say what they should.

mod support;

use std::process::Command;
use std::time::Duration;

use support::binary::{Running, command, run_to_exit};
use support::client::Client;
use support::files::{TempFile, repo_path};

const EXIT_WITHIN: Duration = Duration::from_secs(20);

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

/// Runs the binary on a config file holding `contents`, expecting it to
/// refuse to start: the file (for its path) and the stderr.
fn refuses_file(name: &str, contents: &str) -> (TempFile, String) {
    let file = TempFile::new(name, contents);
    let stderr = refuses(command(&[
        "--config",
        file.arg(),
        "--listen",
        "127.0.0.1:0",
    ]));
    (file, stderr)
}

#[test]
fn file_settings_are_applied() {
    let file = TempFile::new(
        "server.toml",
        "# comments are fine\nkeep_alive_timeout = \"5s\"\nkeep_alive_buffer = \"250ms\"\n\
         max_requests_per_socket = 3\naccess_log = true\n",
    );
    let header = keep_alive_header(command(&["--config", file.arg()]));
    assert_eq!(header, "timeout=5, max=2");
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
    let (_file, stderr) = refuses_file("server.toml", "keep_alive_timout = \"5s\"\n");
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
        ("log_format = \"xml\"\n", "log_format"),
        ("max_header_size = 100\n", "max_header_size"),
        ("max_headers = -1\n", "max_headers"),
        ("workers = 0\n", "workers"),
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
    let (file, stderr) = refuses_file("server.toml", "keep_alive_timeout = \n");
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
    // The packaged file turns the lab's query controls off: ignored, not
    // obeyed (a reset) nor refused (400 for the bad value).
    assert_eq!(client.request("/?ka=bad&after=rst").status, 200);
    assert_eq!(client.request("/").status, 200, "after=rst was obeyed");
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
fn help_explains_every_timeout_and_limit_with_its_default() {
    let (status, stdout, _) = run_to_exit(command(&["--help"]), EXIT_WITHIN);
    assert!(status.success());
    let lines: Vec<&str> = stdout.lines().collect();
    for flag in [
        "--listen",
        "--workers",
        "--keep-alive-timeout",
        "--keep-alive-buffer",
        "--timeout",
        "--headers-timeout",
        "--request-timeout",
        "--shutdown-timeout",
        "--max-requests-per-socket",
        "--max-header-size",
        "--max-body-size",
        "--max-connections",
    ] {
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("{flag} ")))
            .unwrap_or_else(|| panic!("{flag} not in --help:\n{stdout}"));
        // The explanation: the lines after the flag, up to the next flag.
        let explanation = lines[at + 1..]
            .iter()
            .map(|l| l.trim())
            .take_while(|l| !l.starts_with('-'))
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
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

/// A named pipe in a fresh directory (removed when dropped).
fn fifo() -> TempFile {
    let file = TempFile::new("placeholder", "");
    std::fs::remove_file(&file.path).unwrap();
    let made = Command::new("mkfifo")
        .arg(&file.path)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    file
}

#[test]
fn a_config_that_is_not_a_regular_file_fails_fast() {
    let pipe = fifo();
    for (path, what) in [
        ("/dev/zero", "character device"),
        (pipe.arg(), "FIFO"),
        ("/tmp", "directory"),
    ] {
        let started = std::time::Instant::now();
        let stderr = refuses(command(&["--config", path, "--listen", "127.0.0.1:0"]));
        assert!(stderr.contains(path), "{path}: {stderr}");
        assert!(
            stderr.contains(what) && stderr.contains("not a regular file"),
            "{path}: {stderr}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{path} took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn a_config_file_over_a_mebibyte_is_refused() {
    let padding = format!("# {}\n", "x".repeat(1 << 20));
    let (file, stderr) = refuses_file("huge.toml", &padding);
    assert!(stderr.contains(file.arg()), "{stderr}");
    assert!(stderr.contains("larger than 1MiB"), "{stderr}");
}

#[test]
fn a_header_size_below_a_kibibyte_in_the_file_is_refused() {
    let (_file, stderr) = refuses_file("server.toml", "max_header_size = \"0\"\n");
    assert!(
        stderr.contains("max_header_size") && stderr.contains("too small"),
        "{stderr}"
    );
}

#[test]
fn check_prints_the_effective_configuration_and_its_origins() {
    let file = TempFile::new(
        "server.toml",
        "keep_alive_timeout = \"5s\"\nmax_body_size = \"2MiB\"\n",
    );
    let mut cmd = command(&["--check", "--config", file.arg(), "--timeout", "90s"]);
    cmd.env("KAS_MAX_CONNECTIONS", "100");
    cmd.env("KAS_MAX_HEADERS", "500");
    let (status, stdout, stderr) = run_to_exit(cmd, EXIT_WITHIN);
    assert!(status.success(), "status {status}: {stderr}");
    let line = |key: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{key} =")))
            .unwrap_or_else(|| panic!("no {key} in:\n{stdout}"))
            .to_owned()
    };
    assert!(
        line("keep_alive_timeout").contains("\"5s\"")
            && line("keep_alive_timeout").ends_with("# config file")
    );
    assert!(line("max_body_size").contains("\"2MiB\""));
    assert!(line("timeout").contains("\"1m30s\"") && line("timeout").ends_with("# flag"));
    assert!(
        line("max_connections").contains("100")
            && line("max_connections").ends_with("# KAS_MAX_CONNECTIONS")
    );
    assert!(
        line("max_headers").contains("500") && line("max_headers").ends_with("# KAS_MAX_HEADERS")
    );
    assert!(line("listen").ends_with("# default"));
    // What it prints is itself a config file that loads.
    let printed = TempFile::new("effective.toml", &stdout);
    let (status, again, stderr) = run_to_exit(
        command(&["--check", "--config", printed.arg()]),
        EXIT_WITHIN,
    );
    assert!(
        status.success(),
        "the printed configuration does not load: {stderr}"
    );
    assert!(again.contains("timeout = \"1m30s\""), "{again}");
}

#[test]
fn check_exits_2_on_any_error() {
    let file = TempFile::new("server.toml", "keep_alive_timeout = \"soon\"\n");
    let stderr = refuses(command(&["--check", "--config", file.arg()]));
    assert!(stderr.contains("keep_alive_timeout"), "{stderr}");
    let mut env = command(&["--check"]);
    env.env("KAS_WORKERS", "0");
    let stderr = refuses(env);
    assert!(stderr.contains("KAS_WORKERS"), "{stderr}");
}

#[test]
fn admin_off_switches_off_an_admin_address_from_the_file() {
    let file = TempFile::new("server.toml", "admin = \"127.0.0.1:9901\"\n");
    let admin_line = |cmd: Command| {
        let (status, stdout, stderr) = run_to_exit(cmd, EXIT_WITHIN);
        assert!(status.success(), "status {status}: {stderr}");
        stdout
            .lines()
            .find(|l| l.contains("admin"))
            .unwrap_or_else(|| panic!("no admin line in:\n{stdout}"))
            .to_owned()
    };
    let from_file = admin_line(command(&["--check", "--config", file.arg()]));
    assert!(from_file.contains("9901"), "{from_file}");
    let flag = admin_line(command(&[
        "--check",
        "--config",
        file.arg(),
        "--admin",
        "off",
    ]));
    assert!(flag.contains("off") && !flag.contains("9901"), "{flag}");
    let mut env = command(&["--check", "--config", file.arg()]);
    env.env("KAS_ADMIN", "off");
    let env = admin_line(env);
    assert!(env.contains("off") && !env.contains("9901"), "{env}");
    let off_in_file = TempFile::new("off.toml", "admin = \"off\"\n");
    let in_file = admin_line(command(&["--check", "--config", off_in_file.arg()]));
    assert!(in_file.contains("off"), "{in_file}");
    let stderr = refuses(command(&["--check", "--admin", "of"]));
    assert!(
        stderr.contains("--admin") && stderr.contains("or off"),
        "{stderr}"
    );
}

#[test]
fn check_refuses_what_would_fail_at_start() {
    let stderr = refuses(command(&[
        "--check",
        "--listen",
        "127.0.0.1:8080",
        "--admin",
        "127.0.0.1:8080",
    ]));
    assert!(
        stderr.contains("--admin") && stderr.contains("--listen"),
        "{stderr}"
    );
    let file = TempFile::new("server.toml", "admin = \"8080\"\n");
    let stderr = refuses(command(&[
        "--check",
        "--config",
        file.arg(),
        "--listen",
        "8080",
    ]));
    assert!(stderr.contains("`admin` in the config file"), "{stderr}");
    let dir = std::env::temp_dir();
    let stderr = refuses(command(&["--check", "--access-log", dir.to_str().unwrap()]));
    assert!(
        stderr.contains("--access-log") && stderr.contains("is a directory"),
        "{stderr}"
    );
    let missing = dir
        .join(format!("kas-missing-{}", std::process::id()))
        .join("access.log");
    let mut env = command(&["--check"]);
    env.env("KAS_ACCESS_LOG", &missing);
    let stderr = refuses(env);
    assert!(
        stderr.contains("KAS_ACCESS_LOG") && stderr.contains("does not exist"),
        "{stderr}"
    );
}

/// A keep-alive timeout under a second is not advertised: `timeout=0`
/// would read as "do not reuse" (Node's agent would never reuse). `--check`
/// and the startup log say so.
#[test]
fn a_sub_second_keep_alive_timeout_is_not_advertised_and_says_so() {
    let (status, _, stderr) = run_to_exit(
        command(&["--check", "--keep-alive-timeout", "500ms"]),
        EXIT_WITHIN,
    );
    assert!(status.success(), "status {status}: {stderr}");
    assert!(
        stderr.contains("warning:") && stderr.contains("send no `Keep-Alive` timeout"),
        "{stderr}"
    );
    let mut running = command(&["--keep-alive-timeout", "500ms"]);
    running.args(["--listen", "127.0.0.1:0", "--workers", "1"]);
    let server = Running::start(running);
    let response = Client::connect(server.addr).request("/");
    assert_eq!(response.header("keep-alive"), None, "{response:?}");
    assert!(
        response.has_token("connection", "keep-alive"),
        "{response:?}"
    );
    let log = server.log().join("\n");
    assert!(log.contains("send no `Keep-Alive` timeout"), "{log}");
}

/// Starts the binary on port 0 with `args`: its answer to `GET /`.
fn first_response(mut command: Command) -> (Running, support::client::Response) {
    command.args(["--listen", "127.0.0.1:0", "--workers", "1"]);
    let server = Running::start(command);
    let response = Client::connect(server.addr).request("/");
    assert_eq!(response.status, 200);
    (server, response)
}

/// `--advertise` and `--idle-close` as a variable, as file keys and as
/// flags over both: what responses say, what `--check` prints (and where
/// it came from) and the startup line.
#[test]
fn advertise_and_idle_close_come_from_variables_files_and_flags() {
    let mut env = command(&["--keep-alive-timeout", "5s"]);
    env.env("KAS_ADVERTISE", "none");
    let (_server, response) = first_response(env);
    assert_eq!(response.header("keep-alive"), None, "{response:?}");
    assert!(response.has_token("connection", "keep-alive"));

    let file = TempFile::new(
        "server.toml",
        "keep_alive_timeout = \"5s\"\nadvertise = \"3s\"\nidle_close = \"rst\"\n",
    );
    let (server, response) = first_response(command(&["--config", file.arg()]));
    assert_eq!(response.header("keep-alive"), Some("timeout=3"));
    let log = server.log().join("\n");
    assert!(
        log.contains("advertise=3s") && log.contains("idle_close=rst"),
        "the startup line: {log}"
    );

    let mut flag = command(&["--config", file.arg(), "--advertise", "auto"]);
    flag.env("KAS_ADVERTISE", "none");
    let (_server, response) = first_response(flag);
    assert_eq!(
        response.header("keep-alive"),
        Some("timeout=5"),
        "flag wins"
    );

    let mut check = command(&["--check", "--config", file.arg()]);
    check.env("KAS_IDLE_CLOSE", "fin");
    let (status, stdout, stderr) = run_to_exit(check, EXIT_WITHIN);
    assert!(status.success(), "status {status}: {stderr}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("advertise = \"3s\"") && l.ends_with("# config file")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("idle_close = \"fin\"") && l.ends_with("# KAS_IDLE_CLOSE")),
        "{stdout}"
    );
}

#[test]
fn a_bad_advertise_or_idle_close_exits_2_naming_it() {
    let stderr = refuses(command(&[
        "--advertise",
        "never",
        "--listen",
        "127.0.0.1:0",
    ]));
    assert!(
        stderr.contains("--advertise") && stderr.contains("'never'") && stderr.contains("none"),
        "{stderr}"
    );
    let mut env = command(&["--listen", "127.0.0.1:0"]);
    env.env("KAS_IDLE_CLOSE", "reset");
    let stderr = refuses(env);
    assert!(
        stderr.contains("KAS_IDLE_CLOSE") && stderr.contains("fin") && stderr.contains("rst"),
        "{stderr}"
    );
    let (_file, stderr) = refuses_file("server.toml", "idle_close = \"FIN\"\n");
    assert!(stderr.contains("`idle_close`"), "{stderr}");
}

/// Advertising more than is kept is a lab's choice: it starts, and warns.
#[test]
fn advertising_more_than_is_kept_warns() {
    let (status, _, stderr) = run_to_exit(
        command(&[
            "--check",
            "--keep-alive-timeout",
            "2s",
            "--advertise",
            "30s",
        ]),
        EXIT_WITHIN,
    );
    assert!(status.success(), "status {status}: {stderr}");
    assert!(
        stderr.contains("warning:") && stderr.contains("timeout=30") && stderr.contains("3s"),
        "{stderr}"
    );
}
