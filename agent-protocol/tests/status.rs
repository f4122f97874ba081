//! The typed status model, unary response shapes and the gRPC mapping.

mod support;

use agent_protocol::Violation;
use agent_protocol::grpc::{TransportFailure, grpc_code, grpc_status, transport_failure};
use agent_protocol::pb::common::v1::{
    CapabilityMismatch, ErrorCode, Overload, ProtocolRange, ReplayBounds, SnapshotVersionMismatch,
    StaleClient, Status, UncertainOperation, VersionMismatch, status::Detail,
};
use agent_protocol::pb::engine::v1::{
    CancelRunResponse, ExportSnapshotResponse, HealthResponse, ImportSnapshotResponse,
    PendingInteraction, RespondInteractionRequest, RespondInteractionResponse, ResumeRunResponse,
    StartRunResponse, SuspendRunResponse,
};
use agent_protocol::requests::validate_interaction_response;
use agent_protocol::responses::*;
use agent_protocol::status::{
    OVERLOAD_MESSAGE, check_client_ownership, ok_status, overload_status, validate_status,
    validate_unary_status,
};
use agent_protocol::stream::check_replay_cursor;
use support::*;

fn failed(code: ErrorCode, detail: Option<Detail>) -> Status {
    Status {
        code: code as i32,
        message: "failed".into(),
        retryable: false,
        operation_id: String::new(),
        detail,
    }
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_typed_status_detail_is_validated() {
    use ErrorCode as C;
    let vm = |client: ProtocolRange, server: ProtocolRange| {
        Some(Detail::VersionMismatch(VersionMismatch {
            client: Some(client),
            server: Some(server),
        }))
    };
    let cm = |r: &[&str], a: &[&str], m: &[&str]| {
        Some(Detail::CapabilityMismatch(CapabilityMismatch {
            required: strs(r),
            available: strs(a),
            missing: strs(m),
        }))
    };
    let rb = |requested, earliest, latest, recovery| {
        Some(Detail::ReplayBounds(ReplayBounds {
            requested_after_sequence: requested,
            earliest_sequence: earliest,
            latest_sequence: latest,
            recovery_sequence: recovery,
        }))
    };
    let ov = |r: &str, limit, observed| {
        Some(Detail::Overload(Overload {
            resource: r.into(),
            limit,
            observed,
        }))
    };
    let sc = |e, o| {
        Some(Detail::StaleClient(StaleClient {
            expected_epoch: e,
            observed_epoch: o,
        }))
    };
    let sv = |e: &str, o: &str| {
        Some(Detail::SnapshotVersionMismatch(SnapshotVersionMismatch {
            expected: e.into(),
            observed: o.into(),
        }))
    };
    let uo = |id: &str, kind: &str| {
        Some(Detail::UncertainOperation(UncertainOperation {
            operation_id: id.into(),
            operation_kind: kind.into(),
        }))
    };
    let cases: Vec<(ErrorCode, Option<Detail>, bool)> = vec![
        (C::IncompatibleVersion, vm(range(0, 1), range(2, 3)), true),
        (C::IncompatibleVersion, vm(range(0, 2), range(2, 3)), false), // overlap
        (C::IncompatibleVersion, vm(range(1, 0), range(2, 3)), false), // invalid range
        (C::IncompatibleVersion, None, false),
        (C::MissingCapability, cm(&["a", "b"], &["b"], &["a"]), true),
        (C::MissingCapability, cm(&["a", "b"], &["b"], &[]), false),
        (C::MissingCapability, cm(&["a", "b"], &["b"], &["b"]), false),
        (
            C::MissingCapability,
            cm(&["b", "a"], &[], &["b", "a"]),
            false,
        ), // unsorted
        (C::OutOfRange, rb(1, 5, 9, 4), true),
        (C::OutOfRange, rb(12, 5, 9, 9), true),
        (C::OutOfRange, rb(4, 5, 9, 4), false), // cursor inside [4, 9]
        (C::OutOfRange, rb(1, 5, 9, 9), false), // wrong recovery
        (C::OutOfRange, rb(12, 5, 9, 4), false),
        (C::OutOfRange, rb(1, 0, 9, 0), false),
        (C::OutOfRange, rb(1, 9, 5, 8), false),
        (C::ResourceExhausted, ov("streams", 4, 5), true),
        (C::ResourceExhausted, ov("streams", 4, 4), false),
        (C::ResourceExhausted, ov("streams", 0, 1), false),
        (C::ResourceExhausted, ov("", 4, 5), false),
        (C::StaleClient, sc(3, 2), true),
        (C::StaleClient, sc(0, 2), false),
        (C::StaleClient, sc(3, 3), false),
        (C::SnapshotVersionMismatch, sv("v1", "v2"), true),
        (C::SnapshotVersionMismatch, sv("v1", "v1"), false),
        (C::SnapshotVersionMismatch, sv("v1", " v2"), false),
        (C::UncertainOperation, uo("op-1", "start"), true),
        (C::UncertainOperation, uo("", "start"), false),
        (C::UncertainOperation, uo("op-1", ""), false),
        (C::Conflict, None, true),
        (C::Conflict, sc(3, 2), false), // a code without a detail kind carries none
        (C::Internal, ov("streams", 4, 5), false),
        (C::OutOfRange, sc(3, 2), false), // the wrong detail kind
    ];
    for (code, detail, ok) in cases {
        let status = failed(code, detail.clone());
        assert_eq!(validate_status(&status).is_ok(), ok, "{code:?} {detail:?}");
    }
}

#[test]
fn ok_and_generic_status_rules() {
    assert!(validate_status(&ok_status()).is_ok());
    for edit in [
        (|s: &mut Status| s.message = "x".into()) as fn(&mut Status),
        |s| s.retryable = true,
        |s| s.operation_id = "op".into(),
        |s| {
            s.detail = Some(Detail::StaleClient(StaleClient {
                expected_epoch: 2,
                observed_epoch: 1,
            }))
        },
    ] {
        let mut s = ok_status();
        edit(&mut s);
        assert!(validate_status(&s).is_err());
    }
    let mut s = failed(ErrorCode::Conflict, None);
    assert!(validate_status(&s).is_ok());
    s.code = 0;
    assert!(validate_status(&s).is_err(), "UNSPECIFIED");
    s.code = 17;
    assert!(validate_status(&s).is_err(), "unknown code");
    let mut s = failed(ErrorCode::Conflict, None);
    s.message = String::new();
    assert!(validate_status(&s).is_err(), "a failure needs a message");
    s.message = "line\nbreak".into();
    assert!(validate_status(&s).is_err());
    let mut s = failed(ErrorCode::Conflict, None);
    s.operation_id = "op 1 ".into();
    assert!(validate_status(&s).is_err());
    s.operation_id = "op-1".into();
    assert!(validate_status(&s).is_ok());
}

#[test]
fn unary_capability_mismatch_lists_respect_the_collection_limit() {
    let s = failed(
        ErrorCode::MissingCapability,
        Some(Detail::CapabilityMismatch(CapabilityMismatch {
            required: strs(&["a", "b"]),
            available: strs(&[]),
            missing: strs(&["a", "b"]),
        })),
    );
    assert!(validate_unary_status(&s, 2).is_ok());
    assert!(validate_unary_status(&s, 1).is_err());
}

#[test]
fn replay_bounds_ordering_overload_and_unknown_lifecycle() {
    // The cursor check produces exactly the detail the validator accepts.
    for (after, earliest, latest) in [(0u64, 5u64, 9u64), (2, 5, 9), (10, 5, 9), (u64::MAX, 1, 3)] {
        let err = check_replay_cursor(after, earliest, latest).unwrap_err();
        assert_eq!(err.code(), ErrorCode::OutOfRange);
        let Some(Detail::ReplayBounds(b)) = err.detail() else {
            panic!()
        };
        assert_eq!(
            b.recovery_sequence,
            if after < earliest {
                earliest - 1
            } else {
                latest
            }
        );
        validate_status(&err.into_status()).unwrap();
    }
    for after in 4..=9 {
        assert!(check_replay_cursor(after, 5, 9).is_ok());
    }
    let s = overload_status("active-runs", 8, 9);
    assert_eq!(s.message, OVERLOAD_MESSAGE);
    assert!(validate_status(&s).is_ok());
    assert!(validate_status(&overload_status("active-runs", 8, 8)).is_err());
    // Unknown lifecycles are refused (the envelope validator, tests/snapshot.rs,
    // covers the rest); an unknown event kind likewise.
    let mut e = agent_protocol::pb::engine::v1::RunEvent {
        run_id: "r".into(),
        sequence: 1,
        unix_nano: 1,
        kind: 99,
        payload_json: vec![],
        terminal: false,
    };
    assert!(agent_protocol::stream::validate_run_event(&e).is_err());
    e.kind = 1;
    assert!(agent_protocol::stream::validate_run_event(&e).is_ok());
}

#[test]
fn client_ownership_needs_same_id_same_non_zero_epoch() {
    assert!(check_client_ownership("c", 2, "c", 2).is_ok());
    for (id, observed, expected_id, expected) in
        [("c", 1, "c", 2), ("d", 2, "c", 2), ("c", 0, "c", 0)]
    {
        let err = check_client_ownership(id, observed, expected_id, expected).unwrap_err();
        assert_eq!(err.code(), ErrorCode::StaleClient);
        assert_eq!(
            err.detail(),
            Some(&Detail::StaleClient(StaleClient {
                expected_epoch: expected,
                observed_epoch: observed
            }))
        );
    }
}

#[test]
fn stale_interaction_response_fails_before_payload_acceptance() {
    let n = negotiated(2);
    let pending = PendingInteraction {
        run_id: "run-1".into(),
        interaction_id: "ask-1".into(),
        kind: "approval".into(),
        prompt: "ok?".into(),
        schema_json: b"{}".to_vec(),
    };
    let mut r = RespondInteractionRequest {
        client_id: "c".into(),
        ownership_epoch: 1,
        client_operation_id: "op".into(),
        run_id: "run-1".into(),
        interaction_id: "ask-1".into(),
        // Invalid payload: a stale owner must fail on ownership, not on this.
        value_json: b"not json".to_vec(),
    };
    let err = validate_interaction_response(&r, &n, "c", 2, &pending).unwrap_err();
    assert_eq!(err.code(), ErrorCode::StaleClient);
    let err = validate_interaction_response(&r, &n, "c", 1, &pending).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    r.value_json = b"true".to_vec();
    r.interaction_id = "ask-2".into();
    let err = validate_interaction_response(&r, &n, "c", 1, &pending).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Conflict);
    r.interaction_id = "ask-1".into();
    assert!(validate_interaction_response(&r, &n, "c", 1, &pending).is_ok());
}

fn with_status<T>(status: Status, f: impl FnOnce(Status) -> T) -> T {
    f(status)
}

#[test]
fn unary_response_validators_enforce_success_and_error_only_shapes() {
    let n = negotiated(2);
    let fail = failed(ErrorCode::NotFound, None);
    // Error-only: the status alone passes; any other field fails.
    assert!(
        validate_start_run_response(
            &with_status(fail.clone(), |s| StartRunResponse {
                status: Some(s),
                ..Default::default()
            }),
            &n
        )
        .is_ok()
    );
    let extra = StartRunResponse {
        status: Some(fail.clone()),
        run_id: "r".into(),
        ..Default::default()
    };
    assert_eq!(
        validate_start_run_response(&extra, &n)
            .unwrap_err()
            .message(),
        "a failed response carries only its status"
    );
    assert!(
        validate_start_run_response(&StartRunResponse::default(), &n).is_err(),
        "no status"
    );
    let extra = CancelRunResponse {
        status: Some(fail.clone()),
        already_terminal: true,
        ..Default::default()
    };
    assert!(validate_cancel_run_response(&extra, &n).is_err());
    let extra = HealthResponse {
        status: Some(fail.clone()),
        protocol: Some(agent_protocol::negotiate::version(1, 2, 0)),
        ..Default::default()
    };
    assert!(validate_health_response(&extra, &n).is_err());

    // Success shapes.
    let ok = Some(ok_status());
    let start = StartRunResponse {
        status: ok.clone(),
        run_id: "run-1".into(),
        initial_sequence: 1,
        duplicate_operation: false,
        plan_id: "plan-1".into(),
    };
    assert!(validate_start_run_response(&start, &n).is_ok());
    assert!(
        validate_start_run_response(
            &StartRunResponse {
                initial_sequence: 2,
                ..start.clone()
            },
            &n
        )
        .is_err()
    );
    assert!(
        validate_start_run_response(
            &StartRunResponse {
                plan_id: String::new(),
                ..start.clone()
            },
            &n
        )
        .is_err()
    );

    let cancel = |requested, terminal, seq| CancelRunResponse {
        status: ok.clone(),
        cancellation_requested: requested,
        already_terminal: terminal,
        terminal_sequence: seq,
    };
    assert!(validate_cancel_run_response(&cancel(true, false, 0), &n).is_ok());
    assert!(validate_cancel_run_response(&cancel(false, true, 7), &n).is_ok());
    for (r, t, s) in [
        (true, false, 7),
        (false, true, 0),
        (true, true, 7),
        (false, false, 0),
    ] {
        assert!(
            validate_cancel_run_response(&cancel(r, t, s), &n).is_err(),
            "{r} {t} {s}"
        );
    }
    assert!(
        validate_respond_interaction_response(
            &RespondInteractionResponse {
                status: ok.clone(),
                accepted: true,
                duplicate_operation: true
            },
            &n
        )
        .is_ok()
    );
    assert!(
        validate_respond_interaction_response(
            &RespondInteractionResponse {
                status: ok.clone(),
                accepted: false,
                duplicate_operation: false
            },
            &n
        )
        .is_err()
    );
    for (seq, valid) in [
        (0, false),
        (1, true),
        (u64::MAX - 1, true),
        (u64::MAX, false),
    ] {
        let s = SuspendRunResponse {
            status: ok.clone(),
            suspended: true,
            boundary_sequence: seq,
            duplicate_operation: false,
        };
        assert_eq!(validate_suspend_run_response(&s, &n).is_ok(), valid);
        let r = ResumeRunResponse {
            status: ok.clone(),
            resumed: true,
            next_sequence: seq,
            duplicate_operation: false,
        };
        assert_eq!(validate_resume_run_response(&r, &n).is_ok(), valid);
        let i = ImportSnapshotResponse {
            status: ok.clone(),
            run_id: "r".into(),
            next_sequence: seq,
            duplicate_operation: false,
        };
        assert_eq!(validate_import_snapshot_response(&i, &n).is_ok(), valid);
    }
    assert!(
        validate_suspend_run_response(
            &SuspendRunResponse {
                status: ok.clone(),
                suspended: false,
                boundary_sequence: 3,
                duplicate_operation: false
            },
            &n
        )
        .is_err()
    );
    assert!(
        validate_resume_run_response(
            &ResumeRunResponse {
                status: ok.clone(),
                resumed: false,
                next_sequence: 3,
                duplicate_operation: false
            },
            &n
        )
        .is_err()
    );
    assert!(
        validate_export_snapshot_response(
            &ExportSnapshotResponse {
                status: ok.clone(),
                snapshot: None
            },
            &n
        )
        .is_err()
    );

    let s = server();
    let health = HealthResponse {
        status: ok.clone(),
        server: Some(s.build.clone()),
        protocol: Some(agent_protocol::negotiate::version(1, 2, 0)),
        health: Some(s.health.clone()),
    };
    assert!(validate_health_response(&health, &n).is_ok());
    let mut bad = health.clone();
    bad.protocol = Some(agent_protocol::negotiate::version(1, 4, 0));
    assert!(validate_health_response(&bad, &n).is_err());
    let mut many = health.clone();
    many.health.as_mut().unwrap().degraded_reasons = (0..257).map(|i| format!("r{i}")).collect();
    assert!(
        validate_health_response(&many, &n).is_err(),
        "reasons above max_collection_items"
    );
    // The size bound covers failures too.
    let mut tiny = negotiated(2);
    tiny.limits.max_message_bytes = 4;
    assert!(
        validate_start_run_response(
            &StartRunResponse {
                status: Some(fail),
                ..Default::default()
            },
            &tiny
        )
        .is_err()
    );
}

#[test]
fn application_failures_never_map_to_grpc_codes() {
    let expected = [
        (
            TransportFailure::Unauthenticated,
            tonic::Code::Unauthenticated,
        ),
        (TransportFailure::DaemonStopping, tonic::Code::Unavailable),
        (TransportFailure::Cancelled, tonic::Code::Cancelled),
        (
            TransportFailure::DeadlineExceeded,
            tonic::Code::DeadlineExceeded,
        ),
        (TransportFailure::BrokenStream, tonic::Code::Aborted),
    ];
    for (failure, code) in expected {
        assert_eq!(grpc_code(failure), code);
        assert_eq!(transport_failure(code), Some(failure));
        assert_eq!(grpc_status(failure).code(), code);
    }
    // Every other gRPC code is never sent, so receiving one is a violation.
    for code in [
        tonic::Code::Ok,
        tonic::Code::Unknown,
        tonic::Code::InvalidArgument,
        tonic::Code::NotFound,
        tonic::Code::AlreadyExists,
        tonic::Code::PermissionDenied,
        tonic::Code::ResourceExhausted,
        tonic::Code::FailedPrecondition,
        tonic::Code::OutOfRange,
        tonic::Code::Unimplemented,
        tonic::Code::Internal,
        tonic::Code::DataLoss,
    ] {
        assert_eq!(transport_failure(code), None, "{code:?}");
    }
    // An application failure is a Status inside the response.
    let status: Status = Violation::invalid("x").into();
    assert_eq!(status.code, ErrorCode::InvalidArgument as i32);
}
