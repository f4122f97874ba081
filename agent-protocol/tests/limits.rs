//! Every named bound of `agent_protocol::limits`, at the bound and one past it.

mod support;

use agent_protocol::initialize::{
    OwnershipGrant, complete_initialize, preflight_initialize, validate_initialize_request,
};
use agent_protocol::limits::*;
use agent_protocol::negotiate::{
    is_implemented, validate_attempt_request, validate_capability_names, version,
};
use agent_protocol::pb::common::v1::{ErrorCode, Status};
use agent_protocol::pb::engine::v1::{
    AgentDefinitionRef, CancelRunRequest, ContentPart, Definition, DefinitionSet,
    ExportSnapshotRequest, Message, MessageRole, ReconnectClaim, RespondInteractionRequest,
    SnapshotAuthority, SnapshotEnvelope, SnapshotLifecycle, StartRunRequest, ToolCallPart,
    content_part::Value,
};
use agent_protocol::requests::*;
use agent_protocol::snapshot::{validate_snapshot_envelope, validate_snapshot_envelope_bytes};
use agent_protocol::status::validate_status;
use prost::Message as _;
use sha2::{Digest, Sha256};
use support::*;

fn s(n: usize) -> String {
    "a".repeat(n)
}

/// A JSON string document of exactly `n` bytes.
fn json(n: usize) -> Vec<u8> {
    format!("\"{}\"", "x".repeat(n - 2)).into_bytes()
}

fn start(parts: Vec<ContentPart>) -> StartRunRequest {
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
            parts,
        }),
    }
}

fn text(t: String) -> ContentPart {
    ContentPart {
        value: Some(Value::Text(t)),
    }
}

#[test]
fn protocol_minors() {
    assert!(is_implemented(&version(
        PROTOCOL_MAJOR,
        PROTOCOL_MAXIMUM_MINOR,
        0
    )));
    assert!(!is_implemented(&version(
        PROTOCOL_MAJOR,
        PROTOCOL_MAXIMUM_MINOR + 1,
        0
    )));
    assert!(is_implemented(&version(
        PROTOCOL_MAJOR,
        PROTOCOL_MINIMUM_MINOR,
        0
    )));
    assert!(!is_implemented(&version(PROTOCOL_MAJOR + 1, 0, 0)));
    let export = ExportSnapshotRequest {
        client_id: "c".into(),
        ownership_epoch: 1,
        run_id: "r".into(),
    };
    let mut n = negotiated(SNAPSHOT_TRANSFER_MINIMUM_MINOR);
    assert!(validate_export_snapshot_request(&export, &n).is_ok());
    n.protocol.minor = SNAPSHOT_TRANSFER_MINIMUM_MINOR - 1;
    assert!(validate_export_snapshot_request(&export, &n).is_err());
    let raw = agent_protocol::pb::engine::v1::StreamInteractionsRequest {
        client_id: "c".into(),
        ownership_epoch: 1,
        tail: false,
    }
    .encode_to_vec();
    assert!(
        validate_stream_interactions_request(&raw, &negotiated(INTERACTION_STREAM_MINIMUM_MINOR))
            .is_ok()
    );
    assert!(
        validate_stream_interactions_request(
            &raw,
            &negotiated(INTERACTION_STREAM_MINIMUM_MINOR - 1)
        )
        .is_err()
    );
}

#[test]
fn attempt_minor_and_length() {
    let id = [1u8; INITIALIZATION_ATTEMPT_ID_BYTES];
    let at = version(1, INITIALIZATION_ATTEMPT_MINIMUM_MINOR, 0);
    let below = version(1, INITIALIZATION_ATTEMPT_MINIMUM_MINOR - 1, 0);
    assert!(validate_attempt_request(&at, &at, &id).is_ok());
    assert!(
        validate_attempt_request(&at, &at, &[1u8; INITIALIZATION_ATTEMPT_ID_BYTES + 1]).is_err()
    );
    assert!(validate_attempt_request(&below, &below, &id).is_err());
    assert!(validate_attempt_request(&below, &below, &[]).is_ok());
}

#[test]
fn capability_count_and_name_length() {
    let names = |n: usize| (0..n).map(|i| format!("cap-{i:05}")).collect::<Vec<_>>();
    assert!(validate_capability_names(&names(MAX_CAPABILITIES)).is_ok());
    assert!(validate_capability_names(&names(MAX_CAPABILITIES + 1)).is_err());
    assert!(validate_capability_names(&[s(MAX_CAPABILITY_NAME_BYTES)]).is_ok());
    assert!(validate_capability_names(&[s(MAX_CAPABILITY_NAME_BYTES + 1)]).is_err());
}

#[test]
fn id_and_name_lengths() {
    assert!(validate_client_fields(&s(MAX_ID_BYTES), 1).is_ok());
    assert!(validate_client_fields(&s(MAX_ID_BYTES + 1), 1).is_err());
    assert!(validate_run_id(&s(MAX_ID_BYTES)).is_ok());
    assert!(validate_run_id(&s(MAX_ID_BYTES + 1)).is_err());
    let def = |id: String| Definition {
        id,
        revision: "1".into(),
        model: "m".into(),
        max_turns: 1,
    };
    assert!(validate_definition(&def(s(MAX_NAME_BYTES))).is_ok());
    assert!(validate_definition(&def(s(MAX_NAME_BYTES + 1))).is_err());
}

#[test]
fn status_message_length() {
    let status = |n| Status {
        code: ErrorCode::Conflict as i32,
        message: s(n),
        ..Default::default()
    };
    assert!(validate_status(&status(MAX_STATUS_MESSAGE_BYTES)).is_ok());
    assert!(validate_status(&status(MAX_STATUS_MESSAGE_BYTES + 1)).is_err());
}

#[test]
fn cancel_reason_length() {
    let n = negotiated(2);
    let cancel = |reason| CancelRunRequest {
        client_id: "c".into(),
        ownership_epoch: 1,
        client_operation_id: "o".into(),
        run_id: "r".into(),
        reason,
    };
    assert!(validate_cancel_run_request(&cancel(String::new()), &n).is_ok());
    assert!(validate_cancel_run_request(&cancel(s(MAX_CANCEL_REASON_BYTES)), &n).is_ok());
    assert!(validate_cancel_run_request(&cancel(s(MAX_CANCEL_REASON_BYTES + 1)), &n).is_err());
}

#[test]
fn json_and_text_sizes() {
    let n = negotiated(2);
    assert!(validate_start_run_request(&start(vec![text(s(MAX_JSON_BYTES))]), &n).is_ok());
    assert!(validate_start_run_request(&start(vec![text(s(MAX_JSON_BYTES + 1))]), &n).is_err());
    let tool = |j| ContentPart {
        value: Some(Value::ToolCall(ToolCallPart {
            call_id: "c".into(),
            name: "read".into(),
            arguments_json: j,
        })),
    };
    assert!(validate_start_run_request(&start(vec![tool(json(MAX_JSON_BYTES))]), &n).is_ok());
    assert!(validate_start_run_request(&start(vec![tool(json(MAX_JSON_BYTES + 1))]), &n).is_err());
    let respond = |v| RespondInteractionRequest {
        client_id: "c".into(),
        ownership_epoch: 1,
        client_operation_id: "o".into(),
        run_id: "r".into(),
        interaction_id: "i".into(),
        value_json: v,
    };
    assert!(
        validate_respond_interaction_request(&respond(json(MAX_INTERACTION_PAYLOAD_BYTES)), &n)
            .is_ok()
    );
    assert!(
        validate_respond_interaction_request(&respond(json(MAX_INTERACTION_PAYLOAD_BYTES + 1)), &n)
            .is_err()
    );
}

#[test]
fn message_part_count() {
    let n = negotiated(2);
    let parts = |k: usize| (0..k).map(|_| text("hi".into())).collect::<Vec<_>>();
    assert!(validate_start_run_request(&start(parts(MIN_MESSAGE_PARTS - 1)), &n).is_err());
    assert!(validate_start_run_request(&start(parts(MIN_MESSAGE_PARTS)), &n).is_ok());
    assert!(validate_start_run_request(&start(parts(MAX_MESSAGE_PARTS)), &n).is_ok());
    assert!(validate_start_run_request(&start(parts(MAX_MESSAGE_PARTS + 1)), &n).is_err());
    // ...and the negotiated collection limit applies as well.
    let mut few = negotiated(2);
    few.limits.max_collection_items = 2;
    assert!(validate_start_run_request(&start(parts(2)), &few).is_ok());
    assert!(validate_start_run_request(&start(parts(3)), &few).is_err());
}

#[test]
fn definition_turns() {
    let def = |t| Definition {
        id: "d".into(),
        revision: "1".into(),
        model: "m".into(),
        max_turns: t,
    };
    assert!(validate_definition(&def(MIN_DEFINITION_TURNS - 1)).is_err());
    assert!(validate_definition(&def(MIN_DEFINITION_TURNS)).is_ok());
    assert!(validate_definition(&def(MAX_DEFINITION_TURNS)).is_ok());
    assert!(validate_definition(&def(MAX_DEFINITION_TURNS + 1)).is_err());
    let set = |k: u32| DefinitionSet {
        revision: "r".into(),
        definitions: (0..k)
            .map(|i| Definition {
                id: format!("d{i:03}"),
                ..def(1)
            })
            .collect(),
    };
    assert!(validate_definition_set(Some(&set(3)), 3, u64::MAX).is_ok());
    assert!(validate_definition_set(Some(&set(4)), 3, u64::MAX).is_err());
    assert!(validate_definition_set(Some(&set(0)), 3, u64::MAX).is_err());
    let len = set(3).encoded_len() as u64;
    assert!(validate_definition_set(Some(&set(3)), 3, len).is_ok());
    assert!(validate_definition_set(Some(&set(3)), 3, len - 1).is_err());
}

#[test]
fn reconnect_epoch_and_preview_client_id() {
    let mut req = request(0, 2);
    req.reconnect_claim = Some(ReconnectClaim {
        client_id: "c".into(),
        expected_ownership_epoch: MAX_RECONNECT_EXPECTED_EPOCH,
    });
    assert!(validate_initialize_request(&req).is_ok());
    req.reconnect_claim
        .as_mut()
        .unwrap()
        .expected_ownership_epoch = MAX_RECONNECT_EXPECTED_EPOCH + 1;
    assert!(validate_initialize_request(&req).is_err());
    let fresh = request(0, 2);
    let server = server();
    let plan = preflight_initialize(&fresh, &server).unwrap();
    let ok = complete_initialize(
        &plan,
        &server,
        OwnershipGrant {
            client_id: s(PREVIEW_CLIENT_ID_BYTES),
            epoch: 1,
        },
    );
    assert_eq!(ok.status.unwrap().code, ErrorCode::Ok as i32);
    let bad = complete_initialize(
        &plan,
        &server,
        OwnershipGrant {
            client_id: s(PREVIEW_CLIENT_ID_BYTES + 1),
            epoch: 1,
        },
    );
    assert_eq!(bad.status.unwrap().code, ErrorCode::Internal as i32);
}

fn envelope_with_payload_len(n: usize) -> SnapshotEnvelope {
    let head = b"{\"run_id\":\"run-1\",\"p\":\"";
    let mut payload = head.to_vec();
    payload.resize(n - 2, b'x');
    payload.extend(b"\"}");
    SnapshotEnvelope {
        format: SNAPSHOT_FORMAT.into(),
        run_id: "run-1".into(),
        last_sequence: 1,
        lifecycle: SnapshotLifecycle::Suspended as i32,
        sha256: Sha256::digest(&payload).to_vec(),
        payload,
        authority: Some(SnapshotAuthority {
            scope_id: vec![1; SNAPSHOT_AUTHORITY_DIGEST_BYTES],
            generation: 1,
            hmac_sha256: vec![2; SNAPSHOT_AUTHORITY_DIGEST_BYTES],
        }),
    }
}

#[test]
fn snapshot_payload_envelope_and_digest_sizes() {
    let at = envelope_with_payload_len(MAXIMUM_SNAPSHOT_BYTES);
    assert!(validate_snapshot_envelope(&at).is_ok());
    assert!(at.encoded_len() <= MAXIMUM_SNAPSHOT_ENVELOPE_BYTES);
    assert!(
        validate_snapshot_envelope(&envelope_with_payload_len(MAXIMUM_SNAPSHOT_BYTES + 1)).is_err()
    );
    // The raw envelope bound is checked before decoding.
    let raw = |total: usize| {
        let mut raw = vec![0x2a]; // field 5 (payload), length-delimited
        let len = total - 1 - 4;
        raw.extend([
            (len as u8 & 0x7f) | 0x80,
            ((len >> 7) as u8 & 0x7f) | 0x80,
            ((len >> 14) as u8 & 0x7f) | 0x80,
            (len >> 21) as u8,
        ]);
        raw.resize(total, b'x');
        raw
    };
    let size_error = "snapshot envelope exceeds its maximum size";
    assert_ne!(
        validate_snapshot_envelope_bytes(&raw(MAXIMUM_SNAPSHOT_ENVELOPE_BYTES))
            .unwrap_err()
            .message(),
        size_error
    );
    assert_eq!(
        validate_snapshot_envelope_bytes(&raw(MAXIMUM_SNAPSHOT_ENVELOPE_BYTES + 1))
            .unwrap_err()
            .message(),
        size_error
    );
    assert_eq!(
        MAXIMUM_SNAPSHOT_ENVELOPE_BYTES,
        16 * 1024 * 1024 + MAXIMUM_SNAPSHOT_ENVELOPE_OVERHEAD_BYTES
    );
    let mut long = envelope_with_payload_len(64);
    long.authority.as_mut().unwrap().hmac_sha256.push(0);
    assert!(validate_snapshot_envelope(&long).is_err());
    assert!(validate_snapshot_envelope(&envelope_with_payload_len(64)).is_ok());
}

#[test]
fn the_verbatim_constants() {
    assert_eq!(INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES, 1_048_576);
    assert_eq!(MAXIMUM_SNAPSHOT_BYTES, 16_777_216);
    assert_eq!(MAXIMUM_SNAPSHOT_ENVELOPE_OVERHEAD_BYTES, 295);
    assert_eq!(INTERACTION_STREAM_MINIMUM_MINOR, 2);
    assert_eq!(INITIALIZATION_ATTEMPT_MINIMUM_MINOR, 3);
    assert_eq!(INITIALIZATION_ATTEMPT_ID_BYTES, 16);
    assert_eq!(CAPABILITY_SNAPSHOT_AUTHORITY, "snapshot-authority-v1");
    assert_eq!(SNAPSHOT_FORMAT, "spice.agent.snapshot/v1alpha3");
}
