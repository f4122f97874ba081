//! Test doubles shared by the dispatch, pipeline and plan tests: scripted tools, reporters,
//! a definition set that changes after composition, and helpers to build requests.

// Every test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};

use agent_core::stage::{DispatchError, DispatchRequest, DispatchScope, PlanId, ToolDispatcher};
use agent_core::tool::{
    BoxFuture, Call, Definition, Effect, ExecutionError, MAX_PAYLOAD_BYTES, NoopReporter, Progress,
    ReplaySafety, ReportError, Reporter, Tool, ToolContext, ToolResult,
};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Text of every injected panic; it must never reach an error's text.
pub(crate) const INJECTED: &str = "injected panic: secret-7f3a";

/// A shared, ordered log of what layers did.
pub(crate) type Log = Arc<Mutex<Vec<String>>>;

pub(crate) fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

pub(crate) fn push(log: &Log, entry: impl Into<String>) {
    log.lock().unwrap().push(entry.into());
}

/// Keeps injected panics out of the test output; every other panic is printed as usual.
pub(crate) fn quiet_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload_as_str().is_some_and(|m| m.contains(INJECTED)) {
                return;
            }
            default(info);
        }));
    });
}

/// The three legal (effect, replay safety) combinations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    ReadOnly,
    Idempotent,
    Unsafe,
}

impl Profile {
    pub(crate) const ALL: [Profile; 3] = [Profile::ReadOnly, Profile::Idempotent, Profile::Unsafe];

    pub(crate) fn tool_name(self) -> &'static str {
        match self {
            Profile::ReadOnly => "read",
            Profile::Idempotent => "put",
            Profile::Unsafe => "send",
        }
    }
}

pub(crate) fn definition(name: &str, profile: Profile) -> Definition {
    definition_described(name, profile, "A scripted test tool.")
}

pub(crate) fn definition_described(name: &str, profile: Profile, description: &str) -> Definition {
    let (effect, replay) = match profile {
        Profile::ReadOnly => (Effect::ReadOnly, ReplaySafety::Safe),
        Profile::Idempotent => (Effect::Mutating, ReplaySafety::Idempotent),
        Profile::Unsafe => (Effect::Mutating, ReplaySafety::Unsafe),
    };
    Definition::builder(name, description)
        .effect(effect)
        .replay_safety(replay)
        .build()
        .expect("valid test definition")
}

pub(crate) fn fingerprint() -> String {
    format!("sha256:{}", "0".repeat(64))
}

pub(crate) fn scope() -> DispatchScope {
    scope_for(PlanId::new("static:test").unwrap(), fingerprint())
}

pub(crate) fn scope_for(
    plan: PlanId,
    plan_fingerprint: impl Into<std::sync::Arc<str>>,
) -> DispatchScope {
    DispatchScope::new("run-1", 1, plan, plan_fingerprint).expect("valid scope")
}

/// What a [`ScriptedTool`] does with one call; chosen per call through its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Behaviour {
    Succeed,
    Problem,
    PanicInFuture,
    PanicBeforeFuture,
    ResultForOtherCall,
    ErrorForOtherCall,
    Definitive,
    Retryable,
    Uncertain,
    CancelledError,
    TooLarge,
    /// Signals `started`, then never completes.
    Pending,
}

impl Behaviour {
    /// Every behaviour that completes on its own.
    pub(crate) const COMPLETING: [Behaviour; 11] = [
        Behaviour::Succeed,
        Behaviour::Problem,
        Behaviour::PanicInFuture,
        Behaviour::PanicBeforeFuture,
        Behaviour::ResultForOtherCall,
        Behaviour::ErrorForOtherCall,
        Behaviour::Definitive,
        Behaviour::Retryable,
        Behaviour::Uncertain,
        Behaviour::CancelledError,
        Behaviour::TooLarge,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Behaviour::Succeed => "succeed",
            Behaviour::Problem => "problem",
            Behaviour::PanicInFuture => "panic_in_future",
            Behaviour::PanicBeforeFuture => "panic_before_future",
            Behaviour::ResultForOtherCall => "result_for_other_call",
            Behaviour::ErrorForOtherCall => "error_for_other_call",
            Behaviour::Definitive => "definitive",
            Behaviour::Retryable => "retryable",
            Behaviour::Uncertain => "uncertain",
            Behaviour::CancelledError => "cancelled_error",
            Behaviour::TooLarge => "too_large",
            Behaviour::Pending => "pending",
        }
    }

    fn parse(text: Option<&str>) -> Behaviour {
        Behaviour::COMPLETING
            .into_iter()
            .chain([Behaviour::Pending])
            .find(|b| Some(b.as_str()) == text)
            .unwrap_or(Behaviour::Succeed)
    }
}

/// Which progress note a [`ScriptedTool`] sends before acting (it ignores the outcome).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Report {
    Nothing,
    Valid,
    OtherCall,
    EmptyMessage,
}

impl Report {
    pub(crate) const ALL: [Report; 4] = [
        Report::Nothing,
        Report::Valid,
        Report::OtherCall,
        Report::EmptyMessage,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Report::Nothing => "nothing",
            Report::Valid => "valid",
            Report::OtherCall => "other_call",
            Report::EmptyMessage => "empty",
        }
    }

    fn parse(text: Option<&str>) -> Report {
        Report::ALL
            .into_iter()
            .find(|r| Some(r.as_str()) == text)
            .unwrap_or(Report::Nothing)
    }
}

pub(crate) fn args(behaviour: Behaviour, report: Report) -> Value {
    json!({ "behaviour": behaviour.as_str(), "report": report.as_str() })
}

pub(crate) fn call(id: &str, name: &str, behaviour: Behaviour, report: Report) -> Call {
    Call::new(id, name, args(behaviour, report)).expect("valid call")
}

/// A tool that does what each call's arguments say, counts its calls and remembers what its
/// reporter answered.
pub(crate) struct ScriptedTool {
    definition: Definition,
    calls: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Notified (one permit) when a `Pending` call has started.
    pub(crate) started: Notify,
    report_outcomes: Mutex<Vec<Result<(), ReportError>>>,
    log: Option<Log>,
}

impl ScriptedTool {
    pub(crate) fn new(definition: Definition) -> Arc<Self> {
        Arc::new(Self::build(definition, None))
    }

    /// Also appends `"tool"` to `log` when it runs.
    pub(crate) fn logged(definition: Definition, log: &Log) -> Arc<Self> {
        Arc::new(Self::build(definition, Some(log.clone())))
    }

    fn build(definition: Definition, log: Option<Log>) -> Self {
        ScriptedTool {
            definition,
            calls: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            started: Notify::new(),
            report_outcomes: Mutex::new(Vec::new()),
            log,
        }
    }

    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The most calls that were running at the same time.
    pub(crate) fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    pub(crate) fn report_outcomes(&self) -> Vec<Result<(), ReportError>> {
        self.report_outcomes.lock().unwrap().clone()
    }
}

impl Tool for ScriptedTool {
    fn definition(&self) -> &Definition {
        &self.definition
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let behaviour = Behaviour::parse(call.arguments()["behaviour"].as_str());
        let report = Report::parse(call.arguments()["report"].as_str());
        if behaviour == Behaviour::PanicBeforeFuture {
            panic!("{INJECTED}");
        }
        Box::pin(async move {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            if let Some(log) = &self.log {
                push(log, "tool");
            }
            tokio::task::yield_now().await;
            let reported = match report {
                Report::Nothing => None,
                Report::Valid => Some(ctx.report(call.id(), "working").await),
                Report::OtherCall => Some(ctx.report("someone-else", "working").await),
                Report::EmptyMessage => Some(ctx.report(call.id(), "  ").await),
            };
            if let Some(outcome) = reported {
                // The tool deliberately ignores the outcome; the dispatcher must not.
                self.report_outcomes.lock().unwrap().push(outcome);
            }
            tokio::task::yield_now().await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            let id = call.id();
            match behaviour {
                Behaviour::Succeed => Ok(ToolResult::success(id, format!("ok:{id}"))),
                Behaviour::Problem => Ok(ToolResult::problem(id, format!("problem:{id}"))),
                Behaviour::PanicInFuture | Behaviour::PanicBeforeFuture => panic!("{INJECTED}"),
                Behaviour::ResultForOtherCall => Ok(ToolResult::success("other-call", "stolen")),
                Behaviour::ErrorForOtherCall => {
                    Err(ExecutionError::definitive("other-call", "disk full"))
                }
                Behaviour::Definitive => Err(ExecutionError::definitive(id, "disk full")),
                Behaviour::Retryable => Err(ExecutionError::retryable(id, "timed out")),
                Behaviour::Uncertain => Err(ExecutionError::uncertain(id, "connection lost")),
                Behaviour::CancelledError => Err(ExecutionError::cancelled(id)),
                Behaviour::TooLarge => {
                    Ok(ToolResult::success(id, "x".repeat(MAX_PAYLOAD_BYTES + 1)))
                }
                Behaviour::Pending => {
                    self.started.notify_one();
                    std::future::pending().await
                }
            }
        })
    }
}

pub(crate) fn tool_map<'a, T: Tool>(
    tools: impl IntoIterator<Item = &'a Arc<T>>,
) -> BTreeMap<String, Arc<dyn Tool>> {
    tools
        .into_iter()
        .map(|t| {
            let tool: Arc<dyn Tool> = t.clone();
            (t.definition().name().to_owned(), tool)
        })
        .collect()
}

/// How a [`TestReporter`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReporterMode {
    Accept,
    Fail(&'static str),
    Panic,
}

/// A reporter that records what it was given and answers as configured.
pub(crate) struct TestReporter {
    mode: ReporterMode,
    seen: Mutex<Vec<Progress>>,
}

impl TestReporter {
    pub(crate) fn new(mode: ReporterMode) -> Self {
        TestReporter {
            mode,
            seen: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn seen(&self) -> Vec<Progress> {
        self.seen.lock().unwrap().clone()
    }
}

impl Reporter for TestReporter {
    fn report(&self, progress: Progress) -> BoxFuture<'_, Result<(), ReportError>> {
        Box::pin(async move {
            self.seen.lock().unwrap().push(progress);
            match self.mode {
                ReporterMode::Accept => Ok(()),
                ReporterMode::Fail(message) => Err(ReportError::new(message)),
                ReporterMode::Panic => panic!("{INJECTED}"),
            }
        })
    }
}

/// Dispatches `call` with a fresh token, the shared test scope and no reporter.
pub(crate) async fn dispatch(
    dispatcher: &dyn ToolDispatcher,
    call: &Call,
) -> Result<ToolResult, DispatchError> {
    let cancel = CancellationToken::new();
    dispatch_with(dispatcher, call, &NoopReporter, &cancel).await
}

pub(crate) async fn dispatch_with(
    dispatcher: &dyn ToolDispatcher,
    call: &Call,
    reporter: &dyn Reporter,
    cancel: &CancellationToken,
) -> Result<ToolResult, DispatchError> {
    let scope = scope();
    dispatcher
        .dispatch(DispatchRequest {
            cancel,
            scope: &scope,
            call,
            reporter,
        })
        .await
}

/// A base dispatcher whose definition set changes when `shift` is called: before, it declares
/// `before`; after, `after`. It answers every call by name, declared or not, and counts them,
/// so only the pipeline's own snapshot can stop an undeclared call.
pub(crate) struct ShiftingDispatcher {
    before: Vec<Definition>,
    after: Vec<Definition>,
    shifted: AtomicBool,
    dispatched: Mutex<Vec<String>>,
}

impl ShiftingDispatcher {
    pub(crate) fn new(before: Vec<Definition>, after: Vec<Definition>) -> Arc<Self> {
        Arc::new(ShiftingDispatcher {
            before,
            after,
            shifted: AtomicBool::new(false),
            dispatched: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn shift(&self) {
        self.shifted.store(true, Ordering::SeqCst);
    }

    pub(crate) fn dispatched(&self) -> Vec<String> {
        self.dispatched.lock().unwrap().clone()
    }
}

impl ToolDispatcher for ShiftingDispatcher {
    fn definitions(&self) -> &[Definition] {
        if self.shifted.load(Ordering::SeqCst) {
            &self.after
        } else {
            &self.before
        }
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        Box::pin(async move {
            let call = request.call;
            self.dispatched.lock().unwrap().push(call.name().to_owned());
            Ok(ToolResult::success(
                call.id(),
                format!("ran:{}", call.name()),
            ))
        })
    }
}
