//! Files for the tests: fresh temporary directories and files in them,
//! removed when dropped (no test writes anywhere else, and none modifies a
//! tracked file), and paths of files in the repository.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The path of `relative` in the repository (e.g. `config/server.toml`).
pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// A fresh directory under the system's temporary one, removed (with
/// what is in it) when dropped.
pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    pub fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "kas-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir { path }
    }

    /// Writes `contents` to the file `name` in it, and returns its path.
    pub fn file(&self, name: &str, contents: &[u8]) -> PathBuf {
        let path = self.path.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A file in a [`TempDir`] of its own (removed when dropped).
pub struct TempFile {
    dir: TempDir,
    pub path: PathBuf,
}

impl TempFile {
    pub fn new(name: &str, contents: &str) -> TempFile {
        let dir = TempDir::new();
        let path = dir.file(name, contents.as_bytes());
        TempFile { dir, path }
    }

    pub fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }

    /// Replaces the file's contents.
    pub fn write(&self, contents: &str) {
        std::fs::write(&self.path, contents).unwrap();
    }
}
