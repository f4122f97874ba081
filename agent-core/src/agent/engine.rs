//! The engine: builds and owns runs; see the [module documentation](super).

use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::definition::{AgentDefinition, AgentDefinitionError};
use super::driver::{self, Start};
use super::ids::{AtomicIdSource, IdSource, Ids};
use super::inner::{EngineInner, Registry};
use super::options::{EngineError, EngineOptions};
use super::release::{release_bounded, release_in_background, release_quietly};
use super::run::Run;
use super::snapshot::{Snapshot, SnapshotError, SnapshotStatus};
use crate::event::{Clock, EventLog, LogError, LogLimits, Observer, SystemClock};
use crate::interaction::Broker;
use crate::message::{Message, Role};
use crate::model::ModelProvider;
use crate::panic::{CatchUnwind, contained};
use crate::run_id::RunId;
use crate::stage::{PlanError, PlanId, ReleaseError, ToolPlanLease, ToolPlans};

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
    Definition(#[from] AgentDefinitionError),
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

    /// Who answers interactions (default: [`UnavailableBroker`](crate::interaction::UnavailableBroker)).
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
        Ok(prepared.with_start(Start::Fresh {
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
        Ok(prepared.with_start(Start::Resumed(Box::new(snapshot))))
    }

    /// [`prepare_resume`](Self::prepare_resume) then commit under a fresh root.
    pub async fn resume(&self, snapshot: Snapshot) -> Result<Run, StartError> {
        self.prepare_resume(snapshot).await?.commit_owned_root()
    }

    async fn lease(&self, generation: Option<&PlanId>) -> Result<ToolPlanLease, StartError> {
        let setup = self.inner.setup.get_or_init(CancellationToken::new);
        let plans = self.inner.plans.source();
        let future = contained(|| match generation {
            Some(id) => plans.lease_generation(id, setup),
            None => plans.lease_current(setup),
        })
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

struct Prepared {
    engine: Arc<EngineInner>,
    id: RunId,
    lease: ToolPlanLease,
    log: EventLog,
    start: Option<Start>,
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
    fn with_start(mut self, start: Start) -> Self {
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
        Ok(driver::launch(
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
