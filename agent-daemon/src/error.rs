//! The run host's public error vocabulary (docs/daemon.md, "Errors") and how each failure is
//! classified for the ledger (docs/daemon.md, "The idempotency ledger").

use std::fmt;

use agent_authority::{AuthorityError, ErrorKind};
use serde::{Deserialize, Serialize};

use crate::ledger::LedgerError;
use crate::pending::PendingError;
use crate::session::{SessionError, StaleFacts};

/// What a run-host operation refused. Messages are fixed; no error carries a path, a key, a
/// digest or text from a dependency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", content = "facts", rename_all = "snake_case")]
pub enum HostError {
    /// The host is shutting down (or a dependency it owns is closed).
    Closed,
    /// A budget is exhausted.
    Capacity {
        /// The resource (`active runs`, `run identities`, `operations`, `pending`, ...).
        resource: String,
        /// Its bound.
        limit: u64,
        /// What the operation would have needed (bound + 1 where known).
        observed: u64,
    },
    /// The run is unknown **or owned by another client**: the two are indistinguishable.
    RunUnavailable,
    /// The operation does not fit the run's, the request's or the authority's state.
    State,
    /// The outcome is unknown; the same operation id never runs it again.
    Uncertain,
    /// A dependency (the run authority) cannot be used.
    Unavailable,
    /// The session no longer owns its client (`None`: unknown client, no facts invented).
    StaleSession(Option<StaleFacts>),
    /// A per-client session gate bound.
    SessionGateCapacity {
        /// The gate resource.
        resource: String,
        /// Its bound.
        limit: u64,
    },
    /// The request was cancelled before anything was committed.
    Cancelled,
    /// The operation id was used before with different input.
    Conflict,
    /// An event cursor outside the retained window.
    OutOfRange {
        /// The first retained sequence.
        earliest: u64,
        /// The last sequence.
        latest: u64,
    },
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Closed => f.write_str("run host closed"),
            HostError::Capacity {
                resource, limit, ..
            } => {
                write!(f, "run host capacity exhausted: {resource} (limit {limit})")
            }
            HostError::RunUnavailable => f.write_str("hosted run unavailable"),
            HostError::State => f.write_str("run host state does not allow the operation"),
            HostError::Uncertain => f.write_str("run host outcome uncertain"),
            HostError::Unavailable => f.write_str("run host dependency unavailable"),
            HostError::StaleSession(_) => f.write_str("stale session"),
            HostError::SessionGateCapacity { resource, limit } => {
                write!(
                    f,
                    "session gate capacity exhausted: {resource} (limit {limit})"
                )
            }
            HostError::Cancelled => f.write_str("operation cancelled"),
            HostError::Conflict => f.write_str("operation conflicts with existing input"),
            HostError::OutOfRange { .. } => f.write_str("event cursor out of range"),
        }
    }
}

impl std::error::Error for HostError {}

/// What a failure means for a retry under the same operation id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Proven to have failed before any durable or visible boundary: the entry is
    /// forgotten and the same operation id may run again.
    Abandon,
    /// A final failure, replayed to every duplicate.
    Commit,
    /// Unknown; committed as uncertain, never retried.
    Uncertain,
}

/// A failure with its classification.
pub(crate) type Failure = (HostError, Class);

pub(crate) fn abandon(error: HostError) -> Failure {
    (error, Class::Abandon)
}

pub(crate) fn commit(error: HostError) -> Failure {
    (error, Class::Commit)
}

pub(crate) fn uncertain() -> Failure {
    (HostError::Uncertain, Class::Uncertain)
}

impl From<SessionError> for HostError {
    fn from(error: SessionError) -> HostError {
        match error {
            SessionError::Closed => HostError::Closed,
            SessionError::Stale(facts) => HostError::StaleSession(facts),
            SessionError::GateCapacity { resource, limit } => HostError::SessionGateCapacity {
                resource: resource.to_owned(),
                limit: limit as u64,
            },
            SessionError::Cancelled => HostError::Cancelled,
            SessionError::CapacityExhausted => HostError::Capacity {
                resource: "sessions".into(),
                limit: 0,
                observed: 0,
            },
            SessionError::EpochOverflow | SessionError::Configuration => HostError::State,
            SessionError::Randomness => HostError::Unavailable,
        }
    }
}

/// A session failure before anything was committed: always abandoned.
pub(crate) fn gate(error: SessionError) -> Failure {
    abandon(error.into())
}

impl From<PendingError> for HostError {
    fn from(error: PendingError) -> HostError {
        match error {
            PendingError::Closed => HostError::Closed,
            PendingError::NotBound | PendingError::NotPending => HostError::RunUnavailable,
            PendingError::BindingCapacity | PendingError::ObserverCapacity => HostError::Capacity {
                resource: "pending".into(),
                limit: 0,
                observed: 0,
            },
            PendingError::AlreadyBound | PendingError::Limits => HostError::State,
        }
    }
}

/// An authority failure, by kind: busy and unavailable happen before any write (abandon),
/// uncertain means a write was attempted, state and verification are final.
pub(crate) fn authority(error: &AuthorityError) -> Failure {
    match error.kind() {
        ErrorKind::Busy => abandon(HostError::State),
        ErrorKind::Unavailable => abandon(HostError::Unavailable),
        ErrorKind::Uncertain => uncertain(),
        ErrorKind::State | ErrorKind::Verification => commit(HostError::State),
    }
}

impl<E> From<LedgerError<E>> for HostError {
    fn from(error: LedgerError<E>) -> HostError {
        match error {
            LedgerError::InvalidInput => HostError::State,
            LedgerError::Conflict => HostError::Conflict,
            LedgerError::CapacityExhausted => HostError::Capacity {
                resource: "operations".into(),
                limit: 0,
                observed: 0,
            },
            LedgerError::Cancelled => HostError::Cancelled,
            LedgerError::Executor | LedgerError::Abandoned(_) => HostError::Uncertain,
        }
    }
}
