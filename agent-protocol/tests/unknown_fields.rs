//! Unknown and reserved fields: additive decoding, the wire walker, the
//! envelope-root rule and the import request's structure.

mod support;

use agent_protocol::Negotiated;
use agent_protocol::Violation;
use agent_protocol::limits::{CAPABILITY_SNAPSHOTS, SNAPSHOT_FORMAT};
use agent_protocol::pb::common::v1::{ErrorCode, Limits};
use agent_protocol::pb::engine::v1::{
    AgentDefinitionRef, ImportSnapshotRequest, RunEvent, SnapshotAuthority, SnapshotEnvelope,
    SnapshotLifecycle,
};
use agent_protocol::snapshot::{
    SnapshotVerifier, validate_import_snapshot_request, validate_import_snapshot_request_structure,
    validate_snapshot_envelope, validate_snapshot_envelope_bytes,
};
use agent_protocol::wire::{Malformed, fields, unknown_field_numbers};
use prost::Message as _;
use sha2::{Digest, Sha256};
use support::*;

#[test]
fn unknown_fields_survive_additive_round_trip() {
    // A newer peer's extra field (number 20, varint) decodes: known fields are
    // kept, the extra one is visible to the walker. prost does not re-emit it
    // (see docs/decisions.md), so the walker is how rules see it.
    let limits = Limits {
        max_message_bytes: 1,
        ..Default::default()
    };
    let mut raw = limits.encode_to_vec();
    raw.extend([0xa0, 0x01, 0x2a]);
    assert_eq!(Limits::decode(raw.as_slice()).unwrap(), limits);
    assert_eq!(
        unknown_field_numbers(&raw, &[1, 2, 3, 4, 5, 6]).unwrap(),
        [20]
    );
}

#[test]
fn the_walker_reads_every_wire_type_and_refuses_broken_bytes() {
    let raw = [
        0x08, 0x96, 0x01, // 1: varint 150
        0x11, 1, 2, 3, 4, 5, 6, 7, 8, // 2: fixed64
        0x1a, 0x02, b'h', b'i', // 3: bytes
        0x23, 0x08, 0x01, 0x24, // 4: group holding field 1, then end group 4
        0x2d, 1, 2, 3, 4, // 5: fixed32
    ];
    let got: Vec<(u32, u8)> = fields(&raw)
        .unwrap()
        .iter()
        .map(|f| (f.number, f.wire_type))
        .collect();
    assert_eq!(got, [(1, 0), (2, 1), (3, 2), (4, 3), (5, 5)]);
    assert_eq!(fields(&raw).unwrap()[2].value, b"hi");
    for broken in [
        &[0x08][..],         // varint cut off
        &[0x1a, 0x05, b'x'], // length past the end
        &[0x00, 0x01],       // field number 0
        &[0x0e, 0x01],       // wire type 6
        &[0x23, 0x08, 0x01], // group never ends
        &[0x23, 0x2c],       // group ends with another number
        &[0x0c],             // end group with no start
        &[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
        ], // varint over 64 bits
    ] {
        assert_eq!(fields(broken), Err(Malformed), "{broken:?}");
    }
}

#[test]
fn provisional_schema_reservations_prevent_semantic_reuse() {
    // Bytes from an old client that still sets AgentDefinitionRef.model (3)
    // and RunEvent.operation_id (7): nothing in our types reads them.
    let mut raw = AgentDefinitionRef {
        id: "coder".into(),
        revision: "1".into(),
    }
    .encode_to_vec();
    raw.extend([0x1a, 0x01, b'm', 0x20, 0x05]);
    let decoded = AgentDefinitionRef::decode(raw.as_slice()).unwrap();
    assert_eq!(
        decoded.encode_to_vec(),
        AgentDefinitionRef {
            id: "coder".into(),
            revision: "1".into()
        }
        .encode_to_vec()
    );
    let mut raw = RunEvent {
        sequence: 1,
        ..Default::default()
    }
    .encode_to_vec();
    raw.extend([0x3a, 0x02, b'o', b'p']);
    assert_eq!(
        RunEvent::decode(raw.as_slice()).unwrap(),
        RunEvent {
            sequence: 1,
            ..Default::default()
        }
    );
    // The descriptor test (tests/wire_table.rs) asserts the reserved numbers and names.
}

fn envelope(lifecycle: SnapshotLifecycle) -> SnapshotEnvelope {
    let payload =
        format!("{{\"version\":\"{SNAPSHOT_FORMAT}\",\"run_id\":\"run-1\"}}").into_bytes();
    SnapshotEnvelope {
        format: SNAPSHOT_FORMAT.into(),
        run_id: "run-1".into(),
        last_sequence: 42,
        lifecycle: lifecycle as i32,
        sha256: Sha256::digest(&payload).to_vec(),
        payload,
        authority: Some(SnapshotAuthority {
            scope_id: vec![0x11; 32],
            generation: 7,
            hmac_sha256: vec![0x22; 32],
        }),
    }
}

#[test]
fn snapshot_envelope_structure() {
    assert!(validate_snapshot_envelope(&envelope(SnapshotLifecycle::Suspended)).is_ok());
    type Edit = fn(&mut SnapshotEnvelope);
    let edits: [(&str, Edit); 11] = [
        ("format", |e| {
            e.format = "spice.agent.snapshot/v1alpha2".into()
        }),
        ("run id", |e| e.run_id = String::new()),
        ("sequence 0", |e| e.last_sequence = 0),
        ("sequence max", |e| e.last_sequence = u64::MAX),
        ("unknown lifecycle", |e| e.lifecycle = 5),
        ("unspecified lifecycle", |e| e.lifecycle = 0),
        ("digest", |e| e.sha256[0] ^= 1),
        ("payload run id", |e| {
            e.payload = b"{\"run_id\":\"run-2\"}".to_vec();
            e.sha256 = Sha256::digest(&e.payload).to_vec();
        }),
        ("scope length", |e| {
            e.authority
                .as_mut()
                .unwrap()
                .scope_id
                .pop()
                .map(drop)
                .unwrap_or(())
        }),
        ("generation", |e| {
            e.authority.as_mut().unwrap().generation = 0
        }),
        ("no authority", |e| e.authority = None),
    ];
    for (name, edit) in edits {
        let mut e = envelope(SnapshotLifecycle::Suspended);
        edit(&mut e);
        assert!(validate_snapshot_envelope(&e).is_err(), "{name}");
    }
}

#[test]
fn unknown_fields_at_the_envelope_root_are_refused() {
    let raw = envelope(SnapshotLifecycle::Suspended).encode_to_vec();
    assert!(validate_snapshot_envelope_bytes(&raw).is_ok());
    let mut extra = raw.clone();
    extra.extend([0x40, 0x01]); // field 8
    assert_eq!(
        validate_snapshot_envelope_bytes(&extra)
            .unwrap_err()
            .message(),
        "snapshot envelope carries unknown fields outside its MAC"
    );
}

fn snapshot_negotiated() -> Negotiated {
    negotiated(2)
}

struct Accept;
impl SnapshotVerifier for Accept {
    fn verify(&self, _: &SnapshotEnvelope) -> Result<(), Violation> {
        Ok(())
    }
}
struct Refuse;
impl SnapshotVerifier for Refuse {
    fn verify(&self, _: &SnapshotEnvelope) -> Result<(), Violation> {
        Err(Violation::invalid("snapshot verification failed"))
    }
}

fn import(lifecycle: SnapshotLifecycle) -> ImportSnapshotRequest {
    ImportSnapshotRequest {
        client_id: "c".into(),
        ownership_epoch: 1,
        client_operation_id: "op".into(),
        snapshot: Some(envelope(lifecycle)),
    }
}

#[test]
fn import_checks_structure_first_then_the_verifier() {
    let n = snapshot_negotiated();
    let raw = import(SnapshotLifecycle::Suspended).encode_to_vec();
    assert!(validate_import_snapshot_request(&raw, &n, Some(&Accept)).is_ok());
    assert!(validate_import_snapshot_request(&raw, &n, Some(&Refuse)).is_err());
    assert!(
        validate_import_snapshot_request(&raw, &n, None).is_err(),
        "no verifier never passes"
    );
    // Structure fails before verification is consulted.
    let done = import(SnapshotLifecycle::Completed).encode_to_vec();
    assert_eq!(
        validate_import_snapshot_request(&done, &n, Some(&Accept))
            .unwrap_err()
            .message(),
        "only a SUSPENDED snapshot can be imported"
    );
    // An unknown field inside the nested envelope is refused; one on the
    // request itself is allowed but counts toward the size.
    let mut inner = envelope(SnapshotLifecycle::Suspended).encode_to_vec();
    inner.extend([0x40, 0x01]);
    let mut nested = import(SnapshotLifecycle::Suspended);
    nested.snapshot = None;
    let mut raw_nested = nested.encode_to_vec();
    raw_nested.push(0x3a);
    raw_nested.push(inner.len() as u8 | 0x80);
    raw_nested.push((inner.len() >> 7) as u8);
    raw_nested.extend(&inner);
    assert!(validate_import_snapshot_request_structure(&raw_nested, &n).is_err());
    let mut outer = raw.clone();
    outer.extend([0x50, 0x01]); // field 10 on the request
    assert!(validate_import_snapshot_request_structure(&outer, &n).is_ok());
    let mut tight = snapshot_negotiated();
    tight.limits.max_message_bytes = raw.len() as u64;
    assert!(validate_import_snapshot_request_structure(&raw, &tight).is_ok());
    assert!(validate_import_snapshot_request_structure(&outer, &tight).is_err());
}

#[test]
fn snapshot_rpcs_need_the_snapshot_capabilities() {
    let raw = import(SnapshotLifecycle::Suspended).encode_to_vec();
    let mut n = snapshot_negotiated();
    n.capabilities.retain(|c| c == CAPABILITY_SNAPSHOTS);
    let err = validate_import_snapshot_request_structure(&raw, &n).unwrap_err();
    assert_eq!(err.code(), ErrorCode::MissingCapability);
    agent_protocol::status::validate_status(&err.into_status()).unwrap();
    let export = agent_protocol::pb::engine::v1::ExportSnapshotRequest {
        client_id: "c".into(),
        ownership_epoch: 1,
        run_id: "r".into(),
    };
    assert!(
        agent_protocol::requests::validate_export_snapshot_request(&export, &snapshot_negotiated())
            .is_ok()
    );
    assert_eq!(
        agent_protocol::requests::validate_export_snapshot_request(&export, &n)
            .unwrap_err()
            .code(),
        ErrorCode::MissingCapability
    );
    // Minor 0 has no snapshot transfer even with the names enabled.
    let mut zero = snapshot_negotiated();
    zero.protocol.minor = 0;
    assert_eq!(
        agent_protocol::requests::validate_export_snapshot_request(&export, &zero)
            .unwrap_err()
            .code(),
        ErrorCode::MissingCapability
    );
}
