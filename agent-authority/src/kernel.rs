//! The kernel side of an import and of a local resume, as the authority needs it: small
//! traits, so the ordering is enforced here and testable with a fake, and the real engine
//! plugs in through an adapter in the host.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// The kernel refused (or panicked); the authority reports what that means durably.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelError;

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the kernel refused the run")
    }
}

impl std::error::Error for KernelError {}

/// An imported run the kernel has prepared (reserved, inert) and can commit paused.
pub trait ImportKernel {
    /// The committed-but-gated run.
    type Paused: PausedRun;
    /// Registers the run with every provider, stage, tool and event waiting behind a gate.
    fn commit_paused(self) -> Result<Self::Paused, KernelError>;
    /// Gives the preparation back; nothing ran.
    fn abort(self);
}

/// A run committed paused: activation opens the gate exactly once.
pub trait PausedRun {
    /// What activation yields (the running run's handle).
    type Running;
    /// Opens the gate.
    fn activate(self) -> Result<Self::Running, KernelError>;
    /// Cancels the inert run; no lifecycle event is emitted.
    fn abort(self);
}

/// The kernel's inert reservation of a suspended run's exact boundary
/// (`Run::prepare_local_resume`).
pub trait LocalReservation {
    /// What committing yields.
    type Committed;
    /// Continues the run past the boundary.
    fn commit(self) -> Result<Self::Committed, KernelError>;
    /// Restores the byte-identical suspended state.
    fn abort(self);
}

/// Runs a kernel callback, turning a panic into a [`KernelError`].
pub(crate) fn contained<T>(f: impl FnOnce() -> Result<T, KernelError>) -> Result<T, KernelError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(Err(KernelError))
}

/// Runs an abort, swallowing a panic: aborts happen on paths that already failed.
pub(crate) fn contained_abort(f: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(f));
}
