//! The server over a real Unix socket (docs/transport.md, "Tests"): authentication, sessions,
//! attempts, lifecycle, streams and shutdown.

mod support;

use agent_endpoint::{Store, StoreError};
use agent_protocol::pb::common::v1::ErrorCode;
use agent_protocol::pb::engine::v1 as pb;
use agent_server::fixture::{PENDING_DEFINITION_ID, TEXT_DEFINITION_ID, TEXT_REPLY};
use agent_server::{UNAUTHENTICATED_MESSAGE, attempt_fingerprint};
use prost::Message as _;
use support::*;

fn health(session: &(String, u64)) -> pb::HealthRequest {
    pb::HealthRequest {
        client_id: session.0.clone(),
        ownership_epoch: session.1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_rejects_missing_duplicate_malformed_and_wrong_tokens_before_handlers() {
    let mut fixture = Fixture::start("auth").await;
    let wrong = agent_endpoint::EndpointToken::generate().unwrap();
    let good = fixture.token.authorization_value();
    let cases: Vec<Option<String>> = vec![
        None,
        Some(wrong.authorization_value()),
        Some(good.to_lowercase()),
        Some(format!("Bearer  {}", fixture.token.expose_text())),
        Some(fixture.token.expose_text()),
        Some(format!("{good} ")),
        Some("Bearer ".into()),
    ];
    for case in cases {
        let mut client = connect(&fixture.address, case.clone()).await;
        let error = bounded(client.initialize(initialize(None, None)))
            .await
            .unwrap_err();
        assert_eq!(error.code(), tonic::Code::Unauthenticated, "{case:?}");
        assert_eq!(error.message(), UNAUTHENTICATED_MESSAGE);
        let stream = pb::StreamEventsRequest {
            replay_limit: 1,
            ..Default::default()
        };
        let error = bounded(client.stream_events(stream)).await.unwrap_err();
        assert_eq!(error.code(), tonic::Code::Unauthenticated);
    }
    // Two authorization values, one of them right.
    let channel = channel(&fixture.address).await;
    let good2 = good.clone();
    let mut client = pb::engine_service_client::EngineServiceClient::with_interceptor(
        channel,
        move |mut request: tonic::Request<()>| {
            request
                .metadata_mut()
                .append("authorization", good2.parse().unwrap());
            request
                .metadata_mut()
                .append("authorization", good2.parse().unwrap());
            Ok(request)
        },
    );
    let error = bounded(client.initialize(initialize(None, None)))
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unauthenticated);
    // Nothing reached a handler: no session, no registry entry.
    assert_eq!(fixture.daemon().server().registry_sizes(), (0, 0));
    assert!(fixture.daemon().host().sessions().is_empty());
    // The right token works, and the token never shows in the metadata's Debug.
    let mut client = fixture.client().await;
    session(&mut client).await;
    assert!(!format!("{:?}", fixture.daemon().metadata()).contains(&fixture.token.expose_text()));
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_with_another_uid_is_refused() {
    let mut fixture = Fixture::with("uid", Default::default(), |config| {
        config.expected_uid = 65534
    })
    .await;
    let mut client = fixture.client().await;
    let error = bounded(client.initialize(initialize(None, None)))
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unauthenticated);
    assert!(fixture.daemon().host().sessions().is_empty());
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_health_and_reconnect_over_authenticated_grpc() {
    let mut fixture = Fixture::start("init").await;
    let mut client = fixture.client().await;
    let first = session(&mut client).await;
    assert_eq!(first.1, 1);
    let response = bounded(client.health(health(&first)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(response.status.as_ref()), ErrorCode::Ok);
    assert_eq!(response.protocol.unwrap().minor, 2);
    // Reconnect from a second connection takes over at epoch 2.
    let mut other = fixture.client().await;
    let response = bounded(other.initialize(initialize(None, Some((&first.0, 1)))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code(response.status.as_ref()),
        ErrorCode::Ok,
        "{:?}",
        response.status
    );
    assert_eq!(response.client_id, first.0);
    assert_eq!(response.ownership_epoch, 2);
    // The old epoch is stale with facts; the new one works.
    let stale = bounded(client.health(health(&first)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code(stale.status.as_ref()),
        ErrorCode::StaleClient,
        "{:?}",
        stale.status
    );
    let second = (first.0.clone(), 2);
    let ok = bounded(other.health(health(&second)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(ok.status.as_ref()), ErrorCode::Ok);
    // A reconnect claim at the old epoch is stale too.
    let again = bounded(client.initialize(initialize(None, Some((&first.0, 1)))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(again.status.as_ref()), ErrorCode::StaleClient);
    // An unknown client is unavailable, retryable, and reveals nothing.
    let unknown = bounded(client.health(health(&("f".repeat(32), 1))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(unknown.status.as_ref()), ErrorCode::Unavailable);
    assert!(unknown.status.unwrap().retryable);
    assert_eq!(fixture.daemon().server().registry_sizes(), (1, 0));
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialization_failures_allocate_nothing() {
    let mut fixture = Fixture::start("fail").await;
    let mut client = fixture.client().await;
    let mut bad_range = initialize(None, None);
    bad_range.protocol.as_mut().unwrap().minimum =
        Some(agent_protocol::negotiate::version(2, 0, 0));
    let mut missing_capability = initialize(None, None);
    missing_capability
        .supported_capabilities
        .as_mut()
        .unwrap()
        .names = vec!["teleport".into()];
    missing_capability
        .required_capabilities
        .as_mut()
        .unwrap()
        .names = vec!["teleport".into()];
    let mut no_limits = initialize(None, None);
    no_limits.requested_limits = None;
    let mut unknown_claim = initialize(None, Some((&"a".repeat(32), 1)));
    unknown_claim.client = Some(build());
    for request in [bad_range, missing_capability, no_limits, unknown_claim] {
        let response = bounded(client.initialize(request))
            .await
            .unwrap()
            .into_inner();
        assert_ne!(code(response.status.as_ref()), ErrorCode::Ok);
        assert!(response.client_id.is_empty() && response.ownership_epoch == 0);
    }
    assert_eq!(fixture.daemon().server().registry_sizes(), (0, 0));
    assert!(fixture.daemon().host().sessions().is_empty());
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_capacity_is_reserved_and_reports_overload_facts() {
    let mut fixture = Fixture::with("cap", Default::default(), |config| {
        config.maximum_sessions = 2
    })
    .await;
    let mut client = fixture.client().await;
    session(&mut client).await;
    session(&mut client).await;
    let response = bounded(client.initialize(initialize(None, None)))
        .await
        .unwrap()
        .into_inner();
    let status = response.status.unwrap();
    assert_eq!(
        ErrorCode::try_from(status.code).unwrap(),
        ErrorCode::ResourceExhausted
    );
    match status.detail.unwrap() {
        agent_protocol::pb::common::v1::status::Detail::Overload(o) => {
            assert_eq!(o.resource, agent_server::SESSIONS_RESOURCE);
            assert_eq!((o.limit, o.observed), (2, 3));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fixture.daemon().host().sessions().len(), 2);
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_registry_makes_room_from_ended_sessions_and_keeps_live_ones() {
    // Sessions with nothing in flight are reclaimed at once, so a daemon that has served
    // `maximum` clients over its life still takes new ones.
    let options = agent_server::fixture::FixtureOptions {
        idle_after: std::time::Duration::ZERO,
        ..Default::default()
    };
    let mut fixture = Fixture::with("room", options, |config| config.maximum_sessions = 2).await;
    let mut client = fixture.client().await;
    let busy = session(&mut client).await;
    let run = start(&mut client, &busy, "op-busy", PENDING_DEFINITION_ID).await;
    let idle = session(&mut client).await;
    assert_eq!(fixture.daemon().server().registry_sizes().0, 2);
    let third = session(&mut client).await;
    assert_ne!(third.0, idle.0);
    // The idle client's entry is gone: it reads as an unavailable session.
    let health = bounded(client.health(pb::HealthRequest {
        client_id: idle.0.clone(),
        ownership_epoch: idle.1,
    }))
    .await
    .unwrap()
    .into_inner();
    assert_eq!(code(health.status.as_ref()), ErrorCode::Unavailable);
    // The client with a run in flight kept its session and its run.
    let cancel = bounded(client.cancel_run(pb::CancelRunRequest {
        client_id: busy.0.clone(),
        ownership_epoch: busy.1,
        client_operation_id: "op-cancel".into(),
        run_id: run,
        reason: String::new(),
    }))
    .await
    .unwrap()
    .into_inner();
    assert_eq!(
        code(cancel.status.as_ref()),
        ErrorCode::Ok,
        "{:?}",
        cancel.status
    );
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_replay_exactly_reject_conflicts_and_keep_creation_and_latest_reconnect() {
    let mut fixture = Fixture::start("attempt").await;
    let mut client = fixture.client().await;
    let a = [1u8; 16];
    let first = bounded(client.initialize(initialize(Some(a), None)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(first.status.as_ref()), ErrorCode::Ok);
    assert_eq!(first.initialization_attempt_id, a.to_vec());
    // The same attempt replays the exact response and allocates nothing.
    let replay = bounded(client.initialize(initialize(Some(a), None)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay.encode_to_vec(), first.encode_to_vec());
    assert_eq!(fixture.daemon().host().sessions().len(), 1);
    // The same id with another request conflicts.
    let mut other = initialize(Some(a), None);
    other.requested_limits.as_mut().unwrap().max_active_runs = 7;
    let conflict = bounded(client.initialize(other))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(conflict.status.as_ref()), ErrorCode::Conflict);
    // Reconnects B then C: creation A and latest C are kept, B is gone.
    let id = first.client_id.clone();
    let b = bounded(client.initialize(initialize(Some([2; 16]), Some((&id, 1)))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(b.ownership_epoch, 2);
    let c = bounded(client.initialize(initialize(Some([3; 16]), Some((&id, 2)))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(c.ownership_epoch, 3);
    assert_eq!(fixture.daemon().server().registry_sizes(), (1, 2));
    let replay_c = bounded(client.initialize(initialize(Some([3; 16]), Some((&id, 2)))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay_c.encode_to_vec(), c.encode_to_vec());
    let replay_a = bounded(client.initialize(initialize(Some(a), None)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay_a.encode_to_vec(), first.encode_to_vec());
    // B's record is gone: the same request now runs again and is stale.
    let replay_b = bounded(client.initialize(initialize(Some([2; 16]), Some((&id, 1)))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(replay_b.status.as_ref()), ErrorCode::StaleClient);
    fixture.shutdown().await;
}

#[test]
fn attempt_fingerprint_excludes_only_the_attempt_identity() {
    let a = initialize(Some([1; 16]), None);
    let b = initialize(Some([9; 16]), None);
    assert_eq!(attempt_fingerprint(&a), attempt_fingerprint(&b));
    let mut c = a.clone();
    c.client.as_mut().unwrap().version = "0.2.0".into();
    assert_ne!(attempt_fingerprint(&a), attempt_fingerprint(&c));
    let d = initialize(Some([1; 16]), Some(("x", 1)));
    assert_ne!(attempt_fingerprint(&a), attempt_fingerprint(&d));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_rejects_unsupported_input_and_capabilities_before_the_host() {
    let mut fixture = Fixture::start("life").await;
    let mut client = fixture.client().await;
    let s = session(&mut client).await;
    let mut two_parts = start_request(&s, "op-1", TEXT_DEFINITION_ID);
    two_parts.input = Some(text_message(&["a", "b"]));
    let response = bounded(client.start_run(two_parts))
        .await
        .unwrap()
        .into_inner();
    let status = response.status.unwrap();
    assert_eq!(
        ErrorCode::try_from(status.code).unwrap(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(status.message, agent_server::status::START_INPUT_MESSAGE);
    assert_eq!(status.operation_id, "op-1");
    let mut empty_op = start_request(&s, "", TEXT_DEFINITION_ID);
    empty_op.client_operation_id.clear();
    let response = bounded(client.start_run(empty_op))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(response.status.as_ref()), ErrorCode::InvalidArgument);
    // Snapshot RPCs need both snapshot capabilities.
    let response = bounded(client.suspend_run(pb::SuspendRunRequest {
        client_id: s.0.clone(),
        ownership_epoch: s.1,
        client_operation_id: "op-2".into(),
        run_id: "run-x".into(),
    }))
    .await
    .unwrap()
    .into_inner();
    let status = response.status.unwrap();
    assert_eq!(
        ErrorCode::try_from(status.code).unwrap(),
        ErrorCode::MissingCapability
    );
    // Unknown definition: the host refuses it, nothing stays allocated.
    let response = bounded(client.start_run(start_request(&s, "op-3", "no-such-definition")))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(code(response.status.as_ref()), ErrorCode::Ok);
    assert_eq!(fixture.daemon().host().describe().active_runs, 0);
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_run_streams_gap_free_with_one_terminal_and_pending_run_cancels() {
    let mut fixture = Fixture::start("stream").await;
    let mut client = fixture.client().await;
    let s = session(&mut client).await;
    let run = start(&mut client, &s, "op-text", TEXT_DEFINITION_ID).await;
    let (events, terminals) = collect_run(&mut client, &s, &run).await;
    assert_eq!(terminals, 1);
    assert_eq!(
        events.last().unwrap().kind,
        pb::EventKind::RunCompleted as i32
    );
    let delta = events
        .iter()
        .find(|e| e.kind == pb::EventKind::ModelDelta as i32)
        .unwrap();
    let payload: serde_json::Value = serde_json::from_slice(&delta.payload_json).unwrap();
    assert_eq!(payload["text"], TEXT_REPLY);
    // A duplicate start replays the same run.
    let again = bounded(client.start_run(start_request(&s, "op-text", TEXT_DEFINITION_ID)))
        .await
        .unwrap()
        .into_inner();
    assert!(again.duplicate_operation);
    assert_eq!(again.run_id, run);

    // The pending run stays active until cancelled; its tail then ends with run.cancelled.
    let pending = start(&mut client, &s, "op-pending", PENDING_DEFINITION_ID).await;
    let mut tail = bounded(client.stream_events(stream_request(&s, &pending, 0, true)))
        .await
        .unwrap()
        .into_inner();
    let mut seen = 0;
    let mut tailing = false;
    while !tailing {
        match bounded(tail.message())
            .await
            .unwrap()
            .unwrap()
            .payload
            .unwrap()
        {
            pb::stream_events_response::Payload::Event(e) => seen = e.sequence,
            pb::stream_events_response::Payload::Control(c) => tailing = c.tailing,
        }
    }
    let cancel = bounded(client.cancel_run(pb::CancelRunRequest {
        client_id: s.0.clone(),
        ownership_epoch: s.1,
        client_operation_id: "op-cancel".into(),
        run_id: pending.clone(),
        reason: String::new(),
    }))
    .await
    .unwrap()
    .into_inner();
    assert_eq!(
        code(cancel.status.as_ref()),
        ErrorCode::Ok,
        "{:?}",
        cancel.status
    );
    assert!(cancel.cancellation_requested);
    let mut last = None;
    while let Some(frame) = bounded(tail.message()).await.unwrap() {
        if let Some(pb::stream_events_response::Payload::Event(e)) = frame.payload {
            assert_eq!(e.sequence, seen + 1);
            seen = e.sequence;
            last = Some(e);
        }
    }
    let last = last.unwrap();
    assert!(last.terminal);
    assert_eq!(last.kind, pb::EventKind::RunCancelled as i32);
    fixture.shutdown().await;
}

fn respond_request(session: &(String, u64), op: &str, run: &str) -> pb::RespondInteractionRequest {
    pb::RespondInteractionRequest {
        client_id: session.0.clone(),
        ownership_epoch: session.1,
        client_operation_id: op.to_owned(),
        run_id: run.to_owned(),
        interaction_id: "approve-1".to_owned(),
        value_json: b"true".to_vec(),
    }
}

/// A respond repeated with its operation id replays the first outcome and says so; a new
/// operation id for the answered interaction is a new (failing) operation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_respond_reports_a_duplicate_operation() {
    let (mut fixture, router) = with_router("respond-dup").await;
    let mut client = fixture.client().await;
    let s = session(&mut client).await;
    let run = start(&mut client, &s, "op-run", PENDING_DEFINITION_ID).await;
    let asked = ask(&router, &s.0, &run, "approve-1").await;

    let first = bounded(client.respond_interaction(respond_request(&s, "op-answer", &run)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(first.status.as_ref()), ErrorCode::Ok, "{first:?}");
    assert!(first.accepted && !first.duplicate_operation, "{first:?}");
    let answer = bounded(asked).await.unwrap().unwrap();
    assert_eq!(answer.value(), &serde_json::json!(true));

    let again = bounded(client.respond_interaction(respond_request(&s, "op-answer", &run)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(again.status.as_ref()), ErrorCode::Ok, "{again:?}");
    assert!(again.accepted && again.duplicate_operation, "{again:?}");

    let other = bounded(client.respond_interaction(respond_request(&s, "op-other", &run)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code(other.status.as_ref()),
        ErrorCode::NotFound,
        "{other:?}"
    );
    assert!(!other.duplicate_operation);
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_out_of_range_returns_exact_recovery_bounds() {
    let mut fixture = Fixture::start("range").await;
    let mut client = fixture.client().await;
    let s = session(&mut client).await;
    let run = start(&mut client, &s, "op", TEXT_DEFINITION_ID).await;
    let (events, _) = collect_run(&mut client, &s, &run).await;
    let latest = events.last().unwrap().sequence;
    let mut stream = bounded(client.stream_events(stream_request(&s, &run, latest + 5, false)))
        .await
        .unwrap()
        .into_inner();
    let frame = bounded(stream.message()).await.unwrap().unwrap();
    let Some(pb::stream_events_response::Payload::Control(control)) = frame.payload else {
        panic!("a control frame");
    };
    let status = control.status.unwrap();
    assert_eq!(
        ErrorCode::try_from(status.code).unwrap(),
        ErrorCode::OutOfRange
    );
    assert_eq!(control.last_delivered_sequence, latest);
    assert!(bounded(stream.message()).await.unwrap().is_none());
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_streams_withdraws_metadata_and_removes_the_socket() {
    let mut fixture = Fixture::start("stop").await;
    let mut client = fixture.client().await;
    let s = session(&mut client).await;
    let pending = start(&mut client, &s, "op", PENDING_DEFINITION_ID).await;
    let mut tail = bounded(client.stream_events(stream_request(&s, &pending, 0, true)))
        .await
        .unwrap()
        .into_inner();
    bounded(tail.message()).await.unwrap().unwrap();
    let store = Store::open(fixture.daemon().scope().dir()).unwrap();
    let deadline = || std::time::Instant::now() + std::time::Duration::from_secs(5);
    assert_eq!(
        store.discover(deadline()).unwrap(),
        *fixture.daemon().metadata()
    );
    fixture.shutdown().await;
    // The stream ended (quietly or broken), and nothing is left behind.
    while let Ok(Some(_)) = bounded(tail.message()).await {}
    assert_eq!(
        store.discover(deadline()).unwrap_err(),
        StoreError::NotFound
    );
    assert!(!fixture.address.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_in_the_same_scope_is_refused() {
    let mut fixture = Fixture::start("twice").await;
    let root = tokio_util::sync::CancellationToken::new();
    let host = agent_server::fixture::host(
        &root,
        &fixture.temp.path().join("authority2"),
        Default::default(),
    )
    .await
    .unwrap();
    let scope = agent_endpoint::UserScope::at(fixture.daemon().scope().dir()).unwrap();
    let error = agent_server::Daemon::start(agent_server::DaemonConfig::new(scope, host, build()))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        agent_server::DaemonError::Listen(agent_endpoint::IpcError::InUse)
    );
    // The first daemon still serves.
    let mut client = fixture.client().await;
    session(&mut client).await;
    root.cancel();
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interaction_streams_need_minor_two_and_open_with_a_validated_page() {
    let mut fixture = Fixture::start("inter").await;
    let mut client = fixture.client().await;
    // A minor-1 session is refused with INCOMPATIBLE_VERSION as one control frame.
    let mut old = initialize(None, None);
    old.protocol.as_mut().unwrap().maximum = Some(agent_protocol::negotiate::version(1, 1, 0));
    let response = bounded(client.initialize(old)).await.unwrap().into_inner();
    assert_eq!(response.protocol.unwrap().minor, 1);
    let request = |id: &str, epoch: u64, tail: bool| pb::StreamInteractionsRequest {
        client_id: id.to_owned(),
        ownership_epoch: epoch,
        tail,
    };
    let mut stream = bounded(client.stream_interactions(request(&response.client_id, 1, false)))
        .await
        .unwrap()
        .into_inner();
    let frame = bounded(stream.message()).await.unwrap().unwrap();
    let Some(pb::stream_interactions_response::Payload::Control(control)) = frame.payload else {
        panic!("a control frame");
    };
    assert_eq!(
        code(control.status.as_ref()),
        ErrorCode::IncompatibleVersion
    );
    assert!(bounded(stream.message()).await.unwrap().is_none());
    // A minor-2 session gets exactly a snapshot and an OK control; a tail stays open
    // and ends quietly when the session is fenced by a reconnect.
    let s = session(&mut client).await;
    let mut stream = bounded(client.stream_interactions(request(&s.0, s.1, false)))
        .await
        .unwrap()
        .into_inner();
    let mut frames = Vec::new();
    while let Some(frame) = bounded(stream.message()).await.unwrap() {
        frames.push(frame);
    }
    assert_eq!(frames.len(), 2);
    assert!(matches!(
        frames[0].payload,
        Some(pb::stream_interactions_response::Payload::Snapshot(_))
    ));
    let mut tail = bounded(client.stream_interactions(request(&s.0, s.1, true)))
        .await
        .unwrap()
        .into_inner();
    for _ in 0..2 {
        bounded(tail.message()).await.unwrap().unwrap();
    }
    let mut other = fixture.client().await;
    let reconnected = bounded(other.initialize(initialize(None, Some((&s.0, s.1)))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reconnected.ownership_epoch, s.1 + 1);
    assert!(bounded(tail.message()).await.unwrap().is_none());
    // A stale epoch is refused with the facts.
    let mut stale = bounded(client.stream_interactions(request(&s.0, s.1, false)))
        .await
        .unwrap()
        .into_inner();
    let frame = bounded(stale.message()).await.unwrap().unwrap();
    let Some(pb::stream_interactions_response::Payload::Control(control)) = frame.payload else {
        panic!("a control frame");
    };
    assert_eq!(code(control.status.as_ref()), ErrorCode::StaleClient);
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_translates_the_envelope_and_import_refuses_a_finished_run() {
    let mut fixture = Fixture::start("export").await;
    let mut client = fixture.client().await;
    let mut request = initialize(None, None);
    let names = vec!["snapshot-authority-v1".to_owned(), "snapshots".to_owned()];
    request.supported_capabilities.as_mut().unwrap().names = names.clone();
    request.required_capabilities.as_mut().unwrap().names = names;
    let response = bounded(client.initialize(request))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code(response.status.as_ref()),
        ErrorCode::Ok,
        "{:?}",
        response.status
    );
    let s = (response.client_id, response.ownership_epoch);
    let run = start(&mut client, &s, "op", TEXT_DEFINITION_ID).await;
    let (events, _) = collect_run(&mut client, &s, &run).await;
    let exported = bounded(client.export_snapshot(pb::ExportSnapshotRequest {
        client_id: s.0.clone(),
        ownership_epoch: s.1,
        run_id: run.clone(),
    }))
    .await
    .unwrap()
    .into_inner();
    assert_eq!(
        code(exported.status.as_ref()),
        ErrorCode::Ok,
        "{:?}",
        exported.status
    );
    let envelope = exported.snapshot.unwrap();
    assert_eq!(envelope.run_id, run);
    assert_eq!(envelope.last_sequence, events.last().unwrap().sequence);
    assert_eq!(envelope.lifecycle, pb::SnapshotLifecycle::Completed as i32);
    // The translation is exact both ways.
    let json = agent_server::envelope_from_wire(&envelope).unwrap();
    assert_eq!(agent_server::envelope_to_wire(&json).unwrap(), envelope);
    // A completed run is not importable: a typed refusal with the operation id.
    let imported = bounded(client.import_snapshot(pb::ImportSnapshotRequest {
        client_id: s.0.clone(),
        ownership_epoch: s.1,
        client_operation_id: "op-import".into(),
        snapshot: Some(envelope.clone()),
    }))
    .await
    .unwrap()
    .into_inner();
    let status = imported.status.unwrap();
    assert_ne!(ErrorCode::try_from(status.code).unwrap(), ErrorCode::Ok);
    assert_eq!(status.operation_id, "op-import");
    // A tampered payload digest is refused before the host.
    let mut tampered = envelope;
    tampered.sha256[0] ^= 1;
    let imported = bounded(client.import_snapshot(pb::ImportSnapshotRequest {
        client_id: s.0.clone(),
        ownership_epoch: s.1,
        client_operation_id: "op-import-2".into(),
        snapshot: Some(tampered),
    }))
    .await
    .unwrap()
    .into_inner();
    assert_eq!(code(imported.status.as_ref()), ErrorCode::InvalidArgument);
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_initializations_of_one_attempt_allocate_one_session() {
    let mut fixture = Fixture::start("race").await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let mut client = fixture.client().await;
        tasks.push(tokio::spawn(async move {
            client
                .initialize(initialize(Some([7; 16]), None))
                .await
                .unwrap()
                .into_inner()
                .encode_to_vec()
        }));
    }
    let mut responses = Vec::new();
    for task in tasks {
        responses.push(bounded(task).await.unwrap());
    }
    // Whether it waited for the owner or found the committed record, every caller got the
    // exact same response, and only one session exists.
    assert!(responses.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(fixture.daemon().host().sessions().len(), 1);
    assert_eq!(fixture.daemon().server().registry_sizes(), (1, 1));
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_range_defaults_to_production_and_allows_a_private_prefix() {
    use agent_protocol::negotiate::version;
    use agent_protocol::pb::common::v1::ProtocolRange;
    let range = |lo, hi| ProtocolRange {
        minimum: Some(lo),
        maximum: Some(hi),
    };
    // Production: a 1.3-only client negotiates 1.3.
    let mut fixture = Fixture::start("range-default").await;
    let mut client = fixture.client().await;
    let response = bounded(client.initialize(initialize(Some([3; 16]), None)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(response.status.as_ref()), ErrorCode::Ok);
    assert_eq!(response.protocol.unwrap().minor, 3);
    fixture.shutdown().await;
    // A private prefix 1.0-1.2: legacy clients negotiate 1.2, a 1.3-only client is refused
    // with a typed status and allocates nothing.
    let mut fixture = Fixture::with(
        "range-prefix",
        agent_server::fixture::FixtureOptions::default(),
        move |config| {
            config.protocol = Some(range(version(1, 0, 0), version(1, 2, 0)));
        },
    )
    .await;
    let mut client = fixture.client().await;
    let legacy = bounded(client.initialize(initialize(None, None)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(legacy.status.as_ref()), ErrorCode::Ok);
    assert_eq!(legacy.protocol.unwrap().minor, 2);
    let refused = bounded(client.initialize(initialize(Some([4; 16]), None)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code(refused.status.as_ref()),
        ErrorCode::IncompatibleVersion
    );
    assert_eq!(fixture.daemon().server().registry_sizes(), (1, 0));
    fixture.shutdown().await;
    // Anything that is not such a prefix is refused at construction.
    let temp = TempDir::new("range-bad");
    let root = tokio_util::sync::CancellationToken::new();
    for bad in [
        range(version(1, 1, 0), version(1, 3, 0)),
        range(version(1, 0, 0), version(1, 4, 0)),
        range(version(1, 0, 0), version(1, 2, 1)),
    ] {
        let host =
            agent_server::fixture::host(&root, &temp.path().join("authority"), Default::default())
                .await
                .unwrap();
        let mut config = agent_server::ServerConfig::new(
            agent_endpoint::EndpointToken::generate().unwrap(),
            host.clone(),
            build(),
        );
        config.protocol = Some(bad);
        assert_eq!(
            agent_server::Server::new(config).unwrap_err(),
            agent_server::ServerError::ProtocolRange,
            "{bad:?}"
        );
        bounded(host.shutdown()).await.unwrap();
    }
    root.cancel();
}
