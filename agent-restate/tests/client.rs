//! The `agent-client` adapter (`agent_restate::client`) against the real engine and two
//! fixture workers behind one balanced address: runs started, streamed, answered and
//! cancelled through the seam alone, and the seam's typed errors for what the cluster
//! refuses.
//!
//! The tests take turns (as `cluster.rs`'s do), so timings stay meaningful on two cores.

#[path = "support/engine.rs"]
mod engine;
#[path = "support/fixture.rs"]
mod fixture;
#[path = "support/workers.rs"]
mod workers;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agent_client::{
    self as c, Connector as _, EventStream as _, InteractionStream as _, Session as _,
};
use agent_restate::client::{DEFINITION_REVISION, RestateConnector, RestateSession};

use workers::{Balancer, Worker};

/// Not a test: the worker process's entry (see `workers::Worker::start`).
#[test]
fn worker_process() {
    workers::worker_main(fixture::Fixture::new());
}

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How long a test waits for a run to reach a state.
const PATIENCE: Duration = Duration::from_secs(60);

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An engine, two fixture workers behind a balancer, and a runtime for the adapter.
struct Setup {
    engine: engine::Engine,
    _balancer: Balancer,
    workers: Vec<Worker>,
    dir: PathBuf,
    runtime: tokio::runtime::Runtime,
}

impl Setup {
    fn start() -> Option<Setup> {
        let binary = engine::require()?;
        let engine = engine::Engine::start(&binary);
        let dir = engine.dir().join("fixture");
        std::fs::create_dir_all(&dir).unwrap();
        let balancer = Balancer::start();
        let workers = (0..2)
            .map(|_| {
                let worker = Worker::start(
                    &dir,
                    &engine.admin_url(),
                    &engine.ingress_url(),
                    &balancer.url(),
                    &[("AGENT_RESTATE_SUSPEND_AFTER_MS", "1000")],
                );
                balancer.add(worker.address);
                worker
            })
            .collect();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let setup = Setup {
            engine,
            _balancer: balancer,
            workers,
            dir,
            runtime,
        };
        setup.wait_registered();
        Some(setup)
    }

    fn wait_registered(&self) {
        let url = format!("{}/Runs/catalog", self.engine.ingress_url());
        let deadline = Instant::now() + PATIENCE;
        loop {
            let (status, body) = engine::http("POST", &url, None).unwrap_or_default();
            if status == 200 && body.contains(fixture::DEFINITION) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the workers never registered: {status} {body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn connector(&self) -> RestateConnector {
        RestateConnector::new(&self.engine.ingress_url()).unwrap()
    }

    fn session(&self) -> RestateSession {
        self.runtime
            .block_on(self.connector().initialize(initialize_request()))
            .expect("initialize")
    }

    fn lines(&self, file: &str, prefix: &str) -> usize {
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        text.lines().filter(|l| l.starts_with(prefix)).count()
    }

    fn logs(&self) -> String {
        let mut out = format!("engine log:\n{}\n", self.engine.log_tail());
        for worker in &self.workers {
            let path = self
                .dir
                .join(format!("worker-{}.log", worker.address.port()));
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let tail: String = text.lines().rev().take(20).collect::<Vec<_>>().join("\n");
            out.push_str(&format!(
                "worker {} (newest first):\n{tail}\n",
                worker.pid()
            ));
        }
        out
    }
}

fn initialize_request() -> c::InitializeRequest {
    let v = |minor| c::ProtocolVersion::new(1, minor, 0).unwrap();
    c::InitializeRequest::with_attempt(
        c::ProtocolRange::new(v(0), v(3)).unwrap(),
        c::Build::new("client-test", "0.1.0", "none", "rustc").unwrap(),
        vec![],
        vec![],
        c::Limits::new(4 << 20, 256, 256, 4 << 20, 8, 8).unwrap(),
        None,
        agent_client_grpc::new_attempt_id().unwrap(),
    )
    .unwrap()
}

fn operation(name: &str) -> c::OperationId {
    c::OperationId::new(&format!("op-{name}")).unwrap()
}

fn start_request(name: &str, definition: &str, text: &str) -> c::StartRequest {
    c::StartRequest {
        operation: operation(name),
        definition: c::DefinitionRef::new(definition, DEFINITION_REVISION).unwrap(),
        input: c::Input::new(&format!("msg-{name}"), text).unwrap(),
    }
}

async fn start(session: &RestateSession, name: &str, text: &str) -> c::RunRef {
    let started = session
        .start(start_request(name, fixture::DEFINITION, text))
        .await
        .expect("start");
    assert!(started.run().as_str().starts_with("run-"));
    assert_eq!(started.run().as_str().len(), "run-".len() + 32);
    assert_eq!(started.initial_sequence(), 1);
    assert!(!started.duplicate());
    started.run().clone()
}

/// Every frame of a tailing stream from the start, until it ends, checking that events are
/// gap-free with exactly one run terminal, the last.
async fn stream_to_end(session: &RestateSession, run: &c::RunRef) -> Vec<c::Event> {
    let limits = *session.connection().limits();
    let options = c::EventStreamOptions::new(limits.replay_events(), true, &limits).unwrap();
    let mut stream = session
        .events(c::Cursor::new(run.clone(), 0), options)
        .await
        .expect("events");
    let mut events = Vec::new();
    let mut controls = 0;
    loop {
        let frame = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .expect("the stream ends in time")
            .expect("no stream error");
        match frame {
            Some(c::EventFrame::Event(event)) => events.push(event),
            Some(c::EventFrame::Control(control)) => {
                controls += 1;
                assert_eq!(control.page_last(), Some(events.len() as u64));
                assert!(!control.has_more() && (control.tailing() || is_ended(&events)));
            }
            None => break,
        }
    }
    assert_eq!(controls, 1, "one control, after the first page");
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.sequence(), i as u64 + 1, "gap-free");
        assert_eq!(event.run(), run);
    }
    let terminals = events.iter().filter(|e| is_run_terminal(e)).count();
    assert_eq!(terminals, 1, "exactly one run terminal");
    assert!(is_ended(&events), "the terminal is last");
    events
}

fn is_run_terminal(event: &c::Event) -> bool {
    matches!(
        event.kind(),
        c::EventKind::RunCompleted | c::EventKind::RunFailed | c::EventKind::RunCancelled
    )
}

fn is_ended(events: &[c::Event]) -> bool {
    events.last().is_some_and(is_run_terminal)
}

/// The interaction stream's frames until `interaction` is pending in `run`.
async fn wait_pending(
    stream: &mut impl c::InteractionStream,
    run: &c::RunRef,
    interaction: &str,
) -> c::PendingInteraction {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let frame = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("the interaction opens in time")
            .expect("no stream error")
            .expect("the stream goes on");
        let candidates = match frame {
            c::InteractionFrame::Snapshot(snapshot) => snapshot.pending().to_vec(),
            c::InteractionFrame::Update(update)
                if update.kind() == c::InteractionUpdateKind::Opened =>
            {
                vec![update.interaction().clone()]
            }
            _ => continue,
        };
        if let Some(found) = candidates
            .into_iter()
            .find(|p| p.run() == run && p.id().as_str() == interaction)
        {
            return found;
        }
    }
}

fn value(json: &str) -> c::StructuredValue {
    c::StructuredValue::parse(json.as_bytes().to_vec()).unwrap()
}

#[test]
fn a_run_started_through_the_adapter_streams_to_its_one_terminal_event() {
    let _turn = lock();
    let Some(setup) = Setup::start() else {
        return;
    };
    let began = Instant::now();
    let session = setup.session();
    let connection = session.connection();
    assert_eq!(
        connection.protocol(),
        c::ProtocolVersion::new(1, 3, 0).unwrap()
    );
    assert_eq!(connection.server().component(), "agent-restate");
    let definitions = connection.catalog().definitions();
    assert_eq!(definitions.len(), 1);
    assert_eq!(
        definitions[0].reference(),
        &c::DefinitionRef::new(fixture::DEFINITION, DEFINITION_REVISION).unwrap()
    );
    assert_eq!(
        (definitions[0].model(), definitions[0].max_turns()),
        ("script", 32)
    );
    assert_eq!(connection.health().state(), c::HealthState::Ready);

    setup.runtime.block_on(async {
        let run = start(&session, "stream", "stream text").await;
        let events = stream_to_end(&session, &run).await;
        assert_eq!(events.last().unwrap().kind(), c::EventKind::RunCompleted);
        assert!(
            events.iter().any(|e| matches!(
                e.detail(),
                c::EventDetail::ModelDelta { text } if text == "hello from the cluster"
            )),
            "{events:?}"
        );

        // A replay from the terminal's sequence is empty and does not tail.
        let limits = *session.connection().limits();
        let options = c::EventStreamOptions::new(2, true, &limits).unwrap();
        let last = events.len() as u64;
        let mut at_end = session
            .events(c::Cursor::new(run.clone(), last), options)
            .await
            .unwrap();
        let Some(c::EventFrame::Control(control)) = at_end.next().await.unwrap() else {
            panic!("a control")
        };
        assert!(!control.tailing() && !control.has_more());
        assert_eq!(at_end.next().await.unwrap(), None);
        // A page smaller than the run has more, and does not tail.
        let mut paged = session
            .events(c::Cursor::new(run.clone(), 0), options)
            .await
            .unwrap();
        let mut frames = Vec::new();
        while let Some(frame) = paged.next().await.unwrap() {
            frames.push(frame);
        }
        let Some(c::EventFrame::Control(control)) = frames.last() else {
            panic!("a control last")
        };
        assert_eq!((frames.len(), control.has_more()), (3, true));
        assert!(!control.tailing());
        // A cursor past the end is a gap whose recovery is the last event.
        let gap = session
            .events(c::Cursor::new(run.clone(), last + 5), options)
            .await
            .unwrap_err();
        let c::Error::CursorGap(gap) = gap else {
            panic!("{gap:?}")
        };
        assert_eq!(gap.recovery(), last);

        let listed = setup.connector().list_runs().await.unwrap();
        let entry = listed
            .iter()
            .find(|r| r.run_id == run.as_str())
            .expect("the run is indexed");
        assert_eq!(entry.definition, fixture::DEFINITION);
        let health = session.health().await.unwrap();
        assert_eq!(health.state(), c::HealthState::Ready);

        // A repeated operation id answers the first run.
        let again = session
            .start(start_request("stream", fixture::DEFINITION, "stream text"))
            .await
            .unwrap();
        assert_eq!((again.run(), again.duplicate()), (&run, true));
    });
    eprintln!("streamed a run in {:?}", began.elapsed());
}

#[test]
fn an_approval_is_answered_through_interactions_and_respond() {
    let _turn = lock();
    let Some(setup) = Setup::start() else {
        return;
    };
    let began = Instant::now();
    let session = setup.session();
    setup.runtime.block_on(async {
        let mut interactions = session
            .interactions(c::InteractionStreamOptions { tail: true })
            .await
            .unwrap();
        let Some(c::InteractionFrame::Snapshot(snapshot)) = interactions.next().await.unwrap()
        else {
            panic!("a snapshot first")
        };
        assert!(snapshot.pending().is_empty());
        let Some(c::InteractionFrame::Control(control)) = interactions.next().await.unwrap() else {
            panic!("a control second")
        };
        assert!(control.tailing());
        assert_eq!(control.latest(), snapshot.revision());

        let run = start(&session, "ask", "ask ask").await;
        let pending = wait_pending(&mut interactions, &run, "approve-call-0").await;
        assert_eq!(pending.kind(), "approval");
        assert_eq!(pending.prompt(), "May I run call-0?");

        let id = pending.id().clone();
        let respond = |name: &str, answer: &str| {
            session.respond(operation(name), run.clone(), id.clone(), value(answer))
        };
        let malformed = respond("maybe", "\"maybe\"").await.unwrap_err();
        assert_eq!(
            malformed.status_code(),
            Some(c::StatusCode::InvalidArgument)
        );
        let foreign = session
            .respond(
                operation("foreign"),
                run.clone(),
                c::InteractionId::new("approve-call-9").unwrap(),
                value("true"),
            )
            .await
            .unwrap_err();
        assert_eq!(foreign.status_code(), Some(c::StatusCode::NotFound));
        assert_eq!(
            respond("yes", "true").await.unwrap(),
            c::RespondResult::Accepted
        );
        let second = respond("yes-again", "true").await.unwrap_err();
        assert_eq!(second.status_code(), Some(c::StatusCode::Conflict));
        assert_eq!(
            second.facts().unwrap().operation(),
            Some(&operation("yes-again"))
        );
        // The same operation again answers as the first time.
        assert_eq!(
            respond("yes", "true").await.unwrap(),
            c::RespondResult::Accepted
        );

        let closed = tokio::time::timeout(PATIENCE, interactions.next())
            .await
            .expect("the interaction closes in time")
            .unwrap()
            .unwrap();
        let c::InteractionFrame::Update(closed) = closed else {
            panic!("{closed:?}")
        };
        assert_eq!(closed.kind(), c::InteractionUpdateKind::Closed);
        assert_eq!(closed.interaction(), &pending);

        let events = stream_to_end(&session, &run).await;
        assert_eq!(events.last().unwrap().kind(), c::EventKind::RunCompleted);
    });
    assert_eq!(
        setup.lines("guarded.count", "call-0"),
        1,
        "{}",
        setup.logs()
    );
    eprintln!("answered an approval in {:?}", began.elapsed());
}

#[test]
fn cancel_ends_a_waiting_run_once_and_close_ends_the_streams() {
    let _turn = lock();
    let Some(setup) = Setup::start() else {
        return;
    };
    let began = Instant::now();
    let session = setup.session();
    setup.runtime.block_on(async {
        let run = start(&session, "cancel", "waiting ask").await;
        let mut interactions = session
            .interactions(c::InteractionStreamOptions { tail: true })
            .await
            .unwrap();
        wait_pending(&mut interactions, &run, "approve-call-0").await;
        let cancelled = session
            .cancel(operation("cancel"), run.clone(), None)
            .await
            .unwrap();
        assert_eq!(cancelled, c::CancelResult::Requested);
        let events = stream_to_end(&session, &run).await;
        let terminal = events.last().unwrap();
        assert_eq!(terminal.kind(), c::EventKind::RunCancelled);
        let again = session
            .cancel(operation("cancel-again"), run.clone(), None)
            .await
            .unwrap();
        assert_eq!(again, c::CancelResult::AlreadyTerminal(terminal.sequence()));

        // Close: open streams end with Closed, every later call too.
        let limits = *session.connection().limits();
        let options = c::EventStreamOptions::new(8, true, &limits).unwrap();
        let mut events = session
            .events(c::Cursor::new(run.clone(), 0), options)
            .await
            .unwrap();
        session.close();
        session.close();
        assert_eq!(events.next().await, Err(c::Error::Closed));
        assert_eq!(interactions.next().await, Err(c::Error::Closed));
        assert_eq!(session.health().await, Err(c::Error::Closed));
        let start = session
            .start(start_request("late", fixture::DEFINITION, "text"))
            .await;
        assert_eq!(start, Err(c::Error::Closed));
        assert_eq!(session.connection().catalog().definitions().len(), 1);
    });
    assert_eq!(
        setup.lines("guarded.count", ""),
        0,
        "the refused call never ran"
    );
    eprintln!("cancelled a waiting run in {:?}", began.elapsed());
}

#[test]
fn what_the_cluster_refuses_is_a_typed_error() {
    let _turn = lock();
    let Some(setup) = Setup::start() else {
        return;
    };
    let session = setup.session();
    setup.runtime.block_on(async {
        let unknown = session
            .start(start_request("unknown", "nobody", "text"))
            .await
            .unwrap_err();
        assert_eq!(unknown.status_code(), Some(c::StatusCode::NotFound));
        assert_eq!(
            unknown.facts().unwrap().operation(),
            Some(&operation("unknown"))
        );
        let mut other_revision = start_request("revision", fixture::DEFINITION, "text");
        other_revision.definition = c::DefinitionRef::new(fixture::DEFINITION, "v2").unwrap();
        let revision = session.start(other_revision).await.unwrap_err();
        assert_eq!(revision.status_code(), Some(c::StatusCode::NotFound));
        // An oversized input never reaches the cluster: the seam refuses to build it.
        let oversized = "x".repeat(c::MAX_INPUT_TEXT_BYTES + 1);
        let refused: c::Error = c::Input::new("msg-big", &oversized).unwrap_err().into();
        assert!(matches!(refused, c::Error::Invalid(_)));

        let nowhere = c::RunRef::new("run-nowhere").unwrap();
        let cancel = session
            .cancel(operation("nowhere"), nowhere.clone(), None)
            .await
            .unwrap_err();
        assert_eq!(cancel.status_code(), Some(c::StatusCode::NotFound));
        let limits = *session.connection().limits();
        let options = c::EventStreamOptions::new(8, true, &limits).unwrap();
        let events = session
            .events(c::Cursor::new(nowhere.clone(), 0), options)
            .await
            .unwrap_err();
        assert_eq!(events.status_code(), Some(c::StatusCode::NotFound));

        for error in [
            session
                .suspend(operation("s"), nowhere.clone())
                .await
                .unwrap_err(),
            session
                .resume(operation("r"), nowhere.clone())
                .await
                .unwrap_err(),
            session.export(nowhere.clone()).await.unwrap_err(),
        ] {
            let c::Error::CapabilityMismatch(mismatch) = error else {
                panic!("{error:?}")
            };
            assert_eq!(mismatch.missing(), ["snapshots"]);
        }
        assert!(
            setup.connector().list_runs().await.unwrap().is_empty(),
            "nothing was created"
        );
    });
}

#[test]
fn an_unreachable_cluster_is_refused_at_once() {
    let port = workers::free_port();
    let connector = RestateConnector::new(&format!("http://127.0.0.1:{port}")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let began = Instant::now();
    let error = runtime
        .block_on(connector.initialize(initialize_request()))
        .unwrap_err();
    assert_eq!(error.status_code(), Some(c::StatusCode::Unavailable));
    assert!(error.retryable());
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
}
