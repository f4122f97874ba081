//! How a run-host failure becomes a typed status in a response, or a gRPC status
//! (docs/transport.md, "What the server serves").

use agent_daemon::HostError;
use agent_daemon::session::SessionError;
use agent_protocol::pb::common::v1::status::Detail;
use agent_protocol::pb::common::v1::{
    ErrorCode, Overload, StaleClient, Status, UncertainOperation,
};
use agent_protocol::status::{STALE_CLIENT_MESSAGE, overload_status};

/// The fixed message of a host capacity failure.
pub const CAPACITY_MESSAGE: &str = "daemon capacity is exhausted";
/// The fixed message of an unknown, ended or foreign run.
pub const RUN_UNAVAILABLE_MESSAGE: &str = "run is unavailable";
/// The fixed message of a closed host or an unavailable dependency.
pub const UNAVAILABLE_MESSAGE: &str = "daemon is unavailable";
/// The fixed message of a state conflict.
pub const STATE_MESSAGE: &str = "run state does not allow the operation";
/// The fixed message of an uncertain mutation.
pub const UNCERTAIN_MESSAGE: &str = "operation outcome is uncertain";
/// The fixed message of every other failure.
pub const INTERNAL_MESSAGE: &str = "daemon operation failed";
/// The fixed message of a session that cannot be used.
pub const SESSION_UNAVAILABLE_MESSAGE: &str = "client session is unavailable";
/// The fixed message of a refused Start input.
pub const START_INPUT_MESSAGE: &str = "start run input is unsupported";
/// The fixed message of an invalid request.
pub const INVALID_MESSAGE: &str = "request is invalid";
/// The fixed message of a conflicting initialization attempt.
pub const ATTEMPT_CONFLICT_MESSAGE: &str = "initialization attempt conflicts with an earlier one";

/// The mutation kinds an uncertain status names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutationKind {
    /// StartRun.
    Start,
    /// CancelRun.
    Cancel,
    /// RespondInteraction.
    Respond,
    /// SuspendRun.
    Suspend,
    /// ResumeRun.
    Resume,
    /// ImportSnapshot.
    Import,
}

impl MutationKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            MutationKind::Start => "start",
            MutationKind::Cancel => "cancel",
            MutationKind::Respond => "respond",
            MutationKind::Suspend => "suspend",
            MutationKind::Resume => "resume",
            MutationKind::Import => "import",
        }
    }
}

fn plain(code: ErrorCode, message: &str, retryable: bool) -> Status {
    Status {
        code: code as i32,
        message: message.to_owned(),
        retryable,
        ..Status::default()
    }
}

/// `UNAVAILABLE`, retryable, "client session is unavailable".
pub fn session_unavailable() -> Status {
    plain(ErrorCode::Unavailable, SESSION_UNAVAILABLE_MESSAGE, true)
}

/// `INVALID_ARGUMENT` with the fixed message.
pub fn invalid() -> Status {
    plain(ErrorCode::InvalidArgument, INVALID_MESSAGE, false)
}

/// `INTERNAL` with the fixed message.
pub fn internal() -> Status {
    plain(ErrorCode::Internal, INTERNAL_MESSAGE, false)
}

/// `STALE_CLIENT` with the epochs, or `None` when the facts are not usable.
fn stale(expected: u64, observed: u64) -> Option<Status> {
    (expected != 0 && expected != observed).then(|| Status {
        code: ErrorCode::StaleClient as i32,
        message: STALE_CLIENT_MESSAGE.to_owned(),
        detail: Some(Detail::StaleClient(StaleClient {
            expected_epoch: expected,
            observed_epoch: observed,
        })),
        ..Status::default()
    })
}

fn overload(message: &str, resource: &str, limit: u64, observed: u64) -> Status {
    if limit == 0 || resource.is_empty() {
        return plain(ErrorCode::Unavailable, UNAVAILABLE_MESSAGE, true);
    }
    Status {
        code: ErrorCode::ResourceExhausted as i32,
        message: message.to_owned(),
        retryable: true,
        detail: Some(Detail::Overload(Overload {
            resource: resource.to_owned(),
            limit,
            observed: observed.max(limit.saturating_add(1)),
        })),
        ..Status::default()
    }
}

/// A session failure during Initialize (docs/transport.md, "What the server serves").
pub fn session_failure(error: &SessionError) -> Status {
    match error {
        SessionError::GateCapacity { resource, limit } => {
            let limit = *limit as u64;
            overload_status(resource, limit, limit + 1)
        }
        SessionError::Stale(Some(facts)) => {
            stale(facts.expected, facts.observed).unwrap_or_else(session_unavailable)
        }
        _ => session_unavailable(),
    }
}

/// The lifecycle mapping: `Err` is a gRPC status (cancellation travels that way, not as a
/// typed status). Non-uncertain mutation failures echo `operation`'s id.
pub fn lifecycle_failure(
    error: &HostError,
    operation: Option<(&str, MutationKind)>,
) -> Result<Status, tonic::Status> {
    let mut status = match error {
        HostError::Cancelled => return Err(tonic::Status::cancelled("request cancelled")),
        HostError::StaleSession(Some(facts)) => {
            stale(facts.expected, facts.observed).unwrap_or_else(session_unavailable)
        }
        HostError::StaleSession(None) => session_unavailable(),
        HostError::Capacity {
            resource,
            limit,
            observed,
        } => overload(CAPACITY_MESSAGE, resource, *limit, *observed),
        HostError::SessionGateCapacity { resource, limit } => {
            overload(CAPACITY_MESSAGE, resource, *limit, limit.saturating_add(1))
        }
        HostError::RunUnavailable => plain(ErrorCode::NotFound, RUN_UNAVAILABLE_MESSAGE, false),
        HostError::Closed | HostError::Unavailable => {
            plain(ErrorCode::Unavailable, UNAVAILABLE_MESSAGE, true)
        }
        HostError::State | HostError::Conflict => plain(ErrorCode::Conflict, STATE_MESSAGE, false),
        HostError::Uncertain => match operation {
            Some((id, kind)) => {
                return Ok(Status {
                    code: ErrorCode::UncertainOperation as i32,
                    message: UNCERTAIN_MESSAGE.to_owned(),
                    operation_id: id.to_owned(),
                    detail: Some(Detail::UncertainOperation(UncertainOperation {
                        operation_id: id.to_owned(),
                        operation_kind: kind.as_str().to_owned(),
                    })),
                    ..Status::default()
                });
            }
            None => internal(),
        },
        HostError::OutOfRange { .. } => internal(),
    };
    if let Some((id, _)) = operation {
        status.operation_id = id.to_owned();
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_daemon::session::StaleFacts;

    fn code(status: &Status) -> ErrorCode {
        ErrorCode::try_from(status.code).unwrap()
    }

    fn facts(expected: u64, observed: u64) -> HostError {
        HostError::StaleSession(Some(StaleFacts {
            client_id: "c".into(),
            expected,
            observed,
        }))
    }

    #[test]
    fn lifecycle_failure_maps_safe_recovery_facts() {
        let op = Some(("op-1", MutationKind::Start));
        // Stale with usable facts: STALE_CLIENT with both epochs.
        let stale = lifecycle_failure(&facts(3, 2), op).unwrap();
        assert_eq!(code(&stale), ErrorCode::StaleClient);
        assert_eq!(
            stale.detail,
            Some(Detail::StaleClient(StaleClient {
                expected_epoch: 3,
                observed_epoch: 2,
            }))
        );
        assert_eq!(
            stale.operation_id, "op-1",
            "non-uncertain failures echo the id"
        );
        // Host capacity: retryable RESOURCE_EXHAUSTED with the facts.
        let capacity = HostError::Capacity {
            resource: "active runs".into(),
            limit: 4,
            observed: 5,
        };
        let status = lifecycle_failure(&capacity, None).unwrap();
        assert_eq!(code(&status), ErrorCode::ResourceExhausted);
        assert!(status.retryable);
        assert_eq!(status.message, CAPACITY_MESSAGE);
        assert_eq!(
            status.detail,
            Some(Detail::Overload(Overload {
                resource: "active runs".into(),
                limit: 4,
                observed: 5,
            }))
        );
        // Session-gate capacity: the facts are (limit, limit + 1).
        let gate = HostError::SessionGateCapacity {
            resource: "session gate waiters".into(),
            limit: 64,
        };
        let status = lifecycle_failure(&gate, None).unwrap();
        assert_eq!(code(&status), ErrorCode::ResourceExhausted);
        let Some(Detail::Overload(overload)) = status.detail else {
            panic!("overload facts");
        };
        assert_eq!((overload.limit, overload.observed), (64, 65));
        // The fixed mappings.
        for (error, expected, retryable) in [
            (HostError::RunUnavailable, ErrorCode::NotFound, false),
            (HostError::Closed, ErrorCode::Unavailable, true),
            (HostError::Unavailable, ErrorCode::Unavailable, true),
            (HostError::State, ErrorCode::Conflict, false),
            (HostError::Conflict, ErrorCode::Conflict, false),
            (HostError::StaleSession(None), ErrorCode::Unavailable, true),
        ] {
            let status = lifecycle_failure(&error, None).unwrap();
            assert_eq!(code(&status), expected, "{error:?}");
            assert_eq!(status.retryable, retryable, "{error:?}");
        }
        // Uncertain: the operation and its kind, for every mutation kind.
        for kind in [
            MutationKind::Start,
            MutationKind::Cancel,
            MutationKind::Respond,
            MutationKind::Suspend,
            MutationKind::Resume,
            MutationKind::Import,
        ] {
            let status = lifecycle_failure(&HostError::Uncertain, Some(("op-9", kind))).unwrap();
            assert_eq!(code(&status), ErrorCode::UncertainOperation);
            assert_eq!(
                status.detail,
                Some(Detail::UncertainOperation(UncertainOperation {
                    operation_id: "op-9".into(),
                    operation_kind: kind.as_str().into(),
                }))
            );
        }
    }

    #[test]
    fn lifecycle_failure_fails_closed_without_valid_recovery_facts() {
        // Stale facts that say nothing (epoch 0, or equal epochs) reveal nothing.
        for error in [facts(0, 2), facts(2, 2)] {
            let status = lifecycle_failure(&error, None).unwrap();
            assert_eq!(code(&status), ErrorCode::Unavailable, "{error:?}");
            assert_eq!(status.message, SESSION_UNAVAILABLE_MESSAGE);
            assert_eq!(status.detail, None);
        }
        // Capacity without a resource or a limit is a bare sentinel: UNAVAILABLE.
        for error in [
            HostError::Capacity {
                resource: String::new(),
                limit: 4,
                observed: 5,
            },
            HostError::Capacity {
                resource: "active runs".into(),
                limit: 0,
                observed: 1,
            },
            HostError::SessionGateCapacity {
                resource: String::new(),
                limit: 64,
            },
        ] {
            let status = lifecycle_failure(&error, None).unwrap();
            assert_eq!(code(&status), ErrorCode::Unavailable, "{error:?}");
            assert!(status.retryable);
            assert_eq!(status.detail, None);
        }
        // Observed below the bound is raised to limit + 1 (an overload is past its limit).
        let low = HostError::Capacity {
            resource: "active runs".into(),
            limit: 4,
            observed: 1,
        };
        let Some(Detail::Overload(overload)) = lifecycle_failure(&low, None).unwrap().detail else {
            panic!("overload facts");
        };
        assert_eq!(overload.observed, 5);
        // Uncertain without an operation, and a replay range escaping the stream handler,
        // are INTERNAL with the fixed message.
        for error in [
            HostError::Uncertain,
            HostError::OutOfRange {
                earliest: 1,
                latest: 2,
            },
        ] {
            let status = lifecycle_failure(&error, None).unwrap();
            assert_eq!(code(&status), ErrorCode::Internal, "{error:?}");
            assert_eq!(status.message, INTERNAL_MESSAGE);
        }
    }

    #[test]
    fn lifecycle_transport_failures_remain_grpc_status_only() {
        let error = lifecycle_failure(&HostError::Cancelled, Some(("op", MutationKind::Start)))
            .unwrap_err();
        assert_eq!(error.code(), tonic::Code::Cancelled);
    }
}
