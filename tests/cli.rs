//! The binary: flag and env validation (exit status 2, the flag named),
//! `--help`, a port already in use, and a real start on port 0.

mod common;
mod common_ops;

use std::net::TcpListener;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use common::{Client, HELLO};
use common_ops::{Running, command, run_to_exit, strip_ansi};

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
fn zero_workers_exits_2_naming_the_flag() {
    let finished = run(
        command(&["--listen", "127.0.0.1:0", "--workers", "0"]),
        LIMIT,
    );
    assert_usage_error(&finished, "--workers");
}

#[test]
fn bad_env_var_exits_2_naming_the_setting() {
    let mut cmd = command(&["--listen", "127.0.0.1:0"]);
    cmd.env("KAS_TIMEOUT", "bogus");
    let finished = run(cmd, LIMIT);
    assert_eq!(
        finished.status.code(),
        Some(2),
        "stderr: {}",
        finished.stderr
    );
    assert!(
        finished.stderr.contains("--timeout") || finished.stderr.contains("KAS_TIMEOUT"),
        "stderr names neither --timeout nor KAS_TIMEOUT: {}",
        finished.stderr
    );
    assert!(finished.stderr.contains("bogus"), "{}", finished.stderr);
}

#[test]
fn help_lists_the_timeout_flags() {
    let finished = run(command(&["--help"]), LIMIT);
    assert!(finished.status.success(), "{}", finished.stderr);
    for flag in [
        "--listen",
        "--workers",
        "--keep-alive-timeout",
        "--keep-alive-buffer",
        "--timeout",
        "--headers-timeout",
        "--request-timeout",
        "--max-requests-per-socket",
        "--max-header-size",
        "--max-body-size",
        "--max-connections",
    ] {
        assert!(
            finished.stdout.contains(flag),
            "--help does not list {flag}:\n{}",
            finished.stdout
        );
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
    assert_eq!(response.header("keep-alive"), Some("timeout=7, max=9"));
    assert!(
        running.child.try_wait().unwrap().is_none(),
        "the server exited while serving"
    );
}
