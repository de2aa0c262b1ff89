//! The dashboard in a real browser: Debian's Chromium, headless, driven by
//! a small Node script (tests/browser/dashboard.mjs, playwright-core). It
//! opens N idle keep-alive connections and waits for the page's text to
//! show the keep-alive list holding N, closes some and sees the count
//! follow, checks the console stayed clean, and saves a screenshot to a
//! temporary file (no test modifies a tracked file). With
//! `KAS_DASHBOARD_PNG=PATH` the screenshot goes to PATH and is kept:
//! scripts/dashboard-picture.sh uses that to regenerate docs/dashboard.png
//! (the README shows it).
//!
//! `.ci/run` installs chromium, node and the script's npm packages when
//! missing; where they cannot be, this test fails under `CI=true` and
//! otherwise says it skipped (tests/support/skip.rs).

mod support;

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use keepalive_server::Config;
use support::binary::wait_timeout;
use support::files::repo_path;
use support::server::AdminFixture;

const CONNECTIONS: usize = 40;
const CLOSED: usize = 15;
const BROWSER_TIMEOUT: Duration = Duration::from_secs(180);

/// What is missing to run the browser, if anything.
fn missing_tools() -> Option<String> {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() {
        return Some(format!(
            "no Chromium at {chromium} (apt-get install chromium)"
        ));
    }
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|out| out.status.success()) {
        return Some("no node on PATH (apt-get install nodejs npm)".into());
    }
    if !repo_path("tests/browser/node_modules/playwright-core").exists() {
        return Some("playwright-core is not installed (cd tests/browser && npm ci)".into());
    }
    None
}

#[test]
fn the_dashboard_shows_idle_connections_in_the_keep_alive_list() {
    if let Some(missing) = missing_tools() {
        support::skip::because(&missing);
        return;
    }
    let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
    config.workers = NonZeroUsize::new(2);
    config.keep_alive_timeout = Duration::from_secs(20);
    let f = AdminFixture::start(config);
    let keep = std::env::var_os("KAS_DASHBOARD_PNG").map(PathBuf::from);
    let screenshot = keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("kas-dashboard-{}.png", std::process::id()))
    });

    let mut child = Command::new("node")
        .arg(repo_path("tests/browser/dashboard.mjs"))
        .arg(format!("http://{}/", f.admin))
        .arg(f.addr.port().to_string())
        .arg(CONNECTIONS.to_string())
        .arg(CLOSED.to_string())
        .arg(&screenshot)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    if wait_timeout(&mut child, BROWSER_TIMEOUT).is_none() {
        let _ = child.kill();
        panic!("the browser script ran over {BROWSER_TIMEOUT:?}");
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "browser script failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for line in [
        format!("shown: keep-alive list holding {CONNECTIONS}"),
        format!(
            "shown: keep-alive list holding {} after closing {CLOSED}",
            CONNECTIONS - CLOSED
        ),
        "shown: race verdict for 127.0.0.2".to_string(),
        "shown: updated in 24-hour UTC".to_string(),
        "shown: client closes in their own colour".to_string(),
        "shown: charts drawn from the first snapshot".to_string(),
        "shown: one date row".to_string(),
        "shown: no overflow at 420 px".to_string(),
        "shown: timer tracks in view at 420 px".to_string(),
        "console: clean".to_string(),
    ] {
        assert!(stdout.contains(&line), "no {line:?} in\n{stdout}");
    }
    let png = std::fs::read(&screenshot).expect("a screenshot");
    if keep.is_none() {
        let _ = std::fs::remove_file(&screenshot);
    }
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000);
}
