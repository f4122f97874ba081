//! Closing tailing streams at every point of their life, under load: no
//! background reader may panic (issue 33: the stop signal was polled again
//! after it had resolved, "`async fn` resumed after completion").
//!
//! A reader's panic is swallowed by its task, so a process-wide panic hook
//! counts them; this binary holds only these tests.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_client::{
    self as c, Connector as _, EventStream as _, InteractionStream as _, Session as _,
};
use agent_protocol::pb::engine::v1 as pbe;
use support::*;

/// Sessions (each with its own fake daemon) closing streams concurrently.
const WORKERS: usize = 4;
/// Streams each worker opens and closes, cycling through every close point.
const ITERATIONS: usize = 40;
/// Bounds the whole load run; a hang is a failure, not a stuck CI job.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a `next` is left waiting on the reader before the close.
const WAIT: Duration = Duration::from_millis(2);

static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
}

/// Where in a tailing stream's life the close lands.
#[derive(Clone, Copy, Debug)]
enum Point {
    /// Before the consumer read the first (buffered) item.
    BeforeFirst,
    /// While the consumer's `next` and the reader wait for a tail frame.
    Waiting,
    /// After tail items were delivered.
    AfterItems,
    /// Racing the server ending the stream.
    ServerEnding,
}

const POINTS: [Point; 4] = [
    Point::BeforeFirst,
    Point::Waiting,
    Point::AfterItems,
    Point::ServerEnding,
];

fn cursor() -> c::Cursor {
    c::Cursor::new(c::RunRef::new("run-1").unwrap(), 0)
}

async fn close_events(server: &Server, session: &agent_client_grpc::GrpcSession, point: Point) {
    let tx = server.script_events();
    tx.send(Ok(control(1, 0, 0, true))).await.unwrap();
    let options = c::EventStreamOptions::new(8, true, &client_limits()).unwrap();
    let mut stream = session.events(cursor(), options).await.unwrap();
    match point {
        Point::BeforeFirst => {}
        Point::Waiting => {
            stream.next().await.unwrap();
            assert!(
                tokio::time::timeout(WAIT, stream.next()).await.is_err(),
                "no tail frame was sent"
            );
        }
        Point::AfterItems => {
            stream.next().await.unwrap();
            for seq in 1..=3 {
                tx.send(Ok(delta("run-1", seq))).await.unwrap();
                assert!(matches!(
                    stream.next().await,
                    Ok(Some(c::EventFrame::Event(_)))
                ));
            }
        }
        Point::ServerEnding => {
            stream.next().await.unwrap();
            let end = tokio::spawn(async move { drop(tx) });
            stream.close();
            end.await.unwrap();
            assert_eq!(stream.next().await, Err(c::Error::Closed));
            return;
        }
    }
    stream.close();
    assert_eq!(stream.next().await, Err(c::Error::Closed));
    drop(tx);
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

fn page(tx: &tokio::sync::mpsc::Sender<Result<pbe::StreamInteractionsResponse, tonic::Status>>) {
    use pbe::stream_interactions_response::Payload;
    let frames = [
        Payload::Snapshot(pbe::InteractionSnapshot {
            revision: 1,
            pending: vec![],
        }),
        Payload::Control(pbe::InteractionStreamControl {
            status: Some(agent_protocol::status::ok_status()),
            latest_revision: 1,
            page_last_revision: 1,
            has_more: false,
            tailing: true,
        }),
    ];
    for payload in frames {
        tx.try_send(Ok(pbe::StreamInteractionsResponse {
            payload: Some(payload),
        }))
        .unwrap();
    }
}

fn opened(revision: u64, id: &str) -> pbe::StreamInteractionsResponse {
    pbe::StreamInteractionsResponse {
        payload: Some(pbe::stream_interactions_response::Payload::Delta(
            pbe::InteractionDelta {
                revision,
                kind: pbe::InteractionDeltaKind::Opened as i32,
                interaction: Some(pending(id)),
            },
        )),
    }
}

async fn close_interactions(
    server: &Server,
    session: &agent_client_grpc::GrpcSession,
    point: Point,
) {
    let tx = server.script_interactions();
    page(&tx);
    let mut stream = session
        .interactions(c::InteractionStreamOptions { tail: true })
        .await
        .unwrap();
    let read_page = async |s: &mut agent_client_grpc::GrpcInteractionStream| {
        s.next().await.unwrap();
        s.next().await.unwrap();
    };
    match point {
        Point::BeforeFirst => {}
        Point::Waiting => {
            read_page(&mut stream).await;
            assert!(
                tokio::time::timeout(WAIT, stream.next()).await.is_err(),
                "no tail frame was sent"
            );
        }
        Point::AfterItems => {
            read_page(&mut stream).await;
            for revision in 2..=4 {
                tx.send(Ok(opened(revision, &format!("i-{revision}"))))
                    .await
                    .unwrap();
                assert!(matches!(
                    stream.next().await,
                    Ok(Some(c::InteractionFrame::Update(_)))
                ));
            }
        }
        Point::ServerEnding => {
            read_page(&mut stream).await;
            let end = tokio::spawn(async move { drop(tx) });
            stream.close();
            end.await.unwrap();
            assert_eq!(stream.next().await, Err(c::Error::Closed));
            return;
        }
    }
    stream.close();
    assert_eq!(stream.next().await, Err(c::Error::Closed));
    drop(tx);
}

/// One worker: its own daemon and session, every close point in turn, then
/// a wait until the daemon saw every stream's reader go (a reader that
/// panicked or hung would show here or in the panic count).
async fn worker(interactions: bool) {
    let server = Server::start();
    let session = server.connector().initialize(fresh()).await.unwrap();
    for i in 0..ITERATIONS {
        let point = POINTS[i % POINTS.len()];
        if interactions {
            close_interactions(&server, &session, point).await;
        } else {
            close_events(&server, &session, point).await;
        }
    }
    server.script.streams.wait_dropped(ITERATIONS).await;
    session.close();
}

async fn load(interactions: bool) {
    count_panics();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| tokio::spawn(worker(interactions)))
        .collect();
    tokio::time::timeout(RUN_TIMEOUT, async {
        for w in workers {
            w.await.unwrap();
        }
    })
    .await
    .expect("closing streams finished within the bound");
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a stream reader panicked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_tailing_event_streams_at_every_point_never_panics() {
    load(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_tailing_interaction_streams_at_every_point_never_panics() {
    load(true).await;
}

/// The session closing (rather than the stream) ends both kinds of tail
/// while their readers wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_session_under_waiting_tails_never_panics() {
    count_panics();
    tokio::time::timeout(RUN_TIMEOUT, async {
        for _ in 0..ITERATIONS / 4 {
            let server = Server::start();
            let session = server.connector().initialize(fresh()).await.unwrap();
            let etx = server.script_events();
            etx.send(Ok(control(1, 0, 0, true))).await.unwrap();
            let options = c::EventStreamOptions::new(8, true, &client_limits()).unwrap();
            let mut events = session.events(cursor(), options).await.unwrap();
            events.next().await.unwrap();
            let itx = server.script_interactions();
            page(&itx);
            let mut interactions = session
                .interactions(c::InteractionStreamOptions { tail: true })
                .await
                .unwrap();
            interactions.next().await.unwrap();
            interactions.next().await.unwrap();
            let waiting_events = tokio::spawn(async move { events.next().await });
            let waiting_interactions = tokio::spawn(async move { interactions.next().await });
            tokio::time::sleep(WAIT).await;
            session.close();
            assert_eq!(waiting_events.await.unwrap(), Err(c::Error::Closed));
            assert_eq!(waiting_interactions.await.unwrap(), Err(c::Error::Closed));
            server.script.streams.wait_dropped(2).await;
        }
    })
    .await
    .expect("closing sessions finished within the bound");
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a stream reader panicked");
}
