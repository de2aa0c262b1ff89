//! What packaging promises: the systemd unit is valid (`systemd-analyze
//! verify`, where installed), stops after the server's own drain and runs
//! with the lab's test controls off (through the packaged config file), and
//! the package installs one binary and says its license and minimum Rust.
//! HTTPS under the unit's `DynamicUser=` goes through systemd credentials,
//! as its comments show: those lines verify too, and the server reads its
//! certificate and key from a credentials directory both ways they offer.

mod support;

use std::process::Command;
use std::time::Duration;

use support::binary::{BIN, Running, command, run_to_exit};
use support::files::{TempDir, TempFile, repo_path};
use support::tls::TestCert;

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

/// The unit's commented HTTPS lines (`#   LoadCredential=...`,
/// `#   Environment=KAS_TLS_...`), uncommented.
fn https_lines(unit: &str) -> Vec<&str> {
    let lines: Vec<&str> = unit
        .lines()
        .filter_map(|line| line.strip_prefix("#   "))
        .filter(|line| {
            line.starts_with("LoadCredential=") || line.starts_with("Environment=KAS_TLS")
        })
        .collect();
    assert_eq!(lines.len(), 3, "the unit's HTTPS lines: {lines:?}");
    lines
}

#[test]
fn the_unit_passes_systemd_analyze_verify_with_and_without_https() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        support::skip::because("systemd-analyze is not installed (apt-get install systemd)");
        return;
    }
    // verify checks that the binaries exist: point it at the built one.
    let plain = unit().replace("/usr/local/bin/keepalive-server", BIN);
    let https = plain.replace(
        "[Install]",
        &format!("{}\n\n[Install]", https_lines(&plain).join("\n")),
    );
    for (what, text) in [("as shipped", &plain), ("with its HTTPS lines", &https)] {
        let file = TempFile::new("keepalive-server.service", text);
        let output = Command::new("systemd-analyze")
            .args(["verify", file.arg()])
            .output()
            .expect("run systemd-analyze");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{what}: {stderr}");
        let about_ours: Vec<&str> = stderr
            .lines()
            .filter(|line| line.contains("keepalive-server.service"))
            .collect();
        assert!(
            about_ours.is_empty(),
            "{what}: systemd-analyze: {about_ours:?}"
        );
    }
}

#[test]
fn the_unit_installs_with_the_locked_dependencies() {
    let unit = unit();
    let header: String = unit
        .lines()
        .take_while(|line| line.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(header.contains("cargo install --locked"), "{header}");
}

/// A credentials directory as systemd makes it (read-only copies), with
/// the test's certificate and key under the names the unit gives them.
fn credentials(cert: &TestCert) -> TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new();
    for (name, from) in [("cert.pem", &cert.cert), ("key.pem", &cert.key)] {
        let copy = dir.file(name, &std::fs::read(from).unwrap());
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o400)).unwrap();
    }
    dir
}

/// The unit's `Environment=KAS_TLS_CERT=%d/cert.pem ...` line, with `%d`
/// (systemd's credentials directory) as `dir`: the variables it sets.
fn unit_environment(dir: &std::path::Path) -> Vec<(String, String)> {
    let unit = unit();
    let line = https_lines(&unit)
        .into_iter()
        .find_map(|line| line.strip_prefix("Environment="))
        .expect("an Environment= line");
    line.split_whitespace()
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap();
            (name.to_owned(), value.replace("%d", dir.to_str().unwrap()))
        })
        .collect()
}

#[test]
fn the_server_serves_https_from_a_credentials_directory_as_the_unit_names_it() {
    let cert = TestCert::new();
    let dir = credentials(&cert);
    let mut command = command(&["--listen", "127.0.0.1:0"]);
    command.env("CREDENTIALS_DIRECTORY", &dir.path);
    for (name, value) in unit_environment(&dir.path) {
        command.env(name, value);
    }
    let running = Running::start(command);
    let log = running.log();
    assert!(
        log.iter()
            .any(|line| line.contains("listening on https://")),
        "{log:?}"
    );
    let (head, body) = cert.connect(running.addr).get("/");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "Hello, World!");
}

#[test]
fn relative_tls_paths_in_the_config_file_name_credentials() {
    let cert = TestCert::new();
    let dir = credentials(&cert);
    let config = TempFile::new(
        "server.toml",
        "tls_cert = \"cert.pem\"\ntls_key = \"key.pem\"\n",
    );
    let mut check = command(&["--config", config.arg(), "--check"]);
    check.env("CREDENTIALS_DIRECTORY", &dir.path);
    let (status, report, stderr) = run_to_exit(check, Duration::from_secs(10));
    assert!(status.success(), "{status}: {stderr}");
    let in_dir = dir.path.join("key.pem");
    assert!(
        report.contains(&format!("tls_key = {:?}", in_dir.to_str().unwrap())),
        "{report}"
    );
    // Without the variable, the same file means the working directory's.
    let (status, _, stderr) = run_to_exit(
        command(&["--config", config.arg(), "--check"]),
        Duration::from_secs(10),
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot read certificate cert.pem"),
        "{stderr}"
    );
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
