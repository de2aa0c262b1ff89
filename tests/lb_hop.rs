//! The other hop: `keepalive-server probe --lb-idle-timeout DURATION URL`
//! against real servers started here (this server in-process, Node's http
//! server, nginx, uvicorn), each at an idle timeout shorter than the
//! balancer's: the probe names the server, exits 1 with its own setting
//! and a value; the same server started at that value then passes (exit
//! 0). Balancer timeouts are seconds, so each test takes a few; the harness
//! runs them side by side.

mod probe_fixtures;
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use support::binary::{command, run_to_exit};
use support::server::start;

/// A probe must finish within this (generous: the machine is shared).
const WITHIN: Duration = Duration::from_secs(60);
/// The balancer's idle timeout the servers are judged against: the
/// default margin is 0.3 s, so a service must keep 3.3 s and is advised 5.
const LB: &str = "3s";
const ADVISED_S: u64 = 5;

/// What a probe with `--lb-idle-timeout` printed and its status.
struct Judged {
    code: Option<i32>,
    hop: Value,
    stderr: String,
}

/// Probes `addr` as a service behind a balancer of `lb`.
fn judge(addr: SocketAddr, lb: &str) -> Judged {
    let url = format!("http://{addr}/");
    let args = [
        "probe",
        "--json",
        "--max-requests",
        "0",
        "--lb-idle-timeout",
        lb,
        &url,
    ];
    let (status, stdout, stderr) = run_to_exit(command(&args), WITHIN);
    let report: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"));
    Judged {
        code: status.code(),
        hop: report["lb_hop"].clone(),
        stderr,
    }
}

/// Judges `low` and `advised` (the same server at the advised value) side
/// by side against [`LB`].
fn judge_both(low: SocketAddr, advised: SocketAddr) -> (Judged, Judged) {
    std::thread::scope(|scope| {
        let fixed = scope.spawn(|| judge(advised, LB));
        (judge(low, LB), fixed.join().unwrap())
    })
}

/// The service closed first: exit 1, named as `server` with `setting`,
/// the advised value in the advice and on stderr with by how much.
fn assert_closes_first(judged: &Judged, server: &str, setting: &str) {
    let hop = &judged.hop;
    assert_eq!(judged.code, Some(1), "{hop} {}", judged.stderr);
    assert_eq!(hop["verdict"], "closes_first", "{hop}");
    assert_eq!(hop["server"], server, "{hop}");
    assert_eq!(hop["setting"], setting, "{hop}");
    assert_eq!(hop["advised_s"], ADVISED_S, "{hop}");
    assert!(hop["short_by_ms"].as_f64().unwrap() > 0.0, "{hop}");
    let advice = hop["advice"].as_str().unwrap();
    assert!(advice.contains(setting), "{advice}");
    assert!(judged.stderr.contains("closes first"), "{}", judged.stderr);
}

/// The service kept past the balancer: exit 0, verdict ok.
fn assert_ok(judged: &Judged) {
    assert_eq!(judged.code, Some(0), "{} {}", judged.hop, judged.stderr);
    assert_eq!(judged.hop["verdict"], "ok", "{}", judged.hop);
}

#[test]
fn this_server_is_judged_against_the_balancer_and_its_setting_named() {
    let two = start(|c| c.keep_alive_timeout = Duration::from_secs(2));
    let advised = start(|c| c.keep_alive_timeout = Duration::from_secs(ADVISED_S));
    let (shorter, longer, fixed) = std::thread::scope(|scope| {
        let shorter = scope.spawn(|| judge(two.addr, "1s"));
        let longer = scope.spawn(|| judge(two.addr, LB));
        let fixed = scope.spawn(|| judge(advised.addr, LB));
        (
            shorter.join().unwrap(),
            longer.join().unwrap(),
            fixed.join().unwrap(),
        )
    });
    assert_ok(&shorter);
    assert_eq!(shorter.hop["advertised_timeout_s"], 2, "{}", shorter.hop);
    assert_closes_first(&longer, "keepalive-server", "--keep-alive-timeout");
    let advice = longer.hop["advice"].as_str().unwrap();
    assert!(advice.contains("--keep-alive-timeout 5s"), "{advice}");
    assert!(advice.contains("Keep-Alive: timeout=2"), "{advice}");
    assert_ok(&fixed);
}

#[test]
fn node_is_named_with_its_buffer_and_passes_at_the_advised_value() {
    let Some(low) = probe_fixtures::node(1000) else {
        return;
    };
    let Some(advised) = probe_fixtures::node(ADVISED_S * 1000) else {
        return;
    };
    let (low, fixed) = judge_both(low.addr, advised.addr);
    assert_closes_first(&low, "node", "server.keepAliveTimeout");
    // The advised 5 s is also Node's default keepAliveTimeout: the second
    // run is Node at its default.
    let advice = low.hop["advice"].as_str().unwrap();
    assert!(
        advice.contains("server.keepAliveTimeout = 5000"),
        "{advice}"
    );
    assert!(advice.contains("server.headersTimeout = 6000"), "{advice}");
    assert!(advice.contains("1 s after keepAliveTimeout"), "{advice}");
    // Node closes a second after what it advertises: judged by the close.
    assert_eq!(low.hop["advertised_timeout_s"], 1, "{}", low.hop);
    let closed = low.hop["service_closed_after_ms"].as_f64().unwrap();
    assert!(closed > 1500.0, "{closed}");
    assert_ok(&fixed);
}

#[test]
fn nginx_is_told_its_keepalive_timeout_and_passes_at_the_advised_value() {
    let Some(low) = probe_fixtures::nginx("keepalive_timeout 2s;") else {
        return;
    };
    let Some(advised) = probe_fixtures::nginx(&format!("keepalive_timeout {ADVISED_S}s;")) else {
        return;
    };
    let Some(ten) = probe_fixtures::nginx("keepalive_timeout 10s;") else {
        return;
    };
    let (ten, (low, fixed)) = std::thread::scope(|scope| {
        let ten = scope.spawn(|| judge(ten.addr, LB));
        let both = judge_both(low.addr, advised.addr);
        (ten.join().unwrap(), both)
    });
    assert_closes_first(&low, "nginx", "keepalive_timeout");
    let advice = low.hop["advice"].as_str().unwrap();
    assert!(advice.contains("keepalive_timeout 5s;"), "{advice}");
    assert_ok(&fixed);
    assert_ok(&ten);
    assert_eq!(
        ten.hop["service_closed_after_ms"],
        Value::Null,
        "{}",
        ten.hop
    );
}

#[test]
fn uvicorn_is_told_its_timeout_keep_alive_and_passes_at_the_advised_value() {
    let Some(low) = probe_fixtures::uvicorn(2) else {
        return;
    };
    let Some(advised) = probe_fixtures::uvicorn(ADVISED_S) else {
        return;
    };
    let (low, fixed) = judge_both(low.addr, advised.addr);
    assert_closes_first(&low, "uvicorn", "--timeout-keep-alive");
    let advice = low.hop["advice"].as_str().unwrap();
    assert!(advice.contains("--timeout-keep-alive 5"), "{advice}");
    assert_ok(&fixed);
}

#[test]
fn a_preset_names_its_source_and_the_explicit_duration_wins() {
    let server = start(|c| c.keep_alive_timeout = Duration::from_secs(2));
    let url = format!("http://{}/", server.addr);
    let args = [
        "probe",
        "--json",
        "--max-requests",
        "0",
        "--lb",
        "aws-alb",
        "--lb-idle-timeout",
        "1s",
        &url,
    ];
    let (status, stdout, stderr) = run_to_exit(command(&args), WITHIN);
    assert_eq!(status.code(), Some(0), "{stdout} {stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["lb_hop"]["lb_idle_timeout_ms"], 1000, "{report}");
    assert_eq!(report["lb_hop"]["preset"], Value::Null, "{report}");
    let (status, help, _) = run_to_exit(command(&["probe", "--help"]), WITHIN);
    assert!(status.success());
    for source in [
        "Edit attributes for your Application Load Balancer",
        "Request distribution for external",
        "ngx_http_upstream_module",
    ] {
        assert!(help.contains(source), "{help}");
    }
}
