//! Cost of the run host.
//!
//! - `text_run/bare_engine`: `Engine::start` of a one-turn text run (scripted provider,
//!   6 events) and `Run::wait`: the baseline;
//! - `text_run/host_tmpfs`: the same run through `RunHost::start` and a tailing
//!   `replay_events` until the run terminal, with the run authority on tmpfs (`/dev/shm`),
//!   where fsync is nearly free: the host's own overhead (session check, ledger, slot,
//!   binding, paused commit, commit gate, ACTIVE and COMPLETED records, monitor, stream);
//! - `text_run/authority_floor_tmpfs`: only the two records a text run writes (ACTIVE at
//!   start, the COMPLETED tombstone), on tmpfs: the part of `host_tmpfs` that is the
//!   authority's;
//! - `text_run/host_disk`: the same with the authority under the system temp dir (real
//!   fsyncs): what a daemon on a disk pays;
//! - `ledger/duplicate`: a duplicate of a committed operation in the ledger;
//!   `host/duplicate_start`: the same through `RunHost::start` (session check, ledger,
//!   decode of the recorded outcome).
//!
//! Run with `cargo bench -p agent-daemon --bench host`; results are in
//! `docs/performance.md`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_authority::{Store, StoreOptions};
use agent_core::agent::{AgentDefinition, Engine};
use agent_core::event::ReplayRequest;
use agent_core::message::Message;
use agent_core::model::{ModelRequest, ScriptedProvider, StreamEvent, Usage};
use agent_core::stage::{Dispatcher, StaticToolPlanSource};
use agent_daemon::definition::{Definition, DefinitionSet};
use agent_daemon::host::{HostLimits, StartRequest};
use agent_daemon::ledger::{Execution, Ledger, Outcome, OutcomeKind};
use agent_daemon::pending::{PendingLimits, PendingRouter};
use agent_daemon::session::{Session, SessionStore};
use agent_daemon::{RunHost, RunHostConfig};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio_util::sync::CancellationToken;

fn engine(router: Option<Arc<PendingRouter>>) -> Engine {
    let provider = Arc::new(ScriptedProvider::new(|_: &ModelRequest| {
        vec![StreamEvent::Completed {
            usage: Usage::new(1, 1),
        }]
    }));
    let plans = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new()).unwrap());
    let mut builder = Engine::builder(provider, plans);
    if let Some(router) = router {
        builder = builder.broker(router);
    }
    builder.build().unwrap()
}

fn agent() -> AgentDefinition {
    AgentDefinition::new("benchmark", "scripted", 1).unwrap()
}

struct Dir(PathBuf);

impl Dir {
    fn new(parent: PathBuf, name: &str) -> Dir {
        let path = parent.join(format!("agent-daemon-bench-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .unwrap();
        Dir(path)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn host(dir: &Dir) -> (RunHost, Session) {
    let root = CancellationToken::new();
    let router = PendingRouter::new(PendingLimits::default()).unwrap();
    let sessions = SessionStore::new(&root, 4).unwrap();
    let definitions =
        DefinitionSet::new([Definition::new("benchmark", "r1", agent()).unwrap()]).unwrap();
    let store = Store::open(StoreOptions::new().directory(dir.0.join("store"))).unwrap();
    let host = RunHost::new(RunHostConfig {
        root,
        engine: engine(Some(router.clone())),
        authority: Arc::new(store),
        sessions: sessions.clone(),
        ledger: Arc::new(Ledger::new(1, 1 << 20).unwrap()),
        pending: router,
        definitions,
        limits: HostLimits::default(),
        health_sources: Vec::new(),
    })
    .unwrap();
    let session = sessions.fresh().unwrap();
    (host, session)
}

static OP: AtomicU64 = AtomicU64::new(0);

fn request() -> StartRequest {
    StartRequest {
        operation_id: format!("op-{}", OP.fetch_add(1, Ordering::Relaxed)),
        definition_id: "benchmark".into(),
        revision: "r1".into(),
        text: "hello".into(),
    }
}

async fn host_text_run(host: &RunHost, session: &Session) {
    let ctx = CancellationToken::new();
    let (started, _) = host.start(&ctx, session, request()).await.unwrap();
    let agent_daemon::host::Success::Started { run_id, .. } = started else {
        unreachable!()
    };
    let mut stream = host
        .replay_events(&ctx, session, &run_id, ReplayRequest::after(0).with_tail())
        .await
        .unwrap();
    let mut ended = stream.events.iter().any(|e| e.kind().ends_run());
    while !ended {
        let event = stream.next().await.expect("the run ends");
        ended = event.kind().ends_run();
    }
    stream.close();
    black_box(run_id);
}

fn text_run(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bare = engine(None);
    let tmpfs = Dir::new(PathBuf::from("/dev/shm"), "tmpfs");
    let disk = Dir::new(std::env::temp_dir(), "disk");
    let (on_tmpfs, tmpfs_session) = runtime.block_on(async { host(&tmpfs) });
    let (on_disk, disk_session) = runtime.block_on(async { host(&disk) });
    let mut group = c.benchmark_group("text_run");
    group.bench_function("bare_engine", |b| {
        b.to_async(&runtime).iter(|| async {
            let run = bare
                .start(&agent(), Message::user("hello").unwrap())
                .await
                .unwrap();
            black_box(run.wait().await.unwrap());
        })
    });
    group.bench_function("host_tmpfs", |b| {
        b.to_async(&runtime)
            .iter(|| host_text_run(&on_tmpfs, &tmpfs_session))
    });
    // The durable floor inside `host_tmpfs`: the ACTIVE record at start and the COMPLETED
    // tombstone at the end, with nothing else.
    let floor = Dir::new(PathBuf::from("/dev/shm"), "floor");
    let store = Store::open(StoreOptions::new().directory(floor.0.join("store"))).unwrap();
    group.bench_function("authority_floor_tmpfs", |b| {
        b.iter(|| {
            let id = format!("floor-{}", OP.fetch_add(1, Ordering::Relaxed));
            let mut run = store.start(&id).unwrap();
            run.terminal(agent_authority::TerminalPhase::Completed)
                .unwrap();
        })
    });
    group.bench_function("host_disk", |b| {
        b.to_async(&runtime)
            .iter(|| host_text_run(&on_disk, &disk_session))
    });
    group.finish();
    runtime.block_on(async {
        on_tmpfs.shutdown().await.unwrap();
        on_disk.shutdown().await.unwrap();
    });
}

fn duplicates(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ledger = Ledger::new(1, 16).unwrap();
    let ctx = CancellationToken::new();
    let outcome = Outcome::new(OutcomeKind::Success, vec![b'x'; 128]).unwrap();
    runtime.block_on(async {
        ledger
            .run::<(), _>(&ctx, "client", "op", "run.start/v1", [1; 32], || async {
                Execution::Commit(outcome.clone())
            })
            .await
            .unwrap();
    });
    c.bench_function("ledger/duplicate", |b| {
        b.to_async(&runtime).iter(|| async {
            let result = ledger
                .run::<(), _>(&ctx, "client", "op", "run.start/v1", [1; 32], || async {
                    unreachable!("a duplicate never executes")
                })
                .await;
            black_box(result.unwrap())
        })
    });
    let tmpfs = Dir::new(PathBuf::from("/dev/shm"), "duplicate");
    let (host, session) = runtime.block_on(async { host(&tmpfs) });
    let first = StartRequest {
        operation_id: "dup".into(),
        ..request()
    };
    runtime
        .block_on(host.start(&ctx, &session, first.clone()))
        .unwrap();
    c.bench_function("host/duplicate_start", |b| {
        b.to_async(&runtime).iter(|| async {
            let (success, duplicate) = host.start(&ctx, &session, first.clone()).await.unwrap();
            assert!(duplicate);
            black_box(success)
        })
    });
    runtime.block_on(host.shutdown()).unwrap();
}

criterion_group!(benches, text_run, duplicates);
criterion_main!(benches);
