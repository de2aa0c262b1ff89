//! `keepalive-server probe`: the built binary measuring real servers on
//! loopback with short timeouts — this server in-process, nginx, Node's http
//! server, a server that closes with a reset and one that closes in periodic
//! passes — and its answers to bad input (exit 2 for usage, 1 for a server
//! that cannot be measured, never a hang). Each test runs one probe (the
//! sweep included) so the harness runs them side by side.

mod probe_fixtures;
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::binary::{command, run_to_exit};
use support::server::start;

/// A probe must finish within this (generous: the machine is shared).
const WITHIN: Duration = Duration::from_secs(60);
/// Sweep points far enough from the deadline to be unambiguous on a busy
/// machine, two tries each.
const SWEEP: [&str; 4] = ["--sweep-points", "-200,-50,50,200", "--sweep-tries", "2"];

struct Probed {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

fn probe(args: &[&str]) -> Probed {
    let mut all = vec!["probe"];
    all.extend_from_slice(args);
    let started = Instant::now();
    let (status, stdout, stderr) = run_to_exit(command(&all), WITHIN);
    Probed {
        code: status.code(),
        stdout,
        stderr,
        took: started.elapsed(),
    }
}

/// Runs `probe --json --sweep … URL` and returns the document.
fn probe_json(addr: SocketAddr, extra: &[&str]) -> Value {
    let url = format!("http://{addr}/");
    let mut args = vec!["--json"];
    args.extend_from_slice(&SWEEP);
    args.extend_from_slice(extra);
    args.push(&url);
    let probed = probe(&args);
    assert_eq!(probed.code, Some(0), "stderr: {}", probed.stderr);
    serde_json::from_str(&probed.stdout).unwrap_or_else(|e| panic!("{e}: {}", probed.stdout))
}

/// The idle timeout's median is within 2% or 20 ms of `expected_ms`, and
/// no connection closed earlier than that allows.
fn assert_idle_timeout(report: &Value, expected_ms: f64) {
    let idle = &report["idle_timeout_ms"];
    let tolerance = (expected_ms * 0.02).max(20.0);
    let min = idle["min"].as_f64().expect("idle_timeout_ms.min");
    let median = idle["median"].as_f64().expect("idle_timeout_ms.median");
    assert!(
        min >= expected_ms - tolerance && (median - expected_ms).abs() <= tolerance,
        "idle timeout {idle} not within {tolerance} ms of {expected_ms}: {report:#}"
    );
}

/// Every try at δ < 0 was answered and every try at δ > 0 failed.
fn assert_sweep_splits_at_zero(report: &Value) {
    let points = report["sweep"].as_array().expect("sweep is a list");
    assert_eq!(points.len(), 4, "{report:#}");
    for point in points {
        let delta = point["delta_ms"].as_i64().unwrap();
        let answered = point["answered"].as_u64().unwrap();
        let failed = point["eof"].as_u64().unwrap() + point["reset"].as_u64().unwrap();
        if delta < 0 {
            assert_eq!((answered, failed), (2, 0), "δ {delta}: {report:#}");
        } else {
            assert_eq!((answered, failed), (0, 2), "δ {delta}: {report:#}");
        }
    }
}

#[test]
fn this_server_really_closes_at_timeout_plus_buffer() {
    let server = start(|config| {
        config.keep_alive_timeout = Duration::from_secs(2);
        config.keep_alive_buffer = Duration::from_millis(500);
        config.max_requests_per_socket = 5;
    });
    let report = probe_json(server.addr, &[]);
    assert_idle_timeout(&report, 2500.0);
    assert_eq!(report["advertised_timeout_s"], 2, "{report:#}");
    // Keep-Alive: max counts the requests left after this one.
    assert_eq!(report["advertised_max"], 4, "{report:#}");
    assert_eq!(report["close_style"], "fin", "{report:#}");
    assert_eq!(report["max_requests"], 5, "{report:#}");
    assert_eq!(report["http_version"], "HTTP/1.1", "{report:#}");
    assert_sweep_splits_at_zero(&report);
    // Within the promise (2 s), not the real 2.5 s: the buffer is grace
    // against the race, not room for a pool to use.
    let safe = report["safe_pool_idle_timeout_ms"].as_u64().unwrap();
    assert!((1800..2000).contains(&safe), "{report:#}");
    // The same value in the settings of the pools people run.
    let advice = report["advice"].as_str().unwrap();
    for setting in ["IdleConnTimeout", "keepalive_expiry=", "keepAliveTimeout: "] {
        assert!(advice.contains(setting), "{setting}: {advice}");
    }
}

#[test]
fn nginx_closes_at_its_real_timeout_not_the_advertised_one() {
    let Some(nginx) = probe_fixtures::nginx("keepalive_timeout 3s 2s; keepalive_requests 7;")
    else {
        return;
    };
    let report = probe_json(nginx.addr, &[]);
    assert_idle_timeout(&report, 3000.0);
    assert_eq!(report["advertised_timeout_s"], 2, "{report:#}");
    assert_eq!(report["close_style"], "fin", "{report:#}");
    assert_eq!(report["max_requests"], 7, "{report:#}");
    assert_sweep_splits_at_zero(&report);
}

/// Node 20 closes a second after keepAliveTimeout (its
/// keepAliveTimeoutBuffer) and advertises the whole seconds of it.
#[test]
fn node_closes_a_second_after_keep_alive_timeout() {
    let Some(node) = probe_fixtures::node(1500) else {
        return;
    };
    let report = probe_json(node.addr, &[]);
    assert_idle_timeout(&report, 2500.0);
    assert_eq!(report["advertised_timeout_s"], 1, "{report:#}");
    assert_eq!(report["close_style"], "fin", "{report:#}");
    assert_eq!(report["max_requests"], Value::Null, "{report:#}");
    assert_sweep_splits_at_zero(&report);
}

/// Python's `http.server` keeps no connection alive (HTTP/1.0): every
/// client is told its own "do not pool" setting, never a 0 it would read
/// as "no limit", and one request per connection is said in the singular.
#[test]
fn a_server_that_keeps_nothing_alive_is_told_each_clients_do_not_pool() {
    let Some(python) = probe_fixtures::python_http_server() else {
        return;
    };
    let url = format!("http://{}/", python.addr);
    let probed = probe(&[&url]);
    assert_eq!(probed.code, Some(0), "{}", probed.stderr);
    let text = &probed.stdout;
    for words in [
        "closes a connection after 1 request\n",
        "DisableKeepAlives: true",
        "keepAlive: false",
        "max_keepalive_connections=0",
        "CURLOPT_FORBID_REUSE=1",
        "max_requests_per_connection: 1",
        "option http-server-close",
    ] {
        assert!(text.contains(words), "{words:?} not in {text}");
    }
    for never in [
        "(0 *",
        "timeout: 0 ",
        "idle_timeout: 0s",
        "under 0 ms",
        "ConnectionPool(5, 0",
        "1 requests",
    ] {
        assert!(!text.contains(never), "{never:?} in {text}");
    }
    let json = probe(&["--json", &url]);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["safe_pool_idle_timeout_ms"], 0, "{report:#}");
    let advice = report["advice"].as_str().unwrap();
    assert!(advice.contains("keep no idle connections"), "{advice}");
    assert!(!advice.contains("(0 *"), "{advice}");
}

#[test]
fn a_server_that_resets_idle_connections_is_seen_as_rst() {
    let addr = probe_fixtures::resetting_server(Duration::from_secs(1));
    let report = probe_json(addr, &["--max-requests", "20"]);
    assert_idle_timeout(&report, 1000.0);
    assert_eq!(report["close_style"], "rst", "{report:#}");
    assert_eq!(report["advertised_timeout_s"], Value::Null, "{report:#}");
    assert_sweep_splits_at_zero(&report);
    let advice = report["advice"].as_str().unwrap();
    assert!(advice.contains("ECONNRESET"), "{advice}");
}

/// A server closing idle connections in passes (as lighttpd and coarse
/// timer wheels do) closes each anywhere from its timeout to a period
/// later, by when it went idle. The probe, its connections started over a
/// second, reports the period and that range, and advises a value below
/// the earliest close: reuses after that long, at every phase, are answered.
#[test]
fn a_server_that_closes_in_passes_is_advised_below_its_earliest_close() {
    const TIMEOUT_MS: f64 = 400.0;
    const PERIOD_MS: f64 = 250.0;
    let addr = probe_fixtures::periodic_closer(
        Duration::from_millis(TIMEOUT_MS as u64),
        Duration::from_millis(PERIOD_MS as u64),
    );
    let report = probe_json(addr, &["--max-requests", "5"]);
    let period = report["close_period_ms"].as_f64().expect("a close period");
    assert!((period - PERIOD_MS).abs() <= 10.0, "{report:#}");
    let idle = &report["idle_timeout_ms"];
    let (min, max) = (idle["min"].as_f64().unwrap(), idle["max"].as_f64().unwrap());
    // Never before the timeout; the phases seen reach near both ends.
    assert!(min >= TIMEOUT_MS - 5.0, "{report:#}");
    assert!(min <= TIMEOUT_MS + 100.0, "{report:#}");
    assert!(max >= TIMEOUT_MS + PERIOD_MS - 100.0, "{report:#}");
    let safe = report["safe_pool_idle_timeout_ms"]
        .as_u64()
        .expect("a safe timeout");
    assert!(safe > 0 && (safe as f64) < TIMEOUT_MS - 20.0, "{report:#}");
    assert!(report["advice"].as_str().unwrap().contains("passes every"));
    let reuses = assert_safe_to_reuse(addr, safe, 40);
    assert!(reuses.answered >= 30, "too few reuses on time: {reuses:?}");
}

/// A server whose passes follow its load (gunicorn gthread, waitress)
/// over an exact idle threshold: the advice is close to what it keeps
/// (0.9 of it on a quiet machine), and reuses at it all succeed.
/// (No sweep: on a loaded machine the fixture's own threads may read a
/// reuse late enough to lose it, which would rightly lower the advice.)
#[test]
fn passes_that_follow_the_load_are_advised_close_to_what_is_kept() {
    const TIMEOUT_MS: u64 = 2000;
    let addr = probe_fixtures::load_following_closer(
        Duration::from_millis(TIMEOUT_MS),
        Duration::from_millis(500),
    );
    let url = format!("http://{addr}/");
    let probed = probe(&["--json", "--max-requests", "5", &url]);
    assert_eq!(probed.code, Some(0), "{}", probed.stderr);
    let report: Value = serde_json::from_str(&probed.stdout).unwrap();
    let min = report["idle_timeout_ms"]["min"].as_f64().unwrap();
    assert!(min >= TIMEOUT_MS as f64 - 5.0, "{report:#}");
    let safe = report["safe_pool_idle_timeout_ms"]
        .as_u64()
        .expect("a safe timeout");
    // Above what subtracting a whole period from the earliest close gave
    // (2000 - 500 less the margin: 1400 or less). On a quiet machine it is
    // 1800, 0.9 of what is kept; a late probe loop (this machine is shared)
    // rightly widens the earliest close, so the bound here is generous:
    // the precision is measured against real servers, not asserted.
    assert!((1600..TIMEOUT_MS).contains(&safe), "{report:#}");
    // Why, in figures: passes, the earliest close assumed below every
    // close seen.
    let basis = &report["advice_basis"];
    assert!(basis["pass_period_ms"].as_f64().is_some(), "{report:#}");
    assert!(basis["start_gap_ms"].as_f64().is_some(), "{report:#}");
    let earliest = basis["earliest_close_ms"].as_f64().unwrap();
    assert!(earliest <= min && earliest > safe as f64, "{report:#}");
    assert_safe_to_reuse(addr, safe, 20);
}

/// Passes far apart (scaled down: every 6 s, against the 1 s and then
/// 4 s over which the probe starts its connections): no number, and the
/// command that would measure it.
#[test]
fn a_pass_longer_than_the_run_gets_no_number_and_a_command() {
    let addr = probe_fixtures::periodic_closer(Duration::from_millis(300), Duration::from_secs(6));
    let url = format!("http://{addr}/");
    let probed = probe(&["--json", "--max-requests", "0", &url]);
    assert_eq!(probed.code, Some(0), "{}", probed.stderr);
    let report: Value = serde_json::from_str(&probed.stdout).unwrap();
    assert_eq!(
        report["safe_pool_idle_timeout_ms"],
        Value::Null,
        "{report:#}"
    );
    let advice = report["advice"].as_str().unwrap();
    assert!(
        advice.contains("keepalive-server probe --connections"),
        "{advice}"
    );
    assert!(advice.contains("--stagger"), "{advice}");
    assert!(advice.contains(&url), "{advice}");
}

/// A probe stopped while closes arrive (SIGSTOP, as a starved CPU would
/// stop it) sees those closes late: it measures them again instead of
/// adding its stall to the server's timeout.
#[test]
fn closes_seen_during_a_stall_of_the_probe_are_measured_again() {
    let server = start(|config| {
        config.keep_alive_timeout = Duration::from_secs(1);
        config.keep_alive_buffer = Duration::ZERO;
    });
    let url = format!("http://{}/", server.addr);
    // Four connections over a second close about 1.0, 1.33, 1.67 and 2.0 s
    // after the start: the stop covers the middle two.
    let child = command(&["probe", "--connections", "4", "--max-requests", "0", &url])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the probe");
    let signal = |name: &str| {
        let status = std::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name}");
    };
    std::thread::sleep(Duration::from_millis(1200));
    signal("STOP");
    std::thread::sleep(Duration::from_millis(700));
    signal("CONT");
    let output = child.wait_with_output().expect("the probe's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("measured again"), "{stdout}");
    let max: f64 = stdout
        .split("max ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no max in {stdout}"));
    assert!(
        max < 1000.0 + 50.0,
        "the stall is not in the figures: {stdout}"
    );
}

/// A probe whose loop is late on every wake-up (the test hook sleeps
/// 30 ms after each poll, as a CPU shared with a busy process would make
/// it) sees every close late, again after measuring them anew: it says the
/// run is not reliable and gives no number, and does not blame the server.
#[test]
fn a_probe_late_on_every_wake_up_says_its_run_is_not_reliable() {
    let server = start(|config| {
        config.keep_alive_timeout = Duration::from_secs(1);
        config.keep_alive_buffer = Duration::ZERO;
    });
    let url = format!("http://{}/", server.addr);
    let mut late = command(&[
        "probe",
        "--json",
        "--connections",
        "4",
        "--max-requests",
        "0",
        &url,
    ]);
    late.env(keepalive_server::probe::STALL_HOOK, "30");
    let (status, stdout, stderr) = run_to_exit(late, WITHIN);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["safe_pool_idle_timeout_ms"],
        Value::Null,
        "{report:#}"
    );
    let basis = &report["advice_basis"];
    assert_eq!(basis["reliable"], false, "{report:#}");
    assert!(
        basis["probe_late_wakeups"].as_u64().unwrap() > 0,
        "{report:#}"
    );
    let advice = report["advice"].as_str().unwrap();
    assert!(advice.contains("The probe itself was stalled"), "{advice}");
    assert!(
        !advice.contains("Warning"),
        "the server is not blamed: {advice}"
    );
}

/// When even the sweep's lowest point fails, it widens (earlier points)
/// until one is answered every time, or gives no number: here, a server
/// that answers only a connection's first request, nothing is found.
#[test]
fn a_sweep_that_finds_no_answered_point_gives_no_number() {
    let addr = probe_fixtures::answers_once_server(Duration::from_millis(300));
    let url = format!("http://{addr}/");
    let probed = probe(&[
        "--json",
        "--max-requests",
        "0",
        "--timeout",
        "300ms",
        "--sweep-points",
        "-100,0",
        "--sweep-tries",
        "2",
        &url,
    ]);
    assert_eq!(probed.code, Some(0), "stderr: {}", probed.stderr);
    let report: Value = serde_json::from_str(&probed.stdout).unwrap();
    assert_eq!(
        report["safe_pool_idle_timeout_ms"],
        Value::Null,
        "{report:#}"
    );
    let points = report["sweep"].as_array().expect("sweep is a list");
    // Widened below -100 down to an idle time of zero; nothing answered.
    assert!(points.len() > 2, "{report:#}");
    let lowest = points[0]["delta_ms"].as_i64().unwrap();
    let earliest = report["idle_timeout_ms"]["min"].as_f64().unwrap();
    assert!(lowest as f64 <= -earliest + 1.0, "{report:#}");
    assert!(points.iter().all(|p| p["answered"] == 0), "{report:#}");
    let advice = report["advice"].as_str().unwrap();
    assert!(
        advice.contains("no idle time at which every reuse"),
        "{advice}"
    );
}

/// Reuses sent after an idle time, on time (within 10 ms of it).
#[derive(Debug)]
struct Reuses {
    answered: usize,
    failed: usize,
    /// Sent later than planned (a busy machine): not counted.
    late: usize,
}

/// `n` connections to a fixture answering `OK` responses, started over
/// `spread`: each sends a request, waits `idle` after its response, and
/// sends another.
/// `n` reuses after `safe_ms` idle, spread over a second, none failed.
fn assert_safe_to_reuse(addr: SocketAddr, safe_ms: u64, n: u32) -> Reuses {
    let reuses = reuse_after(
        addr,
        Duration::from_millis(safe_ms),
        n,
        Duration::from_secs(1),
    );
    assert_eq!(reuses.failed, 0, "reusing after {safe_ms} ms: {reuses:?}");
    reuses
}

fn reuse_after(addr: SocketAddr, idle: Duration, n: u32, spread: Duration) -> Reuses {
    const SLACK: Duration = Duration::from_millis(10);
    let threads: Vec<_> = (0..n)
        .map(|i| {
            std::thread::spawn(move || {
                std::thread::sleep(spread * i / n);
                let mut stream = TcpStream::connect(addr).expect("connect");
                let _ = stream.set_nodelay(true);
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
                let answer = |stream: &mut TcpStream| -> bool {
                    if stream.write_all(request).is_err() {
                        return false;
                    }
                    let mut got = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !got.ends_with(b"\r\n\r\nok\n") {
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return false,
                            Ok(k) => got.extend_from_slice(&chunk[..k]),
                        }
                    }
                    true
                };
                assert!(answer(&mut stream), "the first request is answered");
                let responded = Instant::now();
                std::thread::sleep(idle);
                let on_time = responded.elapsed() <= idle + SLACK;
                (on_time, answer(&mut stream))
            })
        })
        .collect();
    let mut reuses = Reuses {
        answered: 0,
        failed: 0,
        late: 0,
    };
    for thread in threads {
        match thread.join().expect("a reuse thread") {
            (false, _) => reuses.late += 1,
            (true, true) => reuses.answered += 1,
            (true, false) => reuses.failed += 1,
        }
    }
    reuses
}

/// The keys of a JSON object, sorted.
fn sorted_keys(object: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = object
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

#[test]
fn json_has_exactly_the_documented_keys() {
    let server = start(|config| {
        config.keep_alive_timeout = Duration::from_secs(1);
        config.keep_alive_buffer = Duration::ZERO;
    });
    let report = probe_json(server.addr, &["--connections", "2"]);
    assert_eq!(
        sorted_keys(&report),
        [
            "advertised_max",
            "advertised_timeout_s",
            "advice",
            "advice_basis",
            "close_period_ms",
            "close_style",
            "http_version",
            "idle_timeout_ms",
            "max_requests",
            "safe_pool_idle_timeout_ms",
            "sweep",
            "url",
        ]
    );
    assert_eq!(report["url"], format!("http://{}/", server.addr));
    for key in ["delta_ms", "answered", "eof", "reset"] {
        assert!(report["sweep"][0].get(key).is_some(), "{key}: {report:#}");
    }
    // The figures behind the advice: a timer per connection, no passes.
    let basis = &report["advice_basis"];
    assert_eq!(
        sorted_keys(basis),
        [
            "earliest_close_ms",
            "lowered_by_period",
            "pass_moved_ms",
            "pass_period_ms",
            "pass_phase",
            "probe_late_wakeups",
            "probe_worst_late_ms",
            "reliable",
            "round_trip_ms",
            "stalled_closes_left",
            "stalled_closes_redone",
            "start_gap_ms",
            "whole_second_stamps",
            "worst_stall_ms",
        ]
    );
    assert_eq!(basis["whole_second_stamps"], false, "{report:#}");
    let earliest = basis["earliest_close_ms"].as_f64().unwrap();
    let min = report["idle_timeout_ms"]["min"].as_f64().unwrap();
    assert!(earliest <= min && earliest > min - 20.0, "{report:#}");
    assert!(basis["round_trip_ms"].as_f64().unwrap() > 0.0, "{report:#}");
    assert_eq!(basis["pass_period_ms"], Value::Null, "{report:#}");
    assert_eq!(basis["reliable"], true, "{report:#}");
}

#[test]
fn an_advertised_timeout_longer_than_the_real_one_is_a_warning() {
    // nginx advertising more than it keeps: 1 s real, 3 s advertised.
    let Some(nginx) = probe_fixtures::nginx("keepalive_timeout 1s 3s;") else {
        return;
    };
    let url = format!("http://{}/", nginx.addr);
    let probed = probe(&["--connections", "2", &url]);
    assert_eq!(probed.code, Some(0), "{}", probed.stderr);
    assert!(
        probed.stdout.contains("warning:") && probed.stdout.contains("will race"),
        "{}",
        probed.stdout
    );
    assert!(probed.stdout.contains("Server: nginx"), "{}", probed.stdout);
}

#[test]
fn a_server_that_keeps_connections_past_max_wait_says_so() {
    let server = start(|config| config.keep_alive_timeout = Duration::from_secs(60));
    let url = format!("http://{}/", server.addr);
    let probed = probe(&["--max-wait", "300ms", "--max-requests", "3", &url]);
    assert_eq!(probed.code, Some(0), "{}", probed.stderr);
    assert!(
        probed
            .stdout
            .contains("keeps idle connections more than 300ms"),
        "{}",
        probed.stdout
    );
    assert!(probed.took < Duration::from_secs(20), "{:?}", probed.took);
    // Piped: a plain line as each phase begins, no redrawing.
    let said: Vec<&str> = probed.stderr.lines().collect();
    assert_eq!(
        said,
        [
            "keepalive-server probe: opening 8 connections over 1s (at most 11s)",
            "keepalive-server probe: waiting for 8 idle connections to close (at most 300ms)",
        ],
        "{}",
        probed.stderr
    );
    assert!(!probed.stderr.contains('\x1b'), "{}", probed.stderr);
}

/// One connection is one, in the report and in the progress lines.
#[test]
fn one_connection_is_said_in_the_singular() {
    let server = start(|config| config.keep_alive_timeout = Duration::from_secs(60));
    let url = format!("http://{}/", server.addr);
    let probed = probe(&[
        "--connections",
        "1",
        "--max-wait",
        "200ms",
        "--max-requests",
        "0",
        &url,
    ]);
    assert_eq!(probed.code, Some(0), "{}", probed.stderr);
    assert!(
        probed.stdout.contains("(1 idle connection, GET)"),
        "{}",
        probed.stdout
    );
    assert!(
        probed.stderr.contains("waiting for 1 idle connection to"),
        "{}",
        probed.stderr
    );
    assert!(
        !probed.stdout.contains("1 idle connections"),
        "{}",
        probed.stdout
    );
}

#[test]
fn nothing_listening_exits_1_at_once_with_a_message() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let probed = probe(&[&format!("http://127.0.0.1:{port}/")]);
    assert_eq!(probed.code, Some(1), "{}", probed.stderr);
    assert!(probed.stderr.contains("refused"), "{}", probed.stderr);
    assert!(probed.took < Duration::from_secs(5), "{:?}", probed.took);
}

#[test]
fn bad_urls_exit_2_and_say_what_was_meant() {
    for (url, says) in [
        ("https://127.0.0.1:0/", "out of range"),
        ("not a url", "invalid URL"),
        ("127.0.0.1:8080", "no scheme"),
        // The user's own host and port, with either scheme.
        (
            "localhost:8443/",
            "did you mean http://localhost:8443/ (or https://localhost:8443/",
        ),
        ("10.1.2.3:9000", "did you mean http://10.1.2.3:9000/"),
        ("ftp://127.0.0.1/", "only http://"),
        ("http://127.0.0.1:99999/", "port 99999 is out of range"),
        ("http://127.0.0.1:0/", "out of range"),
    ] {
        let probed = probe(&[url]);
        assert_eq!(probed.code, Some(2), "{url}: {}", probed.stderr);
        assert!(probed.stderr.contains(says), "{url}: {}", probed.stderr);
        assert!(!probed.stderr.contains("panicked"), "{}", probed.stderr);
    }
    let probed = probe(&["--timeout", "0", "http://127.0.0.1/"]);
    assert_eq!(probed.code, Some(2), "{}", probed.stderr);
    let probed = probe(&["--stagger", "200ms", "http://127.0.0.1/"]);
    assert_eq!(probed.code, Some(2), "{}", probed.stderr);
    assert!(probed.stderr.contains("at least 1s"), "{}", probed.stderr);
}

#[test]
fn a_server_that_is_not_http_or_never_answers_exits_1() {
    let not_http = format!("http://{}/", probe_fixtures::not_http_server());
    let probed = probe(&[&not_http]);
    assert_eq!(probed.code, Some(1), "{}", probed.stderr);
    assert!(probed.stderr.contains("not an HTTP"), "{}", probed.stderr);

    let silent = format!("http://{}/", probe_fixtures::silent_server());
    let probed = probe(&["--timeout", "300ms", &silent]);
    assert_eq!(probed.code, Some(1), "{}", probed.stderr);
    assert!(
        probed.stderr.contains("no response within 300ms"),
        "{}",
        probed.stderr
    );
    assert!(probed.took < Duration::from_secs(10), "{:?}", probed.took);
}

/// Servers that answer without end (interim responses forever, a head or
/// a body a byte every 0.4 s, each byte well within any read timeout):
/// `--timeout` bounds each whole exchange, and the probe exits 1 saying
/// what the server did, in about `--timeout`, not never.
#[test]
fn servers_that_answer_without_end_exit_1_within_the_timeout() {
    for (addr, says) in [
        (
            probe_fixtures::endless_continue_server(),
            "the server sent 11 interim 100 responses and no final one",
        ),
        (
            probe_fixtures::trickling_head_server(),
            "bytes of a response head without finishing it",
        ),
        (probe_fixtures::trickling_body_server(), "a 200 head and"),
    ] {
        let url = format!("http://{addr}/");
        let probed = probe(&["--timeout", "2s", &url]);
        assert_eq!(probed.code, Some(1), "{url}: {}", probed.stderr);
        assert!(probed.stderr.contains(says), "{says}: {}", probed.stderr);
        // One error line after the phase lines.
        let errors = probed.stderr.lines().filter(|l| l.contains("error:"));
        assert_eq!(errors.count(), 1, "{}", probed.stderr);
        // 2 s each way, generous for a shared machine: never a hang.
        assert!(
            probed.took < Duration::from_secs(20),
            "{url}: {:?}",
            probed.took
        );
    }
}

/// TLS failures say what happened and what to do, in words, not the
/// library's debug output.
#[test]
fn tls_failures_say_what_to_do() {
    let cert = support::tls::TestCert::new();
    let tls = probe_fixtures::tls_server(&cert.cert, &cert.key);
    let https = format!("https://localhost:{}/", tls.addr.port());
    // Trusted by nothing given: name both ways out.
    let stranger = probe_fixtures::self_signed_ca_certificate();
    let probed = probe(&["--cacert", stranger.cacert_arg(), &https]);
    assert_eq!(probed.code, Some(1), "{}", probed.stderr);
    for words in [
        "is not signed by a certificate in --cacert",
        "--cacert FILE",
        "--insecure",
    ] {
        assert!(probed.stderr.contains(words), "{words}: {}", probed.stderr);
    }
    let probed = probe(&[&https]);
    assert!(probed.stderr.contains("--cacert"), "{}", probed.stderr);
    assert!(probed.stderr.contains("--insecure"), "{}", probed.stderr);
    // The right scheme for the port.
    let http_to_tls = format!("http://127.0.0.1:{}/", tls.addr.port());
    let probed = probe(&["--timeout", "5s", &http_to_tls]);
    assert_eq!(probed.code, Some(1), "{}", probed.stderr);
    assert!(probed.stderr.contains("use https://"), "{}", probed.stderr);
    let nginx_like = format!(
        "http://{}/",
        probe_fixtures::https_port_answering_plain_requests_400()
    );
    let probed = probe(&["--timeout", "5s", &nginx_like]);
    assert_eq!(probed.code, Some(1), "{}", probed.stderr);
    assert!(probed.stderr.contains("use https://"), "{}", probed.stderr);
    let plain = start(|_| {});
    let https_to_plain = format!("https://127.0.0.1:{}/", plain.addr.port());
    let probed = probe(&["--insecure", "--timeout", "5s", &https_to_plain]);
    assert_eq!(probed.code, Some(1), "{}", probed.stderr);
    assert!(
        probed.stderr.contains("speaks plain HTTP"),
        "{}",
        probed.stderr
    );
    assert!(probed.stderr.contains("use http://"), "{}", probed.stderr);
    // Signed by a CA other than the one of that name in --cacert.
    let pems = probe_fixtures::certificate_from_an_impostor_ca();
    let signed = probe_fixtures::tls_server(&pems.cert, &pems.key);
    let url = format!("https://localhost:{}/", signed.addr.port());
    let probed = probe(&["--cacert", pems.cacert_arg(), &url]);
    assert_eq!(probed.code, Some(1), "{}", probed.stderr);
    assert!(
        probed.stderr.contains("signature does not verify"),
        "{}",
        probed.stderr
    );
    assert!(
        !probed.stderr.contains("Context"),
        "debug output: {}",
        probed.stderr
    );
}

/// A self-signed certificate marked as a CA (as `openssl req -x509` makes
/// by default), given as --cacert, is trusted as is: WebPKI alone refuses
/// a CA as the server's own certificate.
#[test]
fn a_self_signed_ca_certificate_given_as_cacert_is_trusted() {
    let pems = probe_fixtures::self_signed_ca_certificate();
    let server = probe_fixtures::tls_server(&pems.cert, &pems.key);
    let url = format!("https://localhost:{}/?ka=300ms", server.addr.port());
    let args = ["--json", "--connections", "2", "--max-requests", "0"];
    let probed = probe(&[&args[..], &["--cacert", pems.cacert_arg(), &url]].concat());
    assert_eq!(probed.code, Some(0), "{}", probed.stderr);
    let report: Value = serde_json::from_str(&probed.stdout).unwrap();
    assert_eq!(report["tls"]["version"], "TLSv1.3", "{report:#}");
    // Another self-signed CA certificate is still refused.
    let other = probe_fixtures::self_signed_ca_certificate();
    let probed = probe(&[&args[..], &["--cacert", other.cacert_arg(), &url]].concat());
    assert_eq!(probed.code, Some(1), "{}", probed.stderr);
}

#[test]
fn serving_without_a_subcommand_is_unchanged_and_help_names_the_probe() {
    let (status, stdout, _) = run_to_exit(command(&["--help"]), WITHIN);
    assert!(status.success());
    assert!(stdout.contains("--keep-alive-timeout"), "{stdout}");
    assert!(stdout.contains("keepalive-server probe URL"), "{stdout}");
    let (status, stdout, _) = run_to_exit(command(&["probe", "--help"]), WITHIN);
    assert!(status.success());
    for flag in [
        "--connections",
        "--max-wait",
        "--sweep",
        "--json",
        "--timeout",
        "--cacert",
        "--insecure",
    ] {
        assert!(stdout.contains(flag), "{flag}: {stdout}");
    }
    // https is served, not a usage error.
    assert!(stdout.contains("https://HOST"), "{stdout}");
    assert!(!stdout.contains("port, https)"), "{stdout}");
}

#[test]
fn the_probe_sees_a_lab_control_lie_about_the_idle_timeout() {
    // This server, told by the URL's controls to promise 5 s, keep idle
    // connections 1 s and end them with a reset.
    let server = start(|config| config.keep_alive_timeout = Duration::from_secs(30));
    let url = format!("http://{}/?ka=1s&advertise=5s&close=rst", server.addr);
    let mut args = vec!["--json", "--max-requests", "0"];
    args.extend_from_slice(&SWEEP);
    args.push(&url);
    let probed = probe(&args);
    assert_eq!(probed.code, Some(0), "stderr: {}", probed.stderr);
    let report: Value = serde_json::from_str(&probed.stdout).unwrap();
    assert_idle_timeout(&report, 1000.0);
    assert_eq!(report["advertised_timeout_s"], 5, "{report:#}");
    assert_eq!(report["close_style"], "rst", "{report:#}");
    assert_sweep_splits_at_zero(&report);
    let advice = report["advice"].as_str().unwrap();
    assert!(advice.contains("race"), "the lie is called out: {advice}");
}
