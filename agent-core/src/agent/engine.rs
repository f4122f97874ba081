//! The engine: builds and owns runs; see the [module documentation](super).

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::definition::{AgentDefinition, AgentDefinitionError};
use super::driver::{self, Start};
use super::identity::{EngineIdentity, PlanIdentity};
use super::ids::{AtomicIdSource, IdSource, Ids};
use super::inner::{EngineInner, Registry};
use super::ledger::{LedgerKey, Refusal, Release, RetireError, Stage};
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
    PlanChanged(PlanId),
    /// The id source gave an invalid id.
    #[error("the id source gave an invalid run id")]
    RunId,
    /// A run with this id is already live in this engine.
    #[error("run `{0}` is already live")]
    DuplicateRun(RunId),
    /// This engine already used this run id (the run ended, its preparation was aborted,
    /// or the id was retired); run ids are never reused.
    #[error("run id `{0}` was already used by this engine")]
    RetiredRun(RunId),
    /// The run-identity ledger records
    /// [`MAX_RECORDED_RUN_IDS`](super::MAX_RECORDED_RUN_IDS) ids; an id that needs an
    /// entry of its own (not from the engine's counter) is refused.
    #[error("the run-identity ledger is full")]
    IdentityCapacity,
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
    /// The earlier conversation given to
    /// [`start_continuing`](Engine::start_continuing) is not a settled history.
    #[error("the earlier conversation is invalid: {0}")]
    Conversation(&'static str),
    /// Runs execute on a tokio runtime; commit was called outside one.
    #[error("a run must be committed inside a tokio runtime")]
    NoRuntime,
    /// The snapshot was taken by an engine this one may not continue (checked before any
    /// plan is leased).
    #[error("the snapshot cannot be resumed by this engine: {0}")]
    Incompatible(Incompatibility),
}

/// Why an engine refuses a snapshot of another engine; see [`EngineIdentity`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Incompatibility {
    /// This engine has no compatibility identity, or the snapshot names none: snapshots do
    /// not move between such engines.
    #[error("a compatibility identity is required on both sides")]
    NoCompatibilityIdentity,
    /// The compatibility identities differ.
    #[error("the compatibility identities differ")]
    CompatibilityIdentity,
    /// The compiled identities or the workspace identity differ.
    #[error("the static identities differ")]
    StaticIdentity,
    /// The leased generation's plan identity differs from the snapshot's.
    #[error("the plan identities differ")]
    PlanIdentity,
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
    identity: Option<Arc<EngineIdentity>>,
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
    #[inline]
    pub fn ids(mut self, ids: Arc<dyn IdSource>) -> Self {
        self.ids = Some(ids);
        self
    }

    /// The clock that stamps events (default: [`SystemClock`]).
    #[inline]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Who answers interactions (default: [`UnavailableBroker`](crate::interaction::UnavailableBroker)).
    #[inline]
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
    #[inline]
    pub fn options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }

    /// What the application states about the code it runs (default: nothing, which keeps
    /// snapshots local to this engine); every run's [`PlanIdentity`] covers it.
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::Arc;
    /// # use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
    /// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    /// use agent_core::agent::{Engine, EngineIdentity};
    /// # let provider = Arc::new(ScriptedProvider::new(|_| vec![StreamEvent::Completed { usage: Usage::new(1, 1) }]));
    /// # let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
    /// // With `compose!`: `EngineIdentity::new(App::compiled_identities())`.
    /// let identity = EngineIdentity::new(["model_provider:scripted@0a1b"])?.with_compatibility("demo/1")?;
    /// let engine = Engine::builder(provider, tools).identity(identity.clone()).build()?;
    /// assert_eq!(engine.identity(), &identity);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn identity(mut self, identity: EngineIdentity) -> Self {
        self.identity = Some(Arc::new(identity));
        self
    }

    /// Validates the options and builds the engine.
    #[inline]
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
                closed: AtomicBool::new(false),
                drained: Notify::new(),
                setup: std::sync::OnceLock::new(),
                identity: self.identity,
                plan_identity: std::sync::OnceLock::new(),
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
            .field("live_runs", &registry.ledger.live.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A builder over the two required parts.
    #[inline]
    pub fn builder(provider: Arc<dyn ModelProvider>, plans: impl Into<ToolPlans>) -> EngineBuilder {
        EngineBuilder {
            provider,
            plans: plans.into(),
            ids: None,
            clock: None,
            broker: None,
            observers: Vec::new(),
            options: EngineOptions::default(),
            identity: None,
        }
    }

    /// What the application stated about the code this engine runs.
    pub fn identity(&self) -> &EngineIdentity {
        self.inner.identity()
    }

    /// Validates the input, leases the current tool plan, allocates the run id and builds
    /// an unpublished event log. Nothing runs and no event exists until
    /// [`PreparedRun::commit`].
    pub async fn prepare(
        &self,
        agent: &AgentDefinition,
        input: Message,
    ) -> Result<PreparedRun, StartError> {
        Ok(PreparedRun::new(
            self.prepare_fresh(agent, input, None).await?,
        ))
    }

    /// What [`prepare`](Self::prepare) holds, without the handle around it. With `filed`,
    /// the reservation files the run's token at once (see [`Prepared::launch`]).
    async fn prepare_fresh(
        &self,
        agent: &AgentDefinition,
        input: Message,
        filed: Option<&CancellationToken>,
    ) -> Result<Prepared, StartError> {
        // A definition is checked when it is built (or decoded) and cannot change after.
        debug_assert!(agent.validate().is_ok());
        if input.role() != Role::User {
            return Err(StartError::Input);
        }
        if self.inner.is_closed() {
            return Err(StartError::Closed);
        }
        let lease = self.lease(None).await?;
        let identity = self.inner.plan_identity_for(&lease);
        let id = self.inner.ids.next_run_id();
        let start = Start::Fresh {
            agent: agent.clone(),
            input,
        };
        let reservation = Reservation {
            release: Release::Retire,
            filed,
        };
        self.reserve(id, reservation, (lease, identity), EventLog::new, start)
    }

    /// [`prepare`](Self::prepare) then [`commit`](PreparedRun::commit) under a fresh root:
    /// cancel the run with [`Run::cancel`].
    pub async fn start(&self, agent: &AgentDefinition, input: Message) -> Result<Run, StartError> {
        // The same steps without the two handles in between: each would move the run's
        // parts once more. The run's token is filed with its reservation, which saves the
        // commit its own pass under the registry lock.
        let cancel = CancellationToken::new();
        self.prepare_fresh(agent, input, Some(&cancel))
            .await?
            .launch(cancel)
    }

    /// Starts a run that continues a conversation: the `earlier` messages (the history of a
    /// run that ended, such as [`Snapshot::history`]) and then `input`, under a fresh run
    /// id, plan lease and turn count. The model sees the whole conversation; the run's
    /// events are its own (from `run.started`). `earlier` must be a settled history: it
    /// starts with a user message and answers every tool call it makes
    /// ([`StartError::Conversation`]), and with `input` it fits the request bounds
    /// ([`MAX_MESSAGES`](crate::model::MAX_MESSAGES) messages,
    /// [`MAX_REQUEST_BYTES`](crate::model::MAX_REQUEST_BYTES)).
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::Arc;
    /// # use agent_core::agent::{AgentDefinition, Engine};
    /// # use agent_core::message::Message;
    /// # use agent_core::model::{ScriptedProvider, StreamEvent, Usage, ModelRequest};
    /// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // The model answers with how many messages it was sent.
    /// let provider = ScriptedProvider::new(|request: &ModelRequest| {
    ///     let seen = request.messages().len().to_string();
    ///     vec![StreamEvent::TextDelta(seen), StreamEvent::Completed { usage: Usage::new(1, 1) }]
    /// });
    /// let plans = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
    /// let engine = Engine::builder(Arc::new(provider), plans).build()?;
    /// let agent = AgentDefinition::new("chat", "scripted", 1)?;
    ///
    /// let first = engine.start(&agent, Message::user("hello")?).await?;
    /// assert_eq!(first.wait().await?.answer, "1");
    /// let earlier = first.snapshot()?.history().to_vec(); // the question and the answer
    /// let second = engine.start_continuing(&agent, earlier, Message::user("again")?).await?;
    /// assert_eq!(second.wait().await?.answer, "3");
    /// engine.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn start_continuing(
        &self,
        agent: &AgentDefinition,
        earlier: Vec<Message>,
        input: Message,
    ) -> Result<Run, StartError> {
        debug_assert!(agent.validate().is_ok());
        if input.role() != Role::User {
            return Err(StartError::Input);
        }
        let mut history = earlier;
        history.push(input);
        super::snapshot::check_conversation(&history).map_err(StartError::Conversation)?;
        if self.inner.is_closed() {
            return Err(StartError::Closed);
        }
        let cancel = CancellationToken::new();
        let lease = self.lease(None).await?;
        let identity = self.inner.plan_identity_for(&lease);
        let id = self.inner.ids.next_run_id();
        let start = Start::Continued {
            agent: agent.clone(),
            history,
        };
        let reservation = Reservation {
            release: Release::Retire,
            filed: Some(&cancel),
        };
        self.reserve(id, reservation, (lease, identity), EventLog::new, start)?
            .launch(cancel)
    }

    /// Prepares a run that continues `snapshot` (suspended, failed or cancelled) under its
    /// own id, after its last event, leasing exactly the plan generation it recorded and
    /// refusing any other plan (fail closed). Both engines must have the same non-empty
    /// compatibility identity and the same static identities ([`EngineIdentity`]), checked
    /// before the plan is leased, and the leased generation must give the snapshot's plan
    /// identity ([`StartError::Incompatible`]). The import names its exact id: it is refused
    /// when that id is live here ([`StartError::DuplicateRun`]) or was already used here
    /// ([`StartError::RetiredRun`]). Unfinished tool calls are settled first: calls
    /// that never started run, uncertain and replay-unsafe ones are reported to the model as
    /// problems and never run again.
    pub async fn prepare_resume(&self, snapshot: Snapshot) -> Result<PreparedRun, StartError> {
        Ok(PreparedRun::new(self.prepare_import(snapshot, None).await?))
    }

    /// What [`prepare_resume`](Self::prepare_resume) holds, without the handle around it.
    /// With `filed`, the reservation files the run's token at once, as for
    /// [`prepare_fresh`](Self::prepare_fresh).
    async fn prepare_import(
        &self,
        snapshot: Snapshot,
        filed: Option<&CancellationToken>,
    ) -> Result<Prepared, StartError> {
        snapshot.validate()?;
        if snapshot.status() == SnapshotStatus::Completed {
            return Err(StartError::NotResumable);
        }
        if self.inner.is_closed() {
            return Err(StartError::Closed);
        }
        // Fail closed before anything is leased: only an engine that shares a non-empty
        // compatibility identity and the static identities continues another's snapshot.
        let engine = self.inner.identity();
        match (engine.compatibility(), snapshot.compatibility()) {
            (Some(ours), Some(theirs)) if ours == theirs => {}
            (Some(_), Some(_)) => {
                return Err(StartError::Incompatible(
                    Incompatibility::CompatibilityIdentity,
                ));
            }
            _ => {
                return Err(StartError::Incompatible(
                    Incompatibility::NoCompatibilityIdentity,
                ));
            }
        }
        if engine.static_identity() != snapshot.static_identity() {
            return Err(StartError::Incompatible(Incompatibility::StaticIdentity));
        }
        // The id before the plan: a refused id costs no lease, and a retired id is reported
        // as such even when its plan generation is gone. `reserve` checks again under the
        // lock it takes the id in, so an import racing this one for the same id may still
        // lease, then be refused there and release at once; the check does not reserve, so
        // an engine shutdown never waits for a plan source on an import's behalf.
        let key = LedgerKey::new(
            snapshot.run_id().clone(),
            self.inner.ids.counted(snapshot.run_id().as_str()),
        );
        if let Some(refusal) = self.refuse_import(&key) {
            return Err(refusal);
        }
        let plan_id = snapshot.plan_id().clone();
        let lease = self.lease(Some(&plan_id)).await?;
        if lease.id() != &plan_id || lease.fingerprint() != snapshot.plan_fingerprint() {
            release_quietly(&lease, self.inner.options.finalization_timeout).await;
            return Err(StartError::PlanChanged(plan_id));
        }
        let identity = self.inner.plan_identity_for(&lease);
        if identity.fingerprint() != snapshot.plan_identity().fingerprint() {
            release_quietly(&lease, self.inner.options.finalization_timeout).await;
            return Err(StartError::Incompatible(Incompatibility::PlanIdentity));
        }
        let id: Arc<str> = Arc::clone(key.id().as_arc());
        let counted = self.inner.ids.counted(&id);
        let last = snapshot.last_sequence();
        let log = |id, limits| EventLog::after(id, last, limits);
        let start = Start::Resumed(Box::new(snapshot));
        let reservation = Reservation {
            release: Release::Forget,
            filed,
        };
        self.reserve((id, counted), reservation, (lease, identity), log, start)
    }

    /// [`prepare_resume`](Self::prepare_resume) then commit under a fresh root.
    pub async fn resume(&self, snapshot: Snapshot) -> Result<Run, StartError> {
        let cancel = CancellationToken::new();
        self.prepare_import(snapshot, Some(&cancel))
            .await?
            .launch(cancel)
    }

    /// Why an import of `key`'s id is refused now, if it is: checked before anything is
    /// leased, with the same answers [`reserve`](Self::reserve) gives.
    fn refuse_import(&self, key: &LedgerKey) -> Option<StartError> {
        let registry = self.inner.registry();
        if registry.closed {
            return Some(StartError::Closed);
        }
        registry
            .ledger
            .refuse_import(key)
            .map(|refusal| refused(refusal, key))
    }

    async fn lease(&self, generation: Option<&PlanId>) -> Result<ToolPlanLease, StartError> {
        if let Some(plans) = self.inner.plans.as_static() {
            // The engine's own static source: the same lease, with no future to box, and no
            // check of the preparation's token, which is never cancelled.
            return Ok(match generation {
                Some(id) => plans.lease_generation_now(id)?,
                None => plans.lease(),
            });
        }
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

    /// Checks and reserves the id in the ledger and creates the log; on failure releases
    /// the lease. `release` says what an abort does with the id: a fresh run's is retired,
    /// an import's reservation is forgotten (the engine never ran it).
    fn reserve(
        &self,
        (id, counted): (Arc<str>, bool),
        Reservation { release, filed }: Reservation<'_>,
        (lease, identity): (ToolPlanLease, Arc<PlanIdentity>),
        log: impl FnOnce(RunId, LogLimits) -> Result<EventLog, LogError>,
        start: Start,
    ) -> Result<Prepared, StartError> {
        let reserved = match RunId::new(id) {
            Err(_) => Err(StartError::RunId),
            Ok(id) => {
                let import = release == Release::Forget;
                let key = LedgerKey::new(id, counted);
                // Cloned before the lock: the clone takes the token's own lock.
                let shutdown = filed.cloned();
                let mut registry = self.inner.registry();
                let refusal = if registry.closed {
                    Some(StartError::Closed)
                } else if let Some(refusal) = import
                    .then(|| registry.ledger.refuse_import(&key))
                    .flatten()
                {
                    // Checked before the lease too; this catches an import that raced it.
                    Some(refused(refusal, &key))
                } else {
                    registry
                        .ledger
                        .reserve(&key, shutdown)
                        .err()
                        .map(|refusal| refused(refusal, &key))
                };
                match refusal {
                    None => Ok(key),
                    Some(refusal) => Err(refusal),
                }
            }
        };
        let key = match reserved {
            Ok(key) => key,
            Err(failure) => {
                release_in_background(lease, self.inner.options.finalization_timeout);
                return Err(failure);
            }
        };
        match log(key.id().clone(), self.inner.options.log_limits) {
            Ok(log) => Ok(Prepared {
                engine: self.inner.clone(),
                key,
                release,
                lease,
                identity,
                log,
                start,
            }),
            Err(error) => {
                self.inner.unregister(&key, release);
                release_in_background(lease, self.inner.options.finalization_timeout);
                Err(error.into())
            }
        }
    }

    /// Refuses new runs and waits until every live run ended.
    pub async fn close(&self) {
        let drained = self.inner.close_registry().drained();
        if !drained {
            self.wait_drained().await;
        }
    }

    /// Refuses new runs, cancels every live run and waits until they ended. A paused run
    /// or a reserved local resume latches the cancellation: shutdown then waits for the
    /// host's decision (activate or abort, commit or abort).
    pub async fn shutdown(&self) {
        let tokens: Vec<CancellationToken> = self.inner.close_registry().tokens();
        for token in tokens {
            token.cancel();
        }
        self.wait_drained().await;
    }

    async fn wait_drained(&self) {
        if self.inner.registry().drained() {
            return;
        }
        loop {
            let notified = self.inner.drained.notified();
            tokio::pin!(notified);
            if self.inner.registry().drained() {
                return;
            }
            notified.await;
        }
    }

    /// How many runs are prepared, paused, running or suspended.
    pub fn live_runs(&self) -> usize {
        self.inner.registry().ledger.live.len()
    }

    /// The ids of the live runs (prepared, paused, running or suspended), sorted.
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::Arc;
    /// # use agent_core::agent::{AgentDefinition, Engine};
    /// # use agent_core::message::Message;
    /// # use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
    /// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let provider = Arc::new(ScriptedProvider::new(|_| vec![StreamEvent::Completed { usage: Usage::new(1, 1) }]));
    /// # let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
    /// # let engine = Engine::builder(provider, tools).build()?;
    /// let agent = AgentDefinition::new("a", "scripted", 2)?;
    /// let prepared = engine.prepare(&agent, Message::user("hi")?).await?;
    /// assert_eq!(engine.live_run_ids().iter().map(|id| id.as_str()).collect::<Vec<_>>(), ["run-1"]);
    /// prepared.abort().await?;
    /// assert!(engine.live_run_ids().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn live_run_ids(&self) -> Vec<RunId> {
        let registry = self.inner.registry();
        let mut ids: Vec<RunId> = registry
            .ledger
            .live
            .keys()
            .map(|k| k.id().clone())
            .collect();
        drop(registry);
        ids.sort();
        ids
    }

    /// Retires `id` for good: no fresh run takes it and no snapshot naming it is imported
    /// into this engine. A host calls this once it invalidated a run elsewhere (an exported
    /// snapshot it will never honour). Idempotent; ids of runs that ended here are retired
    /// already.
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::Arc;
    /// # use agent_core::agent::{Engine, RetireError};
    /// # use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
    /// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    /// use agent_core::RunId;
    /// # let provider = Arc::new(ScriptedProvider::new(|_| vec![StreamEvent::Completed { usage: Usage::new(1, 1) }]));
    /// # let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
    /// # let engine = Engine::builder(provider, tools).build()?;
    /// let id = RunId::new("imported-7")?;
    /// assert!(!engine.is_retired(&id));
    /// engine.retire(&id)?;
    /// engine.retire(&id)?; // idempotent
    /// assert!(engine.is_retired(&id));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retire(&self, id: &RunId) -> Result<(), RetireError> {
        let key = LedgerKey::new(id.clone(), self.inner.ids.counted(id.as_str()));
        self.inner.registry().ledger.retire(&key)
    }

    /// Whether `id` was used by this engine and is not live: a fresh run never takes it and
    /// an import naming it is refused.
    pub fn is_retired(&self, id: &RunId) -> bool {
        let key = LedgerKey::new(id.clone(), self.inner.ids.counted(id.as_str()));
        self.inner.registry().ledger.is_retired(&key)
    }

    /// Whether `id` is live here: its run is prepared, paused, running or suspended (one
    /// of [`live_run_ids`](Self::live_run_ids)). A live id is neither taken by another run
    /// nor imported, and [`retire`](Self::retire) refuses it.
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::Arc;
    /// # use agent_core::agent::{AgentDefinition, Engine};
    /// # use agent_core::message::Message;
    /// # use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
    /// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let provider = Arc::new(ScriptedProvider::new(|_| vec![StreamEvent::Completed { usage: Usage::new(1, 1) }]));
    /// # let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
    /// # let engine = Engine::builder(provider, tools).build()?;
    /// let agent = AgentDefinition::new("a", "scripted", 2)?;
    /// let run = engine.start(&agent, Message::user("hi")?).await?;
    /// let id = run.id().clone();
    /// assert!(engine.is_live(&id));
    /// run.wait().await?;
    /// // `wait` returns once the run left the engine: its id is used for good.
    /// assert!(!engine.is_live(&id) && engine.is_retired(&id));
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_live(&self, id: &RunId) -> bool {
        let key = LedgerKey::new(id.clone(), self.inner.ids.counted(id.as_str()));
        self.inner.registry().ledger.live.contains_key(&key)
    }

    /// Whether `id`'s run was committed paused ([`PreparedRun::commit_paused`]) and waits
    /// for the host's [`PausedRun::activate`] or [`PausedRun::abort`].
    pub fn is_paused(&self, id: &RunId) -> bool {
        let key = LedgerKey::new(id.clone(), self.inner.ids.counted(id.as_str()));
        self.inner
            .registry()
            .ledger
            .live
            .get(&key)
            .is_some_and(|slot| slot.stage == Stage::Paused)
    }

    /// The run-identity ledger's counts, read under one lock so they agree with each
    /// other. Counting the retired ids passes over the ids recorded one by one (at most
    /// [`MAX_RECORDED_RUN_IDS`](super::MAX_RECORDED_RUN_IDS)).
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::Arc;
    /// # use agent_core::agent::{AgentDefinition, Engine, RunIdentityCounts};
    /// # use agent_core::message::Message;
    /// # use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
    /// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    /// use tokio_util::sync::CancellationToken;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let provider = Arc::new(ScriptedProvider::new(|_| vec![StreamEvent::Completed { usage: Usage::new(1, 1) }]));
    /// # let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
    /// # let engine = Engine::builder(provider, tools).build()?;
    /// let agent = AgentDefinition::new("a", "scripted", 2)?;
    /// let paused = engine.prepare(&agent, Message::user("hi")?).await?.commit_paused(&CancellationToken::new())?;
    /// assert!(engine.is_paused(paused.run_id()));
    /// assert_eq!(engine.identity_counts(), RunIdentityCounts { reserved: 1, live: 1, retired: 0 });
    /// paused.abort().await?;
    /// assert_eq!(engine.identity_counts(), RunIdentityCounts { reserved: 0, live: 0, retired: 1 });
    /// # Ok(())
    /// # }
    /// ```
    pub fn identity_counts(&self) -> RunIdentityCounts {
        let ids = &self.inner.ids;
        let registry = self.inner.registry();
        let ledger = &registry.ledger;
        let reserved = ledger
            .live
            .values()
            .filter(|slot| slot.stage != Stage::Started)
            .count();
        // Every id the counter issued is used unless it is live; the recorded ones it
        // does not cover are counted one by one.
        let live_counted = ledger
            .live
            .keys()
            .filter(|key| ids.counted(key.id().as_str()))
            .count();
        let issued = ids.issued();
        let retired = issued.saturating_sub(live_counted as u64)
            + ledger.retired_uncounted(|id| ids.counted(id)) as u64;
        RunIdentityCounts {
            reserved,
            live: ledger.live.len(),
            retired,
        }
    }
}

/// What the run-identity ledger holds; see [`Engine::identity_counts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RunIdentityCounts {
    /// Live ids whose run has not started: prepared, or committed paused.
    pub reserved: usize,
    /// Live ids: prepared, paused, running or suspended ([`Engine::live_runs`]); the
    /// `reserved` ones are among them.
    pub live: usize,
    /// Ids used for good: runs that ended, aborted fresh preparations and ids retired by
    /// the host ([`Engine::is_retired`] holds for each).
    pub retired: u64,
}

/// The error a ledger refusal of `key`'s id reports.
fn refused(refusal: Refusal, key: &LedgerKey) -> StartError {
    match refusal {
        Refusal::Live => StartError::DuplicateRun(key.id().clone()),
        Refusal::Retired => StartError::RetiredRun(key.id().clone()),
        Refusal::Capacity => StartError::IdentityCapacity,
    }
}

/// What a reservation does besides taking the id.
struct Reservation<'a> {
    /// What an abort does with the id.
    release: Release,
    /// The token to file with the id, for a run committed as soon as it is prepared.
    filed: Option<&'a CancellationToken>,
}

struct Prepared {
    engine: Arc<EngineInner>,
    /// The run's id, as the ledger filed it.
    key: LedgerKey,
    /// What an abort does with the id.
    release: Release,
    lease: ToolPlanLease,
    identity: Arc<PlanIdentity>,
    log: EventLog,
    start: Start,
}

impl Prepared {
    /// Files the run's cancellation with the ledger (so an engine shutdown reaches it), at
    /// `stage`, and names the runtime its task will run on; nothing runs yet. On an error
    /// the caller aborts.
    fn file(
        &self,
        cancel: &CancellationToken,
        stage: Stage,
    ) -> Result<tokio::runtime::Handle, StartError> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Err(StartError::NoRuntime);
        };
        let mut registry = self.engine.registry();
        if registry.closed {
            return Err(StartError::Closed);
        }
        registry.ledger.advance(&self.key, stage, Some(cancel));
        Ok(runtime)
    }

    /// Starts the task of a run whose reservation filed `cancel` (the direct start and
    /// resume), unless the registry was closed since: the same checks, in the same order,
    /// as [`file`](Self::file), without its pass under the lock (a close that this run's
    /// check does not see is ordered after the commit, as with `file`).
    fn launch(self, cancel: CancellationToken) -> Result<Run, StartError> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.abort_in_background();
            return Err(StartError::NoRuntime);
        };
        if self.engine.is_closed() {
            self.abort_in_background();
            return Err(StartError::Closed);
        }
        Ok(self.run(&runtime, cancel))
    }

    /// Starts the task of a filed run.
    fn run(self, runtime: &tokio::runtime::Handle, cancel: CancellationToken) -> Run {
        driver::launch(
            runtime,
            self.engine,
            self.key,
            (self.lease, self.identity),
            self.log,
            cancel,
            self.start,
        )
    }

    /// Releases what was acquired, in the background: closes the log, ends the id and
    /// releases the lease (bounded by the finalization timeout).
    fn abort_in_background(self) {
        self.log.close();
        self.engine.unregister(&self.key, self.release);
        release_in_background(self.lease, self.engine.options.finalization_timeout);
    }

    /// The same, waiting for the lease release.
    async fn abort(self) -> Result<(), ReleaseError> {
        self.log.close();
        self.engine.unregister(&self.key, self.release);
        release_bounded(&self.lease, self.engine.options.finalization_timeout).await
    }
}

/// A run that holds its id, lease and log but has not started: no event, task or provider
/// call exists yet. Exactly one of [`commit`](Self::commit),
/// [`commit_paused`](Self::commit_paused) or [`abort`](Self::abort) happens; dropping it
/// aborts.
pub struct PreparedRun {
    /// Kept beside the state, so the id outlives the decision that takes the state.
    id: RunId,
    state: Option<Prepared>,
}

impl fmt::Debug for PreparedRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedRun")
            .field("run_id", &self.id)
            .finish_non_exhaustive()
    }
}

impl PreparedRun {
    fn new(state: Prepared) -> PreparedRun {
        PreparedRun {
            id: state.key.id().clone(),
            state: Some(state),
        }
    }

    /// The run's id.
    pub fn run_id(&self) -> &RunId {
        &self.id
    }

    /// Starts the run under a child of `root`: cancelling `root` (or calling
    /// [`Run::cancel`]) cancels the run. A root that is already cancelled aborts the
    /// preparation instead. The same as [`commit_paused`](Self::commit_paused) then
    /// [`PausedRun::activate`], in one pass over the ledger.
    pub fn commit(mut self, root: &CancellationToken) -> Result<Run, StartError> {
        if root.is_cancelled() {
            self.abort_now();
            return Err(StartError::Cancelled);
        }
        let Some(state) = self.state.take() else {
            return Err(StartError::Closed);
        };
        let cancel = root.child_token();
        match state.file(&cancel, Stage::Started) {
            Ok(runtime) => Ok(state.run(&runtime, cancel)),
            Err(error) => {
                state.abort_in_background();
                Err(error)
            }
        }
    }

    /// Registers the run under a child of `root` but keeps it inert: its id is taken and
    /// listed ([`Engine::live_run_ids`]), and nothing else happens (no event is published;
    /// no provider, tool, guard, observer or interaction runs) until
    /// [`PausedRun::activate`]. A cancellation of `root` (or an engine shutdown) meanwhile
    /// is latched: the run starts cancelled when activated. A root that is already
    /// cancelled aborts the preparation instead.
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::Arc;
    /// # use agent_core::agent::{AgentDefinition, Engine};
    /// # use agent_core::message::Message;
    /// # use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
    /// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    /// use tokio_util::sync::CancellationToken;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let provider = Arc::new(ScriptedProvider::new(|_| vec![StreamEvent::Completed { usage: Usage::new(1, 1) }]));
    /// # let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
    /// # let engine = Engine::builder(provider, tools).build()?;
    /// let agent = AgentDefinition::new("a", "scripted", 2)?;
    /// let root = CancellationToken::new();
    /// let paused = engine.prepare(&agent, Message::user("hi")?).await?.commit_paused(&root)?;
    /// assert_eq!(engine.live_runs(), 1); // registered, but nothing ran
    /// let run = paused.activate();
    /// run.wait().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn commit_paused(self, root: &CancellationToken) -> Result<PausedRun, StartError> {
        if root.is_cancelled() {
            self.abort_now();
            return Err(StartError::Cancelled);
        }
        self.commit_paused_with(root.child_token())
    }

    fn commit_paused_with(mut self, cancel: CancellationToken) -> Result<PausedRun, StartError> {
        let Some(state) = self.state.take() else {
            return Err(StartError::Closed);
        };
        match state.file(&cancel, Stage::Paused) {
            Ok(runtime) => Ok(PausedRun {
                id: self.id.clone(),
                state: Some(Paused {
                    prepared: state,
                    cancel,
                    runtime,
                }),
            }),
            Err(error) => {
                state.abort_in_background();
                Err(error)
            }
        }
    }

    /// Releases the lease (bounded by the finalization timeout), ends the id (a fresh run's
    /// id is retired; an import's reservation is forgotten) and closes the log, exactly
    /// once. Nothing is published.
    pub async fn abort(mut self) -> Result<(), ReleaseError> {
        let Some(state) = self.state.take() else {
            return Ok(());
        };
        state.abort().await
    }

    fn abort_now(mut self) {
        if let Some(state) = self.state.take() {
            state.abort_in_background();
        }
    }
}

impl Drop for PreparedRun {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            state.abort_in_background();
        }
    }
}

struct Paused {
    prepared: Prepared,
    cancel: CancellationToken,
    runtime: tokio::runtime::Handle,
}

/// A committed run held inert behind the host's decision: registered (its id is taken and
/// listed) but nothing has happened, and a cancellation meanwhile is latched. Exactly one of
/// [`activate`](Self::activate) or [`abort`](Self::abort) happens; dropping it aborts.
pub struct PausedRun {
    /// Kept beside the state, so the id outlives the decision that takes the state.
    id: RunId,
    state: Option<Paused>,
}

impl fmt::Debug for PausedRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PausedRun")
            .field("run_id", &self.run_id())
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl PausedRun {
    /// The run's id.
    pub fn run_id(&self) -> &RunId {
        &self.id
    }

    /// Whether a cancellation (of the root, or by an engine shutdown) is latched: the run
    /// will start cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.state.as_ref().is_some_and(|s| s.cancel.is_cancelled())
    }

    /// Starts the run under the cancellation committed with it. A latched cancellation
    /// applies at once: the log is `run.started` (for a fresh run) then `run.cancelled`, and
    /// no provider, tool or guard runs.
    pub fn activate(mut self) -> Run {
        let Some(Paused {
            prepared,
            cancel,
            runtime,
        }) = self.state.take()
        else {
            unreachable!("a paused run is activated or aborted once, by value")
        };
        // The id is no longer reserved: the run has started.
        prepared
            .engine
            .registry()
            .ledger
            .advance(&prepared.key, Stage::Started, None);
        prepared.run(&runtime, cancel)
    }

    /// Never starts the run: releases the lease (bounded by the finalization timeout),
    /// ends the id (a fresh run's id is retired; an import's reservation is forgotten) and
    /// closes the log, exactly once. Nothing is ever published.
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::Arc;
    /// # use agent_core::agent::{AgentDefinition, Engine};
    /// # use agent_core::message::Message;
    /// # use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
    /// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    /// use tokio_util::sync::CancellationToken;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let provider = Arc::new(ScriptedProvider::new(|_| vec![StreamEvent::Completed { usage: Usage::new(1, 1) }]));
    /// # let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
    /// # let engine = Engine::builder(provider, tools).build()?;
    /// let agent = AgentDefinition::new("a", "scripted", 2)?;
    /// let paused = engine.prepare(&agent, Message::user("hi")?).await?.commit_paused(&CancellationToken::new())?;
    /// let id = paused.run_id().clone();
    /// paused.abort().await?;
    /// assert_eq!(engine.live_runs(), 0);
    /// assert!(engine.is_retired(&id)); // never reused
    /// # Ok(())
    /// # }
    /// ```
    pub async fn abort(mut self) -> Result<(), ReleaseError> {
        let Some(state) = self.state.take() else {
            return Ok(());
        };
        state.prepared.abort().await
    }
}

impl Drop for PausedRun {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            state.prepared.abort_in_background();
        }
    }
}
