//! The other direction of the external check: our client against a scripted daemon that
//! sends exactly the original system's event payloads (docs/protocol.md, "Event payloads"),
//! one kind at a time, each decoded through the whole adapter (page, control, detail).

mod support;

use agent_client::{self as c, Connector as _, EventStream as _, Session as _};
use agent_protocol::pb::engine::v1 as pbe;
use support::*;

/// Streams one page holding `payload` as event 1 of `kind` and returns its decoded detail.
async fn decode_one(
    server: &Server,
    kind: pbe::EventKind,
    payload: &str,
) -> Result<c::EventDetail, c::Error> {
    let session = server.connector().initialize(fresh()).await?;
    let tx = server.script_events();
    for frame in [
        event("run-1", 1, kind, payload.as_bytes()),
        control(1, 1, 1, false),
    ] {
        tx.send(Ok(frame)).await.unwrap();
    }
    let options = c::EventStreamOptions::new(8, false, &client_limits()).unwrap();
    let cursor = c::Cursor::new(c::RunRef::new("run-1").unwrap(), 0);
    let mut stream = session.events(cursor, options).await?;
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), stream.next())
        .await
        .expect("the page arrives in time")?;
    match first {
        Some(c::EventFrame::Event(event)) => Ok(event.detail().clone()),
        other => panic!("{kind:?}: the first frame is the event, got {other:?}"),
    }
}

fn tool(
    name: &str,
    problem: Option<&str>,
    outcome: c::ToolOutcome,
    retry: c::ToolRetry,
) -> c::EventDetail {
    c::EventDetail::ToolTerminal(
        c::ToolTerminal::new("call-1", name, problem, outcome, retry).unwrap(),
    )
}

/// The original's payloads of every kind but the tool outcomes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_originals_event_payloads_decode() {
    use c::EventDetail as D;
    use pbe::EventKind as K;
    let server = Server::start();
    let cases: Vec<(K, &str, D)> = vec![
        (
            K::RunStarted,
            r#"{"definition":"echo"}"#,
            D::RunStarted {
                definition: "echo".into(),
            },
        ),
        (K::RunCompleted, "", D::RunCompleted),
        (
            K::RunFailed,
            r#"{"error":"model provider failed"}"#,
            D::Status {
                text: "model provider failed".into(),
            },
        ),
        (
            K::RunCancelled,
            r#"{"error":"cancelled by client"}"#,
            D::Status {
                text: "cancelled by client".into(),
            },
        ),
        (
            K::TurnFailed,
            r#"{"error":"context canceled"}"#,
            D::Status {
                text: "context canceled".into(),
            },
        ),
        (K::TurnStarted, r#"{"turn":1}"#, D::Turn { turn: 1 }),
        (K::TurnCompleted, r#"{"turn":2}"#, D::Turn { turn: 2 }),
        (
            K::ModelStarted,
            r#"{"turn":1,"operation_id":"run-1/model/1"}"#,
            D::ModelStarted {
                turn: 1,
                operation: Some("run-1/model/1".into()),
            },
        ),
        (
            K::ModelDelta,
            r#"{"text":"hel"}"#,
            D::ModelDelta { text: "hel".into() },
        ),
        (
            K::ModelCompleted,
            r#"{"input_tokens":12,"output_tokens":7}"#,
            D::ModelCompleted {
                usage: c::Usage {
                    input_tokens: 12,
                    output_tokens: 7,
                },
            },
        ),
        (
            K::ModelFailed,
            r#"{"code":"unavailable","message":"upstream closed","retryable":true,"before_stream":true}"#,
            D::ModelFailed(
                c::ModelFailure::new("unavailable", "upstream closed", true, true).unwrap(),
            ),
        ),
        (
            K::ToolStarted,
            r#"{"call_id":"call-1","name":"read_file"}"#,
            D::ToolStarted {
                call_id: "call-1".into(),
                name: "read_file".into(),
            },
        ),
        (
            K::ToolProgress,
            r#"{"call_id":"call-1","message":"half way"}"#,
            D::ToolProgress {
                call_id: "call-1".into(),
                message: "half way".into(),
            },
        ),
        // The original's server writes "" for a completed tool and a fixed text for a
        // failed one when it projects the legacy shape (no outcome, no retry).
        (
            K::ToolCompleted,
            r#"{"call_id":"call-1","name":"read_file","error":""}"#,
            tool(
                "read_file",
                None,
                c::ToolOutcome::Completed,
                c::ToolRetry::Allowed,
            ),
        ),
        (
            K::ToolFailed,
            r#"{"call_id":"call-1","name":"read_file","error":"tool execution failed"}"#,
            tool(
                "read_file",
                Some("tool execution failed"),
                c::ToolOutcome::Failed,
                c::ToolRetry::Allowed,
            ),
        ),
        (
            K::InteractionStarted,
            r#"{"id":"int-1","kind":"approval"}"#,
            D::InteractionStarted {
                id: "int-1".into(),
                kind: "approval".into(),
            },
        ),
        (
            K::InteractionCompleted,
            r#"{"id":"int-1"}"#,
            D::InteractionTerminal {
                id: "int-1".into(),
                problem: None,
            },
        ),
        (
            K::InteractionFailed,
            r#"{"id":"int-1","error":"declined"}"#,
            D::InteractionTerminal {
                id: "int-1".into(),
                problem: Some("declined".into()),
            },
        ),
        (
            K::InteractionCancelled,
            r#"{"id":"int-1","error":"run cancelled"}"#,
            D::InteractionTerminal {
                id: "int-1".into(),
                problem: Some("run cancelled".into()),
            },
        ),
    ];
    for (kind, payload, expected) in cases {
        let detail = decode_one(&server, kind, payload)
            .await
            .unwrap_or_else(|e| panic!("{kind:?} {payload}: {e:?}"));
        assert_eq!(detail, expected, "{kind:?} {payload}");
    }
}

/// The original's tool outcomes (`definitive`/`uncertain` with `retry`) and the optional
/// `metadata` of model events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_originals_tool_outcomes_and_model_metadata_decode() {
    use c::EventDetail as D;
    use pbe::EventKind as K;
    let server = Server::start();
    let cases: Vec<(K, &str, D)> = vec![
        (
            K::ToolCompleted,
            r#"{"call_id":"call-1","name":"write_file","error":"","outcome":"definitive","retry":"allowed"}"#,
            tool(
                "write_file",
                None,
                c::ToolOutcome::Completed,
                c::ToolRetry::Allowed,
            ),
        ),
        (
            K::ToolFailed,
            r#"{"call_id":"call-1","name":"write_file","error":"tool execution failed","outcome":"definitive","retry":"never"}"#,
            tool(
                "write_file",
                Some("tool execution failed"),
                c::ToolOutcome::Failed,
                c::ToolRetry::Never,
            ),
        ),
        (
            K::ToolFailed,
            r#"{"call_id":"call-1","name":"write_file","error":"tool execution failed","outcome":"uncertain","retry":"never"}"#,
            tool(
                "write_file",
                Some("tool execution failed"),
                c::ToolOutcome::Uncertain,
                c::ToolRetry::Never,
            ),
        ),
        (
            K::ModelCompleted,
            r#"{"input_tokens":1,"output_tokens":2,"metadata":[]}"#,
            D::ModelCompleted {
                usage: c::Usage {
                    input_tokens: 1,
                    output_tokens: 2,
                },
            },
        ),
    ];
    for (kind, payload, expected) in cases {
        let detail = decode_one(&server, kind, payload)
            .await
            .unwrap_or_else(|e| panic!("{kind:?} {payload}: {e:?}"));
        assert_eq!(detail, expected, "{kind:?} {payload}");
    }
}

/// What the original's client refuses, ours refuses too: unknown members, trailing JSON,
/// an empty payload (but for `run.completed`), a payload on `run.completed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_the_original_refuses_are_protocol_violations() {
    use pbe::EventKind as K;
    let server = Server::start();
    for (kind, payload) in [
        (K::ModelDelta, r#"{"text":"a","extra":1}"#),
        (K::ModelDelta, r#"{"text":"a"}{"text":"b"}"#),
        (K::TurnStarted, ""),
        (K::RunCompleted, "{}"),
        (
            K::ToolFailed,
            r#"{"call_id":"call-1","name":"n","error":"e","outcome":"uncertain","retry":"allowed"}"#,
        ),
    ] {
        let err = decode_one(&server, kind, payload).await.expect_err(payload);
        assert!(
            matches!(err, c::Error::Protocol(_)),
            "{kind:?} {payload}: {err:?}"
        );
    }
}
