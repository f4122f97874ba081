//! The shared test harness: a run host over a real engine (scripted provider, one gated
//! tool), a real run authority in a private temp dir, and bounded waits.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::future::Future;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use agent_authority::{Step, Store, StoreOptions};
use agent_core::agent::{AgentDefinition, Engine, EngineIdentity};
use agent_core::model::{ModelRequest, ScriptedProvider, StreamEvent, Usage};
use agent_core::stage::{Dispatcher, StaticToolPlanSource};
use agent_core::tool::{
    BoxFuture, Call, Definition as ToolDefinition, Effect, ExecutionError, ReplaySafety, Tool,
    ToolContext, ToolResult,
};
use agent_daemon::definition::{Definition, DefinitionSet};
use agent_daemon::host::{HealthSource, HostLimits, StartRequest};
use agent_daemon::ledger::Ledger;
use agent_daemon::pending::{PendingLimits, PendingRouter};
use agent_daemon::session::{Session, SessionStore};
use agent_daemon::{RunHost, RunHostConfig};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Every wait in these tests is bounded by this.
pub const WAIT: Duration = Duration::from_secs(10);

/// Awaits `future`, failing the test after [`WAIT`].
pub async fn bounded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(WAIT, future)
        .await
        .expect("a bounded wait timed out")
}

/// Polls `future` once here, then runs the rest of it on a new task. Whatever `future`
/// does before its first wait (queueing a waiter, requesting a suspension, taking a lock)
/// has happened when this returns: the order a test needs, whatever the load, where a sleep
/// only makes it likely. The first poll runs unconstrained, so tokio's cooperative budget
/// cannot cut it short. Fails the test if `future` did not wait.
pub async fn spawn_waiting<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut future = Box::pin(future);
    let waiting = tokio::task::unconstrained(std::future::poll_fn(|cx| {
        std::task::Poll::Ready(future.as_mut().poll(cx).is_pending())
    }))
    .await;
    assert!(waiting, "expected to wait, but finished on its first poll");
    tokio::spawn(future)
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh 0700 directory under the system temp dir, removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("agent-daemon-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .expect("create the temp dir");
        TempDir { path }
    }

    pub fn store_dir(&self) -> PathBuf {
        self.path.join("store")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o700));
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A tool that waits for a permit of the harness's gate, so a test decides when turn 1
/// ends (and can request a suspension before it does).
struct Gated {
    definition: ToolDefinition,
    gate: Arc<Semaphore>,
}

impl Tool for Gated {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }
    fn execute<'a>(
        &'a self,
        call: Call,
        _ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move {
            let permit = self.gate.acquire().await.expect("the gate stays open");
            permit.forget();
            Ok(ToolResult::success(call.id(), "ok"))
        })
    }
}

/// The user text of a one-turn text run.
pub const TEXT: &str = "hello";
/// The user text of a run that calls the gated tool in turn 1 and answers in turn 2.
pub const TOOL: &str = "tool";

/// The engine every host here uses (one identity, so snapshots move between them), with
/// `router` as its broker; `calls` counts provider requests.
pub fn engine(router: Arc<PendingRouter>, gate: Arc<Semaphore>, calls: Arc<AtomicUsize>) -> Engine {
    engine_with_ids(router, gate, calls, None)
}

/// [`engine`], with run ids from `ids` when given (custom ids are recorded one by one in
/// the kernel's run-identity ledger, counter ids are not).
#[allow(dead_code)]
pub fn engine_with_ids(
    router: Arc<PendingRouter>,
    gate: Arc<Semaphore>,
    calls: Arc<AtomicUsize>,
    ids: Option<Arc<dyn agent_core::agent::IdSource>>,
) -> Engine {
    let definition = ToolDefinition::builder("wait", "Waits for the test.")
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .build()
        .unwrap();
    let tools = BTreeMap::from([(
        "wait".to_owned(),
        Arc::new(Gated { definition, gate }) as Arc<dyn Tool>,
    )]);
    let provider = Arc::new(ScriptedProvider::new(move |request: &ModelRequest| {
        calls.fetch_add(1, Ordering::SeqCst);
        let first = request.messages().len() == 1;
        let wants_tool = request.messages()[0].text() == TOOL;
        if first && wants_tool {
            vec![
                StreamEvent::ToolCall(Call::new("c1", "wait", serde_json::json!({})).unwrap()),
                StreamEvent::Completed {
                    usage: Usage::new(1, 1),
                },
            ]
        } else {
            vec![StreamEvent::Completed {
                usage: Usage::new(1, 1),
            }]
        }
    }));
    let identity = EngineIdentity::new(["tool:wait@1"])
        .unwrap()
        .with_compatibility("daemon-test/1")
        .unwrap();
    let builder = Engine::builder(
        provider,
        StaticToolPlanSource::from_dispatcher(Dispatcher::new(tools).unwrap()),
    )
    .identity(identity)
    .broker(router);
    let builder = match ids {
        Some(ids) => builder.ids(ids),
        None => builder,
    };
    builder.build().unwrap()
}

/// The served definitions: `coding` revision `r1` (three turns).
pub fn definitions() -> DefinitionSet {
    let agent = AgentDefinition::new("coding", "scripted", 3).unwrap();
    DefinitionSet::new([Definition::new("coding", "r1", agent).unwrap()]).unwrap()
}

pub struct Harness {
    pub host: RunHost,
    pub router: Arc<PendingRouter>,
    pub sessions: SessionStore,
    pub ledger: Arc<Ledger>,
    pub store: Arc<Store>,
    pub gate: Arc<Semaphore>,
    pub calls: Arc<AtomicUsize>,
    pub root: CancellationToken,
}

pub struct Options {
    pub limits: HostLimits,
    pub hook: Option<agent_authority::StepHook>,
    pub sources: Vec<Arc<dyn HealthSource>>,
    pub ledger: (usize, usize),
}

impl Default for Options {
    fn default() -> Self {
        Options {
            limits: HostLimits::default(),
            hook: None,
            sources: Vec::new(),
            ledger: (64, 1024),
        }
    }
}

impl Harness {
    pub fn new(dir: &Path) -> Harness {
        Harness::with(dir, Options::default())
    }

    pub fn with(dir: &Path, options: Options) -> Harness {
        let mut store_options = StoreOptions::new().directory(dir);
        if let Some(hook) = options.hook {
            store_options = store_options.step_hook(hook);
        }
        let store = Arc::new(Store::open(store_options).expect("open the store"));
        let root = CancellationToken::new();
        let router = PendingRouter::new(PendingLimits::default()).unwrap();
        let gate = Arc::new(Semaphore::new(0));
        let calls = Arc::new(AtomicUsize::new(0));
        let sessions = SessionStore::new(&root, 64).unwrap();
        let ledger = Arc::new(Ledger::new(options.ledger.0, options.ledger.1).unwrap());
        let host = RunHost::new(RunHostConfig {
            root: root.clone(),
            engine: engine(router.clone(), gate.clone(), calls.clone()),
            authority: store.clone(),
            sessions: sessions.clone(),
            ledger: ledger.clone(),
            pending: router.clone(),
            definitions: definitions(),
            limits: options.limits,
            health_sources: options.sources,
        })
        .unwrap();
        Harness {
            host,
            router,
            sessions,
            ledger,
            store,
            gate,
            calls,
            root,
        }
    }

    pub fn session(&self) -> Session {
        self.sessions.fresh().unwrap()
    }
}

/// A start request for `coding@r1`.
pub fn start(op: &str, text: &str) -> StartRequest {
    StartRequest {
        operation_id: op.to_owned(),
        definition_id: "coding".into(),
        revision: "r1".into(),
        text: text.into(),
    }
}

/// A hook failing at `step` while `armed`.
pub fn failing_at(
    step: Step,
    armed: Arc<std::sync::atomic::AtomicBool>,
) -> agent_authority::StepHook {
    Arc::new(move |seen| {
        if seen == step && armed.load(Ordering::SeqCst) {
            Err(())
        } else {
            Ok(())
        }
    })
}
