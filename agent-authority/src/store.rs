//! The per-user run authority: the bound directory and identity, per-run locks and signed
//! lifecycle records, leases and the uncertain fence. The operations that create a run
//! ([`Store::start`], [`Store::prepare_import`]) live with the run, in `run.rs`, so that the
//! run builds on the store and the store never names the run.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::TryLockError;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use crate::envelope::is_daemon_token;
use crate::error::{AuthorityError, Reason};
use crate::fsdir::{BoundDir, HeldLock, WriteStage};
use crate::identity::Identity;
use crate::keys::{ScopeId, hex_encode, sha256};
use crate::record::{MAX_RECORD_BYTES, Phase, Record, SnapshotClaim};

/// The default store, below the user's state directory: `$XDG_STATE_HOME/agent-kit/run-authority`,
/// else `$HOME/.local/state/agent-kit/run-authority`.
pub const DEFAULT_SUBDIRECTORY: &str = "agent-kit/run-authority";

/// A point in a lifecycle operation, reported to a [`StepHook`] (crash and failure tests
/// choose where to stop or fail with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// Import: the run's lock is held; the record match and keyed verification are next.
    ImportLocked,
    /// Import: verified; the IMPORTING write is next.
    ImportVerified,
    /// Import: IMPORTING is durable; the kernel's paused commit is next.
    ImportConsumed,
    /// Import: the kernel run is committed paused; the ACTIVE write is next.
    ImportCommitted,
    /// Import: ACTIVE is durable; kernel activation is next.
    ImportRecorded,
    /// Local resume: the kernel reservation is held; the invalidating write is next.
    LocalReserved,
    /// Local resume: ACTIVE at generation + 1 is durable; the kernel commit is next.
    LocalInvalidated,
    /// A record write for this phase: the temp file is synced; the rename is next.
    TempSynced(Phase),
    /// A record write for this phase: renamed into place; the directory fsync is next.
    Renamed(Phase),
}

impl Step {
    /// Every step once: an import's, a suspension's, a local resume's (whose ACTIVE write
    /// repeats `TempSynced(Active)` and `Renamed(Active)`), then the tombstones'.
    pub const ALL: [Step; 19] = [
        Step::ImportLocked,
        Step::ImportVerified,
        Step::TempSynced(Phase::Importing),
        Step::Renamed(Phase::Importing),
        Step::ImportConsumed,
        Step::ImportCommitted,
        Step::TempSynced(Phase::Active),
        Step::Renamed(Phase::Active),
        Step::ImportRecorded,
        Step::TempSynced(Phase::Suspended),
        Step::Renamed(Phase::Suspended),
        Step::LocalReserved,
        Step::LocalInvalidated,
        Step::TempSynced(Phase::Completed),
        Step::Renamed(Phase::Completed),
        Step::TempSynced(Phase::Failed),
        Step::Renamed(Phase::Failed),
        Step::TempSynced(Phase::Cancelled),
        Step::Renamed(Phase::Cancelled),
    ];
}

/// Observes each [`Step`]; an `Err` makes the operation fail right there (at a write
/// stage: the write fails after the writer was called, which makes the run uncertain).
pub type StepHook = Arc<dyn Fn(Step) -> Result<(), ()> + Send + Sync>;

/// How to open a [`Store`].
#[derive(Clone, Default)]
pub struct StoreOptions {
    directory: Option<PathBuf>,
    hook: Option<StepHook>,
}

impl fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreOptions")
            .field("directory", &self.directory.as_ref().map(|_| "<set>"))
            .field("hook", &self.hook.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl StoreOptions {
    /// The default directory, no hook.
    pub fn new() -> Self {
        StoreOptions::default()
    }

    /// Uses `directory` (an absolute path) instead of the default.
    pub fn directory(mut self, directory: impl Into<PathBuf>) -> Self {
        self.directory = Some(directory.into());
        self
    }

    /// Installs a step hook.
    pub fn step_hook(mut self, hook: StepHook) -> Self {
        self.hook = Some(hook);
        self
    }
}

/// The default store directory from the environment (see [`DEFAULT_SUBDIRECTORY`]).
pub fn default_directory() -> Result<PathBuf, AuthorityError> {
    let absolute = |value: std::ffi::OsString| {
        let path = PathBuf::from(value);
        path.is_absolute().then_some(path)
    };
    let base = std::env::var_os("XDG_STATE_HOME")
        .and_then(absolute)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(absolute)
                .map(|h| h.join(".local/state"))
        })
        .ok_or(AuthorityError::new(Reason::Configuration))?;
    Ok(base.join(DEFAULT_SUBDIRECTORY))
}

struct Open {
    dir: Arc<BoundDir>,
    identity: Arc<Identity>,
}

struct Shared {
    leases: usize,
    closing: bool,
    open: Option<Open>,
}

/// Most store directories whose fences one process keeps apart; past it every run of every
/// further directory is fenced (a fence is never dropped to make room).
pub const MAX_FENCED_DIRECTORIES: usize = 256;
/// Most runs fenced one by one per directory; past it every run of that directory is fenced.
pub const MAX_FENCED_RUNS: usize = 4096;

/// One store directory as the fence knows it: its device and inode (so another path to
/// the same directory, or a second [`Store::open`], shares the fence) and its scope (so a
/// deleted directory whose inode is reused by a new store does not inherit the fence).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FenceKey {
    device: u64,
    inode: u64,
    scope: ScopeId,
}

#[derive(Default)]
struct DirectoryFence {
    runs: HashSet<String>,
    /// Set when [`MAX_FENCED_RUNS`] was exceeded: every run of the directory is fenced.
    all: bool,
}

/// The process's uncertain fences by directory, bounded; it fails closed when full.
#[derive(Default)]
pub(crate) struct Fences {
    directories: HashMap<FenceKey, DirectoryFence>,
    /// Set when [`MAX_FENCED_DIRECTORIES`] was exceeded: every run of a directory not in
    /// `directories` is fenced.
    overflow: bool,
}

impl Fences {
    fn is_fenced(&self, key: &FenceKey, run_id: &str) -> bool {
        match self.directories.get(key) {
            Some(fence) => fence.all || fence.runs.contains(run_id),
            None => self.overflow,
        }
    }

    fn fence(&mut self, key: FenceKey, run_id: &str) {
        if !self.directories.contains_key(&key) && self.directories.len() >= MAX_FENCED_DIRECTORIES
        {
            self.overflow = true;
            return;
        }
        let fence = self.directories.entry(key).or_default();
        if fence.all || fence.runs.contains(run_id) {
            return;
        }
        if fence.runs.len() >= MAX_FENCED_RUNS {
            // Fail closed: the runs are no longer needed one by one.
            fence.all = true;
            fence.runs = HashSet::new();
            return;
        }
        fence.runs.insert(run_id.to_owned());
    }
}

/// The fences of this process: every handle on a directory shares them, so the fence
/// holds for the rest of the process, not only for the handle that set it.
static FENCES: LazyLock<Mutex<Fences>> = LazyLock::new(Mutex::default);

fn fences() -> MutexGuard<'static, Fences> {
    FENCES.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) struct Inner {
    shared: Mutex<Shared>,
    fence_key: FenceKey,
    hook: Option<StepHook>,
}

impl Inner {
    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn is_uncertain(&self, run_id: &str) -> bool {
        fences().is_fenced(&self.fence_key, run_id)
    }

    pub(crate) fn fence(&self, run_id: &str) {
        fences().fence(self.fence_key, run_id);
    }

    pub(crate) fn step(&self, step: Step) -> Result<(), AuthorityError> {
        match &self.hook {
            Some(hook) => hook(step).map_err(|()| {
                AuthorityError::io(&std::io::Error::from(std::io::ErrorKind::Interrupted))
            }),
            None => Ok(()),
        }
    }
}

/// Keeps the store open while a run or import uses it; the last release completes a
/// pending [`Store::close`].
pub(crate) struct Lease {
    pub(crate) inner: Arc<Inner>,
    dir: Arc<BoundDir>,
    pub(crate) identity: Arc<Identity>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut shared = self.inner.shared();
        shared.leases -= 1;
        if shared.closing && shared.leases == 0 {
            shared.open = None;
        }
    }
}

fn file_stem(run_id: &str) -> String {
    format!("run-{}", hex_encode(&sha256(run_id.as_bytes())))
}

impl Lease {
    pub(crate) fn lock_run(&self, run_id: &str) -> Result<HeldLock, AuthorityError> {
        let file = self.dir.open_lock(&format!("{}.lock", file_stem(run_id)))?;
        match HeldLock::try_take(file) {
            Ok(held) => Ok(held),
            Err(TryLockError::WouldBlock) => Err(AuthorityError::new(Reason::RunBusy)),
            Err(TryLockError::Error(error)) => Err(AuthorityError::io(&error)),
        }
    }

    pub(crate) fn read_record(&self, run_id: &str) -> Result<Option<Record>, AuthorityError> {
        let name = format!("{}.state", file_stem(run_id));
        match self
            .dir
            .read(&name, MAX_RECORD_BYTES, Reason::RecordInvalid)?
        {
            None => Ok(None),
            Some(bytes) => {
                Record::decode(&bytes, &self.identity.root, &self.identity.expect(run_id)).map(Some)
            }
        }
    }

    /// Whether the run has a record file (valid or not); under the run's lock this proves
    /// the record absent until this process writes one.
    pub(crate) fn record_exists(&self, run_id: &str) -> Result<bool, AuthorityError> {
        self.dir.exists(&format!("{}.state", file_stem(run_id)))
    }

    /// Writes the record. Every failure once this is called counts as attempted.
    pub(crate) fn write_record(
        &self,
        run_id: &str,
        run_generation: u64,
        phase: Phase,
        snapshot: Option<SnapshotClaim>,
    ) -> Result<(), AuthorityError> {
        self.write_record_to(
            Destination::Checked,
            run_id,
            run_generation,
            phase,
            snapshot,
        )
    }

    pub(crate) fn write_record_to(
        &self,
        destination: Destination,
        run_id: &str,
        run_generation: u64,
        phase: Phase,
        snapshot: Option<SnapshotClaim>,
    ) -> Result<(), AuthorityError> {
        let record = Record::new(
            &self.identity.expect(run_id),
            run_generation,
            phase,
            snapshot,
        );
        let bytes = record.encode(&self.identity.root);
        let name = format!("{}.state", file_stem(run_id));
        let inner = &self.inner;
        let mut observe = |stage| match stage {
            WriteStage::TempSynced => inner.step(Step::TempSynced(phase)),
            WriteStage::Renamed => inner.step(Step::Renamed(phase)),
        };
        match destination {
            Destination::Checked => self.dir.write_atomic(&name, &bytes, &mut observe),
            Destination::Absent => self.dir.write_absent(&name, &bytes, &mut observe),
        }
    }
}

/// What a record write knows about the file it replaces.
#[derive(Clone, Copy)]
pub(crate) enum Destination {
    /// Anything: an existing destination is validated first.
    Checked,
    /// Seen absent under the run's lock ([`Lease::record_exists`]): nothing to validate.
    Absent,
}

/// The durable state of one run, as [`Store::inspect`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunStatus {
    /// The recorded phase.
    pub phase: Phase,
    /// The recorded run generation.
    pub run_generation: u64,
}

/// The per-user run authority. Cheap to clone; clones share the bound directory, the
/// identity and the leases. The uncertain fence is the process's: every store opened on the
/// same directory shares it.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = self.inner.shared();
        f.debug_struct("Store")
            .field("open", &shared.open.is_some())
            .field("leases", &shared.leases)
            .field("closing", &shared.closing)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Binds the directory (creating it 0700), then loads or creates the identity.
    pub fn open(options: StoreOptions) -> Result<Store, AuthorityError> {
        let path = match options.directory {
            Some(path) => path,
            None => default_directory()?,
        };
        Store::open_at(&path, options.hook)
    }

    fn open_at(path: &Path, hook: Option<StepHook>) -> Result<Store, AuthorityError> {
        let dir = BoundDir::bind(path)?;
        let identity = Identity::load_or_create(&dir)?;
        let (device, inode) = dir.device_and_inode()?;
        let fence_key = FenceKey {
            device,
            inode,
            scope: identity.scope,
        };
        Ok(Store {
            inner: Arc::new(Inner {
                shared: Mutex::new(Shared {
                    leases: 0,
                    closing: false,
                    open: Some(Open {
                        dir: Arc::new(dir),
                        identity: Arc::new(identity),
                    }),
                }),
                fence_key,
                hook,
            }),
        })
    }

    /// This authority's public scope.
    pub fn scope_id(&self) -> Result<ScopeId, AuthorityError> {
        let lease = self.lease()?;
        Ok(lease.identity.scope)
    }

    /// The authority key generation written into envelopes.
    pub fn key_generation(&self) -> Result<u64, AuthorityError> {
        let lease = self.lease()?;
        Ok(lease.identity.key_generation)
    }

    pub(crate) fn lease(&self) -> Result<Lease, AuthorityError> {
        let mut shared = self.inner.shared();
        if shared.closing {
            return Err(AuthorityError::new(Reason::Closed));
        }
        let Some(open) = &shared.open else {
            return Err(AuthorityError::new(Reason::Closed));
        };
        let (dir, identity) = (open.dir.clone(), open.identity.clone());
        shared.leases += 1;
        Ok(Lease {
            inner: self.inner.clone(),
            dir,
            identity,
        })
    }

    /// Refuses new leases. With leases outstanding it reports busy and the last release
    /// completes the close; otherwise the directory handle and the keys go now. Idempotent.
    pub fn close(&self) -> Result<(), AuthorityError> {
        let mut shared = self.inner.shared();
        shared.closing = true;
        if shared.leases > 0 {
            return Err(AuthorityError::new(Reason::LeasesOutstanding));
        }
        shared.open = None;
        Ok(())
    }

    /// Whether the close has completed (no directory handle, no keys).
    pub fn is_closed(&self) -> bool {
        self.inner.shared().open.is_none()
    }

    /// Whether this process fenced the run as uncertain (through any store on this
    /// directory).
    pub fn is_uncertain(&self, run_id: &str) -> bool {
        self.inner.is_uncertain(run_id)
    }

    /// Reads and verifies the run's record without taking its lock.
    pub fn inspect(&self, run_id: &str) -> Result<Option<RunStatus>, AuthorityError> {
        if !is_daemon_token(run_id) {
            return Err(AuthorityError::new(Reason::InvalidInput));
        }
        let lease = self.lease()?;
        Ok(lease.read_record(run_id)?.map(|record| RunStatus {
            phase: record.phase,
            run_generation: record.run_generation,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(inode: u64) -> FenceKey {
        FenceKey {
            device: 1,
            inode,
            scope: ScopeId::from_bytes([7; crate::keys::SCOPE_ID_BYTES]),
        }
    }

    #[test]
    fn runs_are_fenced_one_by_one_up_to_the_bound_then_all_of_the_directory() {
        let mut fences = Fences::default();
        for i in 0..MAX_FENCED_RUNS {
            fences.fence(key(1), &format!("run-{i}"));
        }
        assert!(fences.is_fenced(&key(1), "run-0"));
        assert!(!fences.is_fenced(&key(1), "other"));
        // Fencing one already fenced changes nothing.
        fences.fence(key(1), "run-0");
        assert!(!fences.is_fenced(&key(1), "other"));
        fences.fence(key(1), "one-more");
        assert!(fences.is_fenced(&key(1), "other"));
        assert!(fences.is_fenced(&key(1), "run-0"));
        assert!(!fences.is_fenced(&key(2), "other"));
    }

    #[test]
    fn past_the_directory_bound_every_further_directory_is_fenced() {
        let mut fences = Fences::default();
        for inode in 0..MAX_FENCED_DIRECTORIES as u64 {
            fences.fence(key(inode), "run-1");
        }
        assert!(!fences.is_fenced(&key(u64::MAX), "run-1"));
        assert!(!fences.is_fenced(&key(0), "run-2"));
        fences.fence(key(u64::MAX), "run-1");
        assert!(fences.is_fenced(&key(u64::MAX), "run-1"));
        assert!(fences.is_fenced(&key(u64::MAX - 1), "anything"));
        // A directory that has its own entry keeps its own answer.
        assert!(!fences.is_fenced(&key(0), "run-2"));
        assert!(fences.is_fenced(&key(0), "run-1"));
    }

    #[test]
    fn the_scope_keeps_a_reused_inode_apart() {
        let mut fences = Fences::default();
        fences.fence(key(1), "run-1");
        let reused = FenceKey {
            scope: ScopeId::from_bytes([8; crate::keys::SCOPE_ID_BYTES]),
            ..key(1)
        };
        assert!(!fences.is_fenced(&reused, "run-1"));
    }
}
