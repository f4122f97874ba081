//! Helpers shared by the integration tests: private temporary directories (never the real
//! home) and a suspended run to import.
#![allow(dead_code, unreachable_pub)]

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use agent_authority::{ActiveRun, Lifecycle, SnapshotEnvelope, Store, StoreOptions};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh 0700 directory under the system temp dir; removed (permissions restored first)
/// on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("agent-authority-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .expect("create the temp dir");
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn store_dir(&self) -> PathBuf {
        self.path.join("store")
    }
}

fn make_writable(path: &Path) {
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.is_dir()
    {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(path) {
            for entry in entries.flatten() {
                make_writable(&entry.path());
            }
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        make_writable(&self.path);
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

pub fn open(dir: &Path) -> Store {
    Store::open(StoreOptions::new().directory(dir)).expect("open the store")
}

/// A payload in sorted-key compact JSON, so re-encoding it through `serde_json::Value`
/// gives the same bytes.
pub fn payload(run_id: &str, turns: u32) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"run_id": run_id, "turns": turns})).unwrap()
}

/// Starts `run_id`, issues a SUSPENDED snapshot and closes the owner (crash equivalent),
/// so the envelope is importable by the next owner.
pub fn suspended(store: &Store, run_id: &str) -> SnapshotEnvelope {
    let mut run = store.start(run_id).expect("start");
    let envelope = run
        .issue_snapshot(Lifecycle::Suspended, 7, payload(run_id, 1))
        .expect("issue");
    run.close().expect("close");
    envelope
}

/// Starts `run_id` and issues a SUSPENDED snapshot, keeping the owner.
pub fn suspended_owner(store: &Store, run_id: &str) -> (ActiveRun, SnapshotEnvelope) {
    let mut run = store.start(run_id).expect("start");
    let envelope = run
        .issue_snapshot(Lifecycle::Suspended, 7, payload(run_id, 1))
        .expect("issue");
    (run, envelope)
}

/// The state file of `run_id`.
pub fn state_file(dir: &Path, run_id: &str) -> PathBuf {
    let digest = agent_authority::sha256(run_id.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("run-{hex}.state"))
}

/// A fake kernel for imports: records what happened in a shared log.
pub mod fake {
    use std::sync::{Arc, Mutex};

    use agent_authority::kernel::{ImportKernel, KernelError, LocalReservation, PausedRun};

    pub type Log = Arc<Mutex<Vec<&'static str>>>;

    pub fn log() -> Log {
        Arc::new(Mutex::new(Vec::new()))
    }

    pub struct Kernel {
        pub log: Log,
        pub fail_commit: bool,
        pub fail_activate: bool,
    }

    impl Kernel {
        pub fn new(log: &Log) -> Kernel {
            Kernel {
                log: log.clone(),
                fail_commit: false,
                fail_activate: false,
            }
        }
    }

    pub struct Paused {
        log: Log,
        fail_activate: bool,
    }

    impl ImportKernel for Kernel {
        type Paused = Paused;
        fn commit_paused(self) -> Result<Paused, KernelError> {
            self.log.lock().unwrap().push("commit_paused");
            if self.fail_commit {
                return Err(KernelError);
            }
            Ok(Paused {
                log: self.log,
                fail_activate: self.fail_activate,
            })
        }
        fn abort(self) {
            self.log.lock().unwrap().push("kernel_abort");
        }
    }

    impl PausedRun for Paused {
        type Running = &'static str;
        fn activate(self) -> Result<&'static str, KernelError> {
            self.log.lock().unwrap().push("activate");
            if self.fail_activate {
                return Err(KernelError);
            }
            Ok("running")
        }
        fn abort(self) {
            self.log.lock().unwrap().push("paused_abort");
        }
    }

    /// A kernel reservation over a suspended state held as bytes: abort restores them.
    pub struct Reservation {
        pub log: Log,
        pub state: Arc<Mutex<Vec<u8>>>,
        pub saved: Vec<u8>,
        pub fail_commit: bool,
    }

    impl Reservation {
        pub fn new(log: &Log, state: &Arc<Mutex<Vec<u8>>>) -> Reservation {
            let saved = state.lock().unwrap().clone();
            // Reserving marks the state resume-pending.
            *state.lock().unwrap() = b"resume-pending".to_vec();
            Reservation {
                log: log.clone(),
                state: state.clone(),
                saved,
                fail_commit: false,
            }
        }
    }

    impl LocalReservation for Reservation {
        type Committed = &'static str;
        fn commit(self) -> Result<&'static str, KernelError> {
            self.log.lock().unwrap().push("local_commit");
            if self.fail_commit {
                return Err(KernelError);
            }
            *self.state.lock().unwrap() = b"running".to_vec();
            Ok("running")
        }
        fn abort(self) {
            self.log.lock().unwrap().push("local_abort");
            *self.state.lock().unwrap() = self.saved;
        }
    }
}
