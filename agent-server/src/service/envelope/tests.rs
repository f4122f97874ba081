use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use agent_core::event::{
    FailureCode, Timestamp, ToolCompleted, ToolFailed, ToolOutcome, ToolStarted, ToolStartedVersion,
};
use agent_protocol::event_payload::{CAPABILITY_RICH_EVENTS, RICH_MEMBER};

fn envelope(run: &str, sequence: u64, event: Event) -> Envelope {
    Envelope::new(
        agent_core::RunId::new(run).expect("a valid run id"),
        sequence,
        Timestamp::from_unix_nanos(1_700_000_000_000_000_000),
        event,
    )
}

fn wire(event: Event) -> pb::RunEvent {
    event_to_wire(&envelope("run-1", 1, event)).expect("representable")
}

fn json(event: &pb::RunEvent) -> serde_json::Value {
    serde_json::from_slice(&event.payload_json).unwrap()
}

fn tool_started() -> Event {
    Event::ToolStarted(ToolStarted {
        version: ToolStartedVersion,
        call_id: "c1".into(),
        name: "write".into(),
        turn: 1,
        plan_id: Arc::from("plan-secret"),
        plan_fingerprint: Arc::from("fingerprint-secret"),
        plan_identity: Arc::from("identity-secret"),
        workspace: Some(Arc::from("/home/secret")),
        declared: None,
    })
}

#[test]
fn every_kernel_kind_is_projected_to_the_wire_shape() {
    use serde_json::json as j;
    let cases: Vec<(Event, serde_json::Value)> = vec![
        (
            Event::RunStarted {
                agent: Arc::from("coder"),
            },
            j!({"definition": "coder"}),
        ),
        (
            Event::RunFailed {
                code: FailureCode::ModelFailed,
            },
            j!({"error": "model_failed"}),
        ),
        (Event::RunCancelled, j!({"error": CANCELLED_TEXT})),
        (Event::TurnStarted { turn: 2 }, j!({"turn": 2})),
        (Event::TurnCompleted { turn: 2 }, j!({"turn": 2})),
        (
            Event::TurnFailed {
                turn: 1,
                code: FailureCode::Cancelled,
            },
            j!({"error": "cancelled"}),
        ),
        (
            Event::ModelStarted { turn: 1 },
            j!({"turn": 1, "operation_id": "run-1/model/1"}),
        ),
        (Event::ModelDelta { text: "hi".into() }, j!({"text": "hi"})),
        (
            Event::ModelCompleted {
                input_tokens: 3,
                output_tokens: 4,
            },
            j!({"input_tokens": 3, "output_tokens": 4}),
        ),
        (
            Event::ModelFailed {
                problem: "rate_limited".into(),
                retryable: true,
                before_stream: false,
            },
            j!({"code": "rate_limited", "message": MODEL_FAILED_MESSAGE,
                "retryable": true, "before_stream": false}),
        ),
        (tool_started(), j!({"call_id": "c1", "name": "write"})),
        (
            Event::ToolProgress {
                call_id: "c1".into(),
                message: "half".into(),
            },
            j!({"call_id": "c1", "message": "half"}),
        ),
        (
            Event::ToolCompleted(ToolCompleted::new("c1", "write", ToolOutcome::Success)),
            j!({"call_id": "c1", "name": "write", "error": ""}),
        ),
        (
            Event::ToolCompleted(ToolCompleted::new("c1", "write", ToolOutcome::Problem)),
            j!({"call_id": "c1", "name": "write", "error": ""}),
        ),
        (
            Event::ToolFailed(ToolFailed::new(
                "c1",
                "write",
                FailureCode::ToolFailed,
                None,
            )),
            j!({"call_id": "c1", "name": "write", "error": TOOL_FAILED_TEXT}),
        ),
        (
            Event::ToolFailed(ToolFailed::new(
                "c1",
                "write",
                FailureCode::ToolFailed,
                Some((ExecutionState::Uncertain, RetryDisposition::Never)),
            )),
            j!({"call_id": "c1", "name": "write", "error": TOOL_FAILED_TEXT,
                "outcome": "uncertain", "retry": "never"}),
        ),
        (
            Event::ToolFailed(ToolFailed::new(
                "c1",
                "write",
                FailureCode::ToolFailed,
                Some((ExecutionState::Definitive, RetryDisposition::Allowed)),
            )),
            j!({"call_id": "c1", "name": "write", "error": TOOL_FAILED_TEXT,
                "outcome": "definitive", "retry": "allowed"}),
        ),
        (
            Event::InteractionStarted {
                id: "i1".into(),
                kind: "approval".into(),
            },
            j!({"id": "i1", "kind": "approval"}),
        ),
        (
            Event::InteractionCompleted { id: "i1".into() },
            j!({"id": "i1"}),
        ),
        (
            Event::InteractionFailed { id: "i1".into() },
            j!({"id": "i1", "error": INTERACTION_FAILED_TEXT}),
        ),
        (
            Event::InteractionCancelled { id: "i1".into() },
            j!({"id": "i1", "error": INTERACTION_CANCELLED_TEXT}),
        ),
    ];
    for (event, expected) in cases {
        let sent = wire(event.clone());
        assert_eq!(json(&sent), expected, "{event:?}");
        assert!(check_wire_event(&sent, false));
    }
    let completed = wire(Event::RunCompleted);
    assert!(completed.payload_json.is_empty());
    assert!(completed.terminal);
}

#[test]
fn a_model_operation_id_fits_the_token_bound() {
    assert_eq!(model_operation_id("run-1", 3), "run-1/model/3");
    let long = "r".repeat(MAX_EVENT_TOKEN_BYTES);
    let id = model_operation_id(&long, 12);
    assert_eq!(id.len(), MAX_EVENT_TOKEN_BYTES);
    assert!(id.ends_with("/model/12"));
    // A cut never splits a character.
    let wide = "é".repeat(MAX_EVENT_TOKEN_BYTES);
    assert!(model_operation_id(&wide, 1).len() <= MAX_EVENT_TOKEN_BYTES);
}

#[test]
fn a_non_token_model_problem_is_sent_under_the_fixed_code() {
    let sent = wire(Event::ModelFailed {
        problem: "bad\ncode".into(),
        retryable: false,
        before_stream: true,
    });
    assert_eq!(json(&sent)["code"], MODEL_FAILED_CODE);
}

#[test]
fn rich_facts_reach_only_a_rich_connection() {
    let plain = event_to_wire_with(&envelope("run-1", 1, tool_started()), false).unwrap();
    let text = String::from_utf8(plain.payload_json.clone()).unwrap();
    assert!(!text.contains("secret"), "{text}");
    assert!(!text.contains(RICH_MEMBER), "{text}");
    let rich = event_to_wire_with(&envelope("run-1", 1, tool_started()), true).unwrap();
    let value = json(&rich);
    assert_eq!(value["call_id"], "c1");
    assert_eq!(value[RICH_MEMBER]["plan_identity"], "identity-secret");
    assert_eq!(value[RICH_MEMBER]["workspace"], "/home/secret");
    // A plain connection's decoder refuses the rich payload: the member is extra.
    assert!(!check_wire_event(&rich, false));
    assert!(check_wire_event(&rich, true));
    let outcome = event_to_wire_with(
        &envelope(
            "run-1",
            1,
            Event::ToolCompleted(ToolCompleted::new("c1", "w", ToolOutcome::Problem)),
        ),
        true,
    )
    .unwrap();
    assert_eq!(json(&outcome)[RICH_MEMBER]["outcome"], "problem");
    assert!(!CAPABILITY_RICH_EVENTS.is_empty());
}

#[test]
fn a_payload_the_decoder_refuses_is_never_sent() {
    let mut sent = wire(Event::TurnStarted { turn: 1 });
    assert!(check_wire_event(&sent, false));
    for bad in [
        &br#"{"turn":1,"agent":"x"}"#[..],
        br#"{"turn":1}{}"#,
        b"",
        br#"{"turn":0}"#,
    ] {
        sent.payload_json = bad.to_vec();
        assert!(!check_wire_event(&sent, false));
    }
    // A kernel value the wire cannot carry fails the projection check: an empty tool
    // progress message is not a wire payload.
    let empty = Event::ToolProgress {
        call_id: "c1".into(),
        message: String::new(),
    };
    assert!(event_to_wire(&envelope("run-1", 1, empty)).is_none());
}

fn token() -> impl Strategy<Value = String> {
    "[a-z0-9._/-]{1,128}"
}

fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<char>(), 0..64)
        .prop_map(move |c| c.into_iter().collect::<String>())
        .prop_filter("bounded", move |s| s.len() <= max)
}

fn code() -> impl Strategy<Value = FailureCode> {
    prop_oneof![
        Just(FailureCode::Cancelled),
        Just(FailureCode::ModelFailed),
        Just(FailureCode::ModelProtocol),
        Just(FailureCode::ToolFailed),
        Just(FailureCode::Panicked),
        Just(FailureCode::EventLogExhausted),
    ]
}

fn execution() -> impl Strategy<Value = Option<(ExecutionState, RetryDisposition)>> {
    prop_oneof![
        Just(None),
        Just(Some((ExecutionState::Definitive, RetryDisposition::Never))),
        Just(Some((
            ExecutionState::Definitive,
            RetryDisposition::Allowed
        ))),
        Just(Some((ExecutionState::Uncertain, RetryDisposition::Never))),
    ]
}

fn kernel_event() -> impl Strategy<Value = Event> {
    prop_oneof![
        token().prop_map(|a| Event::RunStarted { agent: a.into() }),
        Just(Event::RunCompleted),
        code().prop_map(|code| Event::RunFailed { code }),
        Just(Event::RunCancelled),
        (1u32..1000).prop_map(|turn| Event::TurnStarted { turn }),
        (1u32..1000).prop_map(|turn| Event::TurnCompleted { turn }),
        (1u32..1000, code()).prop_map(|(turn, code)| Event::TurnFailed { turn, code }),
        (1u32..=u32::MAX).prop_map(|turn| Event::ModelStarted { turn }),
        text(4096).prop_map(|text| Event::ModelDelta { text }),
        (any::<u64>(), any::<u64>()).prop_map(|(i, o)| Event::ModelCompleted {
            input_tokens: i,
            output_tokens: o
        }),
        (text(256), any::<bool>(), any::<bool>()).prop_map(|(p, r, b)| Event::ModelFailed {
            problem: p,
            retryable: r,
            before_stream: b
        }),
        (token(), token()).prop_map(|(c, n)| {
            let mut started = match tool_started() {
                Event::ToolStarted(s) => s,
                _ => unreachable!(),
            };
            started.call_id = c;
            started.name = n;
            Event::ToolStarted(started)
        }),
        (token(), "[a-z ]{1,64}")
            .prop_map(|(call_id, message)| Event::ToolProgress { call_id, message }),
        (token(), token(), any::<bool>()).prop_map(|(c, n, ok)| {
            let outcome = if ok {
                ToolOutcome::Success
            } else {
                ToolOutcome::Problem
            };
            Event::ToolCompleted(ToolCompleted::new(c, n, outcome))
        }),
        (token(), token(), execution()).prop_map(|(c, n, e)| Event::ToolFailed(ToolFailed::new(
            c,
            n,
            FailureCode::ToolFailed,
            e
        ))),
        (token(), token()).prop_map(|(id, kind)| Event::InteractionStarted { id, kind }),
        token().prop_map(|id| Event::InteractionCompleted { id }),
        token().prop_map(|id| Event::InteractionFailed { id }),
        token().prop_map(|id| Event::InteractionCancelled { id }),
    ]
}

proptest! {
    /// Every kernel event within the kernel's bounds projects to a payload the strict
    /// decoder accepts, with and without the rich member, for any kernel run id.
    #[test]
    fn every_projected_kernel_event_decodes(
        run in "[a-zA-Z0-9-]{1,96}",
        event in kernel_event(),
        rich in any::<bool>(),
    ) {
        let sent = event_to_wire_with(&envelope(&run, 1, event.clone()), rich);
        prop_assert!(sent.is_some(), "{event:?}");
        let sent = sent.unwrap();
        let kind = pb::EventKind::try_from(sent.kind).unwrap();
        if rich {
            prop_assert!(decode_event_payload_rich(kind, &sent.payload_json).is_ok());
        } else {
            prop_assert!(decode_event_payload(kind, &sent.payload_json).is_ok());
        }
    }
}
