//! SIGHUP reloads the `--config` file, against the built binary: open
//! connections survive and their next response advertises the new
//! keep-alive timeout (or what `advertise` says, and `idle_close`'s reset),
//! timers armed afterwards use the new durations, an
//! invalid file changes nothing, options that need a restart are reported
//! as ignored, and without a file there is nothing to reload. SIGHUP never
//! ends the process.

mod support;

use std::time::{Duration, Instant};

use support::binary::{Running, serve};
use support::client::Client;
use support::files::TempFile;

const WITHIN: Duration = Duration::from_secs(10);

fn keep_alive(client: &mut Client) -> String {
    let response = client.request("/");
    assert_eq!(response.status, 200);
    response.header("keep-alive").unwrap_or_default().to_owned()
}

/// Rewrites the file, sends SIGHUP and waits for the log line containing
/// `outcome` ("reloaded", "reload failed"), which it returns.
fn reload(server: &Running, file: &TempFile, contents: &str, outcome: &str) -> String {
    file.write(contents);
    server.signal("HUP");
    server.wait_for_line(outcome, WITHIN)
}

fn assert_running(server: &mut Running) {
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server exited; log: {:?}",
        server.log()
    );
}

#[test]
fn an_open_connection_survives_a_reload_and_advertises_the_new_timeout() {
    let file = TempFile::new("server.toml", "keep_alive_timeout = \"5s\"\n");
    let mut server = serve(&["--config", file.arg(), "--workers", "2"]);
    let mut open = Client::connect(server.addr);
    assert_eq!(keep_alive(&mut open), "timeout=5");

    let line = reload(&server, &file, "keep_alive_timeout = \"7s\"\n", "reloaded");
    assert!(line.contains("keep_alive_timeout 5s -> 7s"), "{line}");
    assert!(
        line.contains("applied_by=2"),
        "both workers took it: {line}"
    );

    assert_eq!(
        keep_alive(&mut open),
        "timeout=7",
        "the same connection, after the reload"
    );
    assert_eq!(keep_alive(&mut Client::connect(server.addr)), "timeout=7");
    assert_running(&mut server);
}

#[test]
fn a_reload_changes_what_is_advertised_and_how_idle_connections_close() {
    let file = TempFile::new("server.toml", "keep_alive_timeout = \"1s\"\n");
    let mut server = serve(&["--config", file.arg(), "--workers", "1"]);
    let mut open = Client::connect(server.addr);
    assert_eq!(keep_alive(&mut open), "timeout=1");

    let rst = "keep_alive_timeout = \"1s\"\nkeep_alive_buffer = \"0s\"\n\
               advertise = \"none\"\nidle_close = \"rst\"\n";
    let line = reload(&server, &file, rst, "reloaded");
    assert!(
        line.contains("advertise auto -> none") && line.contains("idle_close fin -> rst"),
        "{line}"
    );
    assert_eq!(keep_alive(&mut open), "", "no Keep-Alive field now");
    open.stream.set_read_timeout(Some(WITHIN)).unwrap();
    let mut byte = [0u8; 1];
    let read = std::io::Read::read(&mut open.stream, &mut byte);
    assert!(
        matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "the idle close after the reload is a reset: {read:?}"
    );
    assert_running(&mut server);
}

#[test]
fn timers_armed_after_a_reload_use_the_new_durations() {
    let file = TempFile::new(
        "server.toml",
        "keep_alive_timeout = \"30s\"\nkeep_alive_buffer = \"0s\"\n",
    );
    let mut server = serve(&["--config", file.arg(), "--workers", "1"]);
    let mut open = Client::connect(server.addr);
    assert_eq!(keep_alive(&mut open), "timeout=30");

    let fast = "keep_alive_timeout = \"1s\"\nkeep_alive_buffer = \"0s\"\n";
    reload(&server, &file, fast, "reloaded");
    assert_eq!(keep_alive(&mut open), "timeout=1");
    let idle_since = Instant::now();
    let waited = open.expect_closed(WITHIN);
    assert!(
        waited >= Duration::from_millis(900) && idle_since.elapsed() < Duration::from_secs(10),
        "closed {waited:?} after a response advertising timeout=1 (the old timeout was 30s)"
    );
    assert_running(&mut server);
}

/// `max_headers` is no restart option: the next head is counted against
/// the reloaded limit.
#[test]
fn a_reloaded_header_count_limit_applies_to_the_next_request() {
    let file = TempFile::new("server.toml", "max_headers = 100\n");
    let mut server = serve(&["--config", file.arg(), "--workers", "1"]);
    let mut fifty_fields = b"GET / HTTP/1.1\r\nHost: t\r\n".to_vec();
    fifty_fields.extend(b"X:1\r\n".repeat(49));
    fifty_fields.extend_from_slice(b"\r\n");
    let status = |request: &[u8]| {
        let mut client = Client::connect(server.addr);
        client.send(request);
        client.read_response().status
    };
    assert_eq!(status(&fifty_fields), 200);
    let line = reload(&server, &file, "max_headers = 10\n", "reloaded");
    assert!(line.contains("max_headers 100 -> 10"), "{line}");
    assert_eq!(status(&fifty_fields), 431);
    assert_running(&mut server);
}

#[test]
fn an_invalid_file_keeps_the_running_configuration() {
    let file = TempFile::new("server.toml", "keep_alive_timeout = \"5s\"\n");
    let mut server = serve(&["--config", file.arg(), "--workers", "1"]);
    let mut open = Client::connect(server.addr);
    assert_eq!(keep_alive(&mut open), "timeout=5");

    for (contents, named) in [
        ("keep_alive_timeout = \"soon\"\n", "keep_alive_timeout"),
        ("keep_alive_timout = \"9s\"\n", "keep_alive_timout"),
        ("max_header_size = 10\n", "max_header_size"),
    ] {
        let line = reload(&server, &file, contents, "reload failed");
        assert!(line.contains(named), "{contents:?}: {line}");
        assert!(line.contains("ERROR"), "{line}");
        assert_eq!(keep_alive(&mut open), "timeout=5", "after {contents:?}");
    }
    // A good file afterwards still applies.
    reload(&server, &file, "keep_alive_timeout = \"6s\"\n", "reloaded");
    assert_eq!(keep_alive(&mut open), "timeout=6");
    assert_running(&mut server);
}

#[test]
fn options_that_need_a_restart_are_reported_and_ignored() {
    let file = TempFile::new("server.toml", "workers = 1\n");
    let mut server = serve(&["--config", file.arg()]);
    file.write("workers = 2\nkeep_alive_timeout = \"4s\"\n");
    server.signal("HUP");
    let warning = server.wait_for_line("ignored until restart", WITHIN);
    assert!(
        warning.contains("workers") && warning.contains("1 -> 2"),
        "{warning}"
    );
    let line = server.wait_for_line("reloaded", WITHIN);
    assert!(!line.contains("workers 1"), "{line}");
    assert_eq!(keep_alive(&mut Client::connect(server.addr)), "timeout=4");
    assert_running(&mut server);
}

#[test]
fn without_a_config_file_sighup_says_there_is_nothing_to_reload() {
    let mut server = serve(&["--workers", "1"]);
    server.signal("HUP");
    server.wait_for_line("nothing to reload", WITHIN);
    assert_eq!(keep_alive(&mut Client::connect(server.addr)), "timeout=65");
    assert_running(&mut server);
}

#[test]
fn sighup_right_after_the_startup_line_does_not_end_the_process() {
    for _ in 0..5 {
        let mut server = serve(&["--workers", "1"]);
        server.signal("HUP");
        // Handled (not the default action, which ends the process).
        server.wait_for_line("nothing to reload", WITHIN);
        assert_running(&mut server);
    }
}
