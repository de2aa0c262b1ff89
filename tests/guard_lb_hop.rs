//! The other hop in the guard: `keepalive-server lab --upstream URL
//! --lb-idle-timeout DURATION -- COMMAND` checks the service behind the
//! lab while COMMAND runs, against real services started here (this
//! server in-process, Node's http server), with a 2 s balancer so each run
//! takes a few seconds: a service that closes idle connections first fails
//! the run with status 4 naming its own setting, apart from the clients'
//! verdicts; one that keeps them longer passes; a service that COMMAND
//! stops before the check is done cuts it short (inconclusive, status 4,
//! not a pass); and `--lb-idle-timeout` without `--upstream` is a usage
//! error.

mod probe_fixtures;
mod support;

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use serde_json::Value;
use support::binary::{command, run_to_exit};
use support::files::TempDir;
use support::server::{keep_alive, start};

/// A guard run must finish within this (generous: the machine is shared).
const WITHIN: Duration = Duration::from_secs(60);
/// The balancer's idle timeout: with the default 0.2 s margin, a service
/// must keep idle connections 2.2 s, and is advised 4 s.
const LB: &str = "2s";

/// What a guard run gave: its status, stderr and `--json` report.
struct Run {
    code: Option<i32>,
    stderr: String,
    report: Value,
}

impl Run {
    /// The `lb_hop` object of the report.
    fn hop(&self) -> &Value {
        &self.report["lb_hop"]
    }

    /// The guard's last line: the run's one verdict.
    fn last_line(&self) -> &str {
        self.stderr.lines().last().unwrap_or_default()
    }
}

/// The guard in front of `service`, checking it against [`LB`], with
/// `flags` before `--` and `command` after.
fn guard(service: SocketAddr, flags: &[&str], command_line: &[&str]) -> Run {
    let dir = TempDir::new();
    let json = dir.path.join("report.json");
    let upstream = format!("http://{service}");
    let mut args = vec![
        "lab",
        "--upstream",
        &upstream,
        "--lb-idle-timeout",
        LB,
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    args.push("--");
    args.extend_from_slice(command_line);
    let (status, _, stderr) = run_to_exit(command(&args), WITHIN);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    Run {
        code: status.code(),
        stderr,
        report: serde_json::from_str(&text).unwrap(),
    }
}

/// A guard run with no client, its COMMAND done at once: the check alone.
fn check_alone(service: SocketAddr) -> Run {
    guard(service, &["--allow-no-clients"], &["true"])
}

fn assert_closes_first(run: &Run, server: &str, setting: &str) {
    let hop = run.hop();
    assert_eq!(run.code, Some(4), "{}", run.stderr);
    assert_eq!(hop["verdict"], "closes_first", "{hop}");
    assert_eq!(hop["server"], server, "{hop}");
    assert_eq!(hop["setting"], setting, "{hop}");
    assert!(hop["advice"].as_str().unwrap().contains(setting), "{hop}");
    assert!(
        run.stderr.contains("SERVICE (THE OTHER HOP)") && run.stderr.contains("closes first"),
        "{}",
        run.stderr
    );
    assert!(
        run.last_line().contains("FAIL (status 4)")
            && run.last_line().contains(&format!("raise its {setting}")),
        "{}",
        run.stderr
    );
}

/// At 1 s (no buffer, so its close comes 1.2 s short of the 2.2 s, not
/// 0.2 s: a loaded machine's late timer cannot pass it) this server closes
/// first; at 5 s it passes.
#[test]
fn this_server_behind_a_2s_balancer_fails_at_1s_and_passes_at_5s() {
    let short = start(|c| keep_alive(c, "1s", "0s"));
    let long = start(|c| c.keep_alive_timeout = Duration::from_secs(5));
    let (short, long) = std::thread::scope(|scope| {
        let long = scope.spawn(|| check_alone(long.addr));
        (check_alone(short.addr), long.join().unwrap())
    });
    assert_closes_first(&short, "keepalive-server", "--keep-alive-timeout");
    let advice = short.hop()["advice"].as_str().unwrap();
    assert!(advice.contains("--keep-alive-timeout 4s"), "{advice}");
    assert_eq!(short.hop()["advertised_timeout_s"], 1);
    let closed = short.hop()["service_closed_after_ms"].as_f64().unwrap();
    assert!(closed >= 950.0, "never early: {closed}");
    assert_eq!(short.report["status"], 4);

    assert_eq!(long.code, Some(0), "{}", long.stderr);
    assert_eq!(long.hop()["verdict"], "ok", "{}", long.hop());
    assert_eq!(long.hop()["held_idle_ms"], 2200.0, "{}", long.hop());
    assert!(long.last_line().contains(": ok"), "{}", long.stderr);
}

/// Node closes an idle connection a second after its keepAliveTimeout
/// (its own buffer): at 500 ms it closes after 1.5 s, short of 2.2 s; the
/// advice says so and names server.keepAliveTimeout.
#[test]
fn node_with_a_low_keep_alive_timeout_is_told_its_setting_and_its_buffer() {
    let Some(node) = probe_fixtures::node(500) else {
        return;
    };
    let run = check_alone(node.addr);
    assert_closes_first(&run, "node", "server.keepAliveTimeout");
    let advice = run.hop()["advice"].as_str().unwrap();
    assert!(advice.contains("1 s after keepAliveTimeout"), "{advice}");
    let closed = run.hop()["service_closed_after_ms"].as_f64().unwrap();
    assert!(closed > 1000.0, "Node's buffer: {closed}");
}

/// A client that never races and a service that closes too soon: the run
/// fails on the service alone, with the service's status, and the table
/// shows the two hops apart.
#[test]
fn a_client_that_never_races_and_a_service_that_closes_too_soon_fail_on_the_service() {
    let service = start(|c| keep_alive(c, "1s", "0s"));
    let client = "curl -sf -o /dev/null \"$KAS_LAB_URL\"";
    let run = guard(service.addr, &[], &["sh", "-c", client]);
    assert_closes_first(&run, "keepalive-server", "--keep-alive-timeout");
    let clients = run.report["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 1, "{}", run.report);
    assert_eq!(clients[0]["verdict"], "ok", "{}", run.report);
    assert_eq!(run.report["clients_pass"], true);
    assert_eq!(run.report["command_status"], 0);
    assert!(
        run.last_line()
            .contains("the clients alone would pass (--fail-on at-risk)"),
        "{}",
        run.stderr
    );
    let table = &run.stderr;
    assert!(
        table.find("CLIENT").unwrap() < table.find("SERVICE (THE OTHER HOP)").unwrap(),
        "{table}"
    );
}

/// A service COMMAND starts and stops before 2.2 s of idle: the check is
/// cut short, inconclusive, not a pass; a service that never comes up is
/// not checked, the same way.
#[test]
fn a_service_stopped_by_command_before_the_check_is_done_cuts_it_short() {
    let port = free_port();
    let service = SocketAddr::from(([127, 0, 0, 1], port));
    let bin = env!("CARGO_BIN_EXE_keepalive-server");
    let script = format!(
        "'{bin}' --listen 127.0.0.1:{port} --keep-alive-timeout 30s --workers 1 2>/dev/null & \
         sleep 1.5; kill $!; wait"
    );
    let run = guard(service, &["--allow-no-clients"], &["sh", "-c", &script]);
    assert_eq!(run.code, Some(4), "{}", run.stderr);
    assert_eq!(run.hop()["verdict"], "inconclusive", "{}", run.hop());
    assert!(
        run.stderr
            .contains("Cut short: the service no longer answered"),
        "{}",
        run.stderr
    );
    assert!(
        run.last_line()
            .contains("its check was cut short: inconclusive, not a pass"),
        "{}",
        run.stderr
    );

    let nobody = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let run = guard(nobody, &["--allow-no-clients"], &["sleep", "0.3"]);
    assert_eq!(run.code, Some(4), "{}", run.stderr);
    assert_eq!(run.hop()["verdict"], "inconclusive", "{}", run.hop());
    assert!(
        run.hop()["cut_short"]
            .as_str()
            .unwrap()
            .contains("never accepted a connection while COMMAND ran"),
        "{}",
        run.hop()
    );
}

#[test]
fn the_balancers_timeout_without_the_upstream_is_a_usage_error() {
    for flags in [&["--lb-idle-timeout", "2s"][..], &["--lb", "aws-alb"]] {
        let mut args = vec!["lab"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "true"]);
        let (status, _, stderr) = run_to_exit(command(&args), WITHIN);
        assert_eq!(status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains("--upstream URL"), "{stderr}");
    }
}

/// A loopback port nothing listens on (for a moment).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
