//! The [`kernel`](crate::kernel) traits over the real engine (feature `engine`): an import
//! commits an `agent-core` [`PreparedRun`] paused and activates it; a local resume commits
//! a [`LocalResume`] reservation. The dependency points from this crate to the kernel,
//! never back.

use agent_core::agent::{LocalResume, PreparedRun, Run};
use tokio_util::sync::CancellationToken;

use crate::kernel::{ImportKernel, KernelError, LocalReservation, PausedRun};

/// An engine-prepared import (`Engine::prepare_resume`), to be committed paused under
/// `root` by [`Import::complete`](crate::Import::complete).
#[derive(Debug)]
pub struct EngineImport {
    prepared: PreparedRun,
    root: CancellationToken,
}

impl EngineImport {
    /// Wraps the preparation; cancelling `root` later cancels the run.
    pub fn new(prepared: PreparedRun, root: CancellationToken) -> Self {
        EngineImport { prepared, root }
    }
}

/// An engine run committed paused.
#[derive(Debug)]
pub struct EnginePaused(agent_core::agent::PausedRun);

impl ImportKernel for EngineImport {
    type Paused = EnginePaused;

    fn commit_paused(self) -> Result<EnginePaused, KernelError> {
        self.prepared
            .commit_paused(&self.root)
            .map(EnginePaused)
            .map_err(|_| KernelError)
    }

    fn abort(self) {
        // Dropping a preparation aborts it (its lease is released in the background).
        drop(self.prepared);
    }
}

impl PausedRun for EnginePaused {
    type Running = Run;

    fn activate(self) -> Result<Run, KernelError> {
        Ok(self.0.activate())
    }

    fn abort(self) {
        // Dropping a paused run aborts it without publishing anything.
        drop(self.0);
    }
}

/// A suspended run's local-resume reservation (`Run::prepare_local_resume`).
#[derive(Debug)]
pub struct EngineLocalResume(LocalResume);

impl EngineLocalResume {
    /// Wraps the reservation.
    pub fn new(reservation: LocalResume) -> Self {
        EngineLocalResume(reservation)
    }
}

impl LocalReservation for EngineLocalResume {
    type Committed = ();

    fn commit(self) -> Result<(), KernelError> {
        self.0.commit();
        Ok(())
    }

    fn abort(self) {
        // Dropping a reservation aborts it, as for the other two: it holds no lease, so
        // there is nothing to wait for.
        drop(self.0);
    }
}
