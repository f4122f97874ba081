//! Every bound of the seam's values, at the bound and past it (reference
//! 4.3), and the consistency rules of the typed errors (4.4).

use std::time::{Duration, UNIX_EPOCH};

use agent_client::json::{JsonError, JsonKind, MAX_JSON_DEPTH, validate_json};
use agent_client::*;

fn s(n: usize) -> String {
    "a".repeat(n)
}

fn v(minor: u32) -> ProtocolVersion {
    ProtocolVersion::new(1, minor, 0).unwrap()
}

fn limits() -> Limits {
    Limits::new(1 << 20, 4, 8, 4096, 4, 4).unwrap()
}

fn facts() -> ErrorFacts {
    ErrorFacts::new("fixed message", false, None).unwrap()
}

fn health() -> Health {
    Health::new(HealthState::Ready, vec![], 0, limits()).unwrap()
}

fn catalog() -> Catalog {
    let d = Definition::new(DefinitionRef::new("a", "1").unwrap(), "m", 1).unwrap();
    Catalog::new("r", vec![d], &limits()).unwrap()
}

fn build() -> Build {
    Build::new("c", "v", "x", "t").unwrap()
}

#[test]
fn token_rule() {
    for bad in ["", " a", "a ", "a\tb", "a\nb", "a\rb", "a\0b"] {
        assert!(OperationId::new(bad).is_err(), "{bad:?}");
    }
    assert!(OperationId::new("a b").is_ok());
    assert!(OperationId::new(&s(MAX_ID_BYTES)).is_ok());
    assert!(OperationId::new(&s(MAX_ID_BYTES + 1)).is_err());
    assert!(RunRef::new(&s(MAX_ID_BYTES + 1)).is_err());
    assert!(InteractionId::new(&s(MAX_ID_BYTES + 1)).is_err());
}

#[test]
fn build_protocol_and_limits() {
    let n = MAX_BUILD_FIELD_BYTES;
    assert!(Build::new(&s(n), "v", "c", "t").is_ok());
    assert!(Build::new(&s(n + 1), "v", "c", "t").is_err());
    assert!(Build::new("c", "v", "c", "").is_err());
    assert!(ProtocolVersion::new(0, 1, 0).is_err());
    assert!(ProtocolRange::new(v(2), v(1)).is_err());
    assert!(ProtocolRange::new(v(1), ProtocolVersion::new(2, 0, 0).unwrap()).is_err());
    assert!(Limits::new(0, 1, 1, 1, 1, 1).is_err());
    assert!(Limits::new(1, 1, 1, 1, 1, 0).is_err());
    assert!(Limits::new(1, 1, 8, 8, 1, 1).is_ok());
    assert!(Limits::new(1, 1, 9, 8, 1, 1).is_err());
}

#[test]
fn health_bounds() {
    let reasons = |n: usize| (0..n).map(|i| format!("r{i:03}")).collect::<Vec<_>>();
    let degraded = |r| Health::new(HealthState::Degraded, r, 0, limits());
    assert!(degraded(reasons(MAX_DEGRADED_REASONS)).is_ok());
    assert!(degraded(reasons(MAX_DEGRADED_REASONS + 1)).is_err());
    assert!(degraded(vec![s(MAX_DEGRADED_REASON_BYTES)]).is_ok());
    assert!(degraded(vec![s(MAX_DEGRADED_REASON_BYTES + 1)]).is_err());
    assert!(degraded(vec!["b".into(), "a".into()]).is_err());
    assert!(degraded(vec!["a".into(), "a".into()]).is_err());
    assert!(degraded(vec![]).is_err());
    assert!(Health::new(HealthState::Ready, vec!["a".into()], 0, limits()).is_err());
    assert!(Health::new(HealthState::Ready, vec![], 4, limits()).is_ok());
    assert!(Health::new(HealthState::Ready, vec![], 5, limits()).is_err());
}

#[test]
fn definitions_and_catalog() {
    assert!(DefinitionRef::new(&s(MAX_NAME_BYTES), "1").is_ok());
    assert!(DefinitionRef::new(&s(MAX_NAME_BYTES + 1), "1").is_err());
    let r = || DefinitionRef::new("a", "1").unwrap();
    for (turns, ok) in [
        (0, false),
        (MIN_DEFINITION_TURNS, true),
        (MAX_DEFINITION_TURNS, true),
        (MAX_DEFINITION_TURNS + 1, false),
    ] {
        assert_eq!(Definition::new(r(), "m", turns).is_ok(), ok, "{turns}");
    }
    let def = |id: &str| Definition::new(DefinitionRef::new(id, "1").unwrap(), "m", 1).unwrap();
    assert!(Catalog::new("r", vec![], &limits()).is_err());
    assert!(Catalog::new("r", vec![def("a"), def("b"), def("c"), def("d")], &limits()).is_ok());
    assert!(
        Catalog::new(
            "r",
            vec![def("a"), def("b"), def("c"), def("d"), def("e")],
            &limits()
        )
        .is_err()
    );
    assert!(Catalog::new("r", vec![def("b"), def("a")], &limits()).is_err());
    assert!(Catalog::new("r", vec![def("a"), def("a")], &limits()).is_err());
    let c = Catalog::new("r", vec![def("a"), def("b")], &limits()).unwrap();
    assert_eq!(
        c.get(&DefinitionRef::new("b", "1").unwrap())
            .unwrap()
            .model(),
        "m"
    );
    assert!(c.get(&DefinitionRef::new("b", "2").unwrap()).is_none());
}

fn spec(capabilities: Vec<String>, client_id: &str, epoch: u64) -> ConnectionSpec {
    ConnectionSpec {
        protocol: v(2),
        server: build(),
        capabilities,
        limits: limits(),
        health: health(),
        client_id: client_id.into(),
        epoch,
        catalog: catalog(),
    }
}

#[test]
fn connection_is_canonical_and_immutable() {
    let caps = |n: usize| (0..n).map(|i| format!("c{i:04}")).collect::<Vec<_>>();
    assert!(Connection::new(spec(caps(MAX_CAPABILITIES), "id", 1)).is_ok());
    assert!(Connection::new(spec(caps(MAX_CAPABILITIES + 1), "id", 1)).is_err());
    assert!(Connection::new(spec(vec!["b".into(), "a".into()], "id", 1)).is_err());
    assert!(Connection::new(spec(vec![], &s(MAX_ID_BYTES), 1)).is_ok());
    assert!(Connection::new(spec(vec![], &s(MAX_ID_BYTES + 1), 1)).is_err());
    assert!(Connection::new(spec(vec![], "id", 0)).is_err());
    let c = Connection::new(spec(vec![], "id", 7)).unwrap();
    let claim = c.reconnect_claim().unwrap();
    assert_eq!((claim.client_id(), claim.expected_epoch()), ("id", 7));
}

#[test]
fn reconnect_claim_epoch_bounds() {
    assert!(ReconnectClaim::new("id", 0).is_err());
    assert!(ReconnectClaim::new("id", 1).is_ok());
    assert!(ReconnectClaim::new("id", MAX_RECONNECT_EXPECTED_EPOCH).is_ok());
    assert!(ReconnectClaim::new("id", MAX_RECONNECT_EXPECTED_EPOCH + 1).is_err());
}

#[test]
fn attempt_ids() {
    assert!(InitializationAttemptId::new([0; 16]).is_err());
    assert!(InitializationAttemptId::from_slice(&[1; 15]).is_err());
    assert!(InitializationAttemptId::from_slice(&[1; 17]).is_err());
    let id = InitializationAttemptId::new([0xab; 16]).unwrap();
    assert_eq!(id.to_string(), "ab".repeat(16));
    assert_eq!(id.to_string().len(), 32);

    let mut calls = 0;
    let got = InitializationAttemptId::generate(|b: &mut [u8; 16]| -> Result<(), ()> {
        calls += 1;
        if calls == ATTEMPT_ID_GENERATION_TRIES {
            b[0] = 1;
        }
        Ok(())
    });
    assert!(got.unwrap().is_ok());
    assert_eq!(calls, ATTEMPT_ID_GENERATION_TRIES);
    let mut calls = 0;
    let got = InitializationAttemptId::generate(|_| -> Result<(), ()> {
        calls += 1;
        Ok(())
    });
    assert!(got.unwrap().is_err());
    assert_eq!(calls, ATTEMPT_ID_GENERATION_TRIES);
    assert_eq!(
        InitializationAttemptId::generate(|_| Err("no entropy")),
        Err("no entropy")
    );
}

#[test]
fn initialization_attempt_requests_are_exact_protocol_13_and_caller_retainable() {
    let range = |a, b| ProtocolRange::new(v(a), v(b)).unwrap();
    let legacy = InitializeRequest::new(range(0, 3), build(), vec![], vec![], limits()).unwrap();
    assert_eq!(legacy.protocol().maximum(), v(2), "clamped below 1.3");
    assert_eq!(legacy.protocol().minimum(), v(0));
    assert!(legacy.attempt().is_none());
    assert!(InitializeRequest::new(range(3, 3), build(), vec![], vec![], limits()).is_err());
    let claim = ReconnectClaim::new("id", 1).unwrap();
    let reconnect = InitializeRequest::reconnect(
        range(1, 3),
        build(),
        vec![],
        vec![],
        limits(),
        claim.clone(),
    )
    .unwrap();
    assert_eq!(reconnect.protocol().maximum(), v(2));

    let id = InitializationAttemptId::new([5; 16]).unwrap();
    assert!(
        InitializeRequest::with_attempt(range(0, 2), build(), vec![], vec![], limits(), None, id)
            .is_err()
    );
    let r = InitializeRequest::with_attempt(
        range(0, 4),
        build(),
        vec![],
        vec![],
        limits(),
        Some(claim),
        id,
    )
    .unwrap();
    assert_eq!(
        (r.protocol().minimum(), r.protocol().maximum()),
        (v(3), v(3))
    );
    assert_eq!(r.attempt(), Some(&id));
    assert_eq!(
        r.clone(),
        r,
        "the caller keeps the identical request to replay"
    );

    // Required must be a subset of supported, both canonical.
    assert!(
        InitializeRequest::new(range(0, 2), build(), vec![], vec!["x".into()], limits()).is_err()
    );
    assert!(
        InitializeRequest::new(
            range(0, 2),
            build(),
            vec!["b".into(), "a".into()],
            vec![],
            limits()
        )
        .is_err()
    );
}

#[test]
fn inputs_cursors_and_options() {
    assert!(Input::new("m", " \n ").is_err());
    assert!(Input::new("m", &s(MAX_INPUT_TEXT_BYTES)).is_ok());
    assert!(Input::new("m", &s(MAX_INPUT_TEXT_BYTES + 1)).is_err());
    assert!(CancelReason::new(&s(MAX_CANCEL_REASON_BYTES)).is_ok());
    assert!(CancelReason::new(&s(MAX_CANCEL_REASON_BYTES + 1)).is_err());
    assert_eq!(Cursor::new(RunRef::new("r").unwrap(), 0).after(), 0);
    assert!(EventStreamOptions::new(0, false, &limits()).is_err());
    assert!(EventStreamOptions::new(8, true, &limits()).is_ok());
    assert!(EventStreamOptions::new(9, true, &limits()).is_err());
}

#[test]
fn results() {
    let run = || RunRef::new("r").unwrap();
    assert!(StartResult::new(run(), 0, false, "p").is_err());
    assert!(StartResult::new(run(), 1, false, &s(MAX_NAME_BYTES)).is_ok());
    assert!(StartResult::new(run(), 1, false, &s(MAX_NAME_BYTES + 1)).is_err());
    assert_eq!(
        CancelResult::new(true, false, 0),
        Ok(CancelResult::Requested)
    );
    assert_eq!(
        CancelResult::new(false, true, 4),
        Ok(CancelResult::AlreadyTerminal(4))
    );
    for (a, b, n) in [
        (true, false, 1),
        (false, true, 0),
        (true, true, 1),
        (false, false, 0),
    ] {
        assert!(CancelResult::new(a, b, n).is_err());
    }
    assert!(SuspendResult::new(0, false).is_err());
    assert!(SuspendResult::new(u64::MAX - 1, false).is_ok());
    assert!(SuspendResult::new(u64::MAX, false).is_err());
    assert!(ResumeResult::new(0, false).is_err());
    assert!(ImportResult::new(run(), u64::MAX, false).is_err());
}

#[test]
fn maximum_kernel_payload_fits_opaque_signed_envelope_exactly() {
    assert_eq!(MAXIMUM_SNAPSHOT_ENVELOPE_OVERHEAD_BYTES, 295);
    assert_eq!(MAXIMUM_SNAPSHOT_BYTES, 16 * 1024 * 1024 + 295);
    assert!(Snapshot::new(vec![]).is_err());
    assert!(Snapshot::new(vec![1; MAXIMUM_SNAPSHOT_BYTES]).is_ok());
    assert!(Snapshot::new(vec![1; MAXIMUM_SNAPSHOT_BYTES + 1]).is_err());
    assert_eq!(
        format!("{:?}", Snapshot::new(vec![7; 3]).unwrap()),
        "Snapshot(3 bytes)"
    );
}

#[test]
fn structured_value_redacts_every_default_diagnostic_surface() {
    let secret = "sk-planted-secret-4711";
    let value = StructuredValue::parse(format!(r#"{{"token":"{secret}"}}"#).into_bytes()).unwrap();
    assert_eq!(value.kind(), JsonKind::Object);
    let pending = PendingInteraction::new(
        RunRef::new("r").unwrap(),
        InteractionId::new("i").unwrap(),
        "approval",
        "Allow?",
        value.clone(),
    )
    .unwrap();
    for text in [
        format!("{value}"),
        format!("{value:?}"),
        format!("{value:#?}"),
        format!("{pending:?}"),
        format!("{pending:#?}"),
    ] {
        assert!(!text.contains(secret), "{text}");
    }
    assert!(format!("{value}").contains(REDACTED));
    assert!(String::from_utf8_lossy(value.encode_transfer()).contains(secret));
}

#[test]
fn structured_value_bounds() {
    let string_of = |n: usize| format!("\"{}\"", s(n - 2)).into_bytes();
    assert!(StructuredValue::parse(vec![]).is_err());
    assert!(StructuredValue::parse(b"1".to_vec()).is_ok());
    assert!(StructuredValue::parse(string_of(MAX_STRUCTURED_VALUE_BYTES)).is_ok());
    assert!(StructuredValue::parse(string_of(MAX_STRUCTURED_VALUE_BYTES + 1)).is_err());
    assert!(StructuredValue::parse(b"{".to_vec()).is_err());
    let pend = |prompt: &str| {
        PendingInteraction::new(
            RunRef::new("r").unwrap(),
            InteractionId::new("i").unwrap(),
            "k",
            prompt,
            StructuredValue::parse(b"{}".to_vec()).unwrap(),
        )
    };
    assert!(pend(&s(MAX_PROMPT_BYTES)).is_ok());
    assert!(pend(&s(MAX_PROMPT_BYTES + 1)).is_err());
    assert!(pend(" untrimmed").is_err());
    assert!(pend("").is_err());
}

#[test]
fn json_validator_cases() {
    for (doc, kind) in [
        ("null", JsonKind::Null),
        (" true ", JsonKind::Bool),
        ("-0.5e+10", JsonKind::Number),
        ("1.7e308", JsonKind::Number),
        (r#""a\u00e9\ud83d\ude00\n""#, JsonKind::String),
        ("[]", JsonKind::Array),
        (r#"[1,{"a":[{}]}]"#, JsonKind::Array),
        (r#"{"a":1,"b":{"c":null}}"#, JsonKind::Object),
    ] {
        assert_eq!(validate_json(doc.as_bytes()), Ok(kind), "{doc}");
    }
    for doc in [
        "",
        " ",
        "01",
        "1.",
        ".5",
        "1e",
        "+1",
        "[1,]",
        "{\"a\":1,}",
        "{a:1}",
        "[1 2]",
        "\"\\x\"",
        "\"\\ud800\"",
        "\"\\udc00\"",
        "\"a\u{1}\"",
        "nul",
        "[]]",
        "{}{}",
        "\"open",
        "[",
        "{\"a\"}",
        "NaN",
        "1e309",
        "-2e400",
        "'a'",
    ] {
        assert_eq!(
            validate_json(doc.as_bytes()),
            Err(JsonError::Malformed),
            "{doc:?}"
        );
    }
    assert_eq!(
        validate_json(&[b'"', 0xff, b'"']),
        Err(JsonError::Malformed)
    );
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert_eq!(
        validate_json(nested(MAX_JSON_DEPTH).as_bytes()),
        Ok(JsonKind::Array)
    );
    assert_eq!(
        validate_json(nested(MAX_JSON_DEPTH + 1).as_bytes()),
        Err(JsonError::TooDeep)
    );
    let objects = |n: usize| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
    assert_eq!(
        validate_json(objects(MAX_JSON_DEPTH).as_bytes()),
        Ok(JsonKind::Object)
    );
    assert_eq!(
        validate_json(objects(MAX_JSON_DEPTH + 1).as_bytes()),
        Err(JsonError::TooDeep)
    );
}

fn t() -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_secs(1)
}

fn ev(kind: EventKind, detail: EventDetail) -> Result<Event, ValueError> {
    Event::new(RunRef::new("r").unwrap(), 1, t(), kind, detail)
}

#[test]
fn event_kinds_and_details() {
    let names: std::collections::BTreeSet<_> = EventKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names.len(), 19);
    assert!(names.iter().all(|n| n.split('.').count() == 2));
    assert_eq!(
        EventKind::ALL.iter().filter(|k| k.is_terminal()).count(),
        12
    );
    assert!(ev(EventKind::RunCompleted, EventDetail::RunCompleted).is_ok());
    assert!(ev(EventKind::RunStarted, EventDetail::RunCompleted).is_err());
    assert!(
        Event::new(
            RunRef::new("r").unwrap(),
            0,
            t(),
            EventKind::RunCompleted,
            EventDetail::RunCompleted
        )
        .is_err()
    );
    assert!(
        Event::new(
            RunRef::new("r").unwrap(),
            1,
            UNIX_EPOCH,
            EventKind::RunCompleted,
            EventDetail::RunCompleted
        )
        .is_err()
    );

    let delta = |n| {
        ev(
            EventKind::ModelDelta,
            EventDetail::ModelDelta { text: s(n) },
        )
    };
    assert!(delta(MAX_MODEL_DELTA_BYTES).is_ok());
    assert!(delta(MAX_MODEL_DELTA_BYTES + 1).is_err());
    let status = |n| ev(EventKind::RunFailed, EventDetail::Status { text: s(n) });
    assert!(status(MAX_STATUS_TEXT_BYTES).is_ok());
    assert!(status(MAX_STATUS_TEXT_BYTES + 1).is_err());
    let progress = |n| {
        ev(
            EventKind::ToolProgress,
            EventDetail::ToolProgress {
                call_id: "c".into(),
                message: s(n),
            },
        )
    };
    assert!(progress(MAX_PROGRESS_BYTES).is_ok());
    assert!(progress(MAX_PROGRESS_BYTES + 1).is_err());
    assert!(ModelFailure::new("c", &s(MAX_MODEL_FAILURE_MESSAGE_BYTES), false, true).is_ok());
    assert!(ModelFailure::new("c", &s(MAX_MODEL_FAILURE_MESSAGE_BYTES + 1), false, true).is_err());
    let problem = |n| {
        ev(
            EventKind::InteractionFailed,
            EventDetail::InteractionTerminal {
                id: "i".into(),
                problem: Some(s(n)),
            },
        )
    };
    assert!(problem(MAX_INTERACTION_PROBLEM_BYTES).is_ok());
    assert!(problem(MAX_INTERACTION_PROBLEM_BYTES + 1).is_err());
    assert!(
        ev(
            EventKind::InteractionCompleted,
            EventDetail::InteractionTerminal {
                id: "i".into(),
                problem: Some("x".into())
            }
        )
        .is_err()
    );
    assert!(
        ev(
            EventKind::InteractionCancelled,
            EventDetail::InteractionTerminal {
                id: "i".into(),
                problem: None
            }
        )
        .is_err()
    );
}

#[test]
fn tool_terminal_rules() {
    use ToolOutcome::*;
    use ToolRetry::*;
    let tt = |p: Option<&str>, o, r| ToolTerminal::new("c", "n", p, o, r);
    assert!(tt(None, Completed, Allowed).is_ok());
    assert!(
        tt(Some("x"), Completed, Allowed).is_err(),
        "completed has no problem"
    );
    assert!(tt(None, Failed, Allowed).is_err(), "failed requires one");
    assert!(tt(Some(&s(MAX_TOOL_PROBLEM_BYTES)), Failed, Allowed).is_ok());
    assert!(tt(Some(&s(MAX_TOOL_PROBLEM_BYTES + 1)), Failed, Allowed).is_err());
    assert!(
        tt(Some("x"), Uncertain, Allowed).is_err(),
        "uncertain needs retry never"
    );
    assert!(tt(Some("x"), Uncertain, Never).is_ok());
    let done = tt(None, Completed, Allowed).unwrap();
    assert!(
        ev(
            EventKind::ToolFailed,
            EventDetail::ToolTerminal(done.clone())
        )
        .is_err()
    );
    assert!(ev(EventKind::ToolCompleted, EventDetail::ToolTerminal(done)).is_ok());
}

#[test]
fn event_and_interaction_frames_preserve_explicit_controls() {
    // Current form.
    let c = EventControl::new(1, 5, 3, 3, true, false).unwrap();
    assert_eq!(
        (c.page_last(), c.has_more(), c.tailing()),
        (Some(3), true, false)
    );
    assert!(EventControl::new(1, 5, 5, 5, false, true).is_ok());
    assert!(
        EventControl::new(1, 0, 0, 0, false, true).is_ok(),
        "empty window"
    );
    assert!(EventControl::new(0, 5, 0, 0, true, false).is_err());
    assert!(
        EventControl::new(1, 5, 4, 3, true, false).is_err(),
        "delivered past page"
    );
    assert!(
        EventControl::new(1, 5, 3, 3, false, false).is_err(),
        "has_more must be set"
    );
    assert!(
        EventControl::new(1, 5, 3, 3, true, true).is_err(),
        "both flags"
    );
    assert!(EventControl::new(1, 5, 5, 5, false, false).is_ok());
    assert!(
        EventControl::new(1, 5, 3, 3, false, true).is_err(),
        "tailing mid-window"
    );
    assert!(
        EventControl::new(3, 5, 1, 2, true, false).is_err(),
        "below the window"
    );
    // Legacy form.
    let l = EventControl::legacy(2, 5, 1).unwrap();
    assert_eq!(
        (l.page_last(), l.has_more(), l.tailing()),
        (None, false, false)
    );
    assert!(EventControl::legacy(2, 5, 6).is_err());
    assert!(EventControl::legacy(2, 5, 0).is_err());
    // Interaction control.
    assert!(InteractionControl::new(3, 3, false, true).is_ok());
    assert!(InteractionControl::new(3, 4, false, false).is_err());
    assert!(InteractionControl::new(3, 2, false, false).is_err());
    assert!(InteractionControl::new(3, 2, true, true).is_err());
    assert!(
        InteractionUpdate::new(
            0,
            InteractionUpdateKind::Opened,
            PendingInteraction::new(
                RunRef::new("r").unwrap(),
                InteractionId::new("i").unwrap(),
                "k",
                "p",
                StructuredValue::parse(b"{}".to_vec()).unwrap()
            )
            .unwrap(),
        )
        .is_err()
    );
}

#[test]
fn typed_recovery_errors_reject_inconsistent_facts() {
    assert!(ErrorFacts::new(&s(MAX_ERROR_MESSAGE_BYTES), true, None).is_ok());
    assert!(ErrorFacts::new(&s(MAX_ERROR_MESSAGE_BYTES + 1), true, None).is_err());
    let run = || RunRef::new("r").unwrap();
    // Window [5, 9]: too old below 4 (recovery 4), too new above 9 (recovery 9).
    assert!(CursorGapError::new(run(), 2, 5, 9, 4, facts()).is_ok());
    assert!(CursorGapError::new(run(), 10, 5, 9, 9, facts()).is_ok());
    assert!(
        CursorGapError::new(run(), 4, 5, 9, 4, facts()).is_err(),
        "inside the window"
    );
    assert!(
        CursorGapError::new(run(), 2, 5, 9, 9, facts()).is_err(),
        "wrong recovery"
    );
    assert!(CursorGapError::new(run(), 10, 5, 9, 4, facts()).is_err());
    assert!(CursorGapError::new(run(), 10, 0, 9, 9, facts()).is_err());
    assert!(CursorGapError::new(run(), 10, 9, 5, 5, facts()).is_err());
    assert!(StaleSessionError::new(0, 1, facts()).is_err());
    assert!(StaleSessionError::new(1, 1, facts()).is_err());
    assert!(StaleSessionError::new(1, 2, facts()).is_ok());
    let r = |a, b| ProtocolRange::new(v(a), v(b)).unwrap();
    assert!(VersionMismatchError::new(r(0, 1), r(2, 3), facts()).is_ok());
    assert!(VersionMismatchError::new(r(0, 2), r(2, 3), facts()).is_err());
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(
        CapabilityMismatchError::new(names(&["a", "b"]), names(&["a"]), names(&["b"]), facts())
            .is_ok()
    );
    assert!(
        CapabilityMismatchError::new(names(&["a", "b"]), names(&["a"]), names(&["a"]), facts())
            .is_err()
    );
    assert!(
        CapabilityMismatchError::new(names(&["a"]), names(&["a"]), names(&[]), facts()).is_err()
    );
    assert!(OverloadError::new("r", 1, 2, facts()).is_ok());
    assert!(OverloadError::new("r", 0, 2, facts()).is_err());
    assert!(OverloadError::new("r", 2, 2, facts()).is_err());
    assert!(OverloadError::new(&s(MAX_OVERLOAD_RESOURCE_BYTES + 1), 1, 2, facts()).is_err());
    assert!(SnapshotVersionMismatchError::new("a", "a", facts()).is_err());
    assert!(SnapshotVersionMismatchError::new("a", "b", facts()).is_ok());
    let op = |s: &str| OperationId::new(s).unwrap();
    let with_op = |s: &str| ErrorFacts::new("m", false, Some(op(s))).unwrap();
    assert!(UncertainOperationError::new(op("a"), "start", with_op("a")).is_ok());
    assert!(UncertainOperationError::new(op("a"), "start", with_op("b")).is_err());
    let id = InitializationAttemptId::new([1; 16]).unwrap();
    assert!(InitializationReplayError::new(id, ErrorFacts::new("m", true, None).unwrap()).is_ok());
    assert!(
        InitializationReplayError::new(id, ErrorFacts::new("m", false, None).unwrap()).is_err()
    );
    assert!(
        InitializationReplayError::new(id, ErrorFacts::new("m", true, Some(op("a"))).unwrap())
            .is_err()
    );
    let e = Error::from(
        OverloadError::new("r", 1, 2, ErrorFacts::new("m", true, None).unwrap()).unwrap(),
    );
    assert!(e.retryable());
    assert!(!Error::Closed.retryable());
}
