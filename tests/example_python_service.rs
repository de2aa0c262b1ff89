//! examples/ci/python-service under the guard's main form, as CI runs it:
//! `keepalive-server lab --upstream URL ... -- ./run-suite.sh`, the built
//! binary in front of a real service (a JSON API on Python's http.server,
//! closing idle connections after 2 s and advertising nothing) that the
//! suite's script starts itself, with a pytest suite calling it through a
//! pooled httpx client. Both ways: the 5 s pool fails the guard naming
//! `keepalive_expiry` while pytest's own tests pass; the 1 s pool passes.
//! Needs the examples' venv (httpx, pytest); without it the tests skip
//! (and fail under CI=true; .ci/run makes it).

mod support;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use support::binary::{command, run_to_exit};
use support::files::repo_path;
use support::venv::{examples_bin, path_with};

/// How long a run may take before the test fails it (the suite waits
/// about 7 s).
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// A port that was free a moment ago, for the service.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("local_addr").port()
}

/// The example's suite under the guard, in front of its service on a port
/// of its own, the client pool's keepalive_expiry set: the guard's exit
/// status, stdout (pytest's) and stderr (the guard's table). Checks that
/// the suite's script stopped its service.
fn suite_under_the_guard(bin: &Path, keepalive_expiry: &str) -> (i32, String, String) {
    let port = free_port();
    let upstream = format!("http://127.0.0.1:{port}");
    let mut guard = command(&[
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
        "-q",
        "-p",
        "no:cacheprovider",
    ]);
    guard
        .current_dir(repo_path("examples/ci/python-service"))
        .env("PATH", path_with(bin))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("ITEMS_PORT", port.to_string())
        .env("KEEPALIVE_EXPIRY", keepalive_expiry);
    let (status, stdout, stderr) = run_to_exit(guard, RUN_LIMIT);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "run-suite.sh left its service listening on {port}"
    );
    (status.code().expect("an exit status"), stdout, stderr)
}

#[test]
fn a_5_s_pool_passes_pytest_and_fails_the_guard_naming_keepalive_expiry() {
    let Some(bin) = examples_bin("httpx, pytest") else {
        return;
    };
    let (status, stdout, stderr) = suite_under_the_guard(&bin, "5");
    assert!(stdout.contains("5 passed"), "pytest passes: {stdout}");
    assert_eq!(status, 1, "the guard fails the run: {stderr}");
    assert!(stderr.contains("127.0.0.1 python-httpx/"), "{stderr}");
    assert!(stderr.contains("  race  "), "{stderr}");
    assert!(stderr.contains("production would have lost"), "{stderr}");
    assert!(stderr.contains("Set httpx's keepalive_expiry="), "{stderr}");
    assert!(stderr.contains("FAIL (--fail-on at-risk)"), "{stderr}");
}

#[test]
fn a_1_s_pool_passes() {
    let Some(bin) = examples_bin("httpx, pytest") else {
        return;
    };
    let (status, stdout, stderr) = suite_under_the_guard(&bin, "1");
    assert!(stdout.contains("5 passed"), "pytest passes: {stdout}");
    assert_eq!(status, 0, "{stderr}");
    assert!(stderr.contains("127.0.0.1 python-httpx/"), "{stderr}");
    assert!(stderr.contains("  ok  "), "{stderr}");
    assert!(stderr.contains("pass (--fail-on at-risk)"), "{stderr}");
}
