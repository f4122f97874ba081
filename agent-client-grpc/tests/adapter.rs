//! The gRPC adapter against a scripted fake `EngineService` on a Unix
//! socket (the adapter rules of docs/client.md).

mod support;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::task::Poll;

use agent_client::{
    self as c, Connector as _, EventStream as _, InteractionStream as _, Session as _,
};
use agent_client_grpc::{Config, GrpcConnector};
use agent_protocol::pb::common::v1 as pbc;
use agent_protocol::pb::engine::v1 as pbe;
use support::*;
use tonic::Status;

fn status(code: pbc::ErrorCode, detail: Option<pbc::status::Detail>, op: &str) -> pbc::Status {
    pbc::Status {
        code: code as i32,
        message: "scripted failure".into(),
        retryable: false,
        operation_id: op.into(),
        detail,
    }
}

fn start_request(op: &str) -> c::StartRequest {
    c::StartRequest {
        operation: c::OperationId::new(op).unwrap(),
        definition: c::DefinitionRef::new("echo", "1").unwrap(),
        input: c::Input::new("m1", "hello").unwrap(),
    }
}

fn options(tail: bool) -> c::EventStreamOptions {
    c::EventStreamOptions::new(8, tail, &client_limits()).unwrap()
}

fn cursor(after: u64) -> c::Cursor {
    c::Cursor::new(c::RunRef::new("run-1").unwrap(), after)
}

/// Polls `fut` exactly once.
async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *fut).poll(cx))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_negotiates_and_sends_the_bearer_token() {
    let server = Server::start();
    let session = server.connector().initialize(fresh()).await.unwrap();
    let conn = session.connection();
    assert_eq!(conn.epoch(), 1);
    assert_eq!(conn.protocol(), v(2));
    assert_eq!(conn.server().component(), "fake-daemon");
    assert_eq!(conn.catalog().definitions().len(), 1);
    assert_eq!(server.script.unauthorized.load(Ordering::SeqCst), 0);

    let wrong = GrpcConnector::new(Config::unix(&server.socket, "wrong-token").unwrap());
    let err = wrong.initialize(fresh()).await.unwrap_err();
    assert_eq!(err.status_code(), Some(c::StatusCode::Unauthenticated));
    assert!(!err.retryable());
    assert_eq!(server.script.unauthorized.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_closes_and_joins_prior_stream() {
    let server = Server::start();
    let connector = server.connector();
    let prior = connector.initialize(fresh()).await.unwrap();
    let tx = server.script_events();
    tx.send(Ok(control(1, 0, 0, true))).await.unwrap();
    let mut stream = prior.events(cursor(0), options(true)).await.unwrap();
    assert!(matches!(
        stream.next().await,
        Ok(Some(c::EventFrame::Control(_)))
    ));

    let claim = prior.connection().reconnect_claim().unwrap();
    let next = connector.initialize(reconnect(claim)).await.unwrap();
    assert_eq!(next.connection().epoch(), 2);
    assert_eq!(
        next.connection().client_id(),
        prior.connection().client_id()
    );
    // The prior session was fenced before the reconnect was sent, and its
    // stream's reader has exited: the RPC is gone on the server too.
    assert_eq!(stream.next().await, Err(c::Error::Closed));
    assert_eq!(prior.health().await, Err(c::Error::Closed));
    assert_eq!(prior.connection().epoch(), 1, "Connection survives close");
    server.script.streams.wait_dropped(1).await;
    drop(tx);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_serializes_with_one_waiter_and_overload_facts() {
    let server = Server::start();
    let connector = server.connector();
    let prior = connector.initialize(fresh()).await.unwrap();
    let claim = prior.connection().reconnect_claim().unwrap();
    server
        .script
        .initialize
        .lock()
        .unwrap()
        .push_back(InitStep::Hold);

    let held = server.script.held.notified();
    let mut holder = Box::pin(connector.initialize(reconnect(claim.clone())));
    let mut held = std::pin::pin!(held);
    tokio::select! {
        _ = &mut holder => panic!("the held Initialize answered"),
        _ = &mut held => {}
    }
    // The waiter enters the gate and parks on it.
    let mut waiter = Box::pin(connector.initialize(reconnect(claim.clone())));
    assert!(poll_once(&mut waiter).await.is_pending());
    // A second waiter is refused with the gate's overload facts.
    match connector.initialize(reconnect(claim.clone())).await {
        Err(c::Error::Overload(o)) => {
            assert_eq!(o.resource(), "client-reconnect-waiters");
            assert_eq!((o.limit(), o.observed()), (1, 2));
            assert!(o.facts().retryable());
        }
        other => panic!("expected overload, got {other:?}"),
    }
    // Cancelling the holder hands the gate to the waiter, which reconnects.
    drop(holder);
    let next = waiter.await.unwrap();
    assert_eq!(next.connection().epoch(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn future_reconnect_claim_does_not_fence_local_prior() {
    let server = Server::start();
    let connector = server.connector();
    let prior = connector.initialize(fresh()).await.unwrap();
    let tx = server.script_events();
    tx.send(Ok(control(1, 0, 0, true))).await.unwrap();
    let mut stream = prior.events(cursor(0), options(true)).await.unwrap();
    assert!(matches!(
        stream.next().await,
        Ok(Some(c::EventFrame::Control(_)))
    ));

    let stale = status(
        pbc::ErrorCode::StaleClient,
        Some(pbc::status::Detail::StaleClient(pbc::StaleClient {
            expected_epoch: 1,
            observed_epoch: 5,
        })),
        "",
    );
    server
        .script
        .initialize
        .lock()
        .unwrap()
        .push_back(InitStep::Respond(Box::new(
            agent_protocol::initialize::initialize_failure_response(stale),
        )));
    let claim = c::ReconnectClaim::new(prior.connection().client_id(), 5).unwrap();
    match connector.initialize(reconnect(claim)).await {
        Err(c::Error::StaleSession(s)) => assert_eq!((s.expected(), s.observed()), (5, 1)),
        other => panic!("expected stale session, got {other:?}"),
    }
    // The prior session and its stream are untouched.
    tx.send(Ok(delta("run-1", 1))).await.unwrap();
    match stream.next().await {
        Ok(Some(c::EventFrame::Event(e))) => assert_eq!(e.sequence(), 1),
        other => panic!("expected the tail event, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempt_retry_is_capped_at_two_and_caller_retains_identity() {
    let server = Server::start();
    let connector = server.connector();
    {
        let mut steps = server.script.initialize.lock().unwrap();
        steps.push_back(InitStep::Fail(Status::unavailable("down")));
        steps.push_back(InitStep::Fail(Status::unavailable("down")));
    }
    let request = fresh_with_attempt([9; 16]);
    match connector.initialize(request.clone()).await {
        Err(c::Error::InitializationReplay(r)) => {
            assert_eq!(r.attempt().bytes(), &[9; 16]);
            assert!(r.facts().retryable());
            assert!(r.facts().operation().is_none());
        }
        other => panic!("expected a replayable attempt, got {other:?}"),
    }
    assert_eq!(server.script.initialize_calls.load(Ordering::SeqCst), 2);
    {
        let seen = server.script.initialize_seen.lock().unwrap();
        assert_eq!(seen[0], seen[1], "the resend is byte-identical");
    }
    // The caller replays the same attempt and gets the committed outcome.
    let session = connector.initialize(request).await.unwrap();
    assert_eq!(session.connection().protocol(), v(3));
    let seen = server.script.initialize_seen.lock().unwrap();
    assert_eq!(seen[2], seen[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_and_definitive_initialize_failures_are_not_retried() {
    let server = Server::start();
    let connector = server.connector();
    let calls = || server.script.initialize_calls.load(Ordering::SeqCst);
    let push = |s: Status| {
        server
            .script
            .initialize
            .lock()
            .unwrap()
            .push_back(InitStep::Fail(s))
    };

    push(Status::internal("ambiguous"));
    assert!(matches!(
        connector.initialize(fresh_with_attempt([3; 16])).await,
        Err(c::Error::InitializationReplay(_))
    ));
    assert_eq!(calls(), 1);

    push(Status::permission_denied("no"));
    let err = connector
        .initialize(fresh_with_attempt([3; 16]))
        .await
        .unwrap_err();
    assert_eq!(err.status_code(), Some(c::StatusCode::Unauthenticated));
    assert_eq!(calls(), 2);

    push(Status::invalid_argument("no"));
    let err = connector
        .initialize(fresh_with_attempt([3; 16]))
        .await
        .unwrap_err();
    assert_eq!(err.status_code(), Some(c::StatusCode::InvalidArgument));
    assert_eq!(calls(), 3);

    // Legacy requests are never resent and never retryable after loss.
    push(Status::unavailable("down"));
    let err = connector.initialize(fresh()).await.unwrap_err();
    assert_eq!(err.status_code(), Some(c::StatusCode::Unavailable));
    assert!(!err.retryable());
    assert_eq!(calls(), 4);

    let claim = c::ReconnectClaim::new("client-9", 1).unwrap();
    push(Status::unavailable("down"));
    let err = connector.initialize(reconnect(claim)).await.unwrap_err();
    assert_eq!(err.status_code(), Some(c::StatusCode::Unavailable));
    assert!(!err.retryable(), "do not retry the same claim");
    assert_eq!(calls(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutation_transport_outcomes_are_explicit() {
    let mut server = Server::start();
    let session = server.connector().initialize(fresh()).await.unwrap();
    let set = |f: fn(&pbe::StartRunRequest) -> Result<pbe::StartRunResponse, Status>| {
        *server.script.start.lock().unwrap() = Some(Box::new(f));
    };

    set(|_| Err(Status::unavailable("stopping")));
    match session.start(start_request("op-1")).await {
        Err(c::Error::UncertainOperation(u)) => {
            assert_eq!(u.operation().as_str(), "op-1");
            assert_eq!(u.kind(), "start");
            assert!(!u.facts().retryable());
        }
        other => panic!("expected uncertain, got {other:?}"),
    }
    set(|_| Err(Status::aborted("broken")));
    assert!(matches!(
        session.start(start_request("op-2")).await,
        Err(c::Error::UncertainOperation(_))
    ));
    set(|_| Err(Status::invalid_argument("bad")));
    assert_eq!(
        session
            .start(start_request("op-3"))
            .await
            .unwrap_err()
            .status_code(),
        Some(c::StatusCode::InvalidArgument)
    );
    set(|_| Err(Status::unauthenticated("no")));
    assert_eq!(
        session
            .start(start_request("op-4"))
            .await
            .unwrap_err()
            .status_code(),
        Some(c::StatusCode::Unauthenticated)
    );
    set(|r| {
        Ok(pbe::StartRunResponse {
            status: Some(agent_protocol::status::ok_status()),
            run_id: "run-1".into(),
            initial_sequence: 1,
            duplicate_operation: r.client_operation_id == "op-dup",
            plan_id: "plan-1".into(),
        })
    });
    let started = session.start(start_request("op-5")).await.unwrap();
    assert_eq!(
        (started.run().as_str(), started.initial_sequence()),
        ("run-1", 1)
    );
    assert!(
        session
            .start(start_request("op-dup"))
            .await
            .unwrap()
            .duplicate()
    );

    // The daemon dies while the call is in flight: the outcome is unknown.
    *server.script.start.lock().unwrap() = None;
    let held = server.script.held.notified();
    let call = session.start(start_request("op-6"));
    let mut call = std::pin::pin!(call);
    tokio::select! {
        _ = held => {}
        r = &mut call => panic!("held call answered: {r:?}"),
    }
    server.kill();
    match call.await {
        Err(c::Error::UncertainOperation(u)) => assert_eq!(u.operation().as_str(), "op-6"),
        other => panic!("expected uncertain after transport loss, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_translation_rejects_correlation_mismatch() {
    let server = Server::start();
    let session = server.connector().initialize(fresh()).await.unwrap();
    let reply = |s: pbc::Status| {
        *server.script.start.lock().unwrap() = Some(Box::new(move |_| {
            Ok(pbe::StartRunResponse {
                status: Some(s.clone()),
                ..Default::default()
            })
        }));
    };
    let violation = c::Error::Protocol(c::Error::PROTOCOL_VIOLATION);

    reply(status(pbc::ErrorCode::Conflict, None, "other-op"));
    assert_eq!(
        session.start(start_request("op-1")).await,
        Err(violation.clone())
    );

    reply(status(pbc::ErrorCode::Conflict, None, "op-1"));
    match session.start(start_request("op-1")).await {
        Err(c::Error::Status(s)) => {
            assert_eq!(s.code, c::StatusCode::Conflict);
            assert_eq!(
                s.facts.operation().map(c::OperationId::as_str),
                Some("op-1")
            );
        }
        other => panic!("expected conflict, got {other:?}"),
    }

    let stale = |observed| {
        status(
            pbc::ErrorCode::StaleClient,
            Some(pbc::status::Detail::StaleClient(pbc::StaleClient {
                expected_epoch: 7,
                observed_epoch: observed,
            })),
            "",
        )
    };
    reply(stale(3));
    assert_eq!(
        session.start(start_request("op-1")).await,
        Err(violation.clone())
    );
    reply(stale(1));
    assert!(matches!(
        session.start(start_request("op-1")).await,
        Err(c::Error::StaleSession(_))
    ));

    let uncertain = |op: &str| {
        status(
            pbc::ErrorCode::UncertainOperation,
            Some(pbc::status::Detail::UncertainOperation(
                pbc::UncertainOperation {
                    operation_id: op.into(),
                    operation_kind: "start".into(),
                },
            )),
            "",
        )
    };
    reply(uncertain("op-2"));
    assert_eq!(
        session.start(start_request("op-1")).await,
        Err(violation.clone())
    );
    reply(uncertain("op-1"));
    assert!(matches!(
        session.start(start_request("op-1")).await,
        Err(c::Error::UncertainOperation(_))
    ));

    // OUT_OF_RANGE belongs to event streams only.
    reply(status(
        pbc::ErrorCode::OutOfRange,
        Some(pbc::status::Detail::ReplayBounds(pbc::ReplayBounds {
            requested_after_sequence: 9,
            earliest_sequence: 1,
            latest_sequence: 5,
            recovery_sequence: 5,
        })),
        "",
    ));
    assert_eq!(session.start(start_request("op-1")).await, Err(violation));
}

async fn open(
    server: &Server,
    frames: Vec<pbe::StreamEventsResponse>,
    after: u64,
    tail: bool,
) -> (
    c::Error,
    Option<agent_client_grpc::GrpcEventStream>,
    tokio::sync::mpsc::Sender<Result<pbe::StreamEventsResponse, Status>>,
) {
    let session = server.connector().initialize(fresh()).await.unwrap();
    let tx = server.script_events();
    for f in frames {
        tx.send(Ok(f)).await.unwrap();
    }
    match session.events(cursor(after), options(tail)).await {
        Ok(s) => {
            // Keep the session alive with the stream.
            std::mem::forget(session);
            (c::Error::Closed, Some(s), tx)
        }
        Err(e) => (e, None, tx),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_page_and_tail_reject_protocol_violations() {
    let server = Server::start();
    let violation = |e: &c::Error| matches!(e, c::Error::Protocol(_));

    // Page: contiguous from `after`, closes at the last event.
    let (_, s, _tx) = open(
        &server,
        vec![
            delta("run-1", 3),
            delta("run-1", 4),
            control(1, 4, 4, false),
        ],
        2,
        false,
    )
    .await;
    let mut s = s.expect("valid page");
    for seq in [3, 4] {
        assert!(matches!(s.next().await, Ok(Some(c::EventFrame::Event(e))) if e.sequence() == seq));
    }
    assert!(matches!(
        s.next().await,
        Ok(Some(c::EventFrame::Control(_)))
    ));
    drop(_tx);
    assert_eq!(s.next().await, Ok(None), "EOF ends the stream");

    let (e, _, _tx) = open(
        &server,
        vec![delta("run-1", 4), control(1, 4, 4, false)],
        2,
        false,
    )
    .await;
    assert!(violation(&e), "gap in the page: {e:?}");
    let (e, _, _tx) = open(
        &server,
        vec![delta("run-1", 3), control(1, 4, 4, false)],
        2,
        false,
    )
    .await;
    assert!(violation(&e), "control past the last event: {e:?}");
    let (e, _, _tx) = open(&server, vec![control(1, 0, 0, true)], 0, false).await;
    assert!(
        violation(&e),
        "tailing control on a non-tail request: {e:?}"
    );
    let gap = status(
        pbc::ErrorCode::OutOfRange,
        Some(pbc::status::Detail::ReplayBounds(pbc::ReplayBounds {
            requested_after_sequence: 9,
            earliest_sequence: 1,
            latest_sequence: 5,
            recovery_sequence: 5,
        })),
        "",
    );
    let (e, _, _tx) = open(&server, vec![error_control(gap.clone())], 9, false).await;
    match e {
        c::Error::CursorGap(g) => assert_eq!((g.requested(), g.recovery()), (9, 5)),
        other => panic!("expected a cursor gap, got {other:?}"),
    }
    let (e, _, _tx) = open(&server, vec![error_control(gap.clone())], 8, false).await;
    assert!(violation(&e), "OUT_OF_RANGE must echo the cursor: {e:?}");
    let (e, _, _tx) = open(
        &server,
        vec![delta("run-1", 10), error_control(gap)],
        9,
        false,
    )
    .await;
    assert!(
        violation(&e),
        "an error control only before any event: {e:?}"
    );

    // Tail: a frame after a non-tailing control.
    let (_, s, tx) = open(&server, vec![control(1, 0, 0, false)], 0, false).await;
    let mut s = s.unwrap();
    tx.send(Ok(delta("run-1", 1))).await.unwrap();
    assert!(matches!(
        s.next().await,
        Ok(Some(c::EventFrame::Control(_)))
    ));
    assert!(violation(&s.next().await.unwrap_err()));

    // Tail: contiguity, OK controls and error controls.
    let tail_case = |frame: pbe::StreamEventsResponse| async {
        let (_, s, tx) = open(&server, vec![control(1, 0, 0, true)], 0, true).await;
        let mut s = s.unwrap();
        assert!(matches!(
            s.next().await,
            Ok(Some(c::EventFrame::Control(_)))
        ));
        tx.send(Ok(delta("run-1", 1))).await.unwrap();
        assert!(matches!(s.next().await, Ok(Some(c::EventFrame::Event(_)))));
        tx.send(Ok(frame)).await.unwrap();
        s.next().await
    };
    assert!(violation(&tail_case(delta("run-1", 3)).await.unwrap_err()));
    assert!(violation(&tail_case(delta("run-2", 2)).await.unwrap_err()));
    assert!(violation(
        &tail_case(control(1, 1, 1, true)).await.unwrap_err()
    ));
    let err = tail_case(error_control(status(pbc::ErrorCode::Unavailable, None, "")))
        .await
        .unwrap_err();
    assert_eq!(err.status_code(), Some(c::StatusCode::Unavailable));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_page_rejects_oversized_first_replay_event() {
    let server = Server::start();
    // Negotiated replay bytes are 4096; one event alone exceeds them.
    let text = "x".repeat(5000);
    let payload = format!(r#"{{"text":"{text}"}}"#);
    let big = event("run-1", 1, pbe::EventKind::ModelDelta, payload.as_bytes());
    let (e, _, _tx) = open(&server, vec![big, control(1, 1, 1, false)], 0, false).await;
    assert!(matches!(e, c::Error::Protocol(_)), "{e:?}");
    // Just under the bound passes.
    let text = "x".repeat(3000);
    let payload = format!(r#"{{"text":"{text}"}}"#);
    let fits = event("run-1", 1, pbe::EventKind::ModelDelta, payload.as_bytes());
    let (_, s, _tx) = open(&server, vec![fits, control(1, 1, 1, false)], 0, false).await;
    assert!(s.is_some());
}

fn pending(id: &str) -> pbe::PendingInteraction {
    pbe::PendingInteraction {
        run_id: "run-1".into(),
        interaction_id: id.into(),
        kind: "approval".into(),
        prompt: "Allow?".into(),
        schema_json: br#"{"type":"boolean"}"#.to_vec(),
    }
}

fn interaction_page(
    revision: u64,
    items: Vec<pbe::PendingInteraction>,
    tailing: bool,
) -> Vec<pbe::StreamInteractionsResponse> {
    use pbe::stream_interactions_response::Payload;
    vec![
        pbe::StreamInteractionsResponse {
            payload: Some(Payload::Snapshot(pbe::InteractionSnapshot {
                revision,
                pending: items,
            })),
        },
        pbe::StreamInteractionsResponse {
            payload: Some(Payload::Control(pbe::InteractionStreamControl {
                status: Some(agent_protocol::status::ok_status()),
                latest_revision: revision,
                page_last_revision: revision,
                has_more: false,
                tailing,
            })),
        },
    ]
}

fn interaction_delta(
    revision: u64,
    kind: pbe::InteractionDeltaKind,
    item: pbe::PendingInteraction,
) -> pbe::StreamInteractionsResponse {
    pbe::StreamInteractionsResponse {
        payload: Some(pbe::stream_interactions_response::Payload::Delta(
            pbe::InteractionDelta {
                revision,
                kind: kind as i32,
                interaction: Some(item),
            },
        )),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interaction_tail_rejects_protocol_violations() {
    let server = Server::start();
    let session = server.connector().initialize(fresh()).await.unwrap();
    let case = |frames: Vec<pbe::StreamInteractionsResponse>, tail: bool| {
        let tx = server.script_interactions();
        let session = &session;
        async move {
            for f in frames {
                tx.send(Ok(f)).await.unwrap();
            }
            (
                session
                    .interactions(c::InteractionStreamOptions { tail })
                    .await,
                tx,
            )
        }
    };
    use pbe::InteractionDeltaKind::{Closed, Opened};

    // A valid page and tail.
    let (s, tx) = case(interaction_page(1, vec![pending("i-1")], true), true).await;
    let mut s = s.unwrap();
    assert!(
        matches!(s.next().await, Ok(Some(c::InteractionFrame::Snapshot(snap))) if snap.pending().len() == 1)
    );
    assert!(matches!(
        s.next().await,
        Ok(Some(c::InteractionFrame::Control(_)))
    ));
    tx.send(Ok(interaction_delta(2, Opened, pending("i-2"))))
        .await
        .unwrap();
    assert!(
        matches!(s.next().await, Ok(Some(c::InteractionFrame::Update(u))) if u.revision() == 2)
    );
    tx.send(Ok(interaction_delta(3, Closed, pending("i-1"))))
        .await
        .unwrap();
    assert!(
        matches!(s.next().await, Ok(Some(c::InteractionFrame::Update(u))) if u.kind() == c::InteractionUpdateKind::Closed)
    );
    // Revision gap.
    tx.send(Ok(interaction_delta(5, Opened, pending("i-3"))))
        .await
        .unwrap();
    assert!(matches!(s.next().await, Err(c::Error::Protocol(_))));

    let tail_violation = |frame| async {
        let (s, tx) = case(interaction_page(1, vec![pending("i-1")], true), true).await;
        let mut s = s.unwrap();
        s.next().await.unwrap();
        s.next().await.unwrap();
        tx.send(Ok(frame)).await.unwrap();
        s.next().await
    };
    assert!(
        matches!(
            tail_violation(interaction_delta(2, Opened, pending("i-1"))).await,
            Err(c::Error::Protocol(_))
        ),
        "open twice"
    );
    assert!(
        matches!(
            tail_violation(interaction_delta(2, Closed, pending("i-9"))).await,
            Err(c::Error::Protocol(_))
        ),
        "close unknown"
    );
    let mut changed = pending("i-1");
    changed.prompt = "Other?".into();
    assert!(
        matches!(
            tail_violation(interaction_delta(2, Closed, changed)).await,
            Err(c::Error::Protocol(_))
        ),
        "close mismatch"
    );

    // A frame after a non-tailing page.
    let (s, tx) = case(interaction_page(1, vec![], false), false).await;
    let mut s = s.unwrap();
    s.next().await.unwrap();
    s.next().await.unwrap();
    tx.send(Ok(interaction_delta(2, Opened, pending("i-1"))))
        .await
        .unwrap();
    assert!(matches!(s.next().await, Err(c::Error::Protocol(_))));

    // Tailing flag differs from the request.
    let (s, _tx) = case(interaction_page(1, vec![], true), false).await;
    assert!(matches!(s, Err(c::Error::Protocol(_))));

    // An error control first becomes a typed error.
    let (s, _tx) = case(
        vec![pbe::StreamInteractionsResponse {
            payload: Some(pbe::stream_interactions_response::Payload::Control(
                pbe::InteractionStreamControl {
                    status: Some(status(pbc::ErrorCode::Unavailable, None, "")),
                    ..Default::default()
                },
            )),
        }],
        true,
    )
    .await;
    assert_eq!(
        s.unwrap_err().status_code(),
        Some(c::StatusCode::Unavailable)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_close_ends_streams_and_later_calls() {
    let server = Server::start();
    let session = server.connector().initialize(fresh()).await.unwrap();
    let tx = server.script_events();
    tx.send(Ok(control(1, 0, 0, true))).await.unwrap();
    let mut stream = session.events(cursor(0), options(true)).await.unwrap();
    stream.next().await.unwrap();
    let pending_next = tokio::spawn(async move { stream.next().await });
    session.close();
    session.close();
    assert_eq!(pending_next.await.unwrap(), Err(c::Error::Closed));
    assert_eq!(
        session.start(start_request("op")).await,
        Err(c::Error::Closed)
    );
    server.script.streams.wait_dropped(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_the_negotiated_server_identity() {
    let server = Server::start();
    let session = server.connector().initialize(fresh()).await.unwrap();
    let reply = |component: &'static str, minor: u32| {
        *server.script.health.lock().unwrap() = Some(Box::new(move |_| {
            let mut build = server_build();
            build.component = component.into();
            Ok(pbe::HealthResponse {
                status: Some(agent_protocol::status::ok_status()),
                server: Some(build),
                protocol: Some(pbc::ProtocolVersion {
                    major: 1,
                    minor,
                    patch: 0,
                }),
                health: Some(pbc::Health {
                    state: pbc::HealthState::Degraded as i32,
                    degraded_reasons: vec!["disk".into()],
                    active_runs: 1,
                    limits: Some(server_limits()),
                }),
            })
        }));
    };
    reply("fake-daemon", 2);
    let health = session.health().await.unwrap();
    assert_eq!(health.state(), c::HealthState::Degraded);
    assert_eq!(health.degraded_reasons(), ["disk"]);
    reply("another-daemon", 2);
    assert!(matches!(session.health().await, Err(c::Error::Protocol(_))));
    reply("fake-daemon", 1);
    assert!(matches!(session.health().await, Err(c::Error::Protocol(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_live_session_for_one_client_is_a_protocol_error() {
    let server = Server::start();
    let connector = server.connector();
    let first = connector.initialize(fresh()).await.unwrap();
    // The daemon grants the same client id to a fresh request again.
    let mut again = accept(
        &{
            let seen = server.script.initialize_seen.lock().unwrap();
            <pbe::InitializeRequest as prost::Message>::decode(seen[0].as_slice()).unwrap()
        },
        1,
    );
    again.client_id = first.connection().client_id().to_owned();
    server
        .script
        .initialize
        .lock()
        .unwrap()
        .push_back(InitStep::Respond(Box::new(again.clone())));
    assert!(matches!(
        connector.initialize(fresh()).await,
        Err(c::Error::Protocol(_))
    ));
    // Once the first is closed, the id may be installed again.
    first.close();
    server
        .script
        .initialize
        .lock()
        .unwrap()
        .push_back(InitStep::Respond(Box::new(again)));
    assert!(connector.initialize(fresh()).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_does_not_wait_for_an_unread_full_stream() {
    let server = Server::start();
    let connector = server.connector();
    let prior = connector.initialize(fresh()).await.unwrap();
    let tx = server.script_events();
    tx.send(Ok(control(1, 0, 0, true))).await.unwrap();
    let stream = prior.events(cursor(0), options(true)).await.unwrap();
    // More tail frames than the reader may buffer; nobody reads them.
    let frames = agent_client_grpc::STREAM_BUFFER_FRAMES as u64 * 3;
    for seq in 1..=frames {
        tx.send(Ok(delta("run-1", seq))).await.unwrap();
    }
    let claim = prior.connection().reconnect_claim().unwrap();
    let next = connector.initialize(reconnect(claim)).await.unwrap();
    assert_eq!(next.connection().epoch(), 2);
    let mut stream = stream;
    // Buffered frames are not delivered after close.
    assert_eq!(stream.next().await, Err(c::Error::Closed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_transport_loss_is_fail_closed_for_fresh_and_reconnect() {
    for (request, replayable) in [
        (fresh(), false),
        (
            reconnect(c::ReconnectClaim::new("client-1", 1).unwrap()),
            false,
        ),
        (fresh_with_attempt([4; 16]), true),
    ] {
        let mut server = Server::start();
        server
            .script
            .initialize
            .lock()
            .unwrap()
            .push_back(InitStep::Hold);
        let connector = server.connector();
        let held = server.script.held.notified();
        let call = connector.initialize(request);
        let mut call = std::pin::pin!(call);
        tokio::select! {
            _ = held => {}
            r = &mut call => panic!("held Initialize answered: {r:?}"),
        }
        // The daemon dies after the request arrived: nothing is known.
        server.kill();
        let err = call.await.unwrap_err();
        if replayable {
            assert!(matches!(err, c::Error::InitializationReplay(_)), "{err:?}");
        } else {
            assert_eq!(
                err.status_code(),
                Some(c::StatusCode::Unavailable),
                "{err:?}"
            );
            assert!(!err.retryable(), "never resend the same legacy request");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connectors_and_sessions_are_redacted() {
    let server = Server::start();
    let config = Config::unix(&server.socket, TOKEN).unwrap();
    assert!(!format!("{config:?}").contains(TOKEN));
    let connector = GrpcConnector::new(config);
    let session = connector.initialize(fresh()).await.unwrap();
    for text in [format!("{connector:?}"), format!("{session:?}")] {
        assert!(!text.contains(TOKEN), "{text}");
        assert!(!text.contains("engine.sock"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_kind_decodes_into_its_detail() {
    use pbe::EventKind as K;
    let cases: [(K, &[u8]); 19] = [
        (K::RunStarted, br#"{"definition":"echo"}"#),
        (K::RunCompleted, b""),
        (K::RunFailed, br#"{"error":"model failed"}"#),
        (K::RunCancelled, br#"{"error":"cancelled by client"}"#),
        (K::TurnStarted, br#"{"turn":1}"#),
        (K::TurnCompleted, br#"{"turn":1}"#),
        (K::TurnFailed, br#"{"error":"turn failed"}"#),
        (K::ModelStarted, br#"{"turn":1,"operation_id":"m-1"}"#),
        (K::ModelDelta, br#"{"text":"hi"}"#),
        (K::ModelCompleted, br#"{"input_tokens":3,"output_tokens":4}"#),
        (K::ModelFailed, br#"{"code":"rate-limited","message":"slow down","retryable":true,"before_stream":true}"#),
        (K::ToolStarted, br#"{"call_id":"c-1","name":"read"}"#),
        (K::ToolProgress, br#"{"call_id":"c-1","message":"half"}"#),
        (K::ToolCompleted, br#"{"call_id":"c-1","name":"read"}"#),
        (K::ToolFailed, br#"{"call_id":"c-1","name":"write","error":"lost","outcome":"uncertain","retry":"never"}"#),
        (K::InteractionStarted, br#"{"id":"i-1","kind":"approval"}"#),
        (K::InteractionCompleted, br#"{"id":"i-1"}"#),
        (K::InteractionFailed, br#"{"id":"i-1","error":"timed out"}"#),
        (K::InteractionCancelled, br#"{"id":"i-1","error":"run cancelled"}"#),
    ];
    let server = Server::start();
    let session = server.connector().initialize(fresh()).await.unwrap();
    let tx = server.script_events();
    tx.send(Ok(control(1, 0, 0, true))).await.unwrap();
    let mut stream = session.events(cursor(0), options(true)).await.unwrap();
    assert!(matches!(
        stream.next().await,
        Ok(Some(c::EventFrame::Control(_)))
    ));
    for (i, (kind, payload)) in cases.iter().enumerate() {
        tx.send(Ok(event("run-1", i as u64 + 1, *kind, payload)))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    for _ in 0..cases.len() {
        match stream.next().await {
            Ok(Some(c::EventFrame::Event(e))) => seen.push(e),
            other => panic!("expected an event, got {other:?}"),
        }
    }
    let kinds: Vec<&str> = seen.iter().map(|e| e.kind().name()).collect();
    let expected: Vec<&str> = c::EventKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(
        kinds, expected,
        "wire numbers map to the seam's kinds in order"
    );
    assert_eq!(
        seen[0].detail(),
        &c::EventDetail::RunStarted {
            definition: "echo".into()
        }
    );
    assert_eq!(seen[1].detail(), &c::EventDetail::RunCompleted);
    assert_eq!(
        seen[9].detail(),
        &c::EventDetail::ModelCompleted {
            usage: c::Usage {
                input_tokens: 3,
                output_tokens: 4
            }
        }
    );
    match seen[14].detail() {
        c::EventDetail::ToolTerminal(t) => {
            assert_eq!(t.outcome(), c::ToolOutcome::Uncertain);
            assert_eq!(t.retry(), c::ToolRetry::Never);
            assert_eq!(t.problem(), Some("lost"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        seen[18].detail(),
        &c::EventDetail::InteractionTerminal {
            id: "i-1".into(),
            problem: Some("run cancelled".into())
        }
    );

    // Payloads that break their kind's shape end the stream as violations.
    for (kind, payload) in [
        (K::RunCompleted, &br#"{}"#[..]),
        (K::ModelDelta, br#"{"text":"hi","extra":1}"#),
        (K::TurnStarted, b""),
        (
            K::ToolFailed,
            br#"{"call_id":"c","name":"n","error":"x","outcome":"uncertain"}"#,
        ),
        (
            K::ToolCompleted,
            br#"{"call_id":"c","name":"n","error":"x"}"#,
        ),
        // The kernel's own shapes are not the wire's: one decoding, the wire's.
        (K::RunStarted, br#"{"agent":"coder"}"#),
        (K::RunCancelled, b""),
        (K::RunFailed, br#"{"code":"model_failed"}"#),
        (K::TurnFailed, br#"{"code":"cancelled","turn":1}"#),
        (K::ModelStarted, br#"{"turn":1}"#),
        (
            K::ModelFailed,
            br#"{"problem":"x","retryable":false,"before_stream":true}"#,
        ),
        (
            K::ToolCompleted,
            br#"{"call_id":"c","name":"n","error":"","outcome":"success"}"#,
        ),
        (K::InteractionFailed, br#"{"id":"i","code":"declined"}"#),
        // Trailing JSON after the object.
        (K::TurnStarted, br#"{"turn":1}{"turn":2}"#),
    ] {
        let tx = server.script_events();
        tx.send(Ok(control(1, 0, 0, true))).await.unwrap();
        tx.send(Ok(event("run-1", 1, kind, payload))).await.unwrap();
        let mut stream = session.events(cursor(0), options(true)).await.unwrap();
        stream.next().await.unwrap();
        assert!(
            matches!(stream.next().await, Err(c::Error::Protocol(_))),
            "{kind:?} {}",
            String::from_utf8_lossy(payload)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_results_are_validated() {
    let server = Server::start();
    let session = server.connector().initialize(fresh()).await.unwrap();
    let set = |requested: bool, terminal: bool, sequence: u64| {
        *server.script.cancel.lock().unwrap() = Some(Box::new(move |r: &pbe::CancelRunRequest| {
            assert_eq!(r.reason, "user asked");
            Ok(pbe::CancelRunResponse {
                status: Some(agent_protocol::status::ok_status()),
                cancellation_requested: requested,
                already_terminal: terminal,
                terminal_sequence: sequence,
            })
        }));
    };
    let cancel = || {
        session.cancel(
            c::OperationId::new("op-c").unwrap(),
            c::RunRef::new("run-1").unwrap(),
            Some(c::CancelReason::new("user asked").unwrap()),
        )
    };
    set(true, false, 0);
    assert_eq!(cancel().await, Ok(c::CancelResult::Requested));
    set(false, true, 9);
    assert_eq!(cancel().await, Ok(c::CancelResult::AlreadyTerminal(9)));
    set(true, true, 9);
    assert!(matches!(cancel().await, Err(c::Error::Protocol(_))));
}
