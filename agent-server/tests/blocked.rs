//! A client that stops reading a tailing stream, over the real socket (contract sections
//! 3.4-3.9): an event tail falls behind the host's bounded subscription queue and ends
//! with an overload control, and so does an interaction tail whose observer queue is
//! exhausted; the blocked send holds its stream lease, so a reconnect
//! waits (and the reconnect gate's waiter bound is reached); a cancelled Initialize before
//! its commit leaves nothing behind; and a shutdown force-closes the blocked connection at
//! its deadline and returns.
//!
//! The run's model is gated: it yields nothing until the test opens the gate, then yields
//! [`DELTAS`] text deltas of [`CHUNK_BYTES`] each (far more than the subscription queue,
//! the server's stream buffer and HTTP/2's windows hold together).

mod support;

use std::sync::Arc;
use std::time::Duration;

use agent_core::agent::{AgentDefinition, Engine, EngineOptions};
use agent_core::event::LogLimits;
use agent_core::model::{
    EventStream, ModelProvider, ModelRequest, ProviderError, StreamError, StreamEvent, Usage,
};
use agent_core::stage::{Dispatcher, StaticToolPlanSource};
use agent_core::tool::BoxFuture;
use agent_daemon::definition::DefinitionSet;
use agent_protocol::pb::common::v1::ErrorCode;
use agent_protocol::pb::common::v1::status::Detail;
use agent_protocol::pb::engine::v1 as pb;
use agent_server::MAX_RECONNECT_WAITERS;
use agent_server::fixture::{self, FixtureError, FixtureOptions};
use support::*;
use tokio::sync::Notify;

/// The flood definition's id and model.
const FLOOD: &str = "flood";
/// Text deltas the flood model yields once its gate opens.
const DELTAS: usize = 4000;
/// Bytes per delta: the run's text stays below the kernel's 1 MiB text bound, and the
/// frames (about 1.3 MB) are more than twice what the server's stream buffer, hyper's send
/// buffer and the reading client's 64 KiB HTTP/2 windows hold.
const CHUNK_BYTES: usize = 1000;
/// The run log's per-subscriber queue bound in the lag test, small so the tail lags long
/// before the end.
const SUBSCRIBER_EVENTS: usize = 8;
/// The bound everywhere else: the whole flood fits, so the tail never lags and the stream
/// task stays blocked in its send until the client reads (or the connection is closed).
const UNLAGGING_EVENTS: usize = 2 * DELTAS;

/// The gate the model waits on.
#[derive(Clone, Default)]
struct Flood {
    gate: Arc<Notify>,
}

struct FloodStream {
    flood: Flood,
    opened: bool,
    sent: usize,
}

impl EventStream for FloodStream {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<StreamEvent>, StreamError>> {
        Box::pin(async move {
            if !self.opened {
                self.flood.gate.notified().await;
                self.opened = true;
            }
            self.sent += 1;
            if self.sent <= DELTAS {
                return Ok(Some(StreamEvent::TextDelta("x".repeat(CHUNK_BYTES))));
            }
            if self.sent == DELTAS + 1 {
                return Ok(Some(StreamEvent::Completed {
                    usage: Usage::new(1, 1),
                }));
            }
            Ok(None)
        })
    }
}

impl ModelProvider for Flood {
    fn stream(
        &self,
        _request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        let flood = self.clone();
        Box::pin(async move {
            Ok(Box::new(FloodStream {
                flood,
                opened: false,
                sent: 0,
            }) as Box<dyn EventStream>)
        })
    }
}

/// A daemon serving only the flood definition.
async fn flood_fixture(tag: &str, flood: &Flood, subscriber_events: usize) -> Fixture {
    let definitions = flood_definitions();
    let provider = flood.clone();
    Fixture::with_host(
        tag,
        move |root, authority| {
            let engine = move |pending: Arc<agent_daemon::pending::PendingRouter>| {
                let limits = LogLimits {
                    subscriber_max_events: subscriber_events,
                    subscriber_max_bytes: 64 << 20,
                    // The whole run stays retained, so a replay after any cursor works.
                    max_events: 4 * DELTAS,
                    ..LogLimits::default()
                };
                Engine::builder(
                    Arc::new(provider),
                    StaticToolPlanSource::from_dispatcher(
                        Dispatcher::new(Default::default()).unwrap(),
                    ),
                )
                .broker(pending)
                .options(EngineOptions::default().with_log_limits(limits))
                .build()
                .map_err(|_| FixtureError::Engine)
            };
            fixture::run_host(
                root,
                authority,
                FixtureOptions::default(),
                definitions,
                engine,
            )
            .unwrap()
        },
        |_| {},
    )
    .await
}

type Stream = tonic::Streaming<pb::StreamEventsResponse>;

/// A client whose HTTP/2 windows are the protocol's 64 KiB default (tonic's channel
/// otherwise accepts megabytes unread), so a client that stops reading blocks the server
/// soon.
async fn small_window_client(fixture: &Fixture) -> Client {
    let channel =
        tonic::transport::Endpoint::from_shared(format!("unix://{}", fixture.address.display()))
            .unwrap()
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(65_535)
            .connect()
            .await
            .unwrap();
    let authorization = fixture.token.authorization_value();
    let auth: Auth = Box::new(move |mut request: tonic::Request<()>| {
        request
            .metadata_mut()
            .insert("authorization", authorization.parse().unwrap());
        Ok(request)
    });
    agent_protocol::pb::engine::v1::engine_service_client::EngineServiceClient::with_interceptor(
        channel, auth,
    )
}

/// Starts a flood run and opens its tail: reads the initial page up to its control, then
/// opens the gate and stops reading. A second tail of the same run, on a connection that
/// is read, follows the run to its terminal event: then every event is in the first
/// tail's queue, and its stream task (which needs only a few hundred of them to fill the
/// buffers) is blocked in a send the client will not take.
async fn blocked_tail(
    fixture: &Fixture,
    flood: &Flood,
) -> (Client, (String, u64), String, Stream, u64) {
    let mut client = small_window_client(fixture).await;
    let s = session(&mut client).await;
    let run = start(&mut client, &s, "op-flood", FLOOD).await;
    let mut stream = bounded(client.stream_events(stream_request(&s, &run, 0, true)))
        .await
        .unwrap()
        .into_inner();
    let mut last = 0;
    loop {
        match bounded(stream.message()).await.unwrap().unwrap().payload {
            Some(pb::stream_events_response::Payload::Event(event)) => {
                assert_eq!(event.sequence, last + 1);
                last = event.sequence;
            }
            Some(pb::stream_events_response::Payload::Control(control)) => {
                assert_eq!(code(control.status.as_ref()), ErrorCode::Ok);
                assert!(control.tailing, "the run is still active: {control:?}");
                break;
            }
            None => panic!("a frame without payload"),
        }
    }
    flood.gate.notify_one();
    follow(fixture, &s, &run, last).await;
    (client, s, run, stream, last)
}

/// Follows `run` from `after` to its terminal event on a connection that is read, opening
/// the tail again after every page end and every lag (from the cursor the lag names).
async fn follow(fixture: &Fixture, s: &(String, u64), run: &str, mut after: u64) {
    let mut follower = fixture.client().await;
    loop {
        let mut tail = bounded(follower.stream_events(stream_request(s, run, after, true)))
            .await
            .unwrap()
            .into_inner();
        while let Some(frame) = bounded(tail.message()).await.unwrap() {
            match frame.payload {
                Some(pb::stream_events_response::Payload::Event(event)) => {
                    assert_eq!(event.sequence, after + 1, "gap-free");
                    after = event.sequence;
                    if is_run_terminal(&event) {
                        return;
                    }
                }
                Some(pb::stream_events_response::Payload::Control(control)) => {
                    let status = code(control.status.as_ref());
                    if status == ErrorCode::ResourceExhausted {
                        after = control.last_delivered_sequence;
                    } else {
                        assert_eq!(status, ErrorCode::Ok, "{control:?}");
                    }
                }
                None => panic!("a frame without payload"),
            }
        }
    }
}

/// Reads the rest of a stream: the last event (checked contiguous after `last`) and the
/// final control, if the stream did not end quietly (a fence).
async fn drain(stream: &mut Stream, mut last: u64) -> (u64, Option<pb::StreamControl>) {
    while let Some(frame) = bounded(stream.message()).await.unwrap() {
        match frame.payload {
            Some(pb::stream_events_response::Payload::Event(event)) => {
                assert_eq!(event.sequence, last + 1, "gap-free");
                last = event.sequence;
            }
            Some(pb::stream_events_response::Payload::Control(control)) => {
                assert!(bounded(stream.message()).await.unwrap().is_none());
                return (last, Some(control));
            }
            None => panic!("a frame without payload"),
        }
    }
    (last, None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_tail_ends_with_overload_facts_and_the_exact_cursor() {
    let flood = Flood::default();
    let mut fixture = flood_fixture("lag", &flood, SUBSCRIBER_EVENTS).await;
    let (mut client, s, run, mut stream, last) = blocked_tail(&fixture, &flood).await;
    let (last, control) = drain(&mut stream, last).await;
    let control = control.expect("a lag ends with a control");
    let status = control.status.as_ref().unwrap();
    assert_eq!(
        code(Some(status)),
        ErrorCode::ResourceExhausted,
        "{control:?}"
    );
    let Some(Detail::Overload(overload)) = &status.detail else {
        panic!("overload facts: {status:?}");
    };
    assert_eq!(overload.resource, "event_subscription_events");
    assert_eq!(overload.limit, SUBSCRIBER_EVENTS as u64);
    assert_eq!(overload.observed, SUBSCRIBER_EVENTS as u64 + 1);
    assert_eq!(
        control.last_delivered_sequence, last,
        "exactly what was delivered"
    );
    assert!(
        (last as usize) < DELTAS,
        "the tail fell behind before the end"
    );
    // The cursor is exact: a replay after it continues with the next event.
    let mut replay = bounded(client.stream_events(stream_request(&s, &run, last, false)))
        .await
        .unwrap()
        .into_inner();
    let Some(pb::stream_events_response::Payload::Event(next)) =
        bounded(replay.message()).await.unwrap().unwrap().payload
    else {
        panic!("an event follows the cursor");
    };
    assert_eq!(next.sequence, last + 1);
    drop(replay);
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_force_stops_a_blocked_stream_at_its_deadline() {
    let flood = Flood::default();
    let mut fixture = flood_fixture("force", &flood, UNLAGGING_EVENTS).await;
    let (_client, _s, _run, mut stream, _last) = blocked_tail(&fixture, &flood).await;
    // The stream's send is blocked on a client that stopped reading: a graceful stop cannot
    // finish, so the deadline forces it, and shutdown (server, then host) returns.
    let daemon = fixture.daemon.take().unwrap();
    let result = bounded(daemon.shutdown(Duration::from_millis(200))).await;
    assert!(result.is_ok(), "{result:?}");
    // The connection was closed under the stream: it ends without the control every
    // orderly end sends (an OK page end, a lag, a failure).
    let control = bounded(async {
        loop {
            match stream.message().await {
                Ok(Some(frame)) => {
                    if let Some(pb::stream_events_response::Payload::Control(control)) =
                        frame.payload
                    {
                        return Some(control);
                    }
                }
                Ok(None) | Err(_) => return None,
            }
        }
    })
    .await;
    assert_eq!(control, None, "the forced stop cut the stream off");
    assert!(!fixture.temp.path().join("scope/agent.sock").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sixty_fifth_reconnect_waiter_gets_overload_facts() {
    let flood = Flood::default();
    let mut fixture = flood_fixture("waiters", &flood, UNLAGGING_EVENTS).await;
    let (_client, s, _run, mut stream, last) = blocked_tail(&fixture, &flood).await;
    let mut waiters = fixture
        .daemon()
        .server()
        .reconnect_waiters(&s.0)
        .expect("the client is registered");
    waiters.borrow_and_update();
    let reconnect = |client: Client| {
        let claim = s.clone();
        tokio::spawn(async move {
            let mut client = client;
            client
                .initialize(initialize(None, Some((&claim.0, claim.1))))
                .await
                .unwrap()
                .into_inner()
        })
    };
    // The first reconnect takes the gate (it counts as a waiter until it holds it), then
    // waits in the session store for the blocked stream's lease.
    let holder = reconnect(fixture.client().await);
    bounded(waiters.changed()).await.unwrap();
    bounded(waiters.wait_for(|n| *n == 0)).await.unwrap();
    let mut queued = Vec::new();
    for _ in 0..MAX_RECONNECT_WAITERS {
        queued.push(reconnect(fixture.client().await));
    }
    if tokio::time::timeout(
        Duration::from_secs(5),
        waiters.wait_for(|n| *n == MAX_RECONNECT_WAITERS),
    )
    .await
    .is_err()
    {
        let done: Vec<_> = queued.iter().map(|t| t.is_finished()).collect();
        panic!(
            "stuck at {} holder {:?} done {:?}",
            *waiters.borrow(),
            holder.await,
            done
        );
    }
    let mut client = fixture.client().await;
    let refused = bounded(client.initialize(initialize(None, Some((&s.0, s.1)))))
        .await
        .unwrap()
        .into_inner();
    let status = refused.status.as_ref().unwrap();
    assert_eq!(code(Some(status)), ErrorCode::ResourceExhausted);
    let Some(Detail::Overload(overload)) = &status.detail else {
        panic!("overload facts: {status:?}");
    };
    assert_eq!(overload.resource, agent_server::RECONNECT_WAITERS_RESOURCE);
    assert_eq!(overload.limit, MAX_RECONNECT_WAITERS as u64);
    assert_eq!(overload.observed, MAX_RECONNECT_WAITERS as u64 + 1);
    // The holder still waits for the blocked send (it holds the gate the others queue on).
    assert!(!holder.is_finished());
    // Draining the stream frees its lease: the holder wins, every queued claim is stale.
    drain(&mut stream, last).await;
    let won = bounded(holder).await.unwrap();
    assert_eq!(code(won.status.as_ref()), ErrorCode::Ok, "{:?}", won.status);
    assert_eq!(won.ownership_epoch, s.1 + 1);
    for task in queued {
        let lost = bounded(task).await.unwrap();
        assert_eq!(code(lost.status.as_ref()), ErrorCode::StaleClient);
    }
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_cancelled_before_its_commit_leaves_nothing_and_stays_retryable() {
    let flood = Flood::default();
    let mut fixture = flood_fixture("attempt", &flood, UNLAGGING_EVENTS).await;
    let (_client, s, _run, mut stream, last) = blocked_tail(&fixture, &flood).await;
    let mut waiters = fixture
        .daemon()
        .server()
        .reconnect_waiters(&s.0)
        .expect("the client is registered");
    waiters.borrow_and_update();
    let attempt = [7u8; 16];
    let request = |id: [u8; 16]| initialize(Some(id), Some((&s.0, s.1)));
    // The attempt takes the gate and waits for the blocked stream; then its client goes
    // away, which drops the handler before it commits.
    let mut cancelled_client = fixture.client().await;
    let cancelled = {
        let request = request(attempt);
        tokio::spawn(async move { cancelled_client.initialize(request).await })
    };
    bounded(waiters.changed()).await.unwrap();
    bounded(waiters.wait_for(|n| *n == 0)).await.unwrap();
    cancelled.abort();
    assert!(bounded(cancelled).await.unwrap_err().is_cancelled());
    // Another attempt claims the same epoch. Had the cancelled one lived on, it would hold
    // the gate and win once the stream drains, and this one would be stale.
    let mut other = fixture.client().await;
    let winner = {
        let request = request([8u8; 16]);
        tokio::spawn(async move { other.initialize(request).await.unwrap().into_inner() })
    };
    bounded(waiters.changed()).await.unwrap();
    drain(&mut stream, last).await;
    let won = bounded(winner).await.unwrap();
    assert_eq!(code(won.status.as_ref()), ErrorCode::Ok, "{:?}", won.status);
    assert_eq!(won.ownership_epoch, s.1 + 1);
    // The cancelled attempt left no record: retrying it runs again (and is stale now)
    // instead of replaying a response.
    let mut client = fixture.client().await;
    let retried = bounded(client.initialize(request(attempt)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(retried.status.as_ref()), ErrorCode::StaleClient);
    fixture.shutdown().await;
}

/// Bytes of each interaction prompt in the exhaustion test.
const PROMPT_BYTES: usize = 16 << 10;
/// Open-then-cancel cycles: two deltas each, several times what the server's observer
/// queue, its stream buffer and the 64 KiB windows hold together.
const CYCLES: usize = 400;

// One thread, so the daemon's tail task runs whenever a delta wakes it: it fills its send
// buffers and blocks before its observer queue can overflow. On two workers a loaded host
// could leave the woken task unpolled (tokio's LIFO slot is not stolen) while the cycles
// overflowed the queue; the task then found room for its overload control, ended, and no
// longer held the reconnect this test is about.
#[tokio::test(flavor = "current_thread")]
async fn an_exhausted_interaction_tail_ends_with_overload_facts_and_holds_a_reconnect() {
    use agent_core::interaction::{Broker, InteractionRequest, PendingDelta, Scope};
    use agent_daemon::pending::{PendingLimits, PendingRouter};
    use tokio_util::sync::CancellationToken;

    let router: Arc<std::sync::Mutex<Option<Arc<PendingRouter>>>> = Arc::default();
    let captured = router.clone();
    let mut fixture = Fixture::with_host(
        "exhaust",
        move |root, authority| {
            let definitions = flood_definitions();
            fixture::run_host(
                root,
                authority,
                FixtureOptions::default(),
                definitions,
                move |pending: Arc<PendingRouter>| {
                    *captured.lock().unwrap() = Some(pending.clone());
                    fixture::engine(pending)
                },
            )
            .unwrap()
        },
        |_| {},
    )
    .await;
    let router = router.lock().unwrap().clone().unwrap();
    let mut client = small_window_client(&fixture).await;
    let s = session(&mut client).await;
    let mut tail = bounded(client.stream_interactions(pb::StreamInteractionsRequest {
        client_id: s.0.clone(),
        ownership_epoch: s.1,
        tail: true,
    }))
    .await
    .unwrap()
    .into_inner();
    for _ in 0..2 {
        bounded(tail.message()).await.unwrap().unwrap();
    }
    // The test's own observer of the same client paces the cycles: each prompt is open
    // before it is cancelled. The daemon's tail is not read meanwhile.
    let scope = Scope::new("run-x").unwrap();
    let _binding = router.bind_run(&s.0, &scope).unwrap();
    let mut pacer = router.subscribe(&s.0).unwrap();
    pacer.take_snapshot();
    let never = CancellationToken::new();
    let prompt = "p".repeat(PROMPT_BYTES);
    for n in 0..CYCLES {
        let request = InteractionRequest::new(
            format!("i{n}"),
            "confirm",
            prompt.clone(),
            serde_json::json!({"type": "boolean"}),
        )
        .unwrap();
        let cancel = CancellationToken::new();
        let asking = {
            let (router, scope, cancel) = (router.clone(), scope.clone(), cancel.clone());
            tokio::spawn(async move { router.request(&scope, &request, &cancel).await })
        };
        let opened = bounded(pacer.next(&never)).await.unwrap();
        assert!(matches!(opened, PendingDelta::Opened { .. }));
        cancel.cancel();
        let closed = bounded(pacer.next(&never)).await.unwrap();
        assert!(matches!(closed, PendingDelta::Closed { .. }));
        let _ = bounded(asking).await.unwrap();
    }
    // The tail's send is blocked on the unread client, so a reconnect of that client
    // waits for the stream to drain: it holds the reconnect gate while a second claim
    // queues behind it.
    let mut waiters = fixture
        .daemon()
        .server()
        .reconnect_waiters(&s.0)
        .expect("the client is registered");
    waiters.borrow_and_update();
    let reconnect = |mut client: Client| {
        let claim = s.clone();
        tokio::spawn(async move {
            client
                .initialize(initialize(None, Some((&claim.0, claim.1))))
                .await
                .unwrap()
                .into_inner()
        })
    };
    let holder = reconnect(fixture.client().await);
    bounded(waiters.changed()).await.unwrap();
    bounded(waiters.wait_for(|n| *n == 0)).await.unwrap();
    let queued = reconnect(fixture.client().await);
    bounded(waiters.wait_for(|n| *n == 1)).await.unwrap();
    assert!(!holder.is_finished(), "the reconnect waits for the drain");
    // Now read the daemon's tail: deltas, then the control that says why it ended.
    let mut last_revision = 0;
    let control = loop {
        let frame = bounded(tail.message()).await.unwrap().unwrap();
        match frame.payload.unwrap() {
            pb::stream_interactions_response::Payload::Delta(delta) => {
                last_revision = delta.revision;
            }
            pb::stream_interactions_response::Payload::Control(control) => break control,
            pb::stream_interactions_response::Payload::Snapshot(_) => panic!("one snapshot"),
        }
    };
    assert!(bounded(tail.message()).await.unwrap().is_none());
    let status = control.status.as_ref().unwrap();
    assert_eq!(
        code(Some(status)),
        ErrorCode::ResourceExhausted,
        "{control:?}"
    );
    let Some(Detail::Overload(overload)) = &status.detail else {
        panic!("overload facts: {status:?}");
    };
    let limits = PendingLimits::default();
    let limit = match overload.resource.as_str() {
        "pending_observer_queue_entries" => limits.observer_queue_entries,
        "pending_observer_queue_bytes" => limits.observer_queue_bytes,
        other => panic!("an observer queue bound, not {other}"),
    } as u64;
    assert_eq!(overload.limit, limit);
    assert!(overload.observed > limit, "{overload:?}");
    assert_eq!(
        control.page_last_revision, last_revision,
        "the exact last delivery"
    );
    assert!(last_revision < 2 * CYCLES as u64, "the tail was cut off");
    // Drained: the reconnect advances, and the claim queued behind it is stale.
    let won = bounded(holder).await.unwrap();
    assert_eq!(code(won.status.as_ref()), ErrorCode::Ok, "{:?}", won.status);
    assert_eq!(won.ownership_epoch, s.1 + 1);
    let lost = bounded(queued).await.unwrap();
    assert_eq!(code(lost.status.as_ref()), ErrorCode::StaleClient);
    fixture.shutdown().await;
}

/// The served set: the flood definition alone.
fn flood_definitions() -> DefinitionSet {
    DefinitionSet::from_agents(
        vec![AgentDefinition::new(FLOOD, FLOOD, 1).unwrap()],
        fixture::REVISION,
    )
    .unwrap()
}
