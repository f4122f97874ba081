//! The text-run workload both run-host benches measure (`host` with criterion, `host_cpu`
//! with CPU time): a one-turn scripted engine, a run host over a run authority in a private
//! directory, and one start plus a tailing replay to the run terminal.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_authority::{Store, StoreOptions};
use agent_core::agent::{AgentDefinition, Engine};
use agent_core::event::ReplayRequest;
use agent_core::model::{ModelRequest, ScriptedProvider, StreamEvent, Usage};
use agent_core::stage::{Dispatcher, StaticToolPlanSource};
use agent_daemon::definition::{Definition, DefinitionSet};
use agent_daemon::host::{HostLimits, StartRequest};
use agent_daemon::ledger::Ledger;
use agent_daemon::pending::{PendingLimits, PendingRouter};
use agent_daemon::session::{Session, SessionStore};
use agent_daemon::{RunHost, RunHostConfig};
use tokio_util::sync::CancellationToken;

pub(crate) fn engine(router: Option<Arc<PendingRouter>>) -> Engine {
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

pub(crate) fn agent() -> AgentDefinition {
    AgentDefinition::new("benchmark", "scripted", 1).unwrap()
}

pub(crate) struct Dir(pub PathBuf);

impl Dir {
    pub(crate) fn new(parent: PathBuf, name: &str) -> Dir {
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

pub(crate) fn host(dir: &Dir) -> (RunHost, Session) {
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

/// A name never used before in this process.
fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", OP.fetch_add(1, Ordering::Relaxed))
}

/// The two records a text run writes and nothing else: ACTIVE at start, the COMPLETED
/// tombstone at the end (the durable floor inside a host text run).
pub(crate) fn authority_floor_run(store: &Store) {
    let mut run = store.start(&unique("floor")).unwrap();
    run.terminal(agent_authority::TerminalPhase::Completed)
        .unwrap();
}

pub(crate) fn request() -> StartRequest {
    StartRequest {
        operation_id: unique("op"),
        definition_id: "benchmark".into(),
        revision: "r1".into(),
        text: "hello".into(),
    }
}

pub(crate) async fn host_text_run(host: &RunHost, session: &Session) {
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
