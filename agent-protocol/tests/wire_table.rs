//! Wire compatibility: the compiled descriptor set matches every row of the
//! original's wire table, and a few messages encode to hand-computed bytes.

#[rustfmt::skip]
#[path = "wire_table/table.rs"]
mod table;

use std::collections::BTreeSet;

use agent_protocol::pb::FILE_DESCRIPTOR_SET;
use agent_protocol::pb::common::v1 as common;
use agent_protocol::pb::engine::v1 as engine;
use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet};

fn descriptor_set() -> FileDescriptorSet {
    FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("descriptor set decodes")
}

fn messages(fds: &FileDescriptorSet) -> Vec<(String, &DescriptorProto)> {
    fds.file
        .iter()
        .flat_map(|f| {
            f.message_type
                .iter()
                .map(move |m| (format!("{}.{}", f.package(), m.name()), m))
        })
        .collect()
}

fn type_name(f: &prost_types::FieldDescriptorProto) -> String {
    match f.r#type() {
        Type::Message | Type::Enum => f.type_name().trim_start_matches('.').to_owned(),
        Type::String => "string".into(),
        Type::Bytes => "bytes".into(),
        Type::Bool => "bool".into(),
        Type::Uint32 => "uint32".into(),
        Type::Uint64 => "uint64".into(),
        Type::Int64 => "int64".into(),
        other => format!("{other:?}"),
    }
}

#[test]
fn every_field_matches_the_wire_table_and_nothing_else_exists() {
    let fds = descriptor_set();
    let mut compiled = BTreeSet::new();
    for (full, m) in messages(&fds) {
        assert!(
            m.nested_type.is_empty(),
            "{full} has nested messages the table does not list"
        );
        for f in &m.field {
            let label = if f.proto3_optional() {
                "optional"
            } else if f.label() == Label::Repeated {
                "repeated"
            } else {
                ""
            };
            let oneof = match (f.oneof_index, f.proto3_optional()) {
                (Some(i), false) => m.oneof_decl[i as usize].name().to_owned(),
                _ => String::new(),
            };
            compiled.insert((
                full.clone(),
                f.number(),
                f.name().to_owned(),
                type_name(f),
                label.to_owned(),
                oneof,
            ));
        }
    }
    let expected: BTreeSet<_> = table::FIELDS
        .iter()
        .map(|&(m, n, name, ty, label, oneof)| {
            (
                m.to_owned(),
                n,
                name.to_owned(),
                ty.to_owned(),
                label.to_owned(),
                oneof.to_owned(),
            )
        })
        .collect();
    let missing: Vec<_> = expected.difference(&compiled).collect();
    let extra: Vec<_> = compiled.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:#?}\nextra {extra:#?}"
    );
    assert_eq!(expected.len(), 206, "the table has 206 field rows");
}

#[test]
fn every_enum_value_matches_the_wire_table() {
    let fds = descriptor_set();
    let compiled: BTreeSet<(String, String, i32)> = fds
        .file
        .iter()
        .flat_map(|f| {
            f.enum_type.iter().flat_map(move |e| {
                e.value.iter().map(move |v| {
                    (
                        format!("{}.{}", f.package(), e.name()),
                        v.name().to_owned(),
                        v.number(),
                    )
                })
            })
        })
        .collect();
    let expected: BTreeSet<_> = table::ENUM_VALUES
        .iter()
        .map(|&(e, n, v)| (e.to_owned(), n.to_owned(), v))
        .collect();
    assert_eq!(compiled, expected);
    assert_eq!(expected.len(), 55);
}

#[test]
fn reserved_numbers_and_names_match_and_stay_unused() {
    let fds = descriptor_set();
    let all = messages(&fds);
    let mut with_reservations = BTreeSet::new();
    for (full, m) in &all {
        let numbers: BTreeSet<i32> = m
            .reserved_range
            .iter()
            .flat_map(|r| r.start()..r.end()) // end is exclusive in descriptors
            .collect();
        let names: BTreeSet<String> = m.reserved_name.iter().cloned().collect();
        if numbers.is_empty() && names.is_empty() {
            continue;
        }
        with_reservations.insert(full.clone());
        let (_, want_numbers, want_names) = table::RESERVED
            .iter()
            .find(|(name, _, _)| name == full)
            .unwrap_or_else(|| panic!("{full} reserves nothing in the table"));
        assert_eq!(
            numbers,
            want_numbers.iter().copied().collect(),
            "{full} reserved numbers"
        );
        assert_eq!(
            names,
            want_names.iter().map(|s| s.to_string()).collect(),
            "{full} reserved names"
        );
        // A reserved number or name is never a live field.
        assert!(
            m.field
                .iter()
                .all(|f| !numbers.contains(&f.number()) && !names.contains(f.name()))
        );
    }
    let expected: BTreeSet<String> = table::RESERVED
        .iter()
        .map(|(m, _, _)| m.to_string())
        .collect();
    assert_eq!(with_reservations, expected);
}

#[test]
fn service_and_rpcs_match_the_wire_table() {
    let fds = descriptor_set();
    let mut compiled = BTreeSet::new();
    for f in &fds.file {
        for s in &f.service {
            for m in &s.method {
                let streaming = match (m.client_streaming(), m.server_streaming()) {
                    (false, false) => "unary",
                    (false, true) => "server",
                    (true, false) => "client",
                    (true, true) => "bidi",
                };
                compiled.insert((
                    format!("{}.{}", f.package(), s.name()),
                    m.name().to_owned(),
                    m.input_type().trim_start_matches('.').to_owned(),
                    m.output_type().trim_start_matches('.').to_owned(),
                    streaming.to_owned(),
                ));
            }
        }
    }
    let expected: BTreeSet<_> = table::RPCS
        .iter()
        .map(|&(s, r, i, o, k)| {
            (
                s.to_owned(),
                r.to_owned(),
                i.to_owned(),
                o.to_owned(),
                k.to_owned(),
            )
        })
        .collect();
    assert_eq!(compiled, expected);
}

#[test]
fn files_and_packages_are_the_originals() {
    let fds = descriptor_set();
    let files: Vec<(&str, &str)> = fds.file.iter().map(|f| (f.name(), f.package())).collect();
    assert_eq!(
        files,
        [
            (
                "spice/agent/common/v1/common.proto",
                "spice.agent.common.v1"
            ),
            (
                "spice/agent/engine/v1/engine.proto",
                "spice.agent.engine.v1"
            ),
        ]
    );
}

#[test]
fn the_generated_client_names_the_original_rpc_paths() {
    // tonic builds "/package.Service/Method" paths from the descriptor; the
    // generated server routes exactly these.
    let source = include_str!(concat!(env!("OUT_DIR"), "/spice.agent.engine.v1.rs"));
    for (_, rpc, _, _, _) in table::RPCS {
        let path = format!("\"/spice.agent.engine.v1.EngineService/{rpc}\"");
        assert!(source.contains(&path), "missing route {path}");
    }
}

// Hand-computed encodings: key byte = (field number << 3) | wire type.

#[test]
fn protocol_version_encodes_as_three_varints() {
    let v = common::ProtocolVersion {
        major: 1,
        minor: 3,
        patch: 0,
    };
    // 0x08 = field 1 varint, 0x10 = field 2 varint; patch 0 is omitted (proto3 default).
    assert_eq!(v.encode_to_vec(), [0x08, 0x01, 0x10, 0x03]);
}

#[test]
fn status_detail_uses_its_oneof_field_number() {
    let s = common::Status {
        code: common::ErrorCode::StaleClient as i32,
        message: "x".into(),
        retryable: true,
        operation_id: String::new(),
        detail: Some(common::status::Detail::StaleClient(common::StaleClient {
            expected_epoch: 2,
            observed_epoch: 1,
        })),
    };
    // code 13 (0x08 0x0d), message "x" (0x12 0x01 'x'), retryable (0x18 0x01),
    // stale_client is field 14, length-delimited: (14 << 3) | 2 = 0x72.
    assert_eq!(
        s.encode_to_vec(),
        [
            0x08, 0x0d, 0x12, 0x01, b'x', 0x18, 0x01, 0x72, 0x04, 0x08, 0x02, 0x10, 0x01
        ]
    );
}

#[test]
fn run_event_encodes_kind_and_terminal_at_their_numbers() {
    let e = engine::RunEvent {
        run_id: "r".into(),
        sequence: 300,
        unix_nano: 1,
        kind: engine::EventKind::RunCompleted as i32,
        payload_json: b"{}".to_vec(),
        terminal: true,
    };
    assert_eq!(
        e.encode_to_vec(),
        [
            0x0a, 0x01, b'r', // run_id = 1
            0x10, 0xac, 0x02, // sequence = 2, 300 as varint
            0x18, 0x01, // unix_nano = 3
            0x20, 0x02, // kind = 4, RUN_COMPLETED = 2
            0x2a, 0x02, b'{', b'}', // payload_json = 5
            0x30, 0x01, // terminal = 6
        ]
    );
}

#[test]
fn initialize_request_skips_reserved_six_and_puts_the_attempt_at_eight() {
    let r = engine::InitializeRequest {
        reconnect_claim: Some(engine::ReconnectClaim {
            client_id: "c".into(),
            expected_ownership_epoch: 5,
        }),
        initialization_attempt_id: vec![0xaa; 2],
        ..Default::default()
    };
    // reconnect_claim = 7: 0x3a; attempt id = 8: 0x42.
    assert_eq!(
        r.encode_to_vec(),
        [
            0x3a, 0x05, 0x0a, 0x01, b'c', 0x10, 0x05, 0x42, 0x02, 0xaa, 0xaa
        ]
    );
}

#[test]
fn stream_control_encodes_an_explicit_zero_page_last_sequence() {
    let c = engine::StreamControl {
        page_last_sequence: Some(0),
        ..Default::default()
    };
    // proto3 `optional` keeps presence: field 6 with value 0 is still written.
    assert_eq!(c.encode_to_vec(), [0x30, 0x00]);
    let legacy = engine::StreamControl::default();
    assert!(legacy.encode_to_vec().is_empty());
    let wrapped = engine::StreamEventsResponse {
        payload: Some(engine::stream_events_response::Payload::Control(c)),
    };
    assert_eq!(wrapped.encode_to_vec(), [0x12, 0x02, 0x30, 0x00]);
}

#[test]
fn import_request_puts_the_snapshot_at_seven() {
    let r = engine::ImportSnapshotRequest {
        client_operation_id: "o".into(),
        snapshot: Some(engine::SnapshotEnvelope {
            last_sequence: 1,
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        r.encode_to_vec(),
        [0x1a, 0x01, b'o', 0x3a, 0x02, 0x18, 0x01]
    );
}
