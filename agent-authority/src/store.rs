//! The per-user run authority: the bound directory, the identity, per-run locks and signed
//! lifecycle records, leases, the uncertain fence, and the lifecycle operations.

use std::collections::HashSet;
use std::fmt;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::envelope::{HmacSnapshotAuthority, Lifecycle, SnapshotEnvelope, is_valid_run_id};
use crate::error::{AuthorityError, Reason};
use crate::fsdir::{BoundDir, WriteStage};
use crate::kernel::{
    ImportKernel, KernelError, LocalReservation, PausedRun, contained, contained_abort,
};
use crate::keys::{
    KEY_BYTES, SCOPE_ID_BYTES, ScopeId, SecretKey, ct_eq, hex_encode, random, sha256,
};
use crate::record::{Expect, MAX_RECORD_BYTES, Phase, Record, SnapshotClaim};

/// The default store, below the user's state directory: `$XDG_STATE_HOME/agent-kit/run-authority`,
/// else `$HOME/.local/state/agent-kit/run-authority`.
pub const DEFAULT_SUBDIRECTORY: &str = "agent-kit/run-authority";
/// Bytes in `identity.key`: u64be key generation, scope id, root key.
pub const IDENTITY_BYTES: usize = 8 + SCOPE_ID_BYTES + KEY_BYTES;
/// The key generation a new identity starts at.
pub const INITIAL_KEY_GENERATION: u64 = 1;

const IDENTITY_LOCK: &str = "identity.lock";
const IDENTITY_KEY: &str = "identity.key";

/// BSD `flock` merges locks inside one process, so initialisation also takes this mutex.
static IDENTITY_INIT: Mutex<()> = Mutex::new(());

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

struct Identity {
    key_generation: u64,
    scope: ScopeId,
    root: SecretKey,
}

impl Identity {
    fn load_or_create(dir: &BoundDir) -> Result<Identity, AuthorityError> {
        let _process = IDENTITY_INIT.lock().unwrap_or_else(|p| p.into_inner());
        let lock = dir.open_lock(IDENTITY_LOCK)?;
        lock.lock().map_err(|e| AuthorityError::io(&e))?;
        let identity = match dir.read(IDENTITY_KEY, IDENTITY_BYTES, Reason::IdentityInvalid)? {
            Some(bytes) => Identity::parse(&bytes)?,
            None => {
                let scope: [u8; SCOPE_ID_BYTES] =
                    random().map_err(|_| AuthorityError::new(Reason::Randomness))?;
                let root: [u8; KEY_BYTES] =
                    random().map_err(|_| AuthorityError::new(Reason::Randomness))?;
                let mut bytes = Vec::with_capacity(IDENTITY_BYTES);
                bytes.extend_from_slice(&INITIAL_KEY_GENERATION.to_be_bytes());
                bytes.extend_from_slice(&scope);
                bytes.extend_from_slice(&root);
                // Re-validated before use: a broken random source must not yield a zero key.
                let identity = Identity::parse(&bytes)?;
                dir.write_atomic(IDENTITY_KEY, &bytes, &mut |_| Ok(()))?;
                identity
            }
        };
        drop(lock);
        Ok(identity)
    }

    fn parse(bytes: &[u8]) -> Result<Identity, AuthorityError> {
        let invalid = || AuthorityError::new(Reason::IdentityInvalid);
        if bytes.len() != IDENTITY_BYTES {
            return Err(invalid());
        }
        let key_generation = u64::from_be_bytes(bytes[..8].try_into().map_err(|_| invalid())?);
        let scope: [u8; SCOPE_ID_BYTES] = bytes[8..40].try_into().map_err(|_| invalid())?;
        let root: [u8; KEY_BYTES] = bytes[40..].try_into().map_err(|_| invalid())?;
        if key_generation == 0
            || scope == [0; SCOPE_ID_BYTES]
            || root == [0; KEY_BYTES]
            || ct_eq(&scope, &root)
        {
            return Err(invalid());
        }
        Ok(Identity {
            key_generation,
            scope: ScopeId::from_bytes(scope),
            root: SecretKey::from_bytes(root),
        })
    }

    fn expect<'a>(&'a self, run_id: &'a str) -> Expect<'a> {
        Expect {
            scope: &self.scope,
            key_generation: self.key_generation,
            run_id,
        }
    }

    fn snapshot_authority(&self, run_id: &str, run_generation: u64) -> HmacSnapshotAuthority {
        let key = self
            .root
            .derive_run_key(&self.scope, run_id, run_generation);
        match HmacSnapshotAuthority::new(self.scope, self.key_generation, key) {
            Ok(authority) => authority,
            // key_generation > 0 was checked when the identity was parsed.
            Err(_) => unreachable!("identity key generation is positive"),
        }
    }
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

struct Inner {
    shared: Mutex<Shared>,
    uncertain: Mutex<HashSet<String>>,
    hook: Option<StepHook>,
}

impl Inner {
    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_uncertain(&self, run_id: &str) -> bool {
        self.uncertain
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(run_id)
    }

    fn fence(&self, run_id: &str) {
        self.uncertain
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run_id.to_owned());
    }

    fn step(&self, step: Step) -> Result<(), AuthorityError> {
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
struct Lease {
    inner: Arc<Inner>,
    dir: Arc<BoundDir>,
    identity: Arc<Identity>,
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
    fn lock_run(&self, run_id: &str) -> Result<File, AuthorityError> {
        let file = self.dir.open_lock(&format!("{}.lock", file_stem(run_id)))?;
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(TryLockError::WouldBlock) => Err(AuthorityError::new(Reason::RunBusy)),
            Err(TryLockError::Error(error)) => Err(AuthorityError::io(&error)),
        }
    }

    fn read_record(&self, run_id: &str) -> Result<Option<Record>, AuthorityError> {
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

    /// Writes the record. Every failure once this is called counts as attempted.
    fn write_record(
        &self,
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
        self.dir
            .write_atomic(&name, &bytes, &mut |stage| match stage {
                WriteStage::TempSynced => inner.step(Step::TempSynced(phase)),
                WriteStage::Renamed => inner.step(Step::Renamed(phase)),
            })
    }
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
/// identity, the leases and the uncertain fence.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
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
                uncertain: Mutex::new(HashSet::new()),
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

    fn lease(&self) -> Result<Lease, AuthorityError> {
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

    /// Whether this process fenced the run as uncertain.
    pub fn is_uncertain(&self, run_id: &str) -> bool {
        self.inner.is_uncertain(run_id)
    }

    /// Reads and verifies the run's record without taking its lock.
    pub fn inspect(&self, run_id: &str) -> Result<Option<RunStatus>, AuthorityError> {
        if !is_valid_run_id(run_id) {
            return Err(AuthorityError::new(Reason::InvalidInput));
        }
        let lease = self.lease()?;
        Ok(lease.read_record(run_id)?.map(|record| RunStatus {
            phase: record.phase,
            run_generation: record.run_generation,
        }))
    }

    /// Starts a new run: takes its lock and writes ACTIVE at generation 1. A run id that
    /// ever had a record is refused (state); a tampered record is a verification failure.
    pub fn start(&self, run_id: &str) -> Result<ActiveRun, AuthorityError> {
        if !is_valid_run_id(run_id) {
            return Err(AuthorityError::new(Reason::InvalidInput));
        }
        let lease = self.lease()?;
        if self.inner.is_uncertain(run_id) {
            return Err(AuthorityError::new(Reason::Uncertain));
        }
        let lock = lease.lock_run(run_id)?;
        if lease.read_record(run_id)?.is_some() {
            return Err(AuthorityError::new(Reason::RunExists));
        }
        let mut run = ActiveRun {
            lease,
            run_id: run_id.to_owned(),
            lock: Some(lock),
            generation: 1,
            state: RunState::Active,
            uncertain: false,
            close_reported: false,
        };
        run.write(1, Phase::Active, None)?;
        Ok(run)
    }

    /// The first half of an import, in order: the envelope must be SUSPENDED (its structure
    /// was validated when it was decoded), a lease, the uncertain fence, the run's lock, the
    /// record must be SUSPENDED with exactly this claim, then keyed verification under the
    /// run key for the record's generation. Nothing durable changes; on failure the lock is
    /// released.
    pub fn prepare_import(&self, envelope: &SnapshotEnvelope) -> Result<Import, AuthorityError> {
        if envelope.lifecycle() != Lifecycle::Suspended {
            return Err(AuthorityError::new(Reason::Malformed));
        }
        let lease = self.lease()?;
        let run_id = envelope.run_id();
        if self.inner.is_uncertain(run_id) {
            return Err(AuthorityError::new(Reason::Uncertain));
        }
        if envelope.authority().scope_id() != &lease.identity.scope {
            return Err(AuthorityError::new(Reason::ForeignScope));
        }
        let lock = lease.lock_run(run_id)?;
        self.inner.step(Step::ImportLocked)?;
        let record = match lease.read_record(run_id) {
            Ok(Some(record)) => record,
            Ok(None) => return Err(AuthorityError::new(Reason::Rejected)),
            Err(error) => return Err(error),
        };
        if record.phase != Phase::Suspended {
            return Err(AuthorityError::new(Reason::NotSuspended));
        }
        if record.snapshot.as_ref() != Some(&SnapshotClaim::of(envelope)) {
            return Err(AuthorityError::new(Reason::Rejected));
        }
        let authority = lease
            .identity
            .snapshot_authority(run_id, record.run_generation);
        envelope.verify(&authority)?;
        Ok(Import {
            lease,
            envelope: envelope.clone(),
            lock: Some(lock),
            record_generation: record.run_generation,
        })
    }
}

enum RunState {
    Active,
    Suspended(Box<SnapshotEnvelope>),
    Ended,
}

/// A run this process owns: it holds the run's OS lock and a lease on the store.
/// `ActiveRun` deliberately exposes no raw signing interface.
pub struct ActiveRun {
    lease: Lease,
    run_id: String,
    lock: Option<File>,
    generation: u64,
    state: RunState,
    uncertain: bool,
    close_reported: bool,
}

impl fmt::Debug for ActiveRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActiveRun")
            .field("run_id", &self.run_id)
            .field("generation", &self.generation)
            .field("phase", &self.phase())
            .field("uncertain", &self.uncertain)
            .finish_non_exhaustive()
    }
}

/// How a run ended, for [`ActiveRun::terminal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TerminalPhase {
    /// Finished.
    Completed,
    /// Failed.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl TerminalPhase {
    fn phase(self) -> Phase {
        match self {
            TerminalPhase::Completed => Phase::Completed,
            TerminalPhase::Failed => Phase::Failed,
            TerminalPhase::Cancelled => Phase::Cancelled,
        }
    }
}

impl ActiveRun {
    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The current run generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The phase this handle last made durable; `None` once the run ended or was closed.
    pub fn phase(&self) -> Option<Phase> {
        match self.state {
            RunState::Active => Some(Phase::Active),
            RunState::Suspended(_) => Some(Phase::Suspended),
            RunState::Ended => None,
        }
    }

    fn preflight(&self) -> Result<(), AuthorityError> {
        if self.uncertain || self.lease.inner.is_uncertain(&self.run_id) {
            return Err(AuthorityError::new(Reason::Uncertain));
        }
        if matches!(self.state, RunState::Ended) {
            return Err(AuthorityError::new(Reason::Closed));
        }
        Ok(())
    }

    /// Writes a record; any failure latches this handle and fences the run as uncertain.
    fn write(
        &mut self,
        generation: u64,
        phase: Phase,
        snapshot: Option<SnapshotClaim>,
    ) -> Result<(), AuthorityError> {
        match self
            .lease
            .write_record(&self.run_id, generation, phase, snapshot)
        {
            Ok(()) => Ok(()),
            Err(_) => {
                self.latch_uncertain();
                Err(AuthorityError::new(Reason::Uncertain))
            }
        }
    }

    fn latch_uncertain(&mut self) {
        self.uncertain = true;
        self.lease.inner.fence(&self.run_id);
    }

    fn release(&mut self) {
        self.lock = None;
        self.state = RunState::Ended;
    }

    /// Signs the kernel snapshot's payload under the run key for the current generation and
    /// records it. SUSPENDED writes the claim and keeps the lock (issuing the identical
    /// snapshot again returns it without a write; a different one is refused). A terminal
    /// lifecycle writes the tombstone and releases the lock.
    pub fn issue_snapshot(
        &mut self,
        lifecycle: Lifecycle,
        last_sequence: u64,
        payload: Vec<u8>,
    ) -> Result<SnapshotEnvelope, AuthorityError> {
        self.preflight()?;
        if let RunState::Suspended(issued) = &self.state {
            let same = lifecycle == Lifecycle::Suspended
                && issued.last_sequence() == last_sequence
                && issued.payload() == payload.as_slice();
            return if same {
                Ok((**issued).clone())
            } else {
                Err(AuthorityError::new(Reason::SnapshotConflict))
            };
        }
        let authority = self
            .lease
            .identity
            .snapshot_authority(&self.run_id, self.generation);
        // A payload that breaks the envelope's rules (another run's, empty, too large) is the
        // caller's mistake here, not a verification failure: state.
        let envelope =
            SnapshotEnvelope::sign(&authority, &self.run_id, last_sequence, lifecycle, payload)
                .map_err(|error| match error.reason() {
                    Reason::Malformed => AuthorityError::new(Reason::InvalidInput),
                    _ => error,
                })?;
        let generation = self.generation;
        match lifecycle {
            Lifecycle::Suspended => {
                self.write(
                    generation,
                    Phase::Suspended,
                    Some(SnapshotClaim::of(&envelope)),
                )?;
                self.state = RunState::Suspended(Box::new(envelope.clone()));
            }
            Lifecycle::Completed | Lifecycle::Failed | Lifecycle::Cancelled => {
                let phase = match lifecycle {
                    Lifecycle::Completed => Phase::Completed,
                    Lifecycle::Failed => Phase::Failed,
                    _ => Phase::Cancelled,
                };
                self.write(generation, phase, None)?;
                self.release();
            }
        }
        Ok(envelope)
    }

    /// Resumes a suspended run: ACTIVE at generation + 1, which invalidates the issued
    /// snapshot (its key was derived from the old generation).
    pub fn resume(&mut self) -> Result<(), AuthorityError> {
        self.preflight()?;
        if !matches!(self.state, RunState::Suspended(_)) {
            return Err(AuthorityError::new(Reason::WrongPhase));
        }
        let next = self.generation + 1;
        self.write(next, Phase::Active, None)?;
        self.generation = next;
        self.state = RunState::Active;
        Ok(())
    }

    /// Local resume, in order: the caller's kernel reservation (already made, inert), the
    /// durable invalidation (ACTIVE at generation + 1), then the kernel commit. A failure
    /// before the write aborts the reservation (the kernel's suspended state is restored
    /// byte for byte, the record is untouched); from the write on, failure is uncertain.
    pub fn resume_local<R: LocalReservation>(
        &mut self,
        reservation: R,
    ) -> Result<R::Committed, AuthorityError> {
        let before = self.preflight().and_then(|()| {
            if matches!(self.state, RunState::Suspended(_)) {
                self.lease.inner.step(Step::LocalReserved)
            } else {
                Err(AuthorityError::new(Reason::WrongPhase))
            }
        });
        if let Err(error) = before {
            contained_abort(|| reservation.abort());
            return Err(error);
        }
        if let Err(error) = self.resume() {
            contained_abort(|| reservation.abort());
            return Err(error);
        }
        if self.lease.inner.step(Step::LocalInvalidated).is_err() {
            self.latch_uncertain();
            contained_abort(|| reservation.abort());
            return Err(AuthorityError::new(Reason::Uncertain));
        }
        contained(|| reservation.commit()).map_err(|KernelError| {
            self.latch_uncertain();
            AuthorityError::new(Reason::Uncertain)
        })
    }

    /// Writes the tombstone at the current generation and releases the lock.
    pub fn terminal(&mut self, phase: TerminalPhase) -> Result<(), AuthorityError> {
        self.preflight()?;
        let generation = self.generation;
        self.write(generation, phase.phase(), None)?;
        self.release();
        Ok(())
    }

    /// The crash equivalent: releases the lock and leaves the record as it is (ACTIVE stays
    /// unimportable forever; SUSPENDED becomes importable by another owner). On an uncertain
    /// run the first close reports uncertain.
    pub fn close(&mut self) -> Result<(), AuthorityError> {
        self.release();
        if self.uncertain && !self.close_reported {
            self.close_reported = true;
            return Err(AuthorityError::new(Reason::Uncertain));
        }
        Ok(())
    }
}

/// A prepared import: the run's lock is held, the envelope matched the SUSPENDED record and
/// verified. Dropping it (or [`abort`](Self::abort)) releases the lock; nothing durable
/// changed yet.
pub struct Import {
    lease: Lease,
    envelope: SnapshotEnvelope,
    lock: Option<File>,
    record_generation: u64,
}

impl fmt::Debug for Import {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Import")
            .field("run_id", &self.envelope.run_id())
            .field("record_generation", &self.record_generation)
            .finish_non_exhaustive()
    }
}

impl Import {
    /// The verified envelope.
    pub fn envelope(&self) -> &SnapshotEnvelope {
        &self.envelope
    }

    /// Releases the lock; clean, since nothing durable changed.
    pub fn abort(self) {}

    /// The rest of the transaction, in order: write IMPORTING at g+1, commit the kernel run
    /// paused, write ACTIVE at g+1, activate. A failure before the first write is clean
    /// (the kernel preparation is aborted, the lock released). From the first write on,
    /// every failure makes the run uncertain: it is fenced for this process and never
    /// retried; the record stays unimportable.
    pub fn complete<K: ImportKernel>(
        mut self,
        kernel: K,
    ) -> Result<(ActiveRun, <K::Paused as PausedRun>::Running), AuthorityError> {
        let inner = self.lease.inner.clone();
        let run_id = self.envelope.run_id().to_owned();
        if let Err(error) = inner.step(Step::ImportVerified) {
            contained_abort(|| kernel.abort());
            return Err(error);
        }
        let uncertain = |inner: &Inner| {
            inner.fence(&run_id);
            AuthorityError::new(Reason::Uncertain)
        };
        let next = self.record_generation + 1;
        if self
            .lease
            .write_record(&run_id, next, Phase::Importing, None)
            .is_err()
        {
            contained_abort(|| kernel.abort());
            return Err(uncertain(&inner));
        }
        if inner.step(Step::ImportConsumed).is_err() {
            contained_abort(|| kernel.abort());
            return Err(uncertain(&inner));
        }
        let Ok(paused) = contained(|| kernel.commit_paused()) else {
            return Err(uncertain(&inner));
        };
        if inner.step(Step::ImportCommitted).is_err()
            || self
                .lease
                .write_record(&run_id, next, Phase::Active, None)
                .is_err()
            || inner.step(Step::ImportRecorded).is_err()
        {
            contained_abort(|| paused.abort());
            return Err(uncertain(&inner));
        }
        let Ok(running) = contained(|| paused.activate()) else {
            return Err(uncertain(&inner));
        };
        let lock = self.lock.take();
        // Move the lease out: `Import` has no Drop, so its fields can be taken apart.
        let Import { lease, .. } = self;
        Ok((
            ActiveRun {
                lease,
                run_id,
                lock,
                generation: next,
                state: RunState::Active,
                uncertain: false,
                close_reported: false,
            },
            running,
        ))
    }
}
