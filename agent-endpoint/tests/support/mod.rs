//! Private temporary directories for the endpoint tests (short paths: socket addresses are
//! bounded at 100 bytes).
#![allow(dead_code, unreachable_pub)]

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Whether `program` is a file in a directory of `PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Ends a test whose tool from outside the Rust toolchain is missing (the rule of the
/// README's test command): under `CI` (set and not empty, as `.ci/run` sets it) the test is
/// required and fails; elsewhere it prints one line saying what to install, and passes.
pub fn skip_or_fail(needs: &str) {
    if std::env::var_os("CI").is_some_and(|ci| !ci.is_empty()) {
        panic!("CI is set, so this test is required: it needs {needs}");
    }
    // Written to stderr itself: the test harness captures `eprintln!` of passing tests.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("skipped: needs {needs}\n").as_bytes(),
    );
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh 0700 directory under `/tmp`; removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = PathBuf::from(format!("/tmp/ae-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .expect("create the temp dir");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A child directory with `mode`.
    pub fn child(&self, name: &str, mode: u32) -> PathBuf {
        let dir = self.path.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        dir
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
