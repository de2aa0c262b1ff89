//! The examples in front of a real service, run under the guard's main
//! form as CI runs them: `keepalive-server lab --upstream URL
//! --keep-alive-timeout 2s --keep-alive-buffer 0s --advertise none --
//! ./run-suite.sh`, the built binary between a test suite and the items
//! service (examples/ci/python-service: a JSON API on Python's
//! http.server that closes idle connections after 2 s and advertises
//! nothing), which the suite's script starts itself on a free port.
//! Both ways: a pool that keeps idle connections 5 s fails the guard,
//! naming its setting, while the suite's own tests pass; 1 s passes.
//!
//! - examples/ci/python-service: pytest through a pooled httpx client
//!   (`keepalive_expiry`); needs the examples' venv (httpx, pytest).
//! - examples/ci/node-client: node:test through a keep-alive
//!   `http.Agent` (`timeout`); needs node and python3.
//!
//! Without what they need the tests skip (and fail under CI=true; .ci/run
//! installs it).

mod support;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::binary::{command, run_to_exit};
use support::files::repo_path;
use support::skip;
use support::venv::{examples_bin, path_with};

/// How long a run may take before the test fails it (each suite waits
/// about 7 s).
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// A port that was free a moment ago, for the service.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("local_addr").port()
}

/// `examples/ci/<example>/run-suite.sh ARGS` under the guard, in front of
/// the items service on a port of its own, with `env` set and `bin` first
/// on PATH: the guard's exit status, stdout (the suite's) and stderr (the
/// guard's table). Checks that the script stopped its service.
fn suite_under_the_guard(
    example: &str,
    args: &[&str],
    env: (&str, &str),
    bin: Option<&Path>,
) -> (i32, String, String) {
    let port = free_port();
    let upstream = format!("http://127.0.0.1:{port}");
    let mut flags = vec![
        "lab",
        "--upstream",
        &upstream,
        "--keep-alive-timeout",
        "2s",
        "--keep-alive-buffer",
        "0s",
        "--advertise",
        "none",
        "--",
        "./run-suite.sh",
    ];
    flags.extend_from_slice(args);
    let mut guard = command(&flags);
    guard
        .current_dir(repo_path(&format!("examples/ci/{example}")))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("ITEMS_PORT", port.to_string())
        .env(env.0, env.1);
    if let Some(bin) = bin {
        guard.env("PATH", path_with(bin));
    }
    let (status, stdout, stderr) = run_to_exit(guard, RUN_LIMIT);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "run-suite.sh left its service listening on {port}"
    );
    (status.code().expect("an exit status"), stdout, stderr)
}

/// The pytest suite, the httpx pool's keepalive_expiry set.
fn python_service(keepalive_expiry: &str) -> Option<(i32, String, String)> {
    let bin = examples_bin("httpx, pytest")?;
    Some(suite_under_the_guard(
        "python-service",
        &["-q", "-p", "no:cacheprovider"],
        ("KEEPALIVE_EXPIRY", keepalive_expiry),
        Some(&bin),
    ))
}

/// Whether `tool --version` runs, after saying why not.
fn have(tool: &str, needed_for: &str) -> bool {
    let runs = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !runs {
        skip::because(&format!("{tool} is needed for {needed_for}"));
    }
    runs
}

/// The node:test suite, the agent's idle timeout set.
fn node_client(agent_timeout_ms: &str) -> Option<(i32, String, String)> {
    let needed_for = "examples/ci/node-client (node runs the suite, python3 the service)";
    if !have("node", needed_for) || !have("python3", needed_for) {
        return None;
    }
    Some(suite_under_the_guard(
        "node-client",
        &[],
        ("AGENT_TIMEOUT_MS", agent_timeout_ms),
        None,
    ))
}

#[test]
fn python_service_5_s_pool_passes_pytest_and_fails_the_guard_naming_keepalive_expiry() {
    let Some((status, stdout, stderr)) = python_service("5") else {
        return;
    };
    assert!(stdout.contains("5 passed"), "pytest passes: {stdout}");
    assert_eq!(status, 1, "the guard fails the run: {stderr}");
    assert!(stderr.contains("127.0.0.1 python-httpx/"), "{stderr}");
    assert!(stderr.contains("  race  "), "{stderr}");
    assert!(stderr.contains("production would have lost"), "{stderr}");
    assert!(stderr.contains("Set httpx's keepalive_expiry="), "{stderr}");
    assert!(stderr.contains("FAIL (--fail-on at-risk)"), "{stderr}");
}

#[test]
fn python_service_1_s_pool_passes() {
    let Some((status, stdout, stderr)) = python_service("1") else {
        return;
    };
    assert!(stdout.contains("5 passed"), "pytest passes: {stdout}");
    assert_eq!(status, 0, "{stderr}");
    assert!(stderr.contains("127.0.0.1 python-httpx/"), "{stderr}");
    assert!(stderr.contains("  ok  "), "{stderr}");
    assert!(stderr.contains("pass (--fail-on at-risk)"), "{stderr}");
}

#[test]
fn node_client_5_s_agent_passes_node_test_and_fails_the_guard_naming_its_timeout() {
    let Some((status, stdout, stderr)) = node_client("5000") else {
        return;
    };
    assert!(stdout.contains("# pass 5"), "node:test passes: {stdout}");
    assert_eq!(status, 1, "the guard fails the run: {stderr}");
    assert!(stderr.contains("127.0.0.1 (no User-Agent)"), "{stderr}");
    assert!(stderr.contains("  race  "), "{stderr}");
    assert!(stderr.contains("production would have lost"), "{stderr}");
    assert!(stderr.contains("Node http.Agent: timeout: "), "{stderr}");
    assert!(stderr.contains("FAIL (--fail-on at-risk)"), "{stderr}");
}

#[test]
fn node_client_1_s_agent_passes() {
    let Some((status, stdout, stderr)) = node_client("1000") else {
        return;
    };
    assert!(stdout.contains("# pass 5"), "node:test passes: {stdout}");
    assert_eq!(status, 0, "{stderr}");
    assert!(stderr.contains("  ok  "), "{stderr}");
    assert!(stderr.contains("pass (--fail-on at-risk)"), "{stderr}");
}
