//! Every `scripts/*.sh` answers `--help` and `-h` with its usage on
//! stdout and exit 0, at once, starting nothing: each runs with a PATH
//! holding only bash and awk, so a script that went on to start a server,
//! wrk or cargo would fail to find it and exit non-zero.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::binary::run_to_exit;
use support::files::{TempDir, repo_path};

/// Generous: printing a comment block takes milliseconds.
const AT_ONCE: Duration = Duration::from_secs(10);

/// `name`'s path on this machine's PATH.
fn installed(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{name} is not installed"))
}

/// A directory holding only `bash` and `awk`, to be the whole PATH.
fn bare_path() -> TempDir {
    let dir = TempDir::new();
    for tool in ["bash", "awk"] {
        std::os::unix::fs::symlink(installed(tool), dir.path.join(tool)).unwrap();
    }
    dir
}

fn scripts() -> Vec<PathBuf> {
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(repo_path("scripts"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sh"))
        .collect();
    scripts.sort();
    scripts
}

/// Runs `script` with `args` under `path` alone: its status code,
/// stdout, stderr and how long it took.
fn run(script: &Path, args: &[&str], path: &Path) -> (Option<i32>, String, String, Duration) {
    let mut command = Command::new(path.join("bash"));
    command
        .arg(script)
        .args(args)
        .env_clear()
        .env("PATH", path)
        .current_dir(repo_path(""));
    let began = Instant::now();
    let (status, stdout, stderr) = run_to_exit(command, AT_ONCE);
    (status.code(), stdout, stderr, began.elapsed())
}

#[test]
fn every_script_answers_help_with_its_usage_at_once() {
    let path = bare_path();
    let scripts = scripts();
    assert!(scripts.len() >= 12, "scripts/*.sh: {scripts:?}");
    for script in &scripts {
        let name = script.file_name().unwrap().to_string_lossy();
        for flag in ["--help", "-h"] {
            let (code, stdout, stderr, took) = run(script, &[flag], &path.path);
            assert_eq!(code, Some(0), "{name} {flag}: {stderr}");
            assert!(stdout.contains("Usage:"), "{name} {flag}: {stdout}");
            assert!(
                stdout.contains(&format!("scripts/{name}")),
                "{name} {flag} names itself: {stdout}"
            );
            assert!(!stdout.contains("#!"), "{name} {flag}: {stdout}");
            assert!(stderr.is_empty(), "{name} {flag}: {stderr}");
            assert!(took < AT_ONCE, "{name} {flag} took {took:?}");
        }
    }
}

/// The two scripts that take required arguments say so without them,
/// rather than stopping on `$2: unbound variable`.
#[test]
fn a_script_missing_its_arguments_says_its_usage() {
    let path = bare_path();
    for (name, args) in [
        ("ab-cpu.sh", "ROUNDS BIN_A BIN_B"),
        ("probe-vs-wire.sh", "PORT URL"),
    ] {
        let script = repo_path("scripts").join(name);
        let (code, _, stderr, _) = run(&script, &[], &path.path);
        assert_eq!(code, Some(2), "{name}: {stderr}");
        assert!(stderr.contains(args), "{name}: {stderr}");
        assert!(!stderr.contains("unbound variable"), "{name}: {stderr}");
    }
}
