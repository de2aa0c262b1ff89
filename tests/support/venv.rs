//! The Python venv the guard's examples and the uvicorn fixture run in:
//! `KAS_EXAMPLES_VENV`, default target/examples-venv, which `.ci/run`
//! makes with httpx, pytest and uvicorn. Found, or the test skips (and
//! fails under `CI=true`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::files::repo_path;
use super::skip;

/// The venv's directory, where it is or would be.
pub fn examples_venv() -> PathBuf {
    std::env::var_os("KAS_EXAMPLES_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_path("target/examples-venv"))
}

/// The venv's `bin` directory when its Python imports every module of
/// `modules` (e.g. `"httpx, pytest"`), or `None` after saying why not.
pub fn examples_bin(modules: &str) -> Option<PathBuf> {
    let venv = examples_venv();
    let bin = venv.join("bin");
    let usable = Command::new(bin.join("python"))
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|out| out.status.success());
    if usable {
        return Some(bin);
    }
    skip::because(&format!(
        "no Python venv with {modules} at {} (.ci/run makes it; or python3 -m venv DIR && DIR/bin/pip install httpx pytest uvicorn; KAS_EXAMPLES_VENV=DIR)",
        venv.display()
    ));
    None
}

/// `PATH` with `bin` first, so `python` and `pytest` are the venv's.
pub fn path_with(bin: &Path) -> OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    std::env::join_paths(paths).expect("PATH entries without ':'")
}
