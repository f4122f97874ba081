//! One execution of a run: the kernel runs the run from its beginning, and the kernel's
//! hooks replay what the run's record holds and record what is new (docs/scale-out.md,
//! "Executions").
//!
//! - the **model provider** wrapper answers turn `k` from the record; a new turn is asked
//!   of the real provider, read to its end, recorded (the first recording wins), and only
//!   then streamed to the kernel, so a turn cut off mid-stream leaves no deltas behind;
//! - the **claim guard** ([`ToolClaims`]) answers a call from its recorded outcome; a new
//!   call is claimed first, and a call an earlier execution claimed without recording an
//!   outcome runs again only when its tool is replay safe or idempotent, and is otherwise
//!   reported as uncertain, as the kernel's own resume does;
//! - the **broker** answers an interaction from the answers the workflow holds; a new one
//!   is opened in the record and the execution ends, waiting;
//! - the **observer** buffers the run's events, and the execution publishes them up to the
//!   last point every event before which is determined by the record.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_core::BoxFuture;
use agent_core::agent::{AgentDefinition, Engine, EngineBuilder, IdSource};
use agent_core::event::{Envelope, Observer, ObserverError};
use agent_core::interaction::{
    Broker, InteractionError, InteractionRequest, InteractionResponse, Scope,
};
use agent_core::message::Message;
use agent_core::model::{
    EventStream, ModelProvider, ModelRequest, ProviderError, ScriptedStream, StreamEvent,
};
use agent_core::stage::{DispatchError, GuardRequest, Next, ToolDispatchGuard};
use agent_core::tool::{ReplaySafety, ToolResult};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::ingress::{Ingress, IngressError, Target};
use crate::record::*;
use crate::services::{Executor, RUN_RECORD, terminal_name};

/// How often a running execution publishes its determined events.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(100);
/// How often a running execution asks its record whether cancellation was requested.
pub const CANCEL_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// The text the model reads for a call that may have run and is not run again: the
/// kernel's own words for an uncertain call it settles on resume.
pub const UNCERTAIN_CALL: &str = agent_core::agent::UNCERTAIN_CALL_NOT_RUN_AGAIN;

/// What a worker's composition gives an execution: its definitions and an engine built
/// with the execution's hooks.
///
/// ```no_run
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use agent_core::agent::{AgentDefinition, Engine};
/// use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
/// use agent_core::stage::{Dispatcher, StaticToolPlanSource};
/// use agent_restate::execution::{DurableRuns, Hooks, RunFactory};
/// use agent_restate::record::CatalogEntry;
/// use agent_restate::worker::{WorkerConfig, DEFAULT_MAX_EXECUTIONS, DEFAULT_SUSPEND_AFTER, serve};
///
/// struct Greeter(Arc<DurableRuns>);
///
/// impl RunFactory for Greeter {
///     fn catalog(&self) -> Vec<CatalogEntry> {
///         vec![CatalogEntry { id: "greeter".into(), model: "scripted".into(), max_turns: 4 }]
///     }
///     fn definition(&self, id: &str) -> Option<AgentDefinition> {
///         (id == "greeter").then(|| AgentDefinition::new("greeter", "scripted", 4).ok()).flatten()
///     }
///     fn durable_runs(&self) -> Arc<DurableRuns> {
///         self.0.clone()
///     }
///     fn engine(&self, hooks: &Hooks) -> Result<Engine, String> {
///         let model = Arc::new(ScriptedProvider::new(|_| vec![
///             StreamEvent::TextDelta("Hello.".into()),
///             StreamEvent::Completed { usage: Usage::new(1, 1) },
///         ]));
///         let tools = Dispatcher::new(BTreeMap::new()).map_err(|e| e.to_string())?;
///         let plans = StaticToolPlanSource::from_dispatcher(tools);
///         hooks.apply(Engine::builder(hooks.provider(model), plans)).build().map_err(|e| e.to_string())
///     }
/// }
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config = WorkerConfig {
///     listen: "127.0.0.1:9080".parse()?,
///     advertised: "http://127.0.0.1:9080".into(),
///     admin: "http://127.0.0.1:9070".into(),
///     ingress: "http://127.0.0.1:8080".into(),
///     suspend_after: DEFAULT_SUSPEND_AFTER,
///     max_executions: DEFAULT_MAX_EXECUTIONS,
/// };
/// let factory = Arc::new(Greeter(Arc::new(DurableRuns::new())));
/// serve(factory, config, async { let _ = tokio::signal::ctrl_c().await; }).await?;
/// # Ok(())
/// # }
/// ```
pub trait RunFactory: Send + Sync + 'static {
    /// The definitions served.
    fn catalog(&self) -> Vec<CatalogEntry>;
    /// The definition `id`.
    fn definition(&self, id: &str) -> Option<AgentDefinition>;
    /// The runs whose tool calls the composed [`ToolClaims`] guard claims.
    fn durable_runs(&self) -> Arc<DurableRuns>;
    /// An engine for one execution: the composition's provider behind
    /// [`Hooks::provider`], its tool plan, and [`Hooks::apply`] applied last.
    fn engine(&self, hooks: &Hooks) -> Result<Engine, String>;
}

/// The hooks of one execution.
pub struct Hooks {
    execution: Arc<Execution>,
}

impl Hooks {
    /// `provider` behind the record: recorded turns replay, new ones are recorded.
    pub fn provider(&self, provider: Arc<dyn ModelProvider>) -> Arc<dyn ModelProvider> {
        Arc::new(RecordedProvider {
            inner: provider,
            execution: self.execution.clone(),
        })
    }

    /// Lets `observer` (a log projection, metrics) see the run's events once each, as they
    /// are published, instead of every execution's events as the kernel emits them: a
    /// replayed prefix, or the events of an execution that ended waiting, would otherwise
    /// reach it again.
    pub fn observe_published(&self, observer: Arc<dyn Observer>) {
        self.execution
            .observers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(observer);
    }

    /// The run's id as the engine's only id, the replaying broker and the publishing
    /// observer.
    pub fn apply(&self, builder: EngineBuilder) -> EngineBuilder {
        builder
            .ids(Arc::new(FixedId(self.execution.run_id.clone())))
            .broker(Arc::new(ReplayBroker {
                execution: self.execution.clone(),
            }))
            .observer(Arc::new(EventSink {
                execution: self.execution.clone(),
            }))
    }
}

/// The executions running in this process, by run id: what [`ToolClaims`] consults.
#[derive(Debug, Default)]
pub struct DurableRuns {
    runs: Mutex<HashMap<String, Arc<Execution>>>,
}

impl DurableRuns {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn get(&self, run_id: &str) -> Option<Arc<Execution>> {
        self.lock().get(run_id).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Execution>>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many executions run here now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none runs here now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Removes an execution from the registry when it ends.
struct Registered<'a> {
    runs: &'a DurableRuns,
    run_id: String,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.runs.lock().remove(&self.run_id);
    }
}

/// The state one execution's hooks share.
pub struct Execution {
    run_id: String,
    token: String,
    ingress: Ingress,
    replay: Replay,
    answers: BTreeMap<String, serde_json::Value>,
    turns: AtomicU32,
    cancel_requested: AtomicBool,
    /// Set when the execution must cancel its run now.
    stop: CancellationToken,
    /// Set when a record write failed: the execution fails and is retried.
    broken: Mutex<Option<String>>,
    aborted: CancellationToken,
    /// The run's events in their wire form, with the kernel's envelope of each.
    events: Mutex<Vec<(WireEvent, Envelope)>>,
    /// Observers that see the events as they are published ([`Hooks::observe_published`]).
    observers: Mutex<Vec<Arc<dyn Observer>>>,
    determined: AtomicUsize,
    waiting: Mutex<Option<String>>,
    waiting_notify: Notify,
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution")
            .field("run_id", &self.run_id)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Execution {
    fn record(&self, handler: &'static str) -> Target<'_> {
        Target::keyed(RUN_RECORD, &self.run_id, handler)
    }

    /// Fails the execution: a record write failed.
    fn break_with(&self, error: &IngressError) {
        let mut broken = self.broken.lock().unwrap_or_else(PoisonError::into_inner);
        broken.get_or_insert_with(|| error.to_string());
        self.aborted.cancel();
    }

    /// Every event buffered so far is determined by the record.
    fn mark_determined(&self) {
        let count = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        self.determined.fetch_max(count, Ordering::SeqCst);
    }

    fn cancel_requested(&self) -> bool {
        self.cancel_requested.load(Ordering::SeqCst)
    }

    /// The name of the run's terminal event, from the buffered events.
    fn terminal_kind(&self) -> String {
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        let kind = events.iter().rev().find_map(|(e, _)| terminal_name(e.kind));
        kind.unwrap_or("run.failed").to_owned()
    }

    /// Cancellation reached the end of the record: the run is cancelled here.
    fn cancel_here(&self) {
        self.mark_determined();
        self.stop.cancel();
    }

    /// Publishes the determined events not yet published.
    async fn publish(&self, published: &mut usize) -> Result<(), IngressError> {
        let upto = self.determined.load(Ordering::SeqCst);
        if upto <= *published {
            return Ok(());
        }
        let (batch, envelopes): (Vec<WireEvent>, Vec<Envelope>) = {
            let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
            let range = *published..upto.min(events.len());
            events[range].iter().cloned().unzip()
        };
        for (index, chunk) in batch.chunks(MAX_EVENTS_PER_PAGE).enumerate() {
            // One key per chunk: a retried request is applied once, each chunk once.
            let first = *published + index * MAX_EVENTS_PER_PAGE;
            let token = format!("{}-append-{first}", self.token);
            let _: u64 = self
                .ingress
                .call(&self.record("append"), chunk, Some(&token))
                .await?;
        }
        *published += batch.len();
        // Observers see each event once, when it is published: not again on a replay, and
        // never an event of an execution cut off or ended waiting.
        let observers = self
            .observers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for envelope in &envelopes {
            for observer in &observers {
                if let Err(error) = observer.publish(envelope).await {
                    tracing::warn!(run = %self.run_id, "an observer refused an event: {error}");
                }
            }
        }
        Ok(())
    }
}

/// The engine's id source for one execution: always the run's id.
struct FixedId(String);

impl IdSource for FixedId {
    fn next_id(&self, _prefix: &str) -> Arc<str> {
        Arc::from(self.0.as_str())
    }
}

/// The model provider behind the record.
struct RecordedProvider {
    inner: Arc<dyn ModelProvider>,
    execution: Arc<Execution>,
}

impl ModelProvider for RecordedProvider {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        let execution = self.execution.clone();
        let index = execution.turns.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let recorded = usize::try_from(index)
                .ok()
                .and_then(|i| execution.replay.turns.get(i).cloned());
            let turn = match recorded {
                Some(turn) => turn,
                None if execution.cancel_requested() => {
                    execution.cancel_here();
                    return std::future::pending().await;
                }
                None => {
                    execution.mark_determined();
                    let turn = read_turn(&*self.inner, request).await;
                    let request = RecordTurn { index, turn };
                    let token = format!("{}-turn-{index}", execution.token);
                    match execution
                        .ingress
                        .call::<_, TurnRecord>(
                            &execution.record("record_turn"),
                            &request,
                            Some(&token),
                        )
                        .await
                    {
                        Ok(winner) => winner,
                        Err(error) => {
                            execution.break_with(&error);
                            return std::future::pending().await;
                        }
                    }
                }
            };
            match turn {
                TurnRecord::Streamed(items) => {
                    Ok(Box::new(ScriptedStream::from(items)) as Box<dyn EventStream>)
                }
                TurnRecord::Refused(problem) => Err(ProviderError::new(problem)),
            }
        })
    }
}

/// Asks `provider` and reads the whole response: the items up to the terminal one, a
/// failure mid-stream as the terminal `failed` item.
async fn read_turn(provider: &dyn ModelProvider, request: ModelRequest) -> TurnRecord {
    let mut stream = match provider.stream(request).await {
        Ok(stream) => stream,
        Err(error) => return TurnRecord::Refused(error.problem().clone()),
    };
    let mut items = Vec::new();
    loop {
        match stream.next().await {
            Ok(Some(item)) => {
                let terminal =
                    matches!(item, StreamEvent::Completed { .. } | StreamEvent::Failed(_));
                items.push(item);
                if terminal || items.len() >= MAX_TURN_ITEMS {
                    break;
                }
            }
            Ok(None) => break,
            Err(error) => {
                items.push(StreamEvent::Failed(error.problem().clone()));
                break;
            }
        }
    }
    TurnRecord::Streamed(items)
}

/// The broker of one execution: answers from the workflow's answers, or waits.
struct ReplayBroker {
    execution: Arc<Execution>,
}

impl Broker for ReplayBroker {
    fn request<'a>(
        &'a self,
        _scope: &'a Scope,
        request: &'a InteractionRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<InteractionResponse, InteractionError>> {
        Box::pin(async move {
            let execution = &self.execution;
            if let Some(value) = execution.answers.get(request.id()) {
                return InteractionResponse::new(request.id(), value.clone());
            }
            if execution.cancel_requested() {
                execution.cancel_here();
                cancel.cancelled().await;
                return Err(InteractionError::Cancelled);
            }
            let pending = PendingInteraction {
                id: request.id().to_owned(),
                kind: request.kind().to_owned(),
                prompt: request.prompt().to_owned(),
                schema: request.schema().clone(),
            };
            if let Err(error) = execution
                .ingress
                .call::<_, ()>(&execution.record("open"), &pending, None)
                .await
            {
                execution.break_with(&error);
            } else {
                execution.mark_determined();
                *execution
                    .waiting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(pending.id);
                execution.waiting_notify.notify_one();
            }
            cancel.cancelled().await;
            Err(InteractionError::Cancelled)
        })
    }
}

/// Buffers the run's events in their wire form.
struct EventSink {
    execution: Arc<Execution>,
}

impl Observer for EventSink {
    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), ObserverError>> {
        if let Some(event) = agent_server::event_to_wire(envelope) {
            let wire = WireEvent {
                sequence: event.sequence,
                unix_nano: event.unix_nano,
                kind: event.kind,
                payload_json: String::from_utf8_lossy(&event.payload_json).into_owned(),
                terminal: event.terminal,
            };
            self.execution
                .events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((wire, envelope.clone()));
        }
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The guard that claims tool calls of the runs executing here; calls of other runs pass
/// through. Compose it as the last guard, so approvals are asked before a call is claimed.
#[derive(Debug, Clone)]
pub struct ToolClaims {
    runs: Arc<DurableRuns>,
}

impl ToolClaims {
    /// Claims the calls of `runs`.
    pub fn new(runs: Arc<DurableRuns>) -> Self {
        ToolClaims { runs }
    }
}

impl ToolDispatchGuard for ToolClaims {
    fn guard<'a>(
        &'a self,
        request: GuardRequest<'a>,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        let Some(execution) = self.runs.get(request.scope.run_id().as_str()) else {
            return next.run();
        };
        Box::pin(async move {
            let call_id = request.call.id();
            if let Some(outcome) = execution.replay.calls.get(call_id) {
                return outcome_from(call_id, outcome.clone());
            }
            if execution.cancel_requested() {
                execution.cancel_here();
                request.cancel.cancelled().await;
                return Err(DispatchError::Cancelled {
                    call_id: call_id.to_owned(),
                });
            }
            let claim = ClaimRequest {
                call_id: call_id.to_owned(),
                execution: execution.token.clone(),
            };
            let claim = match execution
                .ingress
                .call::<_, Claim>(&execution.record("claim"), &claim, None)
                .await
            {
                Ok(claim) => claim,
                Err(error) => {
                    execution.break_with(&error);
                    return std::future::pending().await;
                }
            };
            let replayable = request.definition.replay_safety() != ReplaySafety::Unsafe;
            match claim {
                Claim::Done(outcome) => return outcome_from(call_id, outcome),
                Claim::Taken if !replayable => {
                    return Ok(ToolResult::problem(call_id, UNCERTAIN_CALL));
                }
                Claim::Granted | Claim::Taken => {}
            }
            execution.mark_determined();
            let result = next.run().await;
            if let Some(outcome) = outcome_of(&result) {
                let finish = FinishCall {
                    call_id: call_id.to_owned(),
                    outcome,
                };
                if let Err(error) = execution
                    .ingress
                    .call::<_, ()>(&execution.record("finish"), &finish, None)
                    .await
                {
                    execution.break_with(&error);
                    return std::future::pending().await;
                }
            }
            result
        })
    }

    fn identity(&self) -> &str {
        "agent-restate/tool-claims"
    }
}

/// The [`Executor`] of a worker: executions of its factory's definitions against the
/// cluster reached through `ingress`.
pub struct Worker<F> {
    factory: Arc<F>,
    ingress: Ingress,
    executions: Arc<tokio::sync::Semaphore>,
}

impl<F: RunFactory> Worker<F> {
    /// A worker over `factory`, writing records through `ingress`, running at most
    /// `max_executions` executions at once (at least one); the others wait for a turn.
    pub fn new(factory: Arc<F>, ingress: Ingress, max_executions: usize) -> Self {
        Worker {
            factory,
            ingress,
            executions: Arc::new(tokio::sync::Semaphore::new(max_executions.max(1))),
        }
    }
}

impl<F: RunFactory> Executor for Worker<F> {
    fn catalog(&self) -> Vec<CatalogEntry> {
        self.factory.catalog()
    }

    fn execute(
        &self,
        start: StartRun,
        answers: BTreeMap<String, serde_json::Value>,
        cancelled: bool,
    ) -> BoxFuture<'static, Result<Step, String>> {
        let factory = self.factory.clone();
        let ingress = self.ingress.clone();
        let executions = self.executions.clone();
        Box::pin(async move {
            // A waiting run holds no permit: its execution ended when it began to wait.
            let _permit = executions
                .acquire_owned()
                .await
                .map_err(|_| "the worker is stopping".to_owned())?;
            execute(&*factory, ingress, start, answers, cancelled).await
        })
    }
}

/// A token naming one execution, unique across processes.
fn execution_token() -> String {
    let mut bytes = [0u8; 16];
    // The OS source never fails on supported platforms; a clock fallback keeps it unique
    // enough for a claim owner even then.
    if getrandom::fill(&mut bytes).is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = now.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn execute<F: RunFactory>(
    factory: &F,
    ingress: Ingress,
    start: StartRun,
    answers: BTreeMap<String, serde_json::Value>,
    cancelled: bool,
) -> Result<Step, String> {
    let replay: Replay = ingress
        .call(
            &Target::keyed(RUN_RECORD, &start.run_id, "replay"),
            &(),
            None,
        )
        .await
        .map_err(|e| e.to_string())?;
    let agent = factory
        .definition(&start.definition)
        .ok_or_else(|| format!("no definition `{}` is served here", start.definition))?;
    let cancel_requested = cancelled || replay.cancel_requested;
    let mut published = usize::try_from(replay.last_sequence).unwrap_or(usize::MAX);
    let execution = Arc::new(Execution {
        run_id: start.run_id.clone(),
        token: execution_token(),
        ingress: ingress.clone(),
        replay,
        answers,
        turns: AtomicU32::new(0),
        cancel_requested: AtomicBool::new(cancel_requested),
        stop: CancellationToken::new(),
        broken: Mutex::new(None),
        aborted: CancellationToken::new(),
        events: Mutex::new(Vec::new()),
        observers: Mutex::new(Vec::new()),
        determined: AtomicUsize::new(0),
        waiting: Mutex::new(None),
        waiting_notify: Notify::new(),
    });
    let runs = factory.durable_runs();
    runs.lock().insert(start.run_id.clone(), execution.clone());
    let _registered = Registered {
        runs: &runs,
        run_id: start.run_id.clone(),
    };
    let engine = factory.engine(&Hooks {
        execution: execution.clone(),
    })?;
    let outcome = drive(&engine, &agent, &start, &execution, &mut published).await;
    engine.shutdown().await;
    outcome
}

async fn drive(
    engine: &Engine,
    agent: &AgentDefinition,
    start: &StartRun,
    execution: &Arc<Execution>,
    published: &mut usize,
) -> Result<Step, String> {
    // Published events are a prefix of this execution's: the replay determines them.
    let input = Message::user(start.input.as_str()).map_err(|e| e.to_string())?;
    let run = engine
        .start(agent, input)
        .await
        .map_err(|e| e.to_string())?;
    let mut publish = tokio::time::interval(PUBLISH_INTERVAL);
    let mut poll = tokio::time::interval(CANCEL_POLL_INTERVAL);
    let mut cancelling = false;
    let broken = |execution: &Execution| {
        execution
            .broken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_default()
    };
    loop {
        tokio::select! {
            _ = run.wait() => {
                execution.mark_determined();
                execution.publish(published).await.map_err(|e| e.to_string())?;
                let kind = execution.terminal_kind();
                return Ok(Step::Ended { kind });
            }
            _ = execution.waiting_notify.notified() => {
                let waiting = execution.waiting.lock().unwrap_or_else(PoisonError::into_inner).clone();
                if let Some(interaction_id) = waiting {
                    execution.publish(published).await.map_err(|e| e.to_string())?;
                    return Ok(Step::Waiting { interaction_id });
                }
            }
            _ = execution.stop.cancelled(), if !cancelling => {
                cancelling = true;
                run.cancel();
            }
            _ = execution.aborted.cancelled() => return Err(broken(execution)),
            _ = publish.tick() => {
                execution.publish(published).await.map_err(|e| e.to_string())?;
            }
            _ = poll.tick(), if !cancelling => {
                // One attempt: the next tick asks again, and a slow cluster must not hold
                // up publishing or the run's end.
                let state: Result<RunState, _> = execution
                    .ingress
                    .call_once(&execution.record("state"), &())
                    .await;
                if state.is_ok_and(|s| s.cancel_requested) {
                    execution.cancel_requested.store(true, Ordering::SeqCst);
                    execution.cancel_here();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::message::Message;
    use agent_core::model::{ModelProblem, ScriptedProvider, Usage};

    fn request() -> ModelRequest {
        ModelRequest::new("op-1", "m", vec![Message::user("hi").unwrap()]).unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_turn_is_read_to_its_terminal_item() {
        let provider = ScriptedProvider::new(|_| {
            vec![
                StreamEvent::TextDelta("a".into()),
                StreamEvent::Completed {
                    usage: Usage::new(1, 1),
                },
                StreamEvent::TextDelta("after the end".into()),
            ]
        });
        let TurnRecord::Streamed(items) = read_turn(&provider, request()).await else {
            panic!("streamed");
        };
        assert_eq!(items.len(), 2, "nothing after the terminal item is kept");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_refused_request_is_recorded_as_refused() {
        struct Refuses;
        impl ModelProvider for Refuses {
            fn stream(
                &self,
                _: ModelRequest,
            ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
                let problem = ModelProblem::new("unknown_model", "no such model");
                Box::pin(std::future::ready(Err(ProviderError::new(problem))))
            }
        }
        let turn = read_turn(&Refuses, request()).await;
        assert!(matches!(turn, TurnRecord::Refused(p) if p.code() == "unknown_model"));
    }
}
