//! Failures: the gRPC transport error table, mutation transport outcomes,
//! and the translation of a typed wire `Status` with its correlation checks
//! (docs/client.md, "Errors and retries").

use agent_client as c;
use agent_protocol::pb::common::v1::{self as pbc, ErrorCode, status::Detail};
use tonic::Code;

use crate::convert::{protocol, range_from_wire};

fn violation() -> c::Error {
    c::Error::Protocol(c::Error::PROTOCOL_VIOLATION)
}

/// The transport error table for a gRPC status (never the peer's text).
pub(crate) fn transport_error(status: &tonic::Status) -> c::Error {
    use c::StatusCode as S;
    let (code, message, retryable) = match status.code() {
        Code::Cancelled => (S::Cancelled, "request cancelled", false),
        Code::DeadlineExceeded => (S::DeadlineExceeded, "request deadline exceeded", true),
        Code::Unauthenticated | Code::PermissionDenied => {
            (S::Unauthenticated, "endpoint authentication failed", false)
        }
        Code::InvalidArgument | Code::OutOfRange => {
            (S::InvalidArgument, "transport refused the request", false)
        }
        Code::FailedPrecondition | Code::Aborted | Code::AlreadyExists => {
            (S::Conflict, "transport reported a conflict", false)
        }
        Code::NotFound => (S::NotFound, "transport reported not found", false),
        Code::Unavailable => (S::Unavailable, "daemon is unavailable", true),
        _ => (S::Internal, "transport failed", false),
    };
    c::Error::status(code, message, retryable)
}

/// Whether a transport failure of a mutation is definitive: the daemon
/// refused the call, so nothing happened. Every other failure leaves the
/// outcome unknown. (A caller that cancels drops the future and never sees
/// a result, so "the caller's context is still live" always holds here.)
pub(crate) fn mutation_failure_is_definitive(code: Code) -> bool {
    matches!(
        code,
        Code::Unauthenticated
            | Code::PermissionDenied
            | Code::InvalidArgument
            | Code::FailedPrecondition
            | Code::NotFound
            | Code::AlreadyExists
    )
}

/// The fixed message of an uncertain mutation after transport loss.
pub(crate) const UNCERTAIN_MESSAGE: &str = "mutation outcome is uncertain";

/// A mutation's transport failure.
pub(crate) fn mutation_transport_error(
    status: &tonic::Status,
    operation: &c::OperationId,
    kind: &str,
) -> c::Error {
    if mutation_failure_is_definitive(status.code()) {
        return transport_error(status);
    }
    uncertain(operation, kind)
}

pub(crate) fn uncertain(operation: &c::OperationId, kind: &str) -> c::Error {
    c::ErrorFacts::new(UNCERTAIN_MESSAGE, false, Some(operation.clone()))
        .and_then(|facts| c::UncertainOperationError::new(operation.clone(), kind, facts))
        .map(c::Error::from)
        .unwrap_or_else(c::Error::Invalid)
}

/// What a status must agree with.
#[derive(Clone, Copy, Default)]
pub(crate) struct Correlation<'a> {
    /// The request's operation id; `None` for a read-only call, where a
    /// status naming an operation is a violation.
    pub(crate) operation: Option<&'a c::OperationId>,
    /// The epoch the request carried (session epoch, or a reconnect
    /// claim's expected epoch); STALE_CLIENT must echo it as observed.
    pub(crate) epoch: Option<u64>,
    /// For event streams: the run and cursor an OUT_OF_RANGE must echo.
    pub(crate) cursor: Option<(&'a c::RunRef, u64)>,
}

/// A non-OK typed status (already validated) as a seam error.
pub(crate) fn status_error(status: &pbc::Status, corr: Correlation<'_>) -> c::Error {
    translate(status, corr).unwrap_or_else(|e| e)
}

fn translate(status: &pbc::Status, corr: Correlation<'_>) -> Result<c::Error, c::Error> {
    use c::StatusCode as S;
    let operation = if status.operation_id.is_empty() {
        None
    } else {
        match corr.operation {
            Some(op) if op.as_str() == status.operation_id => Some(op.clone()),
            _ => return Err(violation()),
        }
    };
    let facts =
        c::ErrorFacts::new(&status.message, status.retryable, operation).map_err(protocol)?;
    let code = ErrorCode::try_from(status.code).map_err(protocol)?;
    let plain = |code| {
        Ok(c::Error::Status(c::StatusError {
            code,
            facts: facts.clone(),
        }))
    };
    match (code, &status.detail) {
        (ErrorCode::InvalidArgument, None) => plain(S::InvalidArgument),
        (ErrorCode::Unauthenticated, None) => plain(S::Unauthenticated),
        (ErrorCode::NotFound, None) => plain(S::NotFound),
        (ErrorCode::Unavailable, None) => plain(S::Unavailable),
        (ErrorCode::Cancelled, None) => plain(S::Cancelled),
        (ErrorCode::DeadlineExceeded, None) => plain(S::DeadlineExceeded),
        (ErrorCode::Conflict, None) => plain(S::Conflict),
        (ErrorCode::Internal, None) => plain(S::Internal),
        (ErrorCode::IncompatibleVersion, Some(Detail::VersionMismatch(d))) => {
            c::VersionMismatchError::new(
                range_from_wire(d.client.as_ref())?,
                range_from_wire(d.server.as_ref())?,
                facts,
            )
            .map(c::Error::from)
            .map_err(protocol)
        }
        (ErrorCode::MissingCapability, Some(Detail::CapabilityMismatch(d))) => {
            c::CapabilityMismatchError::new(
                d.required.clone(),
                d.available.clone(),
                d.missing.clone(),
                facts,
            )
            .map(c::Error::from)
            .map_err(protocol)
        }
        (ErrorCode::OutOfRange, Some(Detail::ReplayBounds(b))) => {
            let Some((run, after)) = corr.cursor else {
                return Err(violation());
            };
            if b.requested_after_sequence != after {
                return Err(violation());
            }
            c::CursorGapError::new(
                run.clone(),
                b.requested_after_sequence,
                b.earliest_sequence,
                b.latest_sequence,
                b.recovery_sequence,
                facts,
            )
            .map(c::Error::from)
            .map_err(protocol)
        }
        (ErrorCode::ResourceExhausted, Some(Detail::Overload(o))) => {
            c::OverloadError::new(&o.resource, o.limit, o.observed, facts)
                .map(c::Error::from)
                .map_err(protocol)
        }
        (ErrorCode::StaleClient, Some(Detail::StaleClient(s))) => {
            if corr.epoch != Some(s.observed_epoch) {
                return Err(violation());
            }
            c::StaleSessionError::new(s.observed_epoch, s.expected_epoch, facts)
                .map(c::Error::from)
                .map_err(protocol)
        }
        (ErrorCode::SnapshotVersionMismatch, Some(Detail::SnapshotVersionMismatch(s))) => {
            c::SnapshotVersionMismatchError::new(&s.expected, &s.observed, facts)
                .map(c::Error::from)
                .map_err(protocol)
        }
        (ErrorCode::UncertainOperation, Some(Detail::UncertainOperation(u))) => {
            let Some(op) = corr.operation else {
                return Err(violation());
            };
            if op.as_str() != u.operation_id {
                return Err(violation());
            }
            c::UncertainOperationError::new(op.clone(), &u.operation_kind, facts)
                .map(c::Error::from)
                .map_err(protocol)
        }
        _ => Err(violation()),
    }
}
