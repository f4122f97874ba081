//! Validator cost per message for the hot RPCs, side by side with prost's
//! decoding of the same bytes (the baseline every server pays anyway):
//! `StartRun` requests and a replay page of `StreamEvents` (64 events plus
//! its closing control).

use agent_protocol::Negotiated;
use agent_protocol::negotiate::version;
use agent_protocol::pb::common::v1::Limits;
use agent_protocol::pb::engine::v1::{
    AgentDefinitionRef, ContentPart, EventKind, Message, MessageRole, RunEvent, StartRunRequest,
    StreamControl, StreamEventsResponse, content_part::Value, stream_events_response::Payload,
};
use agent_protocol::requests::validate_start_run_request;
use agent_protocol::status::ok_status;
use agent_protocol::stream::validate_event_page;
use criterion::{Criterion, criterion_group, criterion_main};
use prost::Message as _;
use std::hint::black_box;

const PAGE_EVENTS: u64 = 64;

fn negotiated() -> Negotiated {
    Negotiated {
        protocol: version(1, 3, 0),
        limits: Limits {
            max_message_bytes: 4 << 20,
            max_collection_items: 256,
            max_replay_events: 1000,
            max_replay_bytes: 4 << 20,
            max_concurrent_streams: 16,
            max_active_runs: 8,
        },
        capabilities: vec![],
    }
}

fn start_request() -> StartRunRequest {
    StartRunRequest {
        client_id: "client-0123456789abcdef".into(),
        ownership_epoch: 3,
        client_operation_id: "op-0123456789abcdef".into(),
        definition: Some(AgentDefinitionRef {
            id: "coder".into(),
            revision: "2026-12-01".into(),
        }),
        input: Some(Message {
            id: "msg-1".into(),
            role: MessageRole::User as i32,
            parts: vec![
                ContentPart {
                    value: Some(Value::Text(
                        "Summarise the repository layout in five bullet points.".into(),
                    )),
                },
                ContentPart {
                    value: Some(Value::Extension(
                        agent_protocol::pb::engine::v1::ExtensionPart {
                            namespace: "client.context".into(),
                            value_json:
                                br#"{"cwd":"/srv/project","files":["src/lib.rs","Cargo.toml"]}"#
                                    .to_vec(),
                        },
                    )),
                },
            ],
        }),
    }
}

fn event_page() -> Vec<StreamEventsResponse> {
    let mut frames: Vec<StreamEventsResponse> = (1..=PAGE_EVENTS)
        .map(|seq| StreamEventsResponse {
            payload: Some(Payload::Event(RunEvent {
                run_id: "run-0123456789abcdef".into(),
                sequence: 100 + seq,
                unix_nano: 1_764_547_200_000_000_000 + seq as i64,
                kind: EventKind::ModelDelta as i32,
                payload_json: br#"{"delta":"The repository holds a workspace of five crates"}"#
                    .to_vec(),
                terminal: false,
            })),
        })
        .collect();
    frames.push(StreamEventsResponse {
        payload: Some(Payload::Control(StreamControl {
            status: Some(ok_status()),
            earliest_sequence: 1,
            latest_sequence: 100 + PAGE_EVENTS,
            last_delivered_sequence: 100 + PAGE_EVENTS,
            tailing: true,
            page_last_sequence: Some(100 + PAGE_EVENTS),
            has_more: false,
        })),
    });
    frames
}

fn bench(c: &mut Criterion) {
    let n = negotiated();
    let start = start_request();
    let start_bytes = start.encode_to_vec();
    assert!(validate_start_run_request(&start, &n).is_ok());
    let mut g = c.benchmark_group("start");
    g.bench_function("decode", |b| {
        b.iter(|| StartRunRequest::decode(black_box(start_bytes.as_slice())).unwrap())
    });
    g.bench_function("validate", |b| {
        b.iter(|| validate_start_run_request(black_box(&start), &n).is_ok())
    });
    g.finish();

    let page = event_page();
    let page_bytes: Vec<Vec<u8>> = page.iter().map(|f| f.encode_to_vec()).collect();
    assert!(validate_event_page(100, &page, &n).is_ok());
    let mut g = c.benchmark_group("event_page_64");
    g.bench_function("decode", |b| {
        b.iter(|| {
            page_bytes
                .iter()
                .map(|raw| StreamEventsResponse::decode(black_box(raw.as_slice())).unwrap())
                .collect::<Vec<_>>()
        })
    });
    g.bench_function("validate", |b| {
        b.iter(|| validate_event_page(100, black_box(&page), &n).is_ok())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
