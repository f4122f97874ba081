//! Hostile servers against the real fault server (`examples/mcp_fault_server.rs` in its
//! `FAULT_RAW` mode): an answer at and past the message bound, and an unsupported protocol
//! version in the handshake.

mod support;

use std::error::Error as _;
use std::time::{Duration, Instant};

use agent_core::stage::DispatchError;
use agent_core::tool::{ExecutionError, ExecutionState};
use agent_mcp::transport::MAX_MESSAGE_BYTES;
use agent_mcp::{McpError, McpToolPlanSource};
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;

/// Long enough that a call that waited for it could not pass as answered "at once".
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

fn raw_config(extra_env: serde_json::Value) -> agent_mcp::McpConfig {
    let mut env = json!({"FAULT_RAW": "1"});
    if let (Some(env), serde_json::Value::Object(extra)) = (env.as_object_mut(), extra_env) {
        env.extend(extra);
    }
    fault_config(
        "fault",
        json!({"env": env, "callTimeoutMs": CALL_TIMEOUT.as_millis() as u64}),
    )
}

fn execution(error: DispatchError) -> ExecutionError {
    match error {
        DispatchError::Execution(e) => e,
        other => panic!("not an execution error: {other:?}"),
    }
}

fn mcp_cause(error: &ExecutionError) -> &McpError {
    error
        .source()
        .and_then(|cause| cause.downcast_ref::<McpError>())
        .unwrap_or_else(|| panic!("no McpError cause: {error}"))
}

#[test]
fn an_answer_at_the_message_bound_is_read_and_previewed() {
    run(async {
        let source = start(&raw_config(json!({})), &[]).await;
        let lease = source.lease_current_typed().await.unwrap();
        let cancel = CancellationToken::new();
        let result = call(
            &lease,
            "fault.sized",
            json!({"bytes": MAX_MESSAGE_BYTES}),
            &cancel,
        )
        .await
        .unwrap();
        assert!(!result.is_problem());
        let content = result.content();
        assert!(content.len() <= agent_mcp::result::DEFAULT_RESULT_BYTES);
        assert!(content.starts_with('x') && content.ends_with('x'));
        assert!(content.contains("bytes omitted …]"), "{}", &content[..100]);
        lease.release(&cancel).await.unwrap();
        source.shutdown().await;
    });
}

#[test]
fn an_answer_past_the_message_bound_fails_at_once_as_too_large() {
    run(async {
        let source = start(&raw_config(json!({})), &[]).await;
        let lease = source.lease_current_typed().await.unwrap();
        let cancel = CancellationToken::new();
        // The id first (found as the bound is passed) and last (found as the line ends).
        for (bytes, id_last) in [
            (MAX_MESSAGE_BYTES + 1, false),
            (3 * MAX_MESSAGE_BYTES, true),
        ] {
            let started = Instant::now();
            let error = execution(
                call(
                    &lease,
                    "fault.sized",
                    json!({"bytes": bytes, "id_last": id_last}),
                    &cancel,
                )
                .await
                .unwrap_err(),
            );
            // A timeout would have been uncertain (`sized` is mutating) and a CallInterrupted.
            assert!(started.elapsed() < CALL_TIMEOUT);
            assert_eq!(error.state(), ExecutionState::Definitive, "{error}");
            assert!(
                matches!(mcp_cause(&error), McpError::AnswerTooLarge { server, tool, limit }
                    if server == "fault" && tool == "sized" && *limit == MAX_MESSAGE_BYTES),
                "{error}"
            );
        }
        // The stream is in step again: the next answer is read.
        let result = call(&lease, "fault.sized", json!({"bytes": 200}), &cancel)
            .await
            .unwrap();
        assert!(!result.is_problem());
        lease.release(&cancel).await.unwrap();
        source.shutdown().await;
    });
}

#[test]
fn a_server_with_an_unsupported_protocol_version_is_refused() {
    run(async {
        let error = McpToolPlanSource::start(
            &raw_config(json!({"FAULT_PROTOCOL_VERSION": "1999-01-01"})),
            compiled(&[]),
            vec![],
            vec![],
            quick_options(),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&error, McpError::UnsupportedProtocol { server, version }
                if server == "fault" && version == "1999-01-01"),
            "{error}"
        );
        assert!(error.to_string().contains("1999-01-01"), "{error}");
        // The server chose the text: at most 64 characters of it are quoted.
        for (length, quoted) in [(64, 64), (65, 64), (10_000, 64)] {
            let version = "9".repeat(length);
            let error = McpToolPlanSource::start(
                &raw_config(json!({"FAULT_PROTOCOL_VERSION": version})),
                compiled(&[]),
                vec![],
                vec![],
                quick_options(),
            )
            .await
            .unwrap_err();
            assert!(
                matches!(&error, McpError::UnsupportedProtocol { version, .. }
                    if version.chars().count() == quoted),
                "{error}"
            );
        }
        // The same server answering with the version asked for is accepted.
        let source = start(&raw_config(json!({})), &[]).await;
        let tools = source.current_tools().unwrap();
        assert!(tools.iter().any(|t| t.name() == "fault.sized"));
        source.shutdown().await;
    });
}
