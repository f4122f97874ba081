//! A run this process owns ([`ActiveRun`]) and a prepared import ([`Import`]): how the store
//! starts a run and prepares an import, the lifecycle operations, local resume and the rest of
//! the import transaction.

use crate::fsdir::HeldLock;
use std::fmt;

use crate::envelope::{Lifecycle, SnapshotEnvelope, is_daemon_token};
use crate::error::{AuthorityError, Reason};
use crate::kernel::{
    ImportKernel, KernelError, LocalReservation, PausedRun, contained, contained_abort,
};
use crate::record::{Phase, SnapshotClaim};
use crate::store::{Destination, Inner, Lease, Step, Store};

pub(crate) enum RunState {
    Active,
    Suspended(Box<SnapshotEnvelope>),
    Ended,
}

impl Store {
    /// Starts a new run: takes its lock and writes ACTIVE at generation 1. A run id that
    /// ever had a record is refused (state); a tampered record is a verification failure.
    pub fn start(&self, run_id: &str) -> Result<ActiveRun, AuthorityError> {
        if !is_daemon_token(run_id) {
            return Err(AuthorityError::new(Reason::InvalidInput));
        }
        let lease = self.lease()?;
        if self.inner.is_uncertain(run_id) {
            return Err(AuthorityError::new(Reason::Uncertain));
        }
        let lock = lease.lock_run(run_id)?;
        // One `fstatat` proves the usual case (no record) under the lock; only a file that
        // is there is read, to tell a valid record (exists) from a tampered one.
        let destination = if lease.record_exists(run_id)? {
            if lease.read_record(run_id)?.is_some() {
                return Err(AuthorityError::new(Reason::RunExists));
            }
            Destination::Checked
        } else {
            Destination::Absent
        };
        let mut run = ActiveRun {
            lease,
            run_id: run_id.to_owned(),
            lock: Some(lock),
            generation: 1,
            state: RunState::Active,
            uncertain: false,
            close_reported: false,
        };
        run.write_to(destination, 1, Phase::Active, None)?;
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

/// A run this process owns: it holds the run's OS lock and a lease on the store.
/// `ActiveRun` deliberately exposes no raw signing interface.
pub struct ActiveRun {
    pub(crate) lease: Lease,
    pub(crate) run_id: String,
    pub(crate) lock: Option<HeldLock>,
    pub(crate) generation: u64,
    pub(crate) state: RunState,
    pub(crate) uncertain: bool,
    pub(crate) close_reported: bool,
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
    pub(crate) fn write(
        &mut self,
        generation: u64,
        phase: Phase,
        snapshot: Option<SnapshotClaim>,
    ) -> Result<(), AuthorityError> {
        self.write_to(Destination::Checked, generation, phase, snapshot)
    }

    /// [`write`](Self::write) with what the caller knows about the destination.
    pub(crate) fn write_to(
        &mut self,
        destination: Destination,
        generation: u64,
        phase: Phase,
        snapshot: Option<SnapshotClaim>,
    ) -> Result<(), AuthorityError> {
        match self
            .lease
            .write_record_to(destination, &self.run_id, generation, phase, snapshot)
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
    pub(crate) lease: Lease,
    pub(crate) envelope: SnapshotEnvelope,
    pub(crate) lock: Option<HeldLock>,
    pub(crate) record_generation: u64,
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
