//! What packaging promises: the systemd unit is valid (`systemd-analyze
//! verify`, where installed), stops after the server's own drain and runs
//! with the lab's test controls off (through the packaged config file), and
//! the package installs one binary and says its license and minimum Rust.

mod support;

use std::process::Command;
use std::time::Duration;

use support::binary::{BIN, command, run_to_exit};
use support::files::{TempFile, repo_path};

fn unit() -> String {
    std::fs::read_to_string(repo_path("config/keepalive-server.service")).expect("the unit file")
}

/// The values of `key=` lines in the unit.
fn values<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter_map(|line| line.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

#[test]
fn the_unit_stops_by_sigterm_after_the_shutdown_timeout_and_reloads_by_sighup() {
    let unit = unit();
    assert_eq!(values(&unit, "KillSignal"), ["SIGTERM"]);
    let reload = values(&unit, "ExecReload");
    assert_eq!(
        reload.last(),
        Some(&"/bin/kill -HUP $MAINPID"),
        "{reload:?}"
    );
    let stop = values(&unit, "TimeoutStopSec");
    let stop = humantime::parse_duration(stop.first().expect("TimeoutStopSec")).unwrap();
    let shutdown =
        keepalive_server::Config::with_listen("127.0.0.1:0".parse().unwrap()).shutdown_timeout;
    assert!(
        stop > shutdown + Duration::from_secs(5),
        "TimeoutStopSec {stop:?} leaves no margin over --shutdown-timeout {shutdown:?}"
    );
    let files: u64 = values(&unit, "LimitNOFILE")[0].parse().unwrap();
    assert!(files >= 65536, "LimitNOFILE={files}");
}

/// The unit's command line, with the config file it names replaced by the
/// packaged one (where its header says to copy it), checked by the binary
/// itself: the lab's query controls are off, set so by that file (the
/// built-in default, for the lab demo, is on).
#[test]
fn the_unit_with_the_packaged_config_runs_with_test_controls_off() {
    let unit = unit();
    const INSTALLED: &str = "/etc/keepalive-server/server.toml";
    assert!(
        unit.contains(&format!("config/server.toml to {INSTALLED}")),
        "the unit's header no longer says where the packaged config goes"
    );
    let packaged = repo_path("config/server.toml");
    let start = values(&unit, "ExecStart");
    let args: Vec<String> = start[0]
        .split_whitespace()
        .skip(1)
        .map(|arg| arg.replace(INSTALLED, packaged.to_str().unwrap()))
        .chain(["--check".to_owned()])
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (status, report, stderr) = run_to_exit(command(&args), Duration::from_secs(10));
    assert!(status.success(), "{status}: {stderr}");
    let line = report
        .lines()
        .find(|line| line.starts_with("test_controls = "))
        .unwrap_or_else(|| panic!("no test_controls in the report:\n{report}"));
    assert!(
        line.starts_with("test_controls = \"off\"") && line.ends_with("# config file"),
        "{line}"
    );
}

#[test]
fn the_unit_passes_systemd_analyze_verify() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        support::skip::because("systemd-analyze is not installed (apt-get install systemd)");
        return;
    }
    // verify checks that the binaries exist: point it at the built one.
    let file = TempFile::new(
        "keepalive-server.service",
        &unit().replace("/usr/local/bin/keepalive-server", BIN),
    );
    let output = Command::new("systemd-analyze")
        .args(["verify", file.arg()])
        .output()
        .expect("run systemd-analyze");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let about_ours: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("keepalive-server.service"))
        .collect();
    assert!(about_ours.is_empty(), "systemd-analyze: {about_ours:?}");
}

#[test]
fn the_package_installs_only_the_server_and_states_license_and_msrv() {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(repo_path(""))
        .output()
        .expect("cargo metadata");
    assert!(output.status.success());
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let server = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "keepalive-server")
        .expect("the server package");
    let bins: Vec<&str> = server["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        bins,
        ["keepalive-server"],
        "cargo install would install these"
    );
    assert_eq!(server["license"], "MIT");
    assert!(server["rust_version"].is_string(), "no rust-version");
    assert!(server["description"].is_string(), "no description");
    let license = std::fs::read_to_string(repo_path("LICENSE")).expect("a LICENSE file");
    assert!(license.starts_with("MIT License"), "{license}");
}
