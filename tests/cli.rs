//! The binary: flag and env validation (exit status 2, the flag named),
//! `--help`, a port already in use, and a real start on port 0.

mod support;

use std::net::TcpListener;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use support::HELLO;
use support::binary::{BIN, Running, command, run_to_exit, strip_ansi};
use support::client::{Client, get};
use support::files::repo_path;

struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs to completion; fails if the process outlives `limit`.
fn run(command: Command, limit: Duration) -> Finished {
    let (status, stdout, stderr) = run_to_exit(command, limit);
    Finished {
        status,
        stdout,
        stderr,
    }
}

fn assert_usage_error(finished: &Finished, flag: &str) {
    assert_eq!(
        finished.status.code(),
        Some(2),
        "exit status for a bad {flag}; stderr: {}",
        finished.stderr
    );
    assert!(
        finished.stderr.contains(flag),
        "stderr does not name {flag}: {}",
        finished.stderr
    );
    assert!(!finished.stderr.contains("panicked"), "{}", finished.stderr);
}

const LIMIT: Duration = Duration::from_secs(10);

#[test]
fn bad_duration_flag_exits_2_naming_the_flag() {
    let finished = run(
        command(&["--listen", "127.0.0.1:0", "--keep-alive-timeout", "soon"]),
        LIMIT,
    );
    assert_usage_error(&finished, "--keep-alive-timeout");
    assert!(finished.stderr.contains("soon"), "{}", finished.stderr);
}

#[test]
fn bad_size_flag_exits_2_naming_the_flag() {
    let finished = run(
        command(&["--listen", "127.0.0.1:0", "--max-header-size", "12parsecs"]),
        LIMIT,
    );
    assert_usage_error(&finished, "--max-header-size");
}

#[test]
fn bad_env_var_exits_2_naming_the_variable_not_the_flag() {
    for (var, flag) in [
        ("KAS_TIMEOUT", "--timeout"),
        ("KAS_KEEP_ALIVE_TIMEOUT", "--keep-alive-timeout"),
    ] {
        let mut cmd = command(&["--listen", "127.0.0.1:0"]);
        cmd.env(var, "bogus");
        let finished = run(cmd, LIMIT);
        assert_usage_error(&finished, var);
        assert!(
            !finished.stderr.contains(flag),
            "blames {flag}, which was not given: {}",
            finished.stderr
        );
        assert!(finished.stderr.contains("bogus"), "{}", finished.stderr);
    }
}

#[test]
fn port_in_use_fails_cleanly() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let finished = run(command(&["--listen", &addr, "--workers", "1"]), LIMIT);
    assert!(!finished.status.success(), "started on a taken port");
    assert_ne!(finished.status.code(), None, "killed by a signal");
    assert!(!finished.stderr.contains("panicked"), "{}", finished.stderr);
    let all = format!("{}{}", finished.stdout, finished.stderr);
    assert!(
        all.contains(&addr),
        "the message does not name {addr}: {all}"
    );
    assert!(
        all.to_ascii_lowercase().contains("in use"),
        "the message does not say the address is in use: {all}"
    );
    drop(taken);
}

#[test]
fn strip_ansi_removes_csi_and_other_escapes() {
    assert_eq!(
        strip_ansi("\x1b[2m2024\x1b[0m \x1b[32m INFO\x1b[0m listen=127.0.0.1:80"),
        "2024  INFO listen=127.0.0.1:80"
    );
    // CSI final bytes other than letters, charset and two-byte escapes.
    assert_eq!(strip_ansi("a\x1b[2~b\x1b(Bc\x1b7d\x1b"), "abcd");
}

#[test]
fn good_flags_start_a_server_that_answers() {
    let mut running = Running::start(command(&[
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--keep-alive-timeout",
        "7s",
        "--max-requests-per-socket",
        "9",
    ]));
    let addr = running.addr;
    assert_ne!(addr.port(), 0, "the log shows the bound port, not 0");
    let mut client = Client::connect(addr);
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert_eq!(response.body, HELLO);
    assert_eq!(response.header("keep-alive"), Some("timeout=7, max=8"));
    assert!(
        running.child.try_wait().unwrap().is_none(),
        "the server exited while serving"
    );
}

/// Asserts a usage error whose message says `says`, and no raw clap or
/// Rust parse wording.
fn assert_explained(finished: &Finished, flag: &str, says: &str) {
    assert_usage_error(finished, flag);
    assert!(
        finished.stderr.contains(says),
        "the message for {flag} does not say {says:?}: {}",
        finished.stderr
    );
    for raw in [
        "unexpected argument",
        "non-zero",
        "invalid digit",
        "NumberExpected",
    ] {
        assert!(
            !finished.stderr.contains(raw),
            "raw parser wording {raw:?}: {}",
            finished.stderr
        );
    }
}

#[test]
fn nonsense_values_get_messages_people_understand() {
    for (args, flag, says) in [
        (&["--workers", "0"][..], "--workers", "at least 1"),
        (&["--workers", "-2"], "--workers", "negative"),
        (
            &["--keep-alive-timeout", "-1s"],
            "--keep-alive-timeout",
            "negative",
        ),
        (&["--timeout", "5"], "--timeout", "5s"),
        (
            &["--max-requests-per-socket", "-3"],
            "--max-requests-per-socket",
            "negative",
        ),
        (
            &["--max-connections", "lots"],
            "--max-connections",
            "whole number",
        ),
        (
            &["--max-header-size", "0"],
            "--max-header-size",
            "too small",
        ),
        (
            &["--max-header-size", "512"],
            "--max-header-size",
            "at least 1KiB",
        ),
        (&["--listen", "nowhere"], "--listen", "no port"),
        (&["--listen", "::1:80"], "--listen", "brackets"),
        (&["--log-format", "xml"], "--log-format", "xml"),
    ] {
        let mut all = args.to_vec();
        if flag != "--listen" {
            all.extend(["--listen", "127.0.0.1:0"]);
        }
        let finished = run(command(&all), LIMIT);
        assert_explained(&finished, flag, says);
    }
}

/// Starts the binary with `args` and one request on the address its
/// startup line names.
fn serves(args: &[&str]) -> Running {
    let mut running = Running::start(command(args));
    let mut client = Client::connect(running.addr);
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(client.read_response().status, 200, "{args:?}");
    assert!(running.child.try_wait().unwrap().is_none());
    running
}

#[test]
fn listen_takes_a_port_alone_or_after_a_colon_on_every_interface() {
    for listen in [":0", "0"] {
        let running = serves(&["--listen", listen, "--workers", "1"]);
        let startup = running.log().join("\n");
        assert!(
            startup.contains("(every interface)"),
            "--listen {listen}: {startup}"
        );
        assert!(
            running.addr.ip().is_loopback(),
            "the URL to open: {}",
            running.addr
        );
    }
}

#[test]
fn listen_resolves_a_host_name() {
    let running = serves(&["--listen", "localhost:0", "--workers", "1"]);
    assert!(running.addr.ip().is_loopback(), "{}", running.addr);
}

#[test]
fn listen_takes_a_bracketed_ipv6_address() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        support::skip::not_on_this_machine("this machine has no IPv6 loopback");
        return;
    }
    let running = serves(&["--listen", "[::1]:0", "--workers", "1"]);
    assert_eq!(
        running.addr.ip(),
        "::1".parse::<std::net::IpAddr>().unwrap()
    );
}

#[test]
fn switches_from_the_environment_take_the_usual_words() {
    for (value, shown) in [
        ("1", "access_log=-"),
        ("yes", "access_log=-"),
        ("off", "access_log=off"),
    ] {
        let mut cmd = command(&["--listen", "127.0.0.1:0", "--workers", "1"]);
        cmd.env("KAS_ACCESS_LOG", value);
        let running = Running::start(cmd);
        let startup = running.log().join("\n");
        assert!(startup.contains(shown), "KAS_ACCESS_LOG={value}: {startup}");
    }
}

#[test]
fn a_mistyped_subcommand_is_pointed_to_the_right_one() {
    for typo in ["prob", "porbe"] {
        let finished = run(command(&[typo, "http://127.0.0.1:1/"]), LIMIT);
        assert_eq!(finished.status.code(), Some(2), "{}", finished.stderr);
        assert!(
            finished
                .stderr
                .contains("a similar subcommand exists: 'probe'"),
            "{typo}: {}",
            finished.stderr
        );
    }
    let finished = run(command(&["--check", "probe", "http://127.0.0.1:1/"]), LIMIT);
    assert_eq!(finished.status.code(), Some(2), "{}", finished.stderr);
    assert!(
        finished.stderr.contains("`probe` must come first"),
        "{}",
        finished.stderr
    );
}

#[test]
fn help_answers_as_a_subcommand_too() {
    let finished = run(command(&["help"]), LIMIT);
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        finished
            .stdout
            .contains("Usage: keepalive-server [OPTIONS] [COMMAND]")
    );
    assert!(finished.stdout.contains("  probe  "), "{}", finished.stdout);
    assert!(finished.stdout.contains("--keep-alive-timeout"));
    let finished = run(command(&["help", "probe"]), LIMIT);
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        finished
            .stdout
            .contains("Usage: keepalive-server probe [OPTIONS] <URL>"),
        "the probe's own help: {}",
        finished.stdout
    );
}

#[test]
fn help_is_wrapped_and_names_placeholders_and_rust_log() {
    let finished = run(command(&["--help"]), LIMIT);
    assert!(finished.status.success(), "{}", finished.stderr);
    let help = &finished.stdout;
    for needle in [
        "<DURATION>",
        "<SIZE>",
        "<ADDR>",
        "RUST_LOG",
        "NO_COLOR",
        "SIGHUP",
        "KAS_KEEP_ALIVE_TIMEOUT",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}:\n{help}");
    }
    let widest = help.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(
        widest <= 100,
        "a --help line is {widest} columns wide:\n{help}"
    );
}

#[test]
fn diagnostics_go_to_stderr_without_colour_when_piped() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut cmd = command(&["--listen", &addr, "--workers", "1"]);
    cmd.env_remove("NO_COLOR");
    let finished = run(cmd, LIMIT);
    assert_eq!(finished.status.code(), Some(1), "{}", finished.stderr);
    assert!(finished.stdout.is_empty(), "stdout: {:?}", finished.stdout);
    assert!(finished.stderr.contains("ERROR"), "{}", finished.stderr);
    assert!(
        !finished.stderr.contains('\u{1b}'),
        "colour codes in piped stderr: {:?}",
        finished.stderr
    );
}

#[test]
fn the_startup_line_gives_the_url_and_readable_timeouts() {
    let running = Running::start(command(&["--listen", "127.0.0.1:0", "--workers", "1"]));
    assert!(running.stdout.try_recv().is_err(), "something on stdout");
    let log = running.log();
    let startup = log
        .iter()
        .find(|line| line.contains("listening on"))
        .expect("a startup line");
    assert!(
        startup.contains(&format!("listening on http://{}/", running.addr)),
        "{startup}"
    );
    for field in [
        "keep_alive_timeout=1m5s",
        "keep_alive_buffer=1s",
        "timeout=2m",
        "headers_timeout=1m",
        "request_timeout=5m",
        "shutdown_timeout=30s",
        "advertise=auto",
        "idle_close=fin",
        "test_controls=on",
    ] {
        assert!(startup.contains(field), "{field} not in {startup}");
    }
}

#[test]
fn the_startup_line_says_the_packaged_config_turns_the_test_controls_off() {
    let packaged = repo_path("config/server.toml");
    let running = Running::start(command(&[
        "--config",
        packaged.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]));
    let log = running.log();
    let line = log
        .iter()
        .find(|line| line.contains("listening on"))
        .expect("a startup line");
    assert!(line.ends_with(" test_controls=off"), "{line}");
}

/// The guide's own `--check` line (docs/configuration.md), run as it
/// says: from the root.
#[test]
fn the_documented_check_command_works_from_the_repository_root() {
    const COMMAND: &str = "keepalive-server --config config/server.toml --check";
    let guide = std::fs::read_to_string(repo_path("docs/configuration.md")).unwrap();
    assert!(
        guide.contains(COMMAND),
        "docs/configuration.md no longer says {COMMAND}"
    );
    let args: Vec<&str> = COMMAND.split(' ').skip(1).collect();
    let mut cmd = command(&args);
    cmd.current_dir(repo_path(""));
    let finished = run(cmd, LIMIT);
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        finished.stdout.contains("# config file"),
        "{}",
        finished.stdout
    );
}

#[test]
fn json_logs_are_one_object_per_line() {
    let mut running = Running::start(command(&[
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--log-format",
        "json",
    ]));
    running.signal("TERM");
    running.wait_exit(LIMIT).expect("exits on SIGTERM");
    running.wait_for_output_end(LIMIT);
    let log = running.log();
    assert!(log.len() >= 2, "{log:?}");
    for line in &log {
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(
            value["level"].is_string() && value["fields"].is_object(),
            "{line}"
        );
    }
    let startup: serde_json::Value = serde_json::from_str(&log[0]).unwrap();
    assert_eq!(startup["fields"]["keep_alive_timeout"], "1m5s", "{startup}");
}

#[test]
fn timer_expiry_debug_lines_name_the_connection_and_peer() {
    let mut cmd = command(&[
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--keep-alive-timeout",
        "1s",
        "--keep-alive-buffer",
        "0s",
    ]);
    cmd.env("RUST_LOG", "keepalive_server=debug");
    let running = Running::start(cmd);
    let mut client = Client::connect(running.addr);
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(client.read_response().status, 200);
    let peer = client.stream.local_addr().unwrap();
    let line = running.wait_for_line("timer expired", Duration::from_secs(10));
    assert!(line.contains(&format!("peer={peer}")), "{line}");
    let id = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("conn="))
        .unwrap_or_else(|| panic!("no conn= in {line}"));
    assert!(id.parse::<u64>().is_ok_and(|id| id >= 1), "{line}");
}

/// Runs the binary on a pseudo-terminal (util-linux `script`), refusing a
/// taken port so it logs an error and exits; what the terminal received.
fn on_a_terminal(no_color: Option<&str>) -> Option<String> {
    if Command::new("script").arg("--version").output().is_err() {
        return None;
    }
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let run = format!(
        "{} --listen {} --workers 1",
        BIN,
        taken.local_addr().unwrap()
    );
    let mut cmd = Command::new("script");
    cmd.args(["-q", "-e", "-c", &run, "/dev/null"]);
    cmd.env_remove("NO_COLOR");
    if let Some(value) = no_color {
        cmd.env("NO_COLOR", value);
    }
    let finished = run_to_exit(cmd, LIMIT);
    Some(finished.1)
}

#[test]
fn colour_on_a_terminal_unless_no_color_is_set() {
    let Some(coloured) = on_a_terminal(None) else {
        support::skip::because("no `script` (util-linux) to make a terminal");
        return;
    };
    assert!(coloured.contains("ERROR"), "{coloured:?}");
    assert!(
        coloured.contains("\u{1b}["),
        "no colour on a terminal: {coloured:?}"
    );
    let plain = on_a_terminal(Some("1")).unwrap();
    assert!(plain.contains("ERROR"), "{plain:?}");
    assert!(
        !plain.contains('\u{1b}'),
        "colour despite NO_COLOR: {plain:?}"
    );
    // An empty NO_COLOR is as good as unset (no-color.org).
    let empty = on_a_terminal(Some("")).unwrap();
    assert!(empty.contains("\u{1b}["), "{empty:?}");
}

#[test]
fn an_access_log_that_cannot_be_opened_is_named_at_start() {
    // /proc exists, so --check passes it, but nothing can be created there.
    let (status, _, stderr) = run_to_exit(
        command(&[
            "--listen",
            "127.0.0.1:0",
            "--access-log",
            "/proc/kas-access.log",
        ]),
        Duration::from_secs(20),
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot open access log /proc/kas-access.log")
            && !stderr.contains("cannot listen"),
        "{stderr}"
    );
}

/// `--check | head -1`, and its warnings to a closed stderr: the report
/// nobody reads does not turn a valid configuration into a panic (exit
/// 101); the status still says valid.
#[test]
fn check_with_its_output_closed_still_exits_0() {
    let closed = || {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        writer
    };
    // 1500ms: a valid value that --check warns about.
    let mut check = command(&["--check", "--keep-alive-timeout", "1500ms"]);
    check
        .stdin(std::process::Stdio::null())
        .stdout(closed())
        .stderr(closed());
    let status = check.status().expect("run --check");
    assert_eq!(status.code(), Some(0), "{status}");
}

/// `--admin 9907` binds every interface: the startup line says so (as the
/// main listener's does), and a warning says who can reach what it serves;
/// an admin listener on loopback draws no warning.
#[test]
fn an_admin_listener_on_every_interface_is_named_so_and_warned_about() {
    for (admin, every_interface) in [(":0", true), ("127.0.0.1:0", false)] {
        let running = Running::start(command(&["--listen", "127.0.0.1:0", "--admin", admin]));
        let log = running.log();
        let startup = log
            .iter()
            .find(|line| line.contains("listening on"))
            .expect("a startup line");
        let (_, shown) = startup
            .split_once(" admin=")
            .unwrap_or_else(|| panic!("no admin= in {startup}"));
        let (url, after) = shown.split_once(' ').expect("more fields after admin=");
        let port = url
            .strip_prefix("http://127.0.0.1:")
            .and_then(|rest| rest.strip_suffix('/'))
            .unwrap_or_else(|| panic!("admin={url} is not a loopback URL"));
        assert_eq!(
            after.starts_with("(every interface)"),
            every_interface,
            "--admin {admin}: {startup}"
        );
        let healthz = get(format!("127.0.0.1:{port}").parse().unwrap(), "/healthz");
        assert_eq!(healthz.status, 200, "the admin URL shown answers");
        let warned = log.iter().any(|line| {
            line.contains("WARN") && line.contains("admin listener is on every interface")
        });
        assert_eq!(warned, every_interface, "--admin {admin}: {log:#?}");
    }
}
