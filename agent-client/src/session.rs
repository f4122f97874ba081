//! The seam's traits (docs/client.md, "Sessions").
//!
//! Methods return `impl Future<Output = ...> + Send`, so any executor (tokio
//! included) can drive them and spawn them. Cancelling a call means dropping
//! its future; the adapter then interrupts the RPC. A session never retries
//! a mutation: see [`crate::Error::UncertainOperation`].

use std::future::Future;

use crate::error::Error;
use crate::interaction::StructuredValue;
use crate::stream::{EventFrame, InteractionFrame};
use crate::values::{
    CancelReason, CancelResult, Connection, Cursor, EventStreamOptions, Health, ImportResult,
    InitializeRequest, InteractionId, InteractionStreamOptions, OperationId, RespondResult,
    ResumeResult, RunRef, Snapshot, StartRequest, StartResult, SuspendResult,
};

/// Opens sessions.
pub trait Connector: Send + Sync {
    /// The session type.
    type Session: Session;

    /// Negotiates a connection. Dropping the future bounds negotiation
    /// only; the session's lifetime is independent of it.
    fn initialize(
        &self,
        request: InitializeRequest,
    ) -> impl Future<Output = Result<Self::Session, Error>> + Send;
}

/// A negotiated connection. Every method may be called concurrently.
pub trait Session: Send + Sync {
    /// The event stream type.
    type Events: EventStream;
    /// The interaction stream type.
    type Interactions: InteractionStream;

    /// What was negotiated; still available after [`Session::close`].
    fn connection(&self) -> &Connection;

    /// Starts a run.
    fn start(
        &self,
        request: StartRequest,
    ) -> impl Future<Output = Result<StartResult, Error>> + Send;

    /// Replays a run's events after the cursor, then optionally tails.
    fn events(
        &self,
        cursor: Cursor,
        options: EventStreamOptions,
    ) -> impl Future<Output = Result<Self::Events, Error>> + Send;

    /// The pending interactions, then optionally their changes.
    fn interactions(
        &self,
        options: InteractionStreamOptions,
    ) -> impl Future<Output = Result<Self::Interactions, Error>> + Send;

    /// Requests cancellation of a run.
    fn cancel(
        &self,
        operation: OperationId,
        run: RunRef,
        reason: Option<CancelReason>,
    ) -> impl Future<Output = Result<CancelResult, Error>> + Send;

    /// Answers an interaction.
    fn respond(
        &self,
        operation: OperationId,
        run: RunRef,
        interaction: InteractionId,
        value: StructuredValue,
    ) -> impl Future<Output = Result<RespondResult, Error>> + Send;

    /// Suspends a run at its next boundary.
    fn suspend(
        &self,
        operation: OperationId,
        run: RunRef,
    ) -> impl Future<Output = Result<SuspendResult, Error>> + Send;

    /// Resumes a suspended run.
    fn resume(
        &self,
        operation: OperationId,
        run: RunRef,
    ) -> impl Future<Output = Result<ResumeResult, Error>> + Send;

    /// Exports a run's signed snapshot (read-only).
    fn export(&self, run: RunRef) -> impl Future<Output = Result<Snapshot, Error>> + Send;

    /// Imports a snapshot as a suspended run.
    fn import(
        &self,
        operation: OperationId,
        snapshot: Snapshot,
    ) -> impl Future<Output = Result<ImportResult, Error>> + Send;

    /// The daemon's health now.
    fn health(&self) -> impl Future<Output = Result<Health, Error>> + Send;

    /// Closes locally: non-blocking and idempotent. Open streams end with
    /// [`Error::Closed`]; later calls return it.
    fn close(&self);
}

/// A run's events. One reader.
pub trait EventStream: Send {
    /// The next frame; `Ok(None)` at the end of the stream.
    fn next(&mut self) -> impl Future<Output = Result<Option<EventFrame>, Error>> + Send;
    /// Closes the stream (idempotent); `next` then returns [`Error::Closed`].
    fn close(&self);
}

/// The pending interactions. One reader.
pub trait InteractionStream: Send {
    /// The next frame; `Ok(None)` at the end of the stream.
    fn next(&mut self) -> impl Future<Output = Result<Option<InteractionFrame>, Error>> + Send;
    /// Closes the stream (idempotent); `next` then returns [`Error::Closed`].
    fn close(&self);
}
