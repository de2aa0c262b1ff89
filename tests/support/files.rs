//! Files for the tests: a file in a fresh temporary directory, removed
//! when dropped (no test writes anywhere else, and none modifies a tracked
//! file), and paths of files in the repository.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The path of `relative` in the repository (e.g. `config/server.toml`).
pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// A file in a fresh temporary directory (removed when dropped).
pub struct TempFile {
    dir: PathBuf,
    pub path: PathBuf,
}

impl TempFile {
    pub fn new(name: &str, contents: &str) -> TempFile {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kas-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap();
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

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
