//! How a test skips when something it needs is missing from the machine
//! (an external tool such as nginx or Chromium, or an IPv6 loopback).
//!
//! Under `CI=true` a skip is a failure: CI installs what the tests need
//! (`.ci/run`), so a missing tool there is a broken setup, not a pass.
//! What no install provides (an IPv6 loopback) skips under CI too.
//! Outside CI the test returns early after saying
//! `SKIPPED <test name>: <why>` on stderr, and appends that line to the
//! file named by `KAS_SKIP_LOG` when set, so `.ci/run` can count the skips
//! (cargo test shows a skipped test as "ok" and hides a passing test's
//! output).

use std::io::Write;

/// Records that the calling test skips because of `why`; panics instead
/// under `CI=true`. The caller returns right after.
pub fn because(why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test} cannot run under CI=true: {why} (.ci/run installs what tests need)");
    }
    record(test, why);
}

/// Records a skip for what no install can provide (the machine's network
/// has no IPv6 loopback): counted and shown, under CI too.
pub fn not_on_this_machine(why: &str) {
    let thread = std::thread::current();
    record(thread.name().unwrap_or("a test"), why);
}

fn record(test: &str, why: &str) {
    let line = format!("SKIPPED {test}: {why}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("KAS_SKIP_LOG") {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| writeln!(file, "{line}"));
        if let Err(e) = appended {
            eprintln!(
                "could not append to KAS_SKIP_LOG {}: {e}",
                path.to_string_lossy()
            );
        }
    }
}
