//! Test doubles and log checks shared by the engine fault, snapshot and property tests:
//! scriptable providers, streams, tools, guards, brokers and observers that block, fail or
//! panic on request, and a checker for the invariants every run's event log must satisfy.

// Every test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use agent_core::agent::{
    AgentDefinition, AtomicIdSource, Engine, EngineBuilder, EngineIdentity, EngineOptions, Run,
    Snapshot,
};
use agent_core::event::{
    Envelope, Event, EventKind, FixedClock, Observer, ObserverError, ReplayRequest, Timestamp,
    ToolCompleted, ToolFailed,
};
use agent_core::interaction::{
    Broker, InteractionError, InteractionRequest, InteractionResponse, Scope,
};
use agent_core::message::Message;
use agent_core::model::{
    EventStream, ModelProvider, ModelRequest, ProviderError, StreamError, StreamEvent, Usage,
};
use agent_core::stage::{
    DispatchError, DispatchRequest, DispatchScope, Dispatcher, GuardRequest, Next,
    StaticToolPlanSource, ToolDispatchDecorator, ToolDispatchGuard, ToolDispatcher, ToolPlanSource,
    compose_pipeline,
};
use agent_core::tool::{
    BoxFuture, Call, Definition, Effect, ExecutionError, ReplaySafety, Tool, ToolContext,
    ToolResult,
};
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// The compatibility identity every test engine states.
pub(crate) const TEST_COMPATIBILITY: &str = "agent-core-tests";

/// Text of every injected panic; it must never reach an event, an error or a snapshot.
pub(crate) const SECRET: &str = "SECRET-PANIC-TEXT";

/// How long any single wait in these tests may take before the test fails instead of hanging.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// Keeps injected panics out of the test output; every other panic is printed as usual.
pub(crate) fn quiet_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload_as_str().is_some_and(|m| m.contains(SECRET)) {
                return;
            }
            default(info);
        }));
    });
}

/// Panics with the secret text.
pub(crate) fn inject_panic() -> ! {
    panic!("{SECRET}: injected");
}

/// Awaits `future`, failing the test (instead of hanging) after [`PATIENCE`].
pub(crate) async fn within<F: Future>(what: &str, future: F) -> F::Output {
    match tokio::time::timeout(PATIENCE, future).await {
        Ok(output) => output,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// A signal a test double sends when it reached its blocking point.
pub(crate) type Signal = mpsc::UnboundedSender<&'static str>;

pub(crate) fn signal() -> (Signal, mpsc::UnboundedReceiver<&'static str>) {
    mpsc::unbounded_channel()
}

/// A shared, ordered record of what happened (observer events, releases, ...).
pub(crate) type Journal = Arc<Mutex<Vec<String>>>;

pub(crate) fn journal() -> Journal {
    Arc::new(Mutex::new(Vec::new()))
}

pub(crate) fn entries(journal: &Journal) -> Vec<String> {
    journal.lock().unwrap().clone()
}

pub(crate) fn note(journal: &Journal, entry: impl Into<String>) {
    journal.lock().unwrap().push(entry.into());
}

// ---------------------------------------------------------------------------------------
// Definitions, inputs, engines
// ---------------------------------------------------------------------------------------

pub(crate) fn definition(name: &str, effect: Effect, replay_safety: ReplaySafety) -> Definition {
    Definition::builder(name, "A scripted engine test tool.")
        .effect(effect)
        .replay_safety(replay_safety)
        .build()
        .expect("valid definition")
}

pub(crate) fn read_definition() -> Definition {
    definition("read", Effect::ReadOnly, ReplaySafety::Safe)
}

pub(crate) fn input() -> Message {
    Message::user("hello").expect("valid input")
}

pub(crate) fn agent(max_turns: u32) -> AgentDefinition {
    AgentDefinition::new("tester", "scripted", max_turns).expect("valid agent")
}

pub(crate) fn call(id: &str, name: &str) -> Call {
    Call::new(id, name, json!({})).expect("valid call")
}

pub(crate) fn completed() -> StreamEvent {
    StreamEvent::Completed {
        usage: Usage::new(1, 1),
    }
}

pub(crate) fn dispatcher(tools: Vec<Arc<dyn Tool>>) -> Arc<dyn ToolDispatcher> {
    let tools: BTreeMap<String, Arc<dyn Tool>> = tools
        .into_iter()
        .map(|t| (t.definition().name().to_owned(), t))
        .collect();
    Arc::new(Dispatcher::new(tools).expect("valid tools"))
}

/// A static plan over `tools`, with `guards` composed in.
pub(crate) fn plans(
    tools: Vec<Arc<dyn Tool>>,
    guards: Vec<Arc<dyn ToolDispatchGuard>>,
) -> Arc<dyn ToolPlanSource> {
    plans_decorated(tools, guards, Vec::new())
}

/// [`plans`] with decorators around the guards.
pub(crate) fn plans_decorated(
    tools: Vec<Arc<dyn Tool>>,
    guards: Vec<Arc<dyn ToolDispatchGuard>>,
    decorators: Vec<Arc<dyn ToolDispatchDecorator>>,
) -> Arc<dyn ToolPlanSource> {
    let pipeline = compose_pipeline(dispatcher(tools), guards, decorators).expect("pipeline");
    Arc::new(StaticToolPlanSource::new(pipeline).expect("plan"))
}

/// What a [`FaultDecorator`]'s dispatcher does with each call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecoratorAct {
    PanicOnCall,
    PanicOnPoll,
    /// Hands the guards and the tool a scope for another turn.
    ForgeScope,
}

/// A decorator that panics or forges the scope on every dispatch.
pub(crate) struct FaultDecorator(pub(crate) DecoratorAct);

struct FaultLayer {
    inner: Arc<dyn ToolDispatcher>,
    act: DecoratorAct,
}

impl ToolDispatchDecorator for FaultDecorator {
    fn wrap(&self, inner: Arc<dyn ToolDispatcher>) -> Option<Arc<dyn ToolDispatcher>> {
        Some(Arc::new(FaultLayer { inner, act: self.0 }))
    }
}

impl ToolDispatcher for FaultLayer {
    fn definitions(&self) -> &[Definition] {
        self.inner.definitions()
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        if self.act == DecoratorAct::PanicOnCall {
            panic!("{SECRET}");
        }
        Box::pin(async move {
            if self.act == DecoratorAct::PanicOnPoll {
                panic!("{SECRET}");
            }
            let forged = DispatchScope::new(
                request.scope.run_id(),
                request.scope.turn() + 1,
                request.scope.plan_id().clone(),
                request.scope.plan_fingerprint(),
            )
            .expect("valid scope");
            self.inner
                .dispatch(DispatchRequest {
                    scope: &forged,
                    ..request
                })
                .await
        })
    }
}

/// Everything an engine is built from; [`build`](Self::build) fills in a fixed clock.
pub(crate) struct Setup {
    pub(crate) provider: Arc<dyn ModelProvider>,
    pub(crate) plans: Arc<dyn ToolPlanSource>,
    pub(crate) broker: Option<Arc<dyn Broker>>,
    pub(crate) observers: Vec<Arc<dyn Observer>>,
    pub(crate) finalization_timeout: Duration,
}

impl Setup {
    pub(crate) fn new(provider: Arc<dyn ModelProvider>, plans: Arc<dyn ToolPlanSource>) -> Self {
        Setup {
            provider,
            plans,
            broker: None,
            observers: Vec::new(),
            finalization_timeout: Duration::from_secs(2),
        }
    }

    pub(crate) fn broker(mut self, broker: Arc<dyn Broker>) -> Self {
        self.broker = Some(broker);
        self
    }

    pub(crate) fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observers.push(observer);
        self
    }

    pub(crate) fn finalization_timeout(mut self, timeout: Duration) -> Self {
        self.finalization_timeout = timeout;
        self
    }

    pub(crate) fn build(self) -> Engine {
        self.build_with(|builder| builder)
    }

    /// [`build`](Self::build), letting `adjust` change the builder last.
    pub(crate) fn build_with(self, adjust: impl FnOnce(EngineBuilder) -> EngineBuilder) -> Engine {
        // Every test engine states the same identity, so snapshots move between them.
        let identity = EngineIdentity::default()
            .with_compatibility(TEST_COMPATIBILITY)
            .expect("valid identity");
        let mut builder = Engine::builder(self.provider, self.plans)
            .identity(identity)
            .ids(Arc::new(AtomicIdSource::new()))
            .clock(Arc::new(FixedClock::new(Timestamp::from_unix_nanos(
                1_000_000_000,
            ))))
            .options(EngineOptions::default().with_finalization_timeout(self.finalization_timeout));
        if let Some(broker) = self.broker {
            builder = builder.broker(broker);
        }
        for observer in self.observers {
            builder = builder.observer(observer);
        }
        adjust(builder).build().expect("engine")
    }
}

/// An engine over `provider` and a static plan of `tools`, without guards or observers.
pub(crate) fn engine(provider: Arc<dyn ModelProvider>, tools: Vec<Arc<dyn Tool>>) -> Engine {
    Setup::new(provider, plans(tools, Vec::new())).build()
}

/// Closes the engine (bounded) and checks that no run is left registered.
pub(crate) async fn drained(engine: &Engine) {
    within("the engine to drain", engine.close()).await;
    assert_eq!(engine.live_runs(), 0, "no run may stay registered");
}

// ---------------------------------------------------------------------------------------
// Providers and streams
// ---------------------------------------------------------------------------------------

/// One `next()` of a [`FaultStream`].
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Item(StreamEvent),
    Error(StreamError),
    /// `Ok(None)`.
    End,
    /// Signals, then never completes.
    Block,
    /// Panics when `next()` is called.
    PanicOnCall,
    /// Returns a future that panics when polled.
    PanicOnPoll,
}

/// How a [`FaultProvider`] answers `stream()` for one request.
#[derive(Debug, Clone)]
pub(crate) enum Opening {
    /// Returns the stream at once.
    Stream,
    /// Fails before any stream exists.
    Refuse(ProviderError),
    /// A future that signals when polled and never completes.
    Block,
    /// Panics inside `stream()` itself.
    PanicOnCall,
    /// A future that panics when polled.
    PanicOnPoll,
}

/// What a [`FaultProvider`] does for one model request.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    pub(crate) opening: Opening,
    pub(crate) steps: Vec<Step>,
    pub(crate) panic_on_drop: bool,
}

impl Script {
    pub(crate) fn items(items: impl IntoIterator<Item = StreamEvent>) -> Self {
        Script::steps(items.into_iter().map(Step::Item))
    }

    pub(crate) fn steps(steps: impl IntoIterator<Item = Step>) -> Self {
        Script {
            opening: Opening::Stream,
            steps: steps.into_iter().collect(),
            panic_on_drop: false,
        }
    }

    pub(crate) fn opening(mut self, opening: Opening) -> Self {
        self.opening = opening;
        self
    }

    pub(crate) fn panic_on_drop(mut self) -> Self {
        self.panic_on_drop = true;
        self
    }

    /// A text answer that ends the run.
    pub(crate) fn answer(text: &str) -> Self {
        Script::items([StreamEvent::TextDelta(text.to_owned()), completed()])
    }
}

/// Serves the n-th model request with the n-th script (the last one repeats), recording
/// every request it saw.
pub(crate) struct FaultProvider {
    scripts: Vec<Script>,
    served: AtomicUsize,
    signal: Option<Signal>,
    pub(crate) requests: Mutex<Vec<ModelRequest>>,
}

impl FaultProvider {
    pub(crate) fn new(scripts: Vec<Script>, signal: Option<Signal>) -> Arc<Self> {
        assert!(!scripts.is_empty());
        Arc::new(FaultProvider {
            scripts,
            served: AtomicUsize::new(0),
            signal,
            requests: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl ModelProvider for FaultProvider {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        self.requests.lock().unwrap().push(request);
        let index = self.served.fetch_add(1, Ordering::SeqCst);
        let script = self.scripts[index.min(self.scripts.len() - 1)].clone();
        let signal = self.signal.clone();
        let stream = FaultStream {
            steps: script.steps.into(),
            signal: signal.clone(),
            panic_on_drop: script.panic_on_drop,
        };
        match script.opening {
            Opening::Stream => {
                Box::pin(async move { Ok(Box::new(stream) as Box<dyn EventStream>) })
            }
            Opening::Refuse(error) => Box::pin(async move { Err(error) }),
            Opening::Block => Box::pin(async move {
                if let Some(signal) = signal {
                    let _ = signal.send("provider future");
                }
                std::future::pending().await
            }),
            Opening::PanicOnCall => inject_panic(),
            Opening::PanicOnPoll => Box::pin(async { inject_panic() }),
        }
    }
}

/// A stream that replays its steps, then `Ok(None)`.
pub(crate) struct FaultStream {
    steps: VecDeque<Step>,
    signal: Option<Signal>,
    panic_on_drop: bool,
}

impl EventStream for FaultStream {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<StreamEvent>, StreamError>> {
        match self.steps.pop_front() {
            None | Some(Step::End) => Box::pin(std::future::ready(Ok(None))),
            Some(Step::Item(event)) => Box::pin(std::future::ready(Ok(Some(event)))),
            Some(Step::Error(error)) => Box::pin(std::future::ready(Err(error))),
            Some(Step::Block) => {
                let signal = self.signal.clone();
                Box::pin(async move {
                    if let Some(signal) = signal {
                        let _ = signal.send("stream next");
                    }
                    std::future::pending().await
                })
            }
            Some(Step::PanicOnCall) => inject_panic(),
            Some(Step::PanicOnPoll) => Box::pin(async { inject_panic() }),
        }
    }
}

impl Drop for FaultStream {
    fn drop(&mut self) {
        if self.panic_on_drop && !std::thread::panicking() {
            inject_panic();
        }
    }
}

// ---------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------

/// What a [`ScriptTool`] does with each call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    Succeed,
    Problem,
    /// Reports progress, ignores whether that worked, then succeeds.
    ReportThenSucceed,
    /// Signals, then never completes (the dispatcher abandons it on cancellation).
    Block,
    PanicOnCall,
    PanicOnPoll,
    /// Returns `ExecutionError::cancelled` at once, while the run is alive.
    CancelledError,
    Definitive,
    Retryable,
    Uncertain,
}

/// A tool that does what its [`Act`] says and counts its executions.
pub(crate) struct ScriptTool {
    definition: Definition,
    act: Act,
    runs: Arc<AtomicUsize>,
    signal: Option<Signal>,
    gate: Option<Arc<Semaphore>>,
}

impl ScriptTool {
    pub(crate) fn new(definition: Definition, act: Act) -> Self {
        ScriptTool {
            definition,
            act,
            runs: Arc::new(AtomicUsize::new(0)),
            signal: None,
            gate: None,
        }
    }

    /// Before acting, signals `gated tool` and waits for a permit of `gate` (consumed).
    pub(crate) fn gated(mut self, gate: Arc<Semaphore>) -> Self {
        self.gate = Some(gate);
        self
    }

    pub(crate) fn read(act: Act) -> Self {
        ScriptTool::new(read_definition(), act)
    }

    pub(crate) fn signalling(mut self, signal: Signal) -> Self {
        self.signal = Some(signal);
        self
    }

    /// The execution counter, shared with the test.
    pub(crate) fn counter(&self) -> Arc<AtomicUsize> {
        self.runs.clone()
    }

    pub(crate) fn arc(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl Tool for ScriptTool {
    fn definition(&self) -> &Definition {
        &self.definition
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        if let Some(gate) = self.gate.clone() {
            let signal = self.signal.clone();
            let ungated = ScriptTool {
                definition: self.definition.clone(),
                act: self.act,
                runs: Arc::new(AtomicUsize::new(0)),
                signal: self.signal.clone(),
                gate: None,
            };
            return Box::pin(async move {
                if let Some(signal) = signal {
                    let _ = signal.send("gated tool");
                }
                gate.acquire().await.expect("gate open").forget();
                ungated.execute(call, ctx).await
            });
        }
        let id = call.id().to_owned();
        match self.act {
            Act::PanicOnCall => inject_panic(),
            Act::PanicOnPoll => Box::pin(async { inject_panic() }),
            Act::Succeed => Box::pin(async move { Ok(ToolResult::success(id, r#"{"ok":true}"#)) }),
            Act::Problem => Box::pin(async move { Ok(ToolResult::problem(id, "no such file")) }),
            Act::ReportThenSucceed => Box::pin(async move {
                let _ = ctx.report(&id, "working").await;
                Ok(ToolResult::success(id, r#"{"ok":true}"#))
            }),
            Act::Block => {
                let signal = self.signal.clone();
                Box::pin(async move {
                    if let Some(signal) = signal {
                        let _ = signal.send("tool execute");
                    }
                    std::future::pending().await
                })
            }
            Act::CancelledError => Box::pin(async move { Err(ExecutionError::cancelled(id)) }),
            Act::Definitive => {
                Box::pin(async move { Err(ExecutionError::definitive(id, "refused upstream")) })
            }
            Act::Retryable => {
                Box::pin(async move { Err(ExecutionError::retryable(id, "upstream timed out")) })
            }
            Act::Uncertain => {
                Box::pin(async move { Err(ExecutionError::uncertain(id, "connection lost")) })
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Guards and brokers
// ---------------------------------------------------------------------------------------

/// What an [`AskGuard`] does before letting a call through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GuardAct {
    /// Asks `approve-<call id>` through the run's requester; runs the call if answered.
    Ask,
    PanicOnCall,
    PanicOnPoll,
}

/// A guard that asks the user (through `scope.requester()`) before every call. An
/// unanswered interaction fails the dispatch (cancelled when the interaction was).
pub(crate) struct AskGuard(pub(crate) GuardAct);

impl ToolDispatchGuard for AskGuard {
    fn guard<'a>(
        &'a self,
        request: GuardRequest<'a>,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        match self.0 {
            GuardAct::PanicOnCall => inject_panic(),
            GuardAct::PanicOnPoll => Box::pin(async { inject_panic() }),
            GuardAct::Ask => Box::pin(async move {
                let call_id = request.call.id().to_owned();
                let question = InteractionRequest::new(
                    format!("approve-{call_id}"),
                    "confirm",
                    "May this tool run?",
                    json!({"type": "boolean"}),
                )
                .expect("valid interaction");
                match request
                    .scope
                    .requester()
                    .request(question, request.cancel)
                    .await
                {
                    Ok(_) => next.run().await,
                    Err(InteractionError::Cancelled) => Err(DispatchError::Cancelled { call_id }),
                    Err(error) => Err(DispatchError::Execution(ExecutionError::definitive(
                        call_id, error,
                    ))),
                }
            }),
        }
    }
}

/// What a [`TestBroker`] does with each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BrokerAct {
    Approve,
    /// Signals, then never answers (ignoring its token: the engine must not rely on it).
    Block,
    PanicOnCall,
    PanicOnPoll,
}

pub(crate) struct TestBroker {
    pub(crate) act: BrokerAct,
    pub(crate) signal: Option<Signal>,
}

impl Broker for TestBroker {
    fn request<'a>(
        &'a self,
        _scope: &'a Scope,
        request: &'a InteractionRequest,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<InteractionResponse, InteractionError>> {
        match self.act {
            BrokerAct::Approve => {
                Box::pin(async move { InteractionResponse::new(request.id(), json!(true)) })
            }
            BrokerAct::Block => Box::pin(async move {
                if let Some(signal) = &self.signal {
                    let _ = signal.send("broker");
                }
                std::future::pending().await
            }),
            BrokerAct::PanicOnCall => inject_panic(),
            BrokerAct::PanicOnPoll => Box::pin(async { inject_panic() }),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Observers
// ---------------------------------------------------------------------------------------

/// What a [`TestObserver`] does when it sees its trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ObserverAct {
    /// Signals, then never completes.
    Block,
    PanicOnCall,
    PanicOnPoll,
    Refuse,
}

/// Records every event kind it accepts (into a journal) and misbehaves once, on the
/// `occurrence`-th (from 1) event of kind `kind`.
pub(crate) struct TestObserver {
    pub(crate) trigger: Option<(EventKind, usize, ObserverAct)>,
    pub(crate) seen: Mutex<BTreeMap<EventKind, usize>>,
    pub(crate) journal: Journal,
    pub(crate) signal: Option<Signal>,
}

impl TestObserver {
    pub(crate) fn new(journal: Journal) -> Self {
        TestObserver {
            trigger: None,
            seen: Mutex::new(BTreeMap::new()),
            journal,
            signal: None,
        }
    }

    pub(crate) fn on(mut self, kind: EventKind, occurrence: usize, act: ObserverAct) -> Self {
        self.trigger = Some((kind, occurrence, act));
        self
    }

    pub(crate) fn signalling(mut self, signal: Signal) -> Self {
        self.signal = Some(signal);
        self
    }
}

impl Observer for TestObserver {
    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), ObserverError>> {
        let kind = envelope.kind();
        let count = {
            let mut seen = self.seen.lock().unwrap();
            let count = seen.entry(kind).or_insert(0);
            *count += 1;
            *count
        };
        let act = match self.trigger {
            Some((trigger, occurrence, act)) if trigger == kind && occurrence == count => act,
            _ => {
                note(&self.journal, kind.as_str());
                return Box::pin(std::future::ready(Ok(())));
            }
        };
        match act {
            ObserverAct::Block => Box::pin(async move {
                if let Some(signal) = &self.signal {
                    let _ = signal.send("observer");
                }
                std::future::pending().await
            }),
            ObserverAct::PanicOnCall => inject_panic(),
            ObserverAct::PanicOnPoll => Box::pin(async { inject_panic() }),
            ObserverAct::Refuse => Box::pin(std::future::ready(Err(ObserverError(
                "refused by the test".to_owned(),
            )))),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reading and checking logs
// ---------------------------------------------------------------------------------------

/// Every retained envelope of the run's log, paging as needed.
pub(crate) fn envelopes(run: &Run) -> Vec<Envelope> {
    let log = run.events();
    let mut after = log.earliest() - 1;
    let mut all = Vec::new();
    loop {
        let page = log.replay(ReplayRequest::after(after)).expect("replay");
        if let Some(last) = page.events.last() {
            after = last.sequence();
        }
        all.extend(page.events);
        if !page.has_more {
            return all;
        }
    }
}

pub(crate) fn events(run: &Run) -> Vec<Event> {
    envelopes(run).iter().map(|e| e.event().clone()).collect()
}

pub(crate) fn kinds(run: &Run) -> Vec<EventKind> {
    envelopes(run).iter().map(Envelope::kind).collect()
}

/// Checks the invariants of a finished run's log whose first event has sequence `first`:
/// one run id; sequences gap-free from `first`; `run.started` (if any) first; exactly one run
/// terminal, last; every committed start (turn, model, tool, interaction) closed by exactly
/// one terminal after it, nested (models and tools inside their turn; interactions, which
/// `Run::interact` may open at any time, only before the run terminal). Returns the run
/// terminal's kind.
pub(crate) fn check_log(envelopes: &[Envelope], first: u64) -> Result<EventKind, String> {
    let Some(last) = envelopes.last() else {
        return Err("the log is empty".to_owned());
    };
    for (offset, envelope) in envelopes.iter().enumerate() {
        let expected = first + offset as u64;
        if envelope.sequence() != expected {
            return Err(format!(
                "sequence gap: expected {expected}, found {}",
                envelope.sequence()
            ));
        }
        if envelope.run_id() != envelopes[0].run_id() {
            return Err(format!("event {expected} names another run"));
        }
    }
    let ends = envelopes.iter().filter(|e| e.kind().ends_run()).count();
    if ends != 1 || !last.kind().ends_run() {
        return Err(format!(
            "expected exactly one run terminal, last; found {ends}, last {}",
            last.kind()
        ));
    }
    let mut turn: Option<u32> = None;
    let mut model = false;
    let mut tools: Vec<String> = Vec::new();
    let mut interactions: Vec<String> = Vec::new();
    for (index, envelope) in envelopes.iter().enumerate() {
        let at = envelope.sequence();
        let fail = |why: &str| Err(format!("event {at} ({}): {why}", envelope.kind()));
        match envelope.event() {
            Event::RunStarted { .. } => {
                if index != 0 || first != 1 {
                    return fail("run.started must be the first event of a fresh log");
                }
            }
            Event::TurnStarted { turn: t } => {
                if turn.is_some() {
                    return fail("a turn started while another was open");
                }
                turn = Some(*t);
            }
            Event::TurnCompleted { turn: t } | Event::TurnFailed { turn: t, .. } => {
                if turn != Some(*t) {
                    return fail("a turn terminal without its start");
                }
                // Interactions asked through `Run::interact` may span turns and tools.
                if model || !tools.is_empty() {
                    return fail("a turn ended with an operation still open");
                }
                turn = None;
            }
            Event::ModelStarted { turn: t } => {
                if turn != Some(*t) || model || !tools.is_empty() {
                    return fail("model.started outside its turn or while busy");
                }
                model = true;
            }
            Event::ModelDelta { .. } => {
                if !model {
                    return fail("model.delta outside a model operation");
                }
            }
            Event::ModelCompleted { .. } | Event::ModelFailed { .. } => {
                if !model {
                    return fail("a model terminal without its start");
                }
                model = false;
            }
            Event::ToolStarted(started) => {
                if turn != Some(started.turn) || model || !tools.is_empty() {
                    return fail("tool.started outside its turn or while busy");
                }
                tools.push(started.call_id.clone());
            }
            Event::ToolProgress { call_id, .. } => {
                if !tools.contains(call_id) {
                    return fail("tool.progress for a call that is not running");
                }
            }
            Event::ToolCompleted(ToolCompleted { call_id, .. })
            | Event::ToolFailed(ToolFailed { call_id, .. }) => {
                if !tools.contains(call_id) {
                    return fail("a tool terminal without its start");
                }
                tools.retain(|c| c != call_id);
            }
            Event::InteractionStarted { id, .. } => {
                if interactions.contains(id) {
                    return fail("an interaction started twice");
                }
                interactions.push(id.clone());
            }
            Event::InteractionCompleted { id }
            | Event::InteractionFailed { id }
            | Event::InteractionCancelled { id } => {
                if !interactions.contains(id) {
                    return fail("an interaction terminal without its start");
                }
                interactions.retain(|i| i != id);
            }
            Event::RunCompleted | Event::RunFailed { .. } | Event::RunCancelled => {
                if turn.is_some() || model || !tools.is_empty() || !interactions.is_empty() {
                    return fail("the run ended with an operation still open");
                }
            }
            other => return fail(&format!("unexpected event {other:?}")),
        }
    }
    Ok(last.kind())
}

/// [`check_log`] on a run's whole log, panicking with the log on failure.
pub(crate) fn assert_log(run: &Run, first: u64) -> EventKind {
    let all = envelopes(run);
    match check_log(&all, first) {
        Ok(kind) => kind,
        Err(why) => {
            let kinds: Vec<&str> = all.iter().map(|e| e.kind().as_str()).collect();
            panic!("{why}\nlog: {kinds:?}");
        }
    }
}

/// The run's terminal snapshot, checked to survive a JSON round trip unchanged.
pub(crate) fn terminal_snapshot(run: &Run) -> Snapshot {
    let snapshot = run.snapshot().expect("a finished run has a snapshot");
    let back = Snapshot::from_json(&snapshot.to_json()).expect("the snapshot validates");
    assert_eq!(back, snapshot, "the snapshot round-trips");
    snapshot
}
