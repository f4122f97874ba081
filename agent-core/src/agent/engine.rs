//! The engine: a deterministic single-agent loop over an already-composed graph.
//!
//! An [`Engine`] holds a [`ModelProvider`], its [`ToolPlans`], an [`IdSource`], a [`Clock`],
//! an interaction [`Broker`] and optional [`Observer`]s. It is not a container: everything
//! it runs was built by `compose!` (or by hand) before.
//!
//! A run starts transactionally: [`Engine::prepare`] validates the input, leases the current
//! tool plan, allocates the run id and builds an unpublished event log, with no event, task
//! or provider call; [`PreparedRun::commit`] starts it under a caller-owned cancellation root
//! and [`PreparedRun::abort`] releases what was acquired, exactly once.
//!
//! Each turn asks the model, collects its tool calls, records `tool.started` before each
//! dispatch, dispatches through the leased plan, appends the results to the history and goes
//! on until a turn has no tool calls (the run completes) or the turn limit is reached (it
//! fails). Every run ends with exactly one terminal event, preceded by the release of its
//! lease. See `docs/run-lifecycle.md` for the state diagram and the event catalogue.
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//!
//! use agent_core::agent::{AgentDefinition, Engine};
//! use agent_core::event::EventKind;
//! use agent_core::message::Message;
//! use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
//! use agent_core::stage::{Dispatcher, StaticToolPlanSource};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let provider = Arc::new(ScriptedProvider::new(|_request| vec![
//!     StreamEvent::TextDelta("Hello!".into()),
//!     StreamEvent::Completed { usage: Usage::new(3, 2) },
//! ]));
//! let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
//! let engine = Engine::builder(provider, tools).build()?;
//!
//! let agent = AgentDefinition::new("greeter", "scripted", 4)?;
//! let run = engine.start(&agent, Message::user("hi")?).await?;
//! let output = run.wait().await?;
//! assert_eq!(output.answer, "Hello!");
//!
//! let page = run.events().replay(agent_core::event::ReplayRequest::after(0))?;
//! let kinds: Vec<EventKind> = page.events.iter().map(|e| e.kind()).collect();
//! assert_eq!(kinds, [
//!     EventKind::RunStarted, EventKind::TurnStarted, EventKind::ModelStarted,
//!     EventKind::ModelDelta, EventKind::ModelCompleted, EventKind::TurnCompleted,
//!     EventKind::RunCompleted,
//! ]);
//! engine.close().await;
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::event::{Clock, EventLog, LogError, LogLimits, Observer, SystemClock};
use crate::future::poll_once;
use crate::interaction::{Broker, UnavailableBroker};
use crate::message::{Message, Role};
use crate::model::{MAX_MODEL_BYTES, ModelProvider};
use crate::panic::CatchUnwind;
use crate::run_id::RunId;
use crate::stage::{PlanError, PlanId, ReleaseError, ToolPlanLease, ToolPlans};
use crate::text::format_arc;

mod driver;
mod run;
mod snapshot;

pub use run::{Run, RunError, RunOutput, RunStatus, SuspendError};
pub use snapshot::{
    CallState, MAX_SNAPSHOT_BYTES, SNAPSHOT_VERSION, Snapshot, SnapshotError, SnapshotStatus,
    UnfinishedCall,
};

use run::RunShared;

/// Most turns a definition may allow.
pub const MAX_TURNS: u32 = 1000;
/// Longest agent name, in bytes.
pub const MAX_AGENT_NAME_BYTES: usize = 128;

/// Why an [`AgentDefinition`] is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DefinitionError {
    /// The name is empty, untrimmed or longer than [`MAX_AGENT_NAME_BYTES`].
    #[error("agent name must be non-empty, trimmed and at most {MAX_AGENT_NAME_BYTES} bytes")]
    Name,
    /// The model is empty, untrimmed or longer than 256 bytes.
    #[error("model must be non-empty, trimmed and at most {MAX_MODEL_BYTES} bytes")]
    Model,
    /// `max_turns` is outside `1..=1000`.
    #[error("max turns must be between 1 and {MAX_TURNS}")]
    MaxTurns,
}

/// What a run executes: a name (for events), the model to ask, and the turn limit.
///
/// ```
/// use agent_core::agent::AgentDefinition;
///
/// let agent = AgentDefinition::new("coder", "gpt-4o-mini", 8)?;
/// assert_eq!((agent.name(), agent.model(), agent.max_turns()), ("coder", "gpt-4o-mini", 8));
/// assert!(AgentDefinition::new("coder", "m", 0).is_err());
/// # Ok::<(), agent_core::agent::DefinitionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "DefinitionParts")]
pub struct AgentDefinition {
    name: Arc<str>,
    model: Arc<str>,
    max_turns: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DefinitionParts {
    name: String,
    model: String,
    max_turns: u32,
}

impl TryFrom<DefinitionParts> for AgentDefinition {
    type Error = DefinitionError;

    fn try_from(parts: DefinitionParts) -> Result<Self, Self::Error> {
        AgentDefinition::new(parts.name, parts.model, parts.max_turns)
    }
}

fn bounded_token(value: &str, max: usize) -> bool {
    !value.is_empty() && value.len() <= max && value.trim() == value
}

impl AgentDefinition {
    /// A validated definition.
    pub fn new(
        name: impl Into<Arc<str>>,
        model: impl Into<Arc<str>>,
        max_turns: u32,
    ) -> Result<Self, DefinitionError> {
        let definition = AgentDefinition {
            name: name.into(),
            model: model.into(),
            max_turns,
        };
        definition.validate()?;
        Ok(definition)
    }

    pub(crate) fn validate(&self) -> Result<(), DefinitionError> {
        if !bounded_token(&self.name, MAX_AGENT_NAME_BYTES) {
            return Err(DefinitionError::Name);
        }
        if !bounded_token(&self.model, MAX_MODEL_BYTES) {
            return Err(DefinitionError::Model);
        }
        if !(1..=MAX_TURNS).contains(&self.max_turns) {
            return Err(DefinitionError::MaxTurns);
        }
        Ok(())
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model every request names.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The most turns a run may take.
    pub fn max_turns(&self) -> u32 {
        self.max_turns
    }
}

/// Allocates run ids.
pub trait IdSource: Send + Sync {
    /// A fresh id starting with `prefix`; the engine refuses an id that is still in use.
    fn next_id(&self, prefix: &str) -> Arc<str>;
}

/// Ids `<prefix>-1`, `<prefix>-2`, ... from one atomic counter.
///
/// ```
/// use agent_core::agent::{AtomicIdSource, IdSource};
///
/// let ids = AtomicIdSource::new();
/// assert_eq!(&*ids.next_id("run"), "run-1");
/// assert_eq!(&*ids.next_id("run"), "run-2");
/// ```
#[derive(Debug, Default)]
pub struct AtomicIdSource(AtomicU64);

impl AtomicIdSource {
    /// A source whose first id ends in `-1`.
    pub const fn new() -> Self {
        AtomicIdSource(AtomicU64::new(0))
    }
}

impl IdSource for AtomicIdSource {
    fn next_id(&self, prefix: &str) -> Arc<str> {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        format_arc(format_args!("{prefix}-{n}"))
    }
}

/// Tunables, validated when the engine is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineOptions {
    /// Limits of each run's event log.
    pub log_limits: LogLimits,
    /// How long finalization may wait for the lease release and for observers to accept a
    /// terminal event (0 < t <= 30 s; default 2 s).
    pub finalization_timeout: Duration,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            log_limits: LogLimits::default(),
            finalization_timeout: Duration::from_secs(2),
        }
    }
}

impl EngineOptions {
    /// The defaults with other log limits.
    pub fn with_log_limits(mut self, limits: LogLimits) -> Self {
        self.log_limits = limits;
        self
    }

    /// The defaults with another finalization timeout.
    pub fn with_finalization_timeout(mut self, timeout: Duration) -> Self {
        self.finalization_timeout = timeout;
        self
    }

    fn validate(&self) -> Result<(), EngineError> {
        self.log_limits
            .validate()
            .map_err(|_| EngineError::InvalidOptions("log limits are invalid"))?;
        if self.finalization_timeout.is_zero()
            || self.finalization_timeout > Duration::from_secs(30)
        {
            return Err(EngineError::InvalidOptions(
                "finalization timeout must be between 0 (exclusive) and 30 seconds",
            ));
        }
        Ok(())
    }
}

/// Why an [`Engine`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// An option is out of range.
    #[error("invalid engine options: {0}")]
    InvalidOptions(&'static str),
}

/// Why a run could not be prepared, committed or resumed. Whatever was acquired has been
/// released.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The engine no longer accepts runs.
    #[error("the engine is closed")]
    Closed,
    /// The input is not a valid user message.
    #[error("the input must be a user message")]
    Input,
    /// The agent definition is invalid.
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    /// No tool plan could be leased.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The plan source panicked; the panic was contained.
    #[error("the tool plan source panicked")]
    PlanSourcePanicked,
    /// The leased plan is not the one the snapshot recorded.
    #[error("the tool plan `{0}` differs from the one the snapshot recorded")]
    PlanChanged(String),
    /// The id source gave an invalid id.
    #[error("the id source gave an invalid run id")]
    RunId,
    /// A run with this id is already live in this engine.
    #[error("run `{0}` is already live")]
    DuplicateRun(String),
    /// The event log could not be created.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The cancellation root was already cancelled.
    #[error("the run's cancellation root was already cancelled")]
    Cancelled,
    /// The snapshot cannot be resumed.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A completed run has nothing left to do.
    #[error("a completed run cannot be resumed")]
    NotResumable,
    /// Runs execute on a tokio runtime; commit was called outside one.
    #[error("a run must be committed inside a tokio runtime")]
    NoRuntime,
}

/// The engine's registry of live runs: ids for duplicate detection and tokens for shutdown.
#[derive(Default)]
struct Registry {
    closed: bool,
    live: HashMap<RunId, Option<CancellationToken>>,
}

pub(crate) struct EngineInner {
    pub(crate) provider: Arc<dyn ModelProvider>,
    plans: ToolPlans,
    ids: Ids,
    pub(crate) clock: Arc<dyn Clock>,
    broker: Option<Arc<dyn Broker>>,
    pub(crate) observers: Vec<Arc<dyn Observer>>,
    pub(crate) options: EngineOptions,
    registry: Mutex<Registry>,
    drained: Notify,
    /// Never cancelled: preparation has no deadline of its own. Created on first use.
    setup: std::sync::OnceLock<CancellationToken>,
}

/// Where run ids come from; the default counter lives in the engine itself.
enum Ids {
    Counter(AtomicIdSource),
    Custom(Arc<dyn IdSource>),
}

impl Ids {
    fn next_id(&self, prefix: &str) -> Arc<str> {
        match self {
            Ids::Counter(counter) => counter.next_id(prefix),
            Ids::Custom(source) => source.next_id(prefix),
        }
    }
}

impl EngineInner {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Who answers interactions.
    pub(crate) fn broker(&self) -> &dyn Broker {
        match &self.broker {
            Some(broker) => &**broker,
            None => &UnavailableBroker,
        }
    }

    /// Forgets a run that ended or was aborted.
    pub(crate) fn unregister(&self, id: &RunId) {
        let mut registry = self.registry();
        registry.live.remove(id);
        // Only `close` and `shutdown` wait for the registry to drain, and they mark it
        // closed first.
        let wake = registry.closed && registry.live.is_empty();
        drop(registry);
        if wake {
            self.drained.notify_waiters();
        }
    }
}

/// Builds an [`Engine`]; see [`Engine::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct EngineBuilder {
    provider: Arc<dyn ModelProvider>,
    plans: ToolPlans,
    ids: Option<Arc<dyn IdSource>>,
    clock: Option<Arc<dyn Clock>>,
    broker: Option<Arc<dyn Broker>>,
    observers: Vec<Arc<dyn Observer>>,
    options: EngineOptions,
}

impl fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("observers", &self.observers.len())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl EngineBuilder {
    /// Where run ids come from (default: [`AtomicIdSource`]).
    pub fn ids(mut self, ids: Arc<dyn IdSource>) -> Self {
        self.ids = Some(ids);
        self
    }

    /// The clock that stamps events (default: [`SystemClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Who answers interactions (default: [`UnavailableBroker`]).
    pub fn broker(mut self, broker: Arc<dyn Broker>) -> Self {
        self.broker = Some(broker);
        self
    }

    /// Adds a required observer; observers see every event in order after it is committed.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observers.push(observer);
        self
    }

    /// Replaces the options.
    pub fn options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }

    /// Validates the options and builds the engine.
    pub fn build(self) -> Result<Engine, EngineError> {
        self.options.validate()?;
        Ok(Engine {
            inner: Arc::new(EngineInner {
                provider: self.provider,
                plans: self.plans,
                ids: self
                    .ids
                    .map_or_else(|| Ids::Counter(AtomicIdSource::new()), Ids::Custom),
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
                broker: self.broker,
                observers: self.observers,
                options: self.options,
                registry: Mutex::new(Registry::default()),
                drained: Notify::new(),
                setup: std::sync::OnceLock::new(),
            }),
        })
    }
}

/// Runs agents. Cheap to clone; clones share runs and configuration.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let registry = self.inner.registry();
        f.debug_struct("Engine")
            .field("closed", &registry.closed)
            .field("live_runs", &registry.live.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A builder over the two required parts.
    pub fn builder(provider: Arc<dyn ModelProvider>, plans: impl Into<ToolPlans>) -> EngineBuilder {
        EngineBuilder {
            provider,
            plans: plans.into(),
            ids: None,
            clock: None,
            broker: None,
            observers: Vec::new(),
            options: EngineOptions::default(),
        }
    }

    /// Validates the input, leases the current tool plan, allocates the run id and builds
    /// an unpublished event log. Nothing runs and no event exists until
    /// [`PreparedRun::commit`].
    pub async fn prepare(
        &self,
        agent: &AgentDefinition,
        input: Message,
    ) -> Result<PreparedRun, StartError> {
        agent.validate()?;
        if input.role() != Role::User {
            return Err(StartError::Input);
        }
        if self.inner.registry().closed {
            return Err(StartError::Closed);
        }
        let lease = self.lease(None).await?;
        let id = self.inner.ids.next_id("run");
        let prepared = self.reserve(id, lease, EventLog::new)?;
        Ok(prepared.with_start(run::Start::Fresh {
            agent: agent.clone(),
            input,
        }))
    }

    /// [`prepare`](Self::prepare) then [`commit`](PreparedRun::commit) under a fresh root:
    /// cancel the run with [`Run::cancel`].
    pub async fn start(&self, agent: &AgentDefinition, input: Message) -> Result<Run, StartError> {
        self.prepare(agent, input).await?.commit_owned_root()
    }

    /// Prepares a run that continues `snapshot` (suspended, failed or cancelled) under its
    /// own id, after its last event, leasing exactly the plan generation it recorded and
    /// refusing any other plan (fail closed). Unfinished tool calls are settled first: calls
    /// that never started run, uncertain and replay-unsafe ones are reported to the model as
    /// problems and never run again.
    pub async fn prepare_resume(&self, snapshot: Snapshot) -> Result<PreparedRun, StartError> {
        snapshot.validate()?;
        if snapshot.status() == SnapshotStatus::Completed {
            return Err(StartError::NotResumable);
        }
        if self.inner.registry().closed {
            return Err(StartError::Closed);
        }
        let plan_id = PlanId::new(snapshot.plan_id.clone())
            .map_err(|_| StartError::Snapshot(SnapshotError::Invalid("plan id is invalid")))?;
        let lease = self.lease(Some(&plan_id)).await?;
        if lease.id() != &plan_id || lease.fingerprint() != snapshot.plan_fingerprint() {
            release_quietly(&lease, self.inner.options.finalization_timeout).await;
            return Err(StartError::PlanChanged(plan_id.to_string()));
        }
        let id: Arc<str> = Arc::from(snapshot.run_id());
        let last = snapshot.last_sequence();
        let prepared = self.reserve(id, lease, |id, limits| EventLog::after(id, last, limits))?;
        Ok(prepared.with_start(run::Start::Resumed(Box::new(snapshot))))
    }

    /// [`prepare_resume`](Self::prepare_resume) then commit under a fresh root.
    pub async fn resume(&self, snapshot: Snapshot) -> Result<Run, StartError> {
        self.prepare_resume(snapshot).await?.commit_owned_root()
    }

    async fn lease(&self, generation: Option<&PlanId>) -> Result<ToolPlanLease, StartError> {
        let setup = self.inner.setup.get_or_init(CancellationToken::new);
        let plans = self.inner.plans.source();
        let future = catch_unwind(AssertUnwindSafe(|| match generation {
            Some(id) => plans.lease_generation(id, setup),
            None => plans.lease_current(setup),
        }))
        .map_err(|_| StartError::PlanSourcePanicked)?;
        match CatchUnwind::new(future).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(StartError::PlanSourcePanicked),
        }
    }

    /// Checks and reserves the id and creates the log; on failure releases the lease.
    fn reserve(
        &self,
        id: Arc<str>,
        lease: ToolPlanLease,
        log: impl FnOnce(Arc<str>, LogLimits) -> Result<EventLog, LogError>,
    ) -> Result<PreparedRun, StartError> {
        let reserved = match RunId::new(id) {
            Err(_) => Err(StartError::RunId),
            Ok(id) => {
                let mut registry = self.inner.registry();
                if registry.closed {
                    Err(StartError::Closed)
                } else if registry.live.contains_key(&id) {
                    Err(StartError::DuplicateRun(id.to_string()))
                } else {
                    registry.live.insert(id.clone(), None);
                    Ok(id)
                }
            }
        };
        let id = match reserved {
            Ok(id) => id,
            Err(failure) => {
                release_in_background(lease, self.inner.options.finalization_timeout);
                return Err(failure);
            }
        };
        match log(Arc::clone(id.as_arc()), self.inner.options.log_limits) {
            Ok(log) => Ok(PreparedRun {
                state: Some(Prepared {
                    engine: self.inner.clone(),
                    id,
                    lease,
                    log,
                    start: None,
                }),
            }),
            Err(error) => {
                self.inner.unregister(&id);
                release_in_background(lease, self.inner.options.finalization_timeout);
                Err(error.into())
            }
        }
    }

    /// Refuses new runs and waits until every live run ended.
    pub async fn close(&self) {
        let drained = {
            let mut registry = self.inner.registry();
            registry.closed = true;
            registry.live.is_empty()
        };
        if !drained {
            self.wait_drained().await;
        }
    }

    /// Refuses new runs, cancels every live run and waits until they ended.
    pub async fn shutdown(&self) {
        let tokens: Vec<CancellationToken> = {
            let mut registry = self.inner.registry();
            registry.closed = true;
            registry.live.values().flatten().cloned().collect()
        };
        for token in tokens {
            token.cancel();
        }
        self.wait_drained().await;
    }

    async fn wait_drained(&self) {
        if self.inner.registry().live.is_empty() {
            return;
        }
        loop {
            let notified = self.inner.drained.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.inner.registry().live.is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// How many runs are prepared or running.
    pub fn live_runs(&self) -> usize {
        self.inner.registry().live.len()
    }
}

/// Releases a lease, bounded by `timeout`; used on paths that already report another error.
async fn release_quietly(lease: &ToolPlanLease, timeout: Duration) {
    let _ = release_bounded(lease, timeout).await;
}

/// Releases a lease; a release that does not finish within `timeout` counts as failed.
pub(crate) async fn release_bounded(
    lease: &ToolPlanLease,
    timeout: Duration,
) -> Result<(), ReleaseError> {
    if lease.release_is_noop() {
        return Ok(());
    }
    let stop = CancellationToken::new();
    let release = lease.release(&stop);
    tokio::pin!(release);
    match poll_once(release.as_mut()).await {
        Some(outcome) => outcome,
        None => match tokio::time::timeout(timeout, release).await {
            Ok(outcome) => outcome,
            Err(_) => {
                stop.cancel();
                Err(ReleaseError::DidNotComplete)
            }
        },
    }
}

/// Releases a lease from a synchronous path: inline when there is nothing to do, else on a
/// task of the current runtime (every caller is inside one).
fn release_in_background(lease: ToolPlanLease, timeout: Duration) {
    if lease.release_is_noop() {
        return;
    }
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(async move { release_quietly(&lease, timeout).await });
    }
}

struct Prepared {
    engine: Arc<EngineInner>,
    id: RunId,
    lease: ToolPlanLease,
    log: EventLog,
    start: Option<run::Start>,
}

/// A run that holds its id, lease and log but has not started: no event, task or provider
/// call exists yet. Exactly one of [`commit`](Self::commit) or [`abort`](Self::abort)
/// happens; dropping it aborts.
pub struct PreparedRun {
    state: Option<Prepared>,
}

impl fmt::Debug for PreparedRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedRun")
            .field("run_id", &self.state.as_ref().map(|s| s.id.as_str()))
            .finish_non_exhaustive()
    }
}

impl PreparedRun {
    fn with_start(mut self, start: run::Start) -> Self {
        if let Some(state) = &mut self.state {
            state.start = Some(start);
        }
        self
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        self.state.as_ref().map_or("", |s| s.id.as_str())
    }

    /// Starts the run under a child of `root`: cancelling `root` (or calling
    /// [`Run::cancel`]) cancels the run. A root that is already cancelled aborts the
    /// preparation instead.
    pub fn commit(self, root: &CancellationToken) -> Result<Run, StartError> {
        if root.is_cancelled() {
            self.abort_now();
            return Err(StartError::Cancelled);
        }
        self.commit_with(root.child_token())
    }

    fn commit_owned_root(self) -> Result<Run, StartError> {
        self.commit_with(CancellationToken::new())
    }

    fn commit_with(mut self, cancel: CancellationToken) -> Result<Run, StartError> {
        let Some(state) = self.state.take() else {
            return Err(StartError::Closed);
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            Self::abort_state(state);
            return Err(StartError::NoRuntime);
        };
        {
            let mut registry = state.engine.registry();
            if registry.closed {
                drop(registry);
                Self::abort_state(state);
                return Err(StartError::Closed);
            }
            if let Some(slot) = registry.live.get_mut(&state.id) {
                *slot = Some(cancel.clone());
            }
        }
        let Some(start) = state.start else {
            state.engine.unregister(&state.id);
            release_in_background(state.lease, state.engine.options.finalization_timeout);
            return Err(StartError::Closed);
        };
        Ok(RunShared::launch(
            &runtime,
            state.engine,
            state.id,
            state.lease,
            state.log,
            cancel,
            start,
        ))
    }

    /// Releases the lease (bounded by the finalization timeout), forgets the id and closes
    /// the log, exactly once.
    pub async fn abort(mut self) -> Result<(), ReleaseError> {
        let Some(state) = self.state.take() else {
            return Ok(());
        };
        state.log.close();
        state.engine.unregister(&state.id);
        release_bounded(&state.lease, state.engine.options.finalization_timeout).await
    }

    fn abort_now(mut self) {
        if let Some(state) = self.state.take() {
            Self::abort_state(state);
        }
    }

    fn abort_state(state: Prepared) {
        state.log.close();
        state.engine.unregister(&state.id);
        release_in_background(state.lease, state.engine.options.finalization_timeout);
    }
}

impl Drop for PreparedRun {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            Self::abort_state(state);
        }
    }
}

/// The driver's failures are the run errors callers receive.
pub(crate) use run::RunError as Failure;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_validate_every_field() {
        assert!(AgentDefinition::new("a", "m", 1).is_ok());
        assert!(AgentDefinition::new("a", "m", MAX_TURNS).is_ok());
        assert_eq!(
            AgentDefinition::new("a", "m", MAX_TURNS + 1),
            Err(DefinitionError::MaxTurns)
        );
        assert_eq!(
            AgentDefinition::new(" a", "m", 1),
            Err(DefinitionError::Name)
        );
        assert_eq!(
            AgentDefinition::new("a", "m".repeat(257), 1),
            Err(DefinitionError::Model)
        );
        let json = serde_json::json!({"name": "a", "model": "m", "max_turns": 0});
        assert!(serde_json::from_value::<AgentDefinition>(json).is_err());
    }

    #[test]
    fn options_are_bounded() {
        assert!(EngineOptions::default().validate().is_ok());
        let zero = EngineOptions::default().with_finalization_timeout(Duration::ZERO);
        assert!(zero.validate().is_err());
        let long = EngineOptions::default().with_finalization_timeout(Duration::from_secs(31));
        assert!(long.validate().is_err());
    }
}
