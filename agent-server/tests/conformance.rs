//! The original system's client conformance profile, checked against our server from the
//! wire up (docs/transport.md, "The external check: the original's client conformance suite"). The original's suite runs through its own gRPC client and is not
//! part of this repository (docs/transport.md says how to run it); these tests check the
//! same promises in the same order, over a real socket, against the fixture daemon:
//!
//! 1. a fresh 1.3 session that asks for the daemon's own capacity and capabilities gets a
//!    protocol inside its range, every capability it required, limits no larger than it
//!    asked for and equal to the limits in its health, and a non-empty catalog;
//! 2. health is ready;
//! 3. a run of the catalog's first definition streams, gap-free, to `run.completed`;
//! 4. a run that waits is cancelled: the answer is a request for a live run (not already
//!    terminal, no terminal sequence), its stream ends in `run.cancelled` (never completed
//!    or failed), and health drains to ready with no active run;
//! 5. an interaction tail opens with a snapshot and then a control;
//! 6. a reconnect keeps the client id and adds one to the epoch; the old session is refused
//!    and its open interaction tail ends;
//! 7. every event payload has exactly the wire's members (the original's client refuses an
//!    unknown member, a missing required one, trailing JSON, an empty payload but for
//!    `run.completed`).

mod support;

use std::collections::BTreeSet;

use agent_protocol::pb::common::v1::{CapabilitySet, ErrorCode, HealthState, Limits};
use agent_protocol::pb::engine::v1 as pb;
use agent_server::fixture::{PENDING_DEFINITION_ID, TEXT_DEFINITION_ID};
use support::*;

/// Frames a conformance stream may take to reach its terminal event (the suite's bound).
const MAX_EVENT_FRAMES: usize = 1024;

/// Every capability the original's protocol names: a probe asks for all of them so the
/// daemon answers with its own set.
const KNOWN_CAPABILITIES: [&str; 2] = ["snapshot-authority-v1", "snapshots"];

fn health_request(session: &(String, u64)) -> pb::HealthRequest {
    pb::HealthRequest {
        client_id: session.0.clone(),
        ownership_epoch: session.1,
    }
}

fn names(list: &[&str]) -> CapabilitySet {
    CapabilitySet {
        names: list.iter().map(|n| (*n).to_owned()).collect(),
    }
}

/// A 1.3 Initialize (attempt id, exact range) with the given capabilities and limits.
fn initialize_13(
    supported: CapabilitySet,
    required: CapabilitySet,
    limits: Limits,
    attempt: u8,
    claim: Option<(&str, u64)>,
) -> pb::InitializeRequest {
    let mut request = initialize(Some([attempt; 16]), claim);
    request.supported_capabilities = Some(supported);
    request.required_capabilities = Some(required);
    request.requested_limits = Some(limits);
    request
}

fn huge_limits() -> Limits {
    Limits {
        max_message_bytes: 1 << 30,
        max_collection_items: u32::MAX,
        max_replay_events: u32::MAX,
        max_replay_bytes: 1 << 40,
        max_concurrent_streams: u32::MAX,
        max_active_runs: u32::MAX,
    }
}

fn within(actual: &Limits, requested: &Limits) -> bool {
    actual.max_message_bytes <= requested.max_message_bytes
        && actual.max_collection_items <= requested.max_collection_items
        && actual.max_replay_events <= requested.max_replay_events
        && actual.max_replay_bytes <= requested.max_replay_bytes
        && actual.max_concurrent_streams <= requested.max_concurrent_streams
        && actual.max_active_runs <= requested.max_active_runs
}

/// Probes the daemon's capacity and capabilities as the external run does: a session that
/// asks for more than any daemon offers and for every known capability.
async fn probe(client: &mut Client) -> (Limits, Vec<String>) {
    let response = bounded(client.initialize(initialize_13(
        names(&KNOWN_CAPABILITIES),
        CapabilitySet::default(),
        huge_limits(),
        0x11,
        None,
    )))
    .await
    .unwrap()
    .into_inner();
    assert_eq!(
        code(response.status.as_ref()),
        ErrorCode::Ok,
        "{:?}",
        response.status
    );
    (
        response.limits.unwrap(),
        response.capabilities.unwrap().names,
    )
}

/// Checks 1: what a session asking for `limits` and requiring `capabilities` is promised.
fn assert_connection(
    response: &pb::InitializeResponse,
    limits: &Limits,
    capabilities: &[String],
) -> (String, u64) {
    assert_eq!(
        code(response.status.as_ref()),
        ErrorCode::Ok,
        "{:?}",
        response.status
    );
    let protocol = response.protocol.unwrap();
    assert_eq!((protocol.major, protocol.minor), (1, 3), "inside 1.3..=1.3");
    let offered = &response.capabilities.as_ref().unwrap().names;
    for required in capabilities {
        assert!(offered.contains(required), "required {required} is offered");
    }
    let negotiated = response.limits.unwrap();
    assert!(
        within(&negotiated, limits),
        "{negotiated:?} within {limits:?}"
    );
    let health = response.health.clone().unwrap();
    assert_eq!(
        health.limits.as_ref(),
        Some(&negotiated),
        "the connection's health reports the connection's limits"
    );
    let definitions = response.definitions.clone().unwrap();
    assert!(!definitions.definitions.is_empty(), "a non-empty catalog");
    assert!(!response.client_id.is_empty());
    assert!(response.ownership_epoch >= 1);
    (response.client_id.clone(), response.ownership_epoch)
}

async fn ready_health(client: &mut Client, session: &(String, u64)) -> pb::HealthResponse {
    let response = bounded(client.health(health_request(session)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(response.status.as_ref()), ErrorCode::Ok);
    response
}

/// Tails `run` from the start to its first run-terminal event, within the suite's frame
/// bound: every event, gap-free from 1.
async fn tail_to_terminal(
    client: &mut Client,
    session: &(String, u64),
    run: &str,
    before_terminal: impl AsyncOnce,
) -> Vec<pb::RunEvent> {
    let mut stream = bounded(client.stream_events(stream_request(session, run, 0, true)))
        .await
        .unwrap()
        .into_inner();
    let mut events: Vec<pb::RunEvent> = Vec::new();
    let mut hook = Some(before_terminal);
    for _ in 0..MAX_EVENT_FRAMES {
        let frame = bounded(stream.message())
            .await
            .unwrap()
            .expect("the stream reaches a run-terminal event before it ends");
        match frame.payload.unwrap() {
            pb::stream_events_response::Payload::Event(event) => {
                assert_eq!(event.sequence, events.len() as u64 + 1, "gap-free");
                let terminal = is_run_terminal(&event);
                events.push(event);
                if terminal {
                    return events;
                }
            }
            pb::stream_events_response::Payload::Control(control) => {
                assert_eq!(code(control.status.as_ref()), ErrorCode::Ok, "{control:?}");
                if control.tailing
                    && let Some(hook) = hook.take()
                {
                    hook.run().await;
                }
            }
        }
    }
    panic!("the event stream exceeded {MAX_EVENT_FRAMES} frames");
}

/// A step run once the stream is tailing (the cancel of check 4).
trait AsyncOnce {
    async fn run(self);
}

struct Nothing;
impl AsyncOnce for Nothing {
    async fn run(self) {}
}

struct CancelWith<'a> {
    client: Client,
    session: &'a (String, u64),
    run: &'a str,
}
impl AsyncOnce for CancelWith<'_> {
    async fn run(mut self) {
        let response = bounded(self.client.cancel_run(pb::CancelRunRequest {
            client_id: self.session.0.clone(),
            ownership_epoch: self.session.1,
            client_operation_id: "conformance-cancel".into(),
            run_id: self.run.to_owned(),
            reason: "client conformance cancellation".into(),
        }))
        .await
        .unwrap()
        .into_inner();
        assert_eq!(
            code(response.status.as_ref()),
            ErrorCode::Ok,
            "{:?}",
            response.status
        );
        assert!(response.cancellation_requested, "{response:?}");
        assert!(!response.already_terminal, "{response:?}");
        assert_eq!(response.terminal_sequence, 0, "{response:?}");
    }
}

/// A fresh conformance session at the daemon's own capacity: (session, limits asked for,
/// capabilities required).
async fn conformance_session(client: &mut Client) -> ((String, u64), Limits, Vec<String>) {
    let (capacity, capabilities) = probe(client).await;
    let required: Vec<&str> = capabilities.iter().map(String::as_str).collect();
    let response = bounded(client.initialize(initialize_13(
        names(&required),
        names(&required),
        capacity,
        0x22,
        None,
    )))
    .await
    .unwrap()
    .into_inner();
    let session = assert_connection(&response, &capacity, &capabilities);
    assert_eq!(
        response.definitions.unwrap().definitions[0].id,
        TEXT_DEFINITION_ID,
        "the suite runs the catalog's first definition: the text fixture sorts first"
    );
    (session, capacity, capabilities)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_original_suites_lifecycle_profile_holds_in_order() {
    let mut fixture = Fixture::start("conf").await;
    let mut client = fixture.client().await;
    let (s, capacity, capabilities) = conformance_session(&mut client).await;
    assert_eq!(
        capabilities,
        vec!["snapshot-authority-v1".to_owned(), "snapshots".to_owned()],
        "the daemon offers its snapshot capabilities, sorted"
    );

    // 2. Ready.
    let health = ready_health(&mut client, &s).await;
    assert_eq!(
        health.health.unwrap().state,
        HealthState::Ready as i32,
        "ready before any run"
    );

    // 3. The first definition's run completes.
    let text = start(&mut client, &s, "conformance-start", TEXT_DEFINITION_ID).await;
    let events = tail_to_terminal(&mut client, &s, &text, Nothing).await;
    assert_eq!(
        events.first().unwrap().kind,
        pb::EventKind::RunStarted as i32
    );
    assert_eq!(
        events.last().unwrap().kind,
        pb::EventKind::RunCompleted as i32
    );

    // 4. The waiting run is cancelled while its stream tails, and health drains.
    let waiting = start(
        &mut client,
        &s,
        "conformance-waiting",
        PENDING_DEFINITION_ID,
    )
    .await;
    let canceller = CancelWith {
        client: fixture.client().await,
        session: &s,
        run: &waiting,
    };
    let events = tail_to_terminal(&mut client, &s, &waiting, canceller).await;
    assert_eq!(
        events.last().unwrap().kind,
        pb::EventKind::RunCancelled as i32,
        "cancelled, not completed or failed"
    );
    let drained = bounded(async {
        loop {
            let health = ready_health(&mut client, &s).await.health.unwrap();
            if health.state == HealthState::Ready as i32 && health.active_runs == 0 {
                return health;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(drained.active_runs, 0);

    // 5. The interaction tail opens with a snapshot, then a control.
    let mut interactions = bounded(client.stream_interactions(pb::StreamInteractionsRequest {
        client_id: s.0.clone(),
        ownership_epoch: s.1,
        tail: true,
    }))
    .await
    .unwrap()
    .into_inner();
    let first = bounded(interactions.message()).await.unwrap().unwrap();
    let second = bounded(interactions.message()).await.unwrap().unwrap();
    assert!(matches!(
        first.payload,
        Some(pb::stream_interactions_response::Payload::Snapshot(_))
    ));
    let Some(pb::stream_interactions_response::Payload::Control(control)) = second.payload else {
        panic!("the second interaction frame is a control");
    };
    assert_eq!(code(control.status.as_ref()), ErrorCode::Ok);

    // 6. A reconnect from another connection keeps the identity and adds one to the epoch.
    let required: Vec<&str> = capabilities.iter().map(String::as_str).collect();
    let mut other = fixture.client().await;
    let response = bounded(other.initialize(initialize_13(
        names(&required),
        names(&required),
        capacity,
        0x33,
        Some((&s.0, s.1)),
    )))
    .await
    .unwrap()
    .into_inner();
    let reconnected = assert_connection(&response, &capacity, &capabilities);
    assert_eq!(reconnected.0, s.0, "the same client id");
    assert_eq!(reconnected.1, s.1 + 1, "the next ownership epoch");
    let stale = bounded(client.health(health_request(&s)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(stale.status.as_ref()), ErrorCode::StaleClient);
    assert!(
        bounded(interactions.message()).await.unwrap().is_none(),
        "the fenced session's interaction tail ends"
    );
    ready_health(&mut other, &reconnected).await;
    fixture.shutdown().await;
}

/// The probe answers the daemon's capacity (health's limits), and from minor 2 on a session
/// that asks for less than that is refused: why the external run probes first and then asks
/// for exactly the capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_finds_the_capacity_and_less_than_it_is_refused() {
    let mut fixture = Fixture::start("cap").await;
    let mut client = fixture.client().await;
    let (capacity, _) = probe(&mut client).await;
    let s = session(&mut client).await;
    let health = ready_health(&mut client, &s).await.health.unwrap();
    assert_eq!(health.limits.unwrap(), capacity);
    let mut smaller = capacity;
    smaller.max_message_bytes -= 1;
    let response = bounded(client.initialize(initialize_13(
        CapabilitySet::default(),
        CapabilitySet::default(),
        smaller,
        0x44,
        None,
    )))
    .await
    .unwrap()
    .into_inner();
    assert_eq!(
        code(response.status.as_ref()),
        ErrorCode::InvalidArgument,
        "{:?}",
        response.status
    );
    // Exactly the capacity is accepted.
    let response = bounded(client.initialize(initialize_13(
        CapabilitySet::default(),
        CapabilitySet::default(),
        capacity,
        0x55,
        None,
    )))
    .await
    .unwrap()
    .into_inner();
    assert_connection(&response, &capacity, &[]);
    fixture.shutdown().await;
}

/// A kind's members: (required, optional).
type Members = (&'static [&'static str], &'static [&'static str]);

fn members(required: &'static [&'static str], optional: &'static [&'static str]) -> Members {
    (required, optional)
}

/// The members of each kind's payload on the wire, `None` for a payload that must be empty
/// (docs/protocol.md, "Event payloads").
fn wire_members(kind: pb::EventKind) -> Option<Members> {
    use pb::EventKind as K;
    Some(match kind {
        K::RunCompleted => return None,
        K::RunStarted => members(&["definition"], &[]),
        K::RunFailed | K::RunCancelled | K::TurnFailed => members(&["error"], &[]),
        K::TurnStarted | K::TurnCompleted => members(&["turn"], &[]),
        K::ModelStarted => members(&["turn", "operation_id"], &[]),
        K::ModelDelta => members(&["text"], &[]),
        K::ModelCompleted => members(&["input_tokens", "output_tokens"], &["metadata"]),
        K::ModelFailed => members(
            &["code", "message", "retryable", "before_stream"],
            &["metadata"],
        ),
        K::ToolStarted => members(&["call_id", "name"], &[]),
        K::ToolProgress => members(&["call_id", "message"], &[]),
        K::ToolCompleted | K::ToolFailed => {
            members(&["call_id", "name", "error"], &["outcome", "retry"])
        }
        K::InteractionStarted => members(&["id", "kind"], &[]),
        K::InteractionCompleted | K::InteractionFailed | K::InteractionCancelled => {
            members(&["id"], &["error"])
        }
        K::Unspecified => panic!("an unspecified event kind on the wire"),
    })
}

/// Check 7 for one event: exactly one JSON object with the kind's members and nothing
/// after it; an empty payload only for `run.completed`; the value rules a client checks.
fn assert_wire_shape(event: &pb::RunEvent) {
    let kind = pb::EventKind::try_from(event.kind).unwrap();
    let Some((required, optional)) = wire_members(kind) else {
        assert!(event.payload_json.is_empty(), "{kind:?} carries no payload");
        return;
    };
    let text = String::from_utf8(event.payload_json.clone()).unwrap();
    assert!(!text.is_empty(), "{kind:?}: event payload is required");
    // `from_slice` refuses trailing JSON, as the original's client does.
    let value: serde_json::Value = serde_json::from_slice(&event.payload_json)
        .unwrap_or_else(|e| panic!("{kind:?}: {text}: {e}"));
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("{kind:?}: {text}"));
    let members: BTreeSet<&str> = object.keys().map(String::as_str).collect();
    for member in &members {
        assert!(
            required.contains(member) || optional.contains(member),
            "{kind:?}: unknown member {member:?} in {text}"
        );
    }
    for member in required {
        assert!(
            members.contains(member),
            "{kind:?}: no {member:?} in {text}"
        );
    }
    let nonempty = |name: &str| object[name].as_str().is_some_and(|s| !s.trim().is_empty());
    match kind {
        pb::EventKind::RunStarted => assert!(nonempty("definition"), "{text}"),
        pb::EventKind::RunFailed | pb::EventKind::RunCancelled | pb::EventKind::TurnFailed => {
            assert!(nonempty("error"), "{kind:?}: {text}");
        }
        pb::EventKind::TurnStarted | pb::EventKind::TurnCompleted => {
            assert!(object["turn"].as_u64().is_some_and(|t| t >= 1), "{text}");
        }
        pb::EventKind::ModelStarted => {
            assert!(object["turn"].as_u64().is_some_and(|t| t >= 1), "{text}");
            assert!(nonempty("operation_id"), "{text}");
        }
        pb::EventKind::ToolCompleted | pb::EventKind::ToolFailed => {
            if let Some(outcome) = object.get("outcome") {
                let retry = object.get("retry").and_then(|r| r.as_str());
                match outcome.as_str() {
                    Some("definitive") => {
                        assert!(matches!(retry, Some("never" | "allowed")), "{text}");
                    }
                    Some("uncertain") => assert_eq!(retry, Some("never"), "{text}"),
                    _ => panic!("{kind:?}: outcome must be definitive or uncertain: {text}"),
                }
            } else {
                assert!(object.get("retry").is_none(), "{text}");
            }
        }
        _ => {}
    }
}

#[test]
fn the_shape_check_refuses_what_the_original_client_refuses() {
    let event = |kind: pb::EventKind, payload: &str| pb::RunEvent {
        run_id: "run-1".into(),
        sequence: 1,
        unix_nano: 1,
        kind: kind as i32,
        payload_json: payload.as_bytes().to_vec(),
        terminal: false,
    };
    let refused = |kind, payload: &'static str| {
        let e = event(kind, payload);
        std::panic::catch_unwind(move || assert_wire_shape(&e)).is_err()
    };
    use pb::EventKind as K;
    // The shapes issue 33 found on the wire.
    assert!(refused(K::RunStarted, r#"{"agent":"a"}"#));
    assert!(refused(K::ModelStarted, r#"{"turn":1}"#));
    assert!(refused(K::RunCancelled, ""));
    assert!(refused(K::TurnFailed, r#"{"code":"cancelled","turn":1}"#));
    assert!(refused(
        K::ModelFailed,
        r#"{"before_stream":true,"problem":"p","retryable":false}"#
    ));
    assert!(refused(
        K::ToolFailed,
        r#"{"call_id":"c","name":"n","error":"e","outcome":"problem"}"#
    ));
    // Trailing JSON, an uncertain outcome that allows a retry, a payload on run.completed.
    assert!(refused(K::RunStarted, r#"{"definition":"d"}{}"#));
    assert!(refused(
        K::ToolFailed,
        r#"{"call_id":"c","name":"n","error":"e","outcome":"uncertain","retry":"allowed"}"#
    ));
    assert!(refused(K::RunCompleted, "{}"));
    // The wire's own shapes pass.
    for (kind, payload) in [
        (K::RunStarted, r#"{"definition":"d"}"#),
        (
            K::ModelStarted,
            r#"{"operation_id":"run-1/model/1","turn":1}"#,
        ),
        (K::RunCancelled, r#"{"error":"cancelled"}"#),
        (
            K::ModelFailed,
            r#"{"code":"c","message":"m","retryable":false,"before_stream":true}"#,
        ),
        (
            K::ToolFailed,
            r#"{"call_id":"c","name":"n","error":"e","outcome":"uncertain","retry":"never"}"#,
        ),
        (K::ToolCompleted, r#"{"call_id":"c","name":"n","error":""}"#),
        (K::RunCompleted, ""),
    ] {
        assert_wire_shape(&event(kind, payload));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_runs_events_have_the_wire_shapes() {
    let mut fixture = Fixture::start("shape").await;
    let mut client = fixture.client().await;
    let (s, _, _) = conformance_session(&mut client).await;
    let run = start(&mut client, &s, "shape-text", TEXT_DEFINITION_ID).await;
    let events = tail_to_terminal(&mut client, &s, &run, Nothing).await;
    for event in &events {
        assert_wire_shape(event);
    }
    let started = serde_json::from_slice::<serde_json::Value>(&events[0].payload_json).unwrap();
    assert_eq!(started["definition"], TEXT_DEFINITION_ID);
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_runs_events_have_the_wire_shapes() {
    let mut fixture = Fixture::start("shapec").await;
    let mut client = fixture.client().await;
    let (s, _, _) = conformance_session(&mut client).await;
    let run = start(&mut client, &s, "shape-wait", PENDING_DEFINITION_ID).await;
    let canceller = CancelWith {
        client: fixture.client().await,
        session: &s,
        run: &run,
    };
    let events = tail_to_terminal(&mut client, &s, &run, canceller).await;
    for event in &events {
        assert_wire_shape(event);
    }
    fixture.shutdown().await;
}
