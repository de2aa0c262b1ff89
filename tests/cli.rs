//! The binary: flag and env validation (exit status 2, the flag named),
//! `--help`, a port already in use, and a real start on port 0.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Client, HELLO};

const BIN: &str = env!("CARGO_BIN_EXE_keepalive-server");

/// A command for the binary with no `KAS_*` or `RUST_LOG` from the outside.
fn command(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("KAS_") {
            command.env_remove(key);
        }
    }
    command
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs to completion; kills the process (and fails) if it outlives `limit`
/// (a bad flag that was accepted would start a server that never exits).
fn run(mut command: Command, limit: Duration) -> Finished {
    let mut child = command.spawn().expect("spawn the binary");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the binary still ran after {limit:?}; stderr: {}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Finished {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
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

/// A running child, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Removes ANSI escape sequences (in case colours are on anyway).
fn strip_ansi(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn listen_field(line: &str) -> Option<SocketAddr> {
    let line = strip_ansi(line);
    let at = line.find("listen=")?;
    let value = line[at + "listen=".len()..].split_whitespace().next()?;
    value.trim_matches('"').parse().ok()
}

#[test]
fn good_flags_start_a_server_that_answers() {
    let mut cmd = command(&[
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--keep-alive-timeout",
        "7s",
        "--max-requests-per-socket",
        "9",
    ]);
    cmd.env("RUST_LOG", "info");
    let mut running = Running(cmd.spawn().expect("spawn the binary"));
    let (lines, seen) = mpsc::channel::<String>();
    let stdout = running.0.stdout.take().unwrap();
    let stderr = running.0.stderr.take().unwrap();
    let to_out = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = to_out.send(line);
        }
    });
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let deadline = Instant::now() + LIMIT;
    let mut log = Vec::new();
    let addr = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match seen.recv_timeout(left) {
            Ok(line) => {
                if let Some(addr) = listen_field(&line) {
                    break addr;
                }
                log.push(line);
            }
            Err(_) => panic!("no listen= log line within {LIMIT:?}; saw {log:#?}"),
        }
    };
    assert_ne!(addr.port(), 0, "the log shows the bound port, not 0");
    let mut client = Client::connect(addr);
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert_eq!(response.body, HELLO);
    assert_eq!(response.header("keep-alive"), Some("timeout=7, max=9"));
    assert!(
        running.0.try_wait().unwrap().is_none(),
        "the server exited while serving"
    );
}
