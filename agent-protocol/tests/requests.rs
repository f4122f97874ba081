//! Request validators not covered by the bound tests.

mod support;

use agent_protocol::pb::common::v1::ErrorCode;
use agent_protocol::pb::engine::v1::{
    AgentDefinitionRef, ContentPart, Definition, DefinitionSet, ExtensionPart, HealthRequest,
    Message, MessageRole, StartRunRequest, StreamEventsRequest, content_part::Value,
};
use agent_protocol::requests::*;
use prost::Message as _;
use support::*;

fn start() -> StartRunRequest {
    StartRunRequest {
        client_id: "c".into(),
        ownership_epoch: 1,
        client_operation_id: "op".into(),
        definition: Some(AgentDefinitionRef {
            id: "coder".into(),
            revision: "1".into(),
        }),
        input: Some(Message {
            id: "m".into(),
            role: MessageRole::User as i32,
            parts: vec![ContentPart {
                value: Some(Value::Text("hi".into())),
            }],
        }),
    }
}

#[test]
fn start_run_needs_a_user_message_and_fits_the_size() {
    let n = negotiated(2);
    assert!(validate_start_run_request(&start(), &n).is_ok());
    let mut r = start();
    r.input.as_mut().unwrap().role = MessageRole::Assistant as i32;
    assert_eq!(
        validate_start_run_request(&r, &n).unwrap_err().message(),
        "input message role must be USER"
    );
    r.input.as_mut().unwrap().role = 9;
    assert_eq!(
        validate_start_run_request(&r, &n).unwrap_err().message(),
        "message role is unknown"
    );
    let mut r = start();
    r.ownership_epoch = 0;
    assert!(validate_start_run_request(&r, &n).is_err());
    let mut r = start();
    r.client_operation_id = String::new();
    assert!(validate_start_run_request(&r, &n).is_err());
    let mut r = start();
    r.definition = None;
    assert!(validate_start_run_request(&r, &n).is_err());
    let mut r = start();
    r.input.as_mut().unwrap().parts = vec![ContentPart { value: None }];
    assert!(validate_start_run_request(&r, &n).is_err());
    r.input.as_mut().unwrap().parts = vec![ContentPart {
        value: Some(Value::Extension(ExtensionPart {
            namespace: "x.y".into(),
            value_json: b"[1]".to_vec(),
        })),
    }];
    assert!(validate_start_run_request(&r, &n).is_ok());
    let mut tight = negotiated(2);
    tight.limits.max_message_bytes = start().encoded_len() as u64;
    assert!(validate_start_run_request(&start(), &tight).is_ok());
    tight.limits.max_message_bytes -= 1;
    assert!(validate_start_run_request(&start(), &tight).is_err());
}

#[test]
fn stream_events_replay_limit_lies_within_the_negotiated_events() {
    let n = negotiated(2);
    let r = |limit| StreamEventsRequest {
        client_id: "c".into(),
        ownership_epoch: 1,
        run_id: "r".into(),
        after_sequence: 0,
        replay_limit: limit,
        tail: true,
    };
    assert!(validate_stream_events_request(&r(0), &n).is_err());
    assert!(validate_stream_events_request(&r(1), &n).is_ok());
    assert!(validate_stream_events_request(&r(n.limits.max_replay_events), &n).is_ok());
    assert!(validate_stream_events_request(&r(n.limits.max_replay_events + 1), &n).is_err());
    let h = HealthRequest {
        client_id: "c".into(),
        ownership_epoch: 1,
    };
    assert!(validate_health_request(&h, &n).is_ok());
    assert!(
        validate_health_request(
            &HealthRequest {
                ownership_epoch: 0,
                ..h
            },
            &n
        )
        .is_err()
    );
}

#[test]
fn definitions_are_sorted_and_resolved_exactly() {
    let d = |id: &str, rev: &str| Definition {
        id: id.into(),
        revision: rev.into(),
        model: "m".into(),
        max_turns: 3,
    };
    let set = DefinitionSet {
        revision: "s".into(),
        definitions: vec![d("a", "1"), d("a", "2"), d("b", "1")],
    };
    assert!(validate_definition_set(Some(&set), 10, u64::MAX).is_ok());
    assert_eq!(resolve_definition(&set, "a", "2").unwrap(), d("a", "2"));
    assert_eq!(
        resolve_definition(&set, "a", "3").unwrap_err().code(),
        ErrorCode::NotFound
    );
    let unsorted = DefinitionSet {
        revision: "s".into(),
        definitions: vec![d("b", "1"), d("a", "1")],
    };
    assert!(validate_definition_set(Some(&unsorted), 10, u64::MAX).is_err());
    let duplicate = DefinitionSet {
        revision: "s".into(),
        definitions: vec![d("a", "1"), d("a", "1")],
    };
    assert!(validate_definition_set(Some(&duplicate), 10, u64::MAX).is_err());
}
