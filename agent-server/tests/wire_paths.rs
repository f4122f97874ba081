//! Every path a run can take reaches the wire in the wire's shape (issue 33, part 1, the
//! property): generated plans drive real runs over the real socket through every path the
//! kernel has (text; a tool's success, problem, progress, definitive, retryable and uncertain
//! failure; model failures before, inside and after the stream; cancellation at each point a
//! run can wait, and at any event; every interaction outcome; a suspended and resumed run),
//! and every event is decoded with the original client's strict rules
//! (`agent_protocol::event_payload`).
//!
//! A plan is the run's input text, one word per turn (`tool-ok ask-yes text`): the scripted
//! provider reads the word of the turn it is asked for, and the test, as the run's client,
//! answers prompts, suspends, resumes and cancels as the plan says. Beside the shapes, each run
//! is checked against a model of the plan: its terminal, one terminal per started scope, and
//! each tool and interaction ending as its word says.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agent_core::agent::{AgentDefinition, Engine};
use agent_core::interaction::{InteractionError, InteractionRequest};
use agent_core::model::{
    EventStream, ModelProblem, ModelProvider, ModelRequest, ProviderError, ScriptedStream,
    StreamError, StreamEvent, Usage,
};
use agent_core::stage::{
    DispatchError, Dispatcher, GuardRequest, Next, StaticToolPlanSource, ToolDispatchGuard,
    compose_pipeline,
};
use agent_core::tool::{
    BoxFuture, Call, Definition as ToolDefinition, Effect, ExecutionError, ReplaySafety, Tool,
    ToolContext, ToolResult,
};
use agent_daemon::definition::{Definition, DefinitionSet};
use agent_daemon::pending::{PendingLimits, PendingRouter};
use agent_protocol::event_payload::{
    CAPABILITY_RICH_EVENTS, ToolExecution, ToolRetry, WirePayload, decode_event_payload,
    decode_event_payload_rich,
};
use agent_protocol::limits::{CAPABILITY_SNAPSHOT_AUTHORITY, CAPABILITY_SNAPSHOTS};
use agent_protocol::pb::common::v1::{CapabilitySet, ErrorCode};
use agent_protocol::pb::engine::v1 as pb;
use agent_server::fixture::{self, FixtureError, FixtureOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;
use support::*;

/// The one definition every plan runs as.
const DEFINITION: &str = "paths";
/// Turns a run may take: a plan of four continuing words runs out of turns.
const MAX_TURNS: u32 = 4;

/// What one turn's model does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Answers with text: the run completes.
    Text,
    /// Calls a tool that ends this way.
    Tool(ToolEnd),
    /// Calls a gated tool: the guard asks the client, who answers this way.
    Ask(Answer),
    /// Fails the model operation at this point.
    Fail(FailAt),
    /// Waits at this point until the run is cancelled.
    Hang(HangAt),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ToolEnd {
    Ok,
    Problem,
    Progress,
    Definitive,
    Retryable,
    Uncertain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// `true`: the tool runs.
    Yes,
    /// `false`: the guard refuses the call as a problem the model sees.
    No,
    /// Two prompts at once, too large together for the client's pending budget: one fails,
    /// the other is answered `true`.
    Full,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailAt {
    /// The provider refuses the request.
    Before,
    /// The stream's first item is a failure.
    In,
    /// A delta, then a failure.
    After,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HangAt {
    /// The provider never answers.
    Model,
    /// A delta, then the stream never yields again.
    Stream,
    /// The tool waits for its cancellation.
    Tool,
    /// The guard's prompt is never answered.
    Ask,
}

impl Step {
    fn word(self) -> &'static str {
        match self {
            Step::Text => "text",
            Step::Tool(ToolEnd::Ok) => "tool-ok",
            Step::Tool(ToolEnd::Problem) => "tool-problem",
            Step::Tool(ToolEnd::Progress) => "tool-progress",
            Step::Tool(ToolEnd::Definitive) => "tool-definitive",
            Step::Tool(ToolEnd::Retryable) => "tool-retryable",
            Step::Tool(ToolEnd::Uncertain) => "tool-uncertain",
            Step::Ask(Answer::Yes) => "ask-yes",
            Step::Ask(Answer::No) => "ask-no",
            Step::Ask(Answer::Full) => "ask-full",
            Step::Fail(FailAt::Before) => "fail-before",
            Step::Fail(FailAt::In) => "fail-in",
            Step::Fail(FailAt::After) => "fail-after",
            Step::Hang(HangAt::Model) => "hang-model",
            Step::Hang(HangAt::Stream) => "hang-stream",
            Step::Hang(HangAt::Tool) => "hang-tool",
            Step::Hang(HangAt::Ask) => "hang-ask",
        }
    }

    fn from_word(word: &str) -> Step {
        ALL_STEPS
            .into_iter()
            .find(|s| s.word() == word)
            .unwrap_or(Step::Text)
    }

    /// Whether the run goes on to another turn after this one.
    fn continues(self) -> bool {
        matches!(
            self,
            Step::Tool(ToolEnd::Ok | ToolEnd::Problem | ToolEnd::Progress) | Step::Ask(_)
        )
    }

    /// The tool this turn's model calls, if any.
    fn tool(self) -> Option<&'static str> {
        Some(match self {
            Step::Tool(ToolEnd::Ok) => "ok",
            Step::Tool(ToolEnd::Problem) => "problem",
            Step::Tool(ToolEnd::Progress) => "progress",
            Step::Tool(ToolEnd::Definitive) => "definitive",
            Step::Tool(ToolEnd::Retryable) => "retryable",
            Step::Tool(ToolEnd::Uncertain) => "uncertain",
            Step::Ask(Answer::Full) => "gated-full",
            Step::Ask(_) | Step::Hang(HangAt::Ask) => "gated",
            Step::Hang(HangAt::Tool) => "hang",
            _ => return None,
        })
    }
}

const ALL_STEPS: [Step; 17] = [
    Step::Text,
    Step::Tool(ToolEnd::Ok),
    Step::Tool(ToolEnd::Problem),
    Step::Tool(ToolEnd::Progress),
    Step::Tool(ToolEnd::Definitive),
    Step::Tool(ToolEnd::Retryable),
    Step::Tool(ToolEnd::Uncertain),
    Step::Ask(Answer::Yes),
    Step::Ask(Answer::No),
    Step::Ask(Answer::Full),
    Step::Fail(FailAt::Before),
    Step::Fail(FailAt::In),
    Step::Fail(FailAt::After),
    Step::Hang(HangAt::Model),
    Step::Hang(HangAt::Stream),
    Step::Hang(HangAt::Tool),
    Step::Hang(HangAt::Ask),
];

/// What the client does with a suspended run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterSuspend {
    Resume,
    Cancel,
}

/// One generated run.
#[derive(Debug, Clone)]
struct Plan {
    steps: Vec<Step>,
    /// Ask for a suspension while the prompt of this (zero-based) turn is pending.
    suspend: Option<(usize, AfterSuspend)>,
    /// Cancel as soon as the event with this sequence arrives (a race with the run).
    cancel_at: Option<u64>,
    /// The session enabled `agent-kit.rich-events/v1`.
    rich: bool,
}

impl Plan {
    fn input(&self) -> String {
        let words: Vec<&str> = self.steps.iter().map(|s| s.word()).collect();
        words.join(" ")
    }

    /// The turns the run executes: up to and including the first that ends it, where a turn
    /// past the plan's words answers with text (as the provider does), and at most
    /// [`MAX_TURNS`].
    fn executed(&self) -> Vec<Step> {
        let mut executed = Vec::new();
        for turn in 0..MAX_TURNS as usize {
            let step = self.steps.get(turn).copied().unwrap_or(Step::Text);
            executed.push(step);
            if !step.continues() {
                break;
            }
        }
        executed
    }

    /// The run's terminal when nothing races it.
    fn terminal(&self) -> pb::EventKind {
        match self.executed().last() {
            Some(Step::Text) => pb::EventKind::RunCompleted,
            Some(Step::Hang(_)) => pb::EventKind::RunCancelled,
            // A failed tool or model, or a plan of only continuing words: out of turns.
            _ => pb::EventKind::RunFailed,
        }
    }
}

fn plans() -> impl Strategy<Value = Plan> {
    let continuing = prop::sample::select(
        ALL_STEPS
            .into_iter()
            .filter(|s| s.continues())
            .collect::<Vec<_>>(),
    );
    let last = prop::sample::select(ALL_STEPS.to_vec());
    (
        prop::collection::vec(continuing, 0..=MAX_TURNS as usize),
        last,
        prop::option::weighted(0.5, (any::<prop::sample::Index>(), any::<bool>())),
        prop::option::weighted(0.2, 1u64..24),
        any::<bool>(),
    )
        .prop_map(|(mut steps, last, suspend, cancel_at, rich)| {
            if steps.len() < MAX_TURNS as usize {
                steps.push(last);
            }
            // A suspension is asked for while a prompt is pending, so it names a turn
            // whose word asks (and that the run reaches).
            let suspend = suspend.and_then(|(index, cancel)| {
                let reached = steps
                    .iter()
                    .position(|s| !s.continues())
                    .map_or(steps.len(), |i| i + 1);
                let asking: Vec<usize> = (0..reached)
                    .filter(|&i| matches!(steps[i], Step::Ask(Answer::Yes | Answer::No)))
                    .collect();
                let then = if cancel {
                    AfterSuspend::Cancel
                } else {
                    AfterSuspend::Resume
                };
                (!asking.is_empty()).then(|| (*index.get(&asking), then))
            });
            Plan {
                steps,
                suspend,
                cancel_at,
                rich,
            }
        })
}

/// The plan's tools; `gated*` are asked about by [`Gate`].
struct Ends {
    definition: ToolDefinition,
}

impl Tool for Ends {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move {
            let id = call.id().to_owned();
            match self.definition.name() {
                "problem" => Ok(ToolResult::problem(id, "no such file")),
                "progress" => {
                    ctx.report(&id, "half way")
                        .await
                        .map_err(|_| ExecutionError::definitive(&id, "progress refused"))?;
                    Ok(ToolResult::success(id, "done"))
                }
                "definitive" => Err(ExecutionError::definitive(id, "refused")),
                "retryable" => Err(ExecutionError::retryable(id, "timed out")),
                "uncertain" => Err(ExecutionError::uncertain(id, "connection lost")),
                "hang" => {
                    ctx.cancelled().await;
                    Err(ExecutionError::cancelled(id))
                }
                _ => Ok(ToolResult::success(id, "fine")),
            }
        })
    }
}

fn tool(name: &str) -> (String, Arc<dyn Tool>) {
    // Only a mutating tool may report an uncertain outcome.
    let (effect, replay) = match name {
        "uncertain" => (Effect::Mutating, ReplaySafety::Unsafe),
        _ => (Effect::ReadOnly, ReplaySafety::Safe),
    };
    let definition = ToolDefinition::builder(name, "Ends as its name says.")
        .effect(effect)
        .replay_safety(replay)
        .build()
        .unwrap();
    (
        name.to_owned(),
        Arc::new(Ends { definition }) as Arc<dyn Tool>,
    )
}

/// Bytes of each `ask-full` prompt: two of them overrun the client's pending budget.
fn full_prompt_bytes() -> usize {
    PendingLimits::default().pending_bytes_per_client / 2 + 1
}

/// Asks the client about every `gated*` call, through the run's own requester.
struct Gate;

fn question(id: String, bytes: usize) -> InteractionRequest {
    InteractionRequest::new(
        id,
        "approval",
        "x".repeat(bytes),
        json!({ "type": "boolean" }),
    )
    .unwrap()
}

impl ToolDispatchGuard for Gate {
    fn guard<'a>(
        &'a self,
        request: GuardRequest<'a>,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        let name = request.call.name();
        if !name.starts_with("gated") {
            return next.run();
        }
        let full = name == "gated-full";
        Box::pin(async move {
            let call_id = request.call.id();
            let requester = request.scope.requester();
            let cancel = request.cancel;
            let answers = if full {
                let bytes = full_prompt_bytes();
                let (a, b) = tokio::join!(
                    requester.request(question(format!("a-{call_id}"), bytes), cancel),
                    requester.request(question(format!("b-{call_id}"), bytes), cancel),
                );
                vec![a, b]
            } else {
                vec![
                    requester
                        .request(question(format!("a-{call_id}"), 16), cancel)
                        .await,
                ]
            };
            if answers
                .iter()
                .any(|a| matches!(a, Err(InteractionError::Cancelled)))
            {
                return Err(DispatchError::Cancelled {
                    call_id: call_id.to_owned(),
                });
            }
            if answers
                .iter()
                .all(|a| a.as_ref().is_ok_and(|a| a.value() == &json!(true)))
            {
                next.run().await
            } else {
                Ok(ToolResult::problem(call_id, "refused"))
            }
        })
    }
}

/// Yields its scripted events, then hangs.
struct ThenHang(ScriptedStream);

impl EventStream for ThenHang {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<StreamEvent>, StreamError>> {
        Box::pin(async move {
            match self.0.next().await? {
                Some(event) => Ok(Some(event)),
                None => std::future::pending().await,
            }
        })
    }
}

/// Reads the plan from the run's input and answers the word of the asked turn.
struct Planned;

impl ModelProvider for Planned {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        Box::pin(async move {
            let turn: usize = request
                .operation_id()
                .rsplit('/')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            let input = request
                .messages()
                .first()
                .map(|m| m.text().into_owned())
                .unwrap_or_default();
            let step = input
                .split(' ')
                .nth(turn - 1)
                .map_or(Step::Text, Step::from_word);
            let done = StreamEvent::Completed {
                usage: Usage::new(2, 3),
            };
            let events = match step {
                Step::Fail(FailAt::Before) => {
                    return Err(ProviderError::new(ModelProblem::new(
                        "rate_limited",
                        "slow down",
                    )));
                }
                Step::Hang(HangAt::Model) => return std::future::pending().await,
                Step::Hang(HangAt::Stream) => {
                    let delta = ScriptedStream::new([StreamEvent::TextDelta("part".into())]);
                    return Ok(Box::new(ThenHang(delta)) as Box<dyn EventStream>);
                }
                Step::Fail(FailAt::In) => vec![StreamEvent::Failed(ModelProblem::new(
                    "overloaded",
                    "try later",
                ))],
                Step::Fail(FailAt::After) => vec![
                    StreamEvent::TextDelta("partial".into()),
                    StreamEvent::Failed(ModelProblem::new("provider_down", "gone")),
                ],
                Step::Text => vec![StreamEvent::TextDelta("answer".into()), done],
                step => {
                    let name = step.tool().expect("every other word calls a tool");
                    let call = Call::new(format!("c{turn}"), name, json!({})).unwrap();
                    vec![StreamEvent::ToolCall(call), done]
                }
            };
            Ok(Box::new(ScriptedStream::new(events)) as Box<dyn EventStream>)
        })
    }
}

/// The daemon every case runs against, with the pending router its runs ask through.
struct World {
    runtime: tokio::runtime::Runtime,
    fixture: Fixture,
    router: Arc<PendingRouter>,
    /// The open session of each test thread and kind (plain, rich), and how many runs it
    /// started. Tests never share a session: a client's pending budget is its own, and
    /// `ask-full` counts on having all of it.
    sessions: Mutex<BTreeMap<(String, bool), (Session, usize)>>,
}

/// A session: its client id and ownership epoch.
type Session = (String, u64);

/// Runs one session starts before the next case opens another: its operations stay well
/// inside the daemon's per-client ledger, and the sessions inside its session limit.
const RUNS_PER_SESSION: usize = 32;

/// Operation ids, unique across every case and session.
static NEXT_OPERATION: AtomicUsize = AtomicUsize::new(0);

fn operation() -> String {
    format!("op-{}", NEXT_OPERATION.fetch_add(1, Ordering::Relaxed))
}

impl World {
    /// A session of the kind `rich` asks for, opened anew every [`RUNS_PER_SESSION`] runs.
    async fn session(&self, client: &mut Client, rich: bool) -> (String, u64) {
        let key = (format!("{:?}", std::thread::current().id()), rich);
        let current = {
            let mut sessions = self.sessions.lock().unwrap();
            match sessions.get_mut(&key) {
                Some((session, runs)) if *runs < RUNS_PER_SESSION => {
                    *runs += 1;
                    Some(session.clone())
                }
                _ => None,
            }
        };
        if let Some(session) = current {
            return session;
        }
        let session = plan_session(client, rich).await;
        self.sessions
            .lock()
            .unwrap()
            .insert(key, (session.clone(), 1));
        session
    }
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let slot = Arc::new(Mutex::new(None));
        let seen = slot.clone();
        let fixture = runtime.block_on(Fixture::with_host(
            "paths",
            move |root, authority| {
                let agent = AgentDefinition::new(DEFINITION, "planned", MAX_TURNS).unwrap();
                let definitions =
                    DefinitionSet::new([
                        Definition::new(DEFINITION, fixture::REVISION, agent).unwrap()
                    ])
                    .unwrap();
                let engine = move |pending: Arc<PendingRouter>| {
                    *seen.lock().unwrap() = Some(pending.clone());
                    let tools = BTreeMap::from(
                        [
                            "ok",
                            "problem",
                            "progress",
                            "definitive",
                            "retryable",
                            "uncertain",
                            "hang",
                            "gated",
                            "gated-full",
                        ]
                        .map(tool),
                    );
                    let base = Arc::new(Dispatcher::new(tools).unwrap());
                    let pipeline = compose_pipeline(base, vec![Arc::new(Gate)], Vec::new())
                        .map_err(|_| FixtureError::Engine)?;
                    let plan =
                        StaticToolPlanSource::new(pipeline).map_err(|_| FixtureError::Engine)?;
                    Engine::builder(Arc::new(Planned), plan)
                        .broker(pending)
                        .build()
                        .map_err(|_| FixtureError::Engine)
                };
                fixture::run_host(
                    root,
                    authority,
                    FixtureOptions::default(),
                    definitions,
                    engine,
                )
                .unwrap()
            },
            |_| {},
        ));
        let router = slot
            .lock()
            .unwrap()
            .take()
            .expect("the engine saw the router");
        World {
            runtime,
            fixture,
            router,
            sessions: Mutex::new(BTreeMap::new()),
        }
    })
}

/// A session with the snapshot capabilities (for suspend and resume), and the rich-events
/// one when `rich`.
async fn plan_session(client: &mut Client, rich: bool) -> (String, u64) {
    let mut names = vec![
        CAPABILITY_SNAPSHOTS.to_owned(),
        CAPABILITY_SNAPSHOT_AUTHORITY.to_owned(),
    ];
    if rich {
        names.push(CAPABILITY_RICH_EVENTS.to_owned());
    }
    // The protocol wants capability lists strictly ascending.
    names.sort();
    let mut request = initialize(None, None);
    request.supported_capabilities = Some(CapabilitySet {
        names: names.clone(),
    });
    let response = bounded(client.initialize(request))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code(response.status.as_ref()),
        ErrorCode::Ok,
        "{:?}",
        response.status
    );
    assert_eq!(response.capabilities.unwrap_or_default().names, names);
    (response.client_id, response.ownership_epoch)
}

/// How often each client action ran, over all cases: the property must reach them all.
#[derive(Default)]
struct Reached {
    resumed: AtomicUsize,
    cancelled_suspended: AtomicUsize,
    raced_cancels: AtomicUsize,
}

/// The client of one run: answers, suspends, resumes and cancels as the plan says.
struct Driver<'a> {
    world: &'a World,
    client: Client,
    session: (String, u64),
    run: String,
}

impl Driver<'_> {
    fn op(&mut self) -> String {
        operation()
    }

    async fn cancel(&mut self) {
        let request = pb::CancelRunRequest {
            client_id: self.session.0.clone(),
            ownership_epoch: self.session.1,
            client_operation_id: self.op(),
            run_id: self.run.clone(),
            reason: String::new(),
        };
        let response = bounded(self.client.cancel_run(request))
            .await
            .unwrap()
            .into_inner();
        // A cancel that loses the race with the run's end is refused; it changes nothing.
        let status = code(response.status.as_ref());
        assert!(
            matches!(
                status,
                ErrorCode::Ok | ErrorCode::Conflict | ErrorCode::NotFound
            ),
            "{response:?}"
        );
    }

    /// Waits (bounded) until the run's prompts named in `ids` are pending for the client.
    async fn pending(&self, ids: &[String]) {
        bounded(async {
            loop {
                let snapshot = self.world.router.snapshot(&self.session.0);
                let pending: BTreeSet<&str> = snapshot
                    .pending()
                    .iter()
                    .filter(|p| p.scope().run_id().as_str() == self.run)
                    .map(|p| p.request().id())
                    .collect();
                if ids.iter().all(|id| pending.contains(id.as_str())) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
    }

    async fn respond(&mut self, id: &str, value: bool) {
        let request = pb::RespondInteractionRequest {
            client_id: self.session.0.clone(),
            ownership_epoch: self.session.1,
            client_operation_id: self.op(),
            run_id: self.run.clone(),
            interaction_id: id.to_owned(),
            value_json: value.to_string().into_bytes(),
        };
        let response = bounded(self.client.respond_interaction(request))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            code(response.status.as_ref()),
            ErrorCode::Ok,
            "{response:?}"
        );
        assert!(response.accepted && !response.duplicate_operation);
    }

    /// Asks for a suspension while a prompt holds the turn open, answers the prompt, and
    /// resumes or cancels the parked run. Whether it parked: a suspension asked for too
    /// late (the run passed its last boundary) is refused and changes nothing.
    async fn suspend_then(
        &mut self,
        answer: (&str, bool),
        then: AfterSuspend,
        reached: &Reached,
    ) -> bool {
        let request = pb::SuspendRunRequest {
            client_id: self.session.0.clone(),
            ownership_epoch: self.session.1,
            client_operation_id: self.op(),
            run_id: self.run.clone(),
        };
        let mut suspender = self.world.fixture.client().await;
        let suspending = tokio::spawn(async move { suspender.suspend_run(request).await });
        // Give the request time to reach the run before the turn can end.
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.respond(answer.0, answer.1).await;
        let response = bounded(suspending).await.unwrap().unwrap().into_inner();
        if code(response.status.as_ref()) != ErrorCode::Ok {
            return false;
        }
        assert!(response.suspended, "{response:?}");
        let boundary = response.boundary_sequence;
        match then {
            AfterSuspend::Resume => {
                let request = pb::ResumeRunRequest {
                    client_id: self.session.0.clone(),
                    ownership_epoch: self.session.1,
                    client_operation_id: self.op(),
                    run_id: self.run.clone(),
                };
                let response = bounded(self.client.resume_run(request))
                    .await
                    .unwrap()
                    .into_inner();
                assert_eq!(
                    code(response.status.as_ref()),
                    ErrorCode::Ok,
                    "{response:?}"
                );
                assert!(response.resumed);
                // The resumed run goes on right after its boundary.
                assert_eq!(response.next_sequence, boundary + 1, "{response:?}");
                reached.resumed.fetch_add(1, Ordering::Relaxed);
            }
            AfterSuspend::Cancel => {
                self.cancel().await;
                reached.cancelled_suspended.fetch_add(1, Ordering::Relaxed);
            }
        }
        true
    }
}

/// What one case observed.
struct Observed {
    events: Vec<pb::RunEvent>,
    payloads: Vec<WirePayload>,
    parked: bool,
    raced: bool,
}

/// Runs `plan` as its client over the socket: every event decoded as it arrives.
async fn drive(world: &World, plan: &Plan, reached: &Reached) -> Observed {
    let mut client = world.fixture.client().await;
    let session = world.session(&mut client, plan.rich).await;
    let mut request = start_request(&session, &operation(), DEFINITION);
    request.input = Some(text_message(&[&plan.input()]));
    let response = bounded(client.start_run(request))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code(response.status.as_ref()),
        ErrorCode::Ok,
        "{response:?}"
    );
    let mut driver = Driver {
        world,
        client: world.fixture.client().await,
        session: session.clone(),
        run: response.run_id.clone(),
    };
    let mut observed = Observed {
        events: Vec::new(),
        payloads: Vec::new(),
        parked: false,
        raced: false,
    };
    let mut turn = 0usize;
    let mut after = 0;
    let mut cancelled = false;
    loop {
        let request = stream_request(&session, &driver.run, after, true);
        let mut stream = bounded(client.stream_events(request))
            .await
            .unwrap()
            .into_inner();
        let mut more = false;
        while let Some(frame) = bounded(stream.message()).await.unwrap() {
            let event = match frame.payload.unwrap() {
                pb::stream_events_response::Payload::Event(event) => event,
                pb::stream_events_response::Payload::Control(control) => {
                    assert_eq!(code(control.status.as_ref()), ErrorCode::Ok, "{control:?}");
                    more = control.has_more;
                    continue;
                }
            };
            assert_eq!(event.sequence, after + 1, "gap-free");
            after = event.sequence;
            let kind = pb::EventKind::try_from(event.kind).unwrap();
            let decoded = if plan.rich {
                decode_event_payload_rich(kind, &event.payload_json).map(|(p, _)| p)
            } else {
                decode_event_payload(kind, &event.payload_json)
            };
            let payload = decoded.unwrap_or_else(|error| {
                panic!(
                    "{kind:?} {}: {error}",
                    String::from_utf8_lossy(&event.payload_json)
                )
            });
            observed.events.push(event);
            let step = plan.steps.get(turn.saturating_sub(1)).copied();
            if let WirePayload::TurnStarted(t) = &payload {
                turn = t.turn as usize;
            }
            if !cancelled && plan.cancel_at == Some(after) {
                cancelled = true;
                observed.raced = true;
                reached.raced_cancels.fetch_add(1, Ordering::Relaxed);
                driver.cancel().await;
            }
            match (&payload, step) {
                // Each point a run waits at, reached: cancel it there.
                (WirePayload::ModelStarted(_), _)
                | (WirePayload::ModelDelta(_), _)
                | (WirePayload::ToolStarted(_), _)
                    if !cancelled
                        && matches!(
                            (&payload, plan.steps.get(turn - 1)),
                            (
                                WirePayload::ModelStarted(_),
                                Some(Step::Hang(HangAt::Model))
                            ) | (WirePayload::ModelDelta(_), Some(Step::Hang(HangAt::Stream)))
                                | (WirePayload::ToolStarted(_), Some(Step::Hang(HangAt::Tool)))
                        ) =>
                {
                    cancelled = true;
                    driver.cancel().await;
                }
                (WirePayload::InteractionStarted(started), Some(Step::Hang(HangAt::Ask)))
                    if !cancelled =>
                {
                    driver.pending(std::slice::from_ref(&started.id)).await;
                    cancelled = true;
                    driver.cancel().await;
                }
                (WirePayload::InteractionStarted(started), Some(Step::Ask(answer)))
                    if !cancelled && answer != Answer::Full =>
                {
                    let id = started.id.clone();
                    driver.pending(std::slice::from_ref(&id)).await;
                    let value = answer == Answer::Yes;
                    match plan.suspend {
                        Some((at, then)) if at + 1 == turn => {
                            observed.parked =
                                driver.suspend_then((&id, value), then, reached).await;
                            cancelled |= observed.parked && then == AfterSuspend::Cancel;
                        }
                        _ => driver.respond(&id, value).await,
                    }
                }
                // Of two prompts over the budget one fails; the other waits for its answer.
                (WirePayload::InteractionFailed(failed), Some(Step::Ask(Answer::Full)))
                    if !cancelled =>
                {
                    let call = format!("c{turn}");
                    let other = if failed.id == format!("a-{call}") {
                        format!("b-{call}")
                    } else {
                        format!("a-{call}")
                    };
                    driver.pending(std::slice::from_ref(&other)).await;
                    driver.respond(&other, true).await;
                }
                _ => {}
            }
            observed.payloads.push(payload);
        }
        if !more {
            break;
        }
    }
    observed
}

/// Checks one run's events against its plan.
fn check(plan: &Plan, observed: &Observed) {
    let payloads = &observed.payloads;
    let kinds: Vec<pb::EventKind> = payloads.iter().map(WirePayload::kind).collect();
    let terminal_kinds = [
        pb::EventKind::RunCompleted,
        pb::EventKind::RunFailed,
        pb::EventKind::RunCancelled,
    ];
    // Exactly one terminal, and it is the last event.
    assert_eq!(
        kinds.iter().filter(|k| terminal_kinds.contains(k)).count(),
        1,
        "{kinds:?}"
    );
    let terminal = *kinds.last().unwrap();
    assert!(terminal_kinds.contains(&terminal), "{kinds:?}");
    assert_eq!(kinds[0], pb::EventKind::RunStarted);
    let cancelled_suspended =
        observed.parked && matches!(plan.suspend, Some((_, AfterSuspend::Cancel)));
    if cancelled_suspended {
        assert_eq!(terminal, pb::EventKind::RunCancelled, "{kinds:?}");
    } else if observed.raced {
        assert!(
            terminal == plan.terminal() || terminal == pb::EventKind::RunCancelled,
            "{kinds:?}"
        );
    } else {
        assert_eq!(terminal, plan.terminal(), "{plan:?}: {kinds:?}");
    }

    // Every started scope has exactly one terminal.
    let mut open_turns = BTreeSet::new();
    let mut open_model = false;
    let mut open_tools = BTreeMap::new();
    let mut open_interactions = BTreeSet::new();
    let mut tool_ends = BTreeMap::new();
    let mut interaction_ends: BTreeMap<String, pb::EventKind> = BTreeMap::new();
    for payload in payloads {
        match payload {
            WirePayload::TurnStarted(t) => assert!(open_turns.insert(t.turn)),
            WirePayload::TurnCompleted(t) => assert!(open_turns.remove(&t.turn)),
            WirePayload::TurnFailed(_) => assert_eq!(std::mem::take(&mut open_turns).len(), 1),
            WirePayload::ModelStarted(_) => {
                assert!(!open_model, "{kinds:?}");
                open_model = true;
            }
            WirePayload::ModelCompleted(_) | WirePayload::ModelFailed(_) => {
                assert!(std::mem::take(&mut open_model), "{kinds:?}");
            }
            WirePayload::ToolStarted(t) => {
                assert!(
                    open_tools
                        .insert(t.call_id.clone(), t.name.clone())
                        .is_none()
                );
            }
            WirePayload::ToolProgress(t) => assert!(open_tools.contains_key(&t.call_id)),
            WirePayload::ToolCompleted(t) | WirePayload::ToolFailed(t) => {
                assert_eq!(open_tools.remove(&t.call_id), Some(t.name.clone()));
                tool_ends.insert(t.call_id.clone(), (payload.kind(), t.outcome, t.retry));
            }
            WirePayload::InteractionStarted(i) => assert!(open_interactions.insert(i.id.clone())),
            WirePayload::InteractionCompleted(i)
            | WirePayload::InteractionFailed(i)
            | WirePayload::InteractionCancelled(i) => {
                assert!(open_interactions.remove(&i.id), "{kinds:?}");
                interaction_ends.insert(i.id.clone(), payload.kind());
            }
            _ => {}
        }
    }
    assert!(open_turns.is_empty() && !open_model, "{kinds:?}");
    assert!(
        open_tools.is_empty() && open_interactions.is_empty(),
        "{kinds:?}"
    );
    if observed.raced || cancelled_suspended {
        return;
    }

    // Without a racing cancel, each executed turn ends as its word says.
    let executed = plan.executed();
    let turns = kinds
        .iter()
        .filter(|k| **k == pb::EventKind::TurnStarted)
        .count();
    assert_eq!(turns, executed.len(), "{plan:?}: {kinds:?}");
    for (i, step) in executed.iter().enumerate() {
        let call = format!("c{}", i + 1);
        let tool_end = tool_ends.get(&call).copied();
        let completed = Some((pb::EventKind::ToolCompleted, None, None));
        let failed = |outcome, retry| Some((pb::EventKind::ToolFailed, Some(outcome), Some(retry)));
        let expected_tool = match step {
            Step::Tool(ToolEnd::Ok | ToolEnd::Problem | ToolEnd::Progress) | Step::Ask(_) => {
                completed
            }
            Step::Tool(ToolEnd::Definitive) => failed(ToolExecution::Definitive, ToolRetry::Never),
            Step::Tool(ToolEnd::Retryable) => failed(ToolExecution::Definitive, ToolRetry::Allowed),
            Step::Tool(ToolEnd::Uncertain) => failed(ToolExecution::Uncertain, ToolRetry::Never),
            Step::Hang(HangAt::Tool | HangAt::Ask) => {
                tool_end.filter(|(k, _, _)| *k == pb::EventKind::ToolFailed)
            }
            _ => None,
        };
        assert_eq!(
            tool_end,
            expected_tool,
            "{plan:?} turn {}: {kinds:?}",
            i + 1
        );
        let a = interaction_ends.get(&format!("a-{call}")).copied();
        let b = interaction_ends.get(&format!("b-{call}")).copied();
        use pb::EventKind::{InteractionCancelled, InteractionCompleted, InteractionFailed};
        match step {
            Step::Ask(Answer::Yes | Answer::No) => {
                assert_eq!((a, b), (Some(InteractionCompleted), None), "{plan:?}");
            }
            Step::Ask(Answer::Full) => {
                let mut ends = [a, b];
                ends.sort();
                let mut expected = [Some(InteractionCompleted), Some(InteractionFailed)];
                expected.sort();
                assert_eq!(ends, expected, "{plan:?}");
            }
            Step::Hang(HangAt::Ask) => {
                assert_eq!((a, b), (Some(InteractionCancelled), None), "{plan:?}");
            }
            _ => assert_eq!((a, b), (None, None), "{plan:?}"),
        }
        if step == &Step::Tool(ToolEnd::Progress) {
            assert!(payloads.iter().any(|p| matches!(p,
                WirePayload::ToolProgress(t) if t.call_id == call && t.message == "half way")));
        }
    }
    let model_failed = payloads.iter().find_map(|p| match p {
        WirePayload::ModelFailed(m) => Some(m),
        _ => None,
    });
    match executed.last() {
        Some(Step::Fail(FailAt::Before)) => {
            assert!(model_failed.unwrap().before_stream, "{kinds:?}");
        }
        Some(Step::Fail(FailAt::After)) => {
            assert!(!model_failed.unwrap().before_stream, "{kinds:?}");
        }
        Some(Step::Fail(FailAt::In) | Step::Hang(HangAt::Model | HangAt::Stream)) => {
            assert!(model_failed.is_some(), "{kinds:?}");
        }
        _ => assert!(model_failed.is_none(), "{kinds:?}"),
    }
}

/// The property, over real runs: `PROPTEST_CASES` plans (128 unless set).
#[test]
fn every_path_of_a_real_run_reaches_the_wire_in_its_shape() {
    let world = world();
    let reached = Reached::default();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(128);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&plans(), |plan| {
        let observed = world.runtime.block_on(drive(world, &plan, &reached));
        check(&plan, &observed);
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    // The fixed walk below reaches every kind; the generated plans must reach the client's
    // actions too, or the property proved less than it says.
    assert!(
        reached.resumed.load(Ordering::Relaxed)
            + reached.cancelled_suspended.load(Ordering::Relaxed)
            > 0
            || cases < 32
    );
    assert!(reached.raced_cancels.load(Ordering::Relaxed) > 0 || cases < 32);
}

/// Each word once, each client action once: every one of the 19 kinds and every path reached
/// on every run of the suite, whatever the generator draws.
#[test]
fn every_word_and_action_once() {
    let world = world();
    let reached = Reached::default();
    let mut seen = BTreeSet::new();
    let mut plans: Vec<Plan> = ALL_STEPS
        .into_iter()
        .map(|step| Plan {
            steps: vec![step, Step::Text],
            suspend: None,
            cancel_at: None,
            rich: false,
        })
        .collect();
    for then in [AfterSuspend::Resume, AfterSuspend::Cancel] {
        plans.push(Plan {
            // Boundaries after turns 2 and 3: a suspension that misses the first parks at
            // the second.
            steps: vec![
                Step::Tool(ToolEnd::Ok),
                Step::Ask(Answer::Yes),
                Step::Tool(ToolEnd::Ok),
                Step::Text,
            ],
            suspend: Some((1, then)),
            cancel_at: None,
            rich: true,
        });
    }
    for plan in &plans {
        // A suspension is asked for shortly before the prompt is answered; on a loaded
        // machine it can reach the run after its last boundary, which refuses it and
        // changes nothing (checked). Such a plan runs again until it parks.
        for attempt in 1.. {
            let observed = world.runtime.block_on(drive(world, plan, &reached));
            check(plan, &observed);
            for payload in &observed.payloads {
                seen.insert(payload.kind() as i32);
            }
            if plan.suspend.is_none() || observed.parked {
                break;
            }
            assert!(attempt < 5, "{plan:?}: the run never parked");
        }
    }
    assert_eq!(reached.resumed.load(Ordering::Relaxed), 1);
    assert_eq!(reached.cancelled_suspended.load(Ordering::Relaxed), 1);
    let all: BTreeSet<i32> = (1..=19).collect();
    let missing: Vec<_> = all
        .difference(&seen)
        .map(|k| pb::EventKind::try_from(*k).unwrap())
        .collect();
    assert!(missing.is_empty(), "never seen: {missing:?}");
}
