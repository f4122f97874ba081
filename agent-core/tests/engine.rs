//! The four reference workloads as exact event sequences, plus the engine's basic contracts.

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_core::agent::{AgentDefinition, AtomicIdSource, Engine, RunStatus, StartError};
use agent_core::event::{Event, EventKind, FailureCode, FixedClock, ReplayRequest, Timestamp};
use agent_core::message::{Message, Part, Role};
use agent_core::model::{
    EventStream, ModelProvider, ModelRequest, ProviderError, ScriptedProvider, StreamError,
    StreamEvent, Usage,
};
use agent_core::stage::{Dispatcher, StaticToolPlanSource};
use agent_core::tool::{
    BoxFuture, Call, Capability, Definition, Effect, ExecutionError, ReplaySafety, Tool,
    ToolContext, ToolResult,
};
use serde_json::json;
use tokio::sync::mpsc;

/// The reference `read` tool: read-only, replay safe, returns fixed content.
struct ReadTool(Definition);

impl ReadTool {
    fn new() -> Self {
        let definition = Definition::builder("read", "Read benchmark data.")
            .effect(Effect::ReadOnly)
            .replay_safety(ReplaySafety::Safe)
            .capability(Capability::FilesystemRead)
            .build()
            .expect("valid definition");
        ReadTool(definition)
    }
}

impl Tool for ReadTool {
    fn definition(&self) -> &Definition {
        &self.0
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        _ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move { Ok(ToolResult::success(call.id(), r#"{"content":"fixture"}"#)) })
    }
}

fn engine(provider: Arc<dyn ModelProvider>, tools: Vec<Arc<dyn Tool>>) -> Engine {
    let tools: BTreeMap<String, Arc<dyn Tool>> = tools
        .into_iter()
        .map(|t| (t.definition().name().to_owned(), t))
        .collect();
    let dispatcher = Dispatcher::new(tools).expect("valid tools");
    let plans = StaticToolPlanSource::new(Arc::new(dispatcher)).expect("plan");
    Engine::builder(provider, Arc::new(plans))
        .ids(Arc::new(AtomicIdSource::new()))
        .clock(Arc::new(FixedClock::new(Timestamp::from_unix_nanos(
            1_000_000_000,
        ))))
        .build()
        .expect("engine")
}

fn input() -> Message {
    Message::user("hello").expect("valid input")
}

fn kinds(run: &agent_core::agent::Run) -> Vec<EventKind> {
    events(run).iter().map(Event::kind).collect()
}

fn events(run: &agent_core::agent::Run) -> Vec<Event> {
    let page = run
        .events()
        .replay(ReplayRequest::after(0))
        .expect("replay");
    assert!(!page.has_more);
    let sequences: Vec<u64> = page.events.iter().map(|e| e.sequence()).collect();
    let expected: Vec<u64> = (1..=page.events.len() as u64).collect();
    assert_eq!(sequences, expected, "sequence numbers are gap-free from 1");
    page.events.iter().map(|e| e.event().clone()).collect()
}

/// Answers every request with `completed` and nothing else: the text run's provider.
fn text_provider() -> Arc<dyn ModelProvider> {
    Arc::new(ScriptedProvider::new(|_: &ModelRequest| {
        vec![StreamEvent::Completed {
            usage: Usage::new(1, 1),
        }]
    }))
}

#[tokio::test]
async fn text_run_emits_six_events() {
    let engine = engine(text_provider(), vec![]);
    let agent = AgentDefinition::new("benchmark", "scripted", 1).unwrap();
    let run = engine.start(&agent, input()).await.unwrap();
    assert_eq!(run.id(), "run-1");
    let output = run.wait().await.expect("completed");
    assert_eq!(output.answer, "");
    assert_eq!(output.turns, 1);
    assert_eq!(output.usage, Usage::new(1, 1));
    use EventKind::*;
    assert_eq!(
        kinds(&run),
        [
            RunStarted,
            TurnStarted,
            ModelStarted,
            ModelCompleted,
            TurnCompleted,
            RunCompleted
        ]
    );
    assert_eq!(run.status(), RunStatus::Completed);
    assert!(run.events().is_closed());
    engine.close().await;
    assert_eq!(engine.live_runs(), 0);
}

/// The second and later runs start on the task the run before them ended on (the engine
/// reuses an ended run's task); each is still a whole run of its own.
#[tokio::test]
async fn runs_one_after_another_each_emit_their_own_six_events() {
    let engine = engine(text_provider(), vec![]);
    let agent = AgentDefinition::new("benchmark", "scripted", 1).unwrap();
    for n in 1..=3 {
        let run = engine.start(&agent, input()).await.unwrap();
        assert_eq!(run.id().as_str(), format!("run-{n}"));
        assert_eq!(run.wait().await.expect("completed").turns, 1);
        assert_eq!(kinds(&run).len(), 6);
        assert!(run.events().is_closed());
    }
    engine.close().await;
    assert_eq!(engine.live_runs(), 0);
}

/// Answers with a tool call unless the last message is a tool result.
fn tool_round_provider() -> Arc<dyn ModelProvider> {
    Arc::new(ScriptedProvider::new(|request: &ModelRequest| {
        let last = request.messages().last().expect("history");
        if last.role() == Role::Tool {
            vec![StreamEvent::Completed {
                usage: Usage::new(1, 1),
            }]
        } else {
            vec![
                StreamEvent::ToolCall(Call::new("benchmark-call", "read", json!({})).unwrap()),
                StreamEvent::Completed {
                    usage: Usage::new(1, 1),
                },
            ]
        }
    }))
}

#[tokio::test]
async fn tool_round_emits_twelve_events() {
    let engine = engine(tool_round_provider(), vec![Arc::new(ReadTool::new())]);
    let agent = AgentDefinition::new("benchmark", "scripted", 2).unwrap();
    let run = engine.start(&agent, input()).await.unwrap();
    let output = run.wait().await.expect("completed");
    assert_eq!(output.turns, 2);
    assert_eq!(output.usage, Usage::new(2, 2));
    use EventKind::*;
    assert_eq!(
        kinds(&run),
        [
            RunStarted,
            TurnStarted,
            ModelStarted,
            ModelCompleted,
            ToolStarted,
            ToolCompleted,
            TurnCompleted,
            TurnStarted,
            ModelStarted,
            ModelCompleted,
            TurnCompleted,
            RunCompleted
        ]
    );
    let events = events(&run);
    let Event::ToolStarted(started) = &events[4] else {
        panic!("expected tool.started, got {:?}", events[4]);
    };
    assert_eq!(
        (
            started.call_id.as_str(),
            started.name.as_str(),
            started.turn
        ),
        ("benchmark-call", "read", 1)
    );
    assert_eq!(&*started.plan_id, run.plan_id().as_str());
    let facts = started.declared.as_ref().expect("declared");
    assert_eq!(facts.effect, Effect::ReadOnly);
    assert_eq!(facts.capabilities, [Capability::FilesystemRead]);
    // What the kernel emits holds every decoding rule and survives its own decoder.
    assert_eq!(
        agent_core::event::ToolStarted::decode(&events[4]),
        Ok(started)
    );
    assert!(agent_core::event::ToolCompleted::decode(&events[5]).is_ok());
    for event in &events[4..6] {
        let json = serde_json::to_string(event).unwrap();
        assert_eq!(&serde_json::from_str::<Event>(&json).unwrap(), event);
    }

    // The history: user, assistant tool call, tool result.
    let snapshot = run.snapshot().expect("terminal snapshot");
    let roles: Vec<Role> = snapshot.history().iter().map(Message::role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool]);
    assert!(
        matches!(&snapshot.history()[2].parts()[0], Part::ToolResult(r) if r.content == r#"{"content":"fixture"}"#)
    );
    assert!(snapshot.unfinished_calls().is_empty());
}

/// Signals when the model operation starts, then never yields.
struct BlockingProvider {
    started: mpsc::UnboundedSender<()>,
}

struct Pending;

impl EventStream for Pending {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<StreamEvent>, StreamError>> {
        Box::pin(std::future::pending())
    }
}

impl ModelProvider for BlockingProvider {
    fn stream(
        &self,
        _request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        let _ = self.started.send(());
        Box::pin(async { Ok(Box::new(Pending) as Box<dyn EventStream>) })
    }
}

/// Waves of concurrent tool rounds on two worker threads, where each run may take the task
/// of a run that ended on its thread: every run completes with its own twelve events.
#[test]
fn concurrent_tool_rounds_on_two_workers_each_complete() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("runtime");
    // A lost hand-off would hang a run; the bound turns that into a failure.
    let waves = async {
        let engine = engine(tool_round_provider(), vec![Arc::new(ReadTool::new())]);
        let agent = AgentDefinition::new("benchmark", "scripted", 2).unwrap();
        for _wave in 0..16 {
            let runs: Vec<_> = (0..8)
                .map(|_| {
                    let (engine, agent) = (engine.clone(), agent.clone());
                    tokio::spawn(async move {
                        let run = engine.start(&agent, input()).await.expect("start");
                        let output = run.wait().await.expect("completed");
                        (output.turns, kinds(&run).len())
                    })
                })
                .collect();
            for run in runs {
                assert_eq!(run.await.expect("joined"), (2, 12));
            }
        }
        engine.close().await;
        assert_eq!(engine.live_runs(), 0);
    };
    runtime
        .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(60), waves).await })
        .expect("every wave finished within 60 s");
}

#[tokio::test]
async fn cancellation_emits_six_events_ending_in_cancelled() {
    let (started, mut started_rx) = mpsc::unbounded_channel();
    let engine = engine(Arc::new(BlockingProvider { started }), vec![]);
    let agent = AgentDefinition::new("benchmark", "scripted", 1).unwrap();
    let run = engine.start(&agent, input()).await.unwrap();
    started_rx.recv().await.expect("model started");
    run.cancel();
    let error = run.wait().await.expect_err("cancelled");
    assert!(error.is_cancelled(), "{error}");
    let events = events(&run);
    use EventKind::*;
    let kinds: Vec<EventKind> = events.iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            RunStarted,
            TurnStarted,
            ModelStarted,
            ModelFailed,
            TurnFailed,
            RunCancelled
        ]
    );
    assert!(matches!(&events[3], Event::ModelFailed { problem, .. } if problem == "cancelled"));
    assert!(matches!(
        &events[4],
        Event::TurnFailed {
            code: FailureCode::Cancelled,
            ..
        }
    ));
    assert_eq!(run.status(), RunStatus::Cancelled);
}

/// `start` files the run's token with its reservation: a shutdown reaches a started run,
/// whether its task is waiting on the model or has not run yet, and a later start is refused.
#[tokio::test]
async fn shutdown_cancels_started_runs_and_refuses_later_starts() {
    let bounded = std::time::Duration::from_secs(10);
    let agent = AgentDefinition::new("a", "m", 1).unwrap();
    for wait_for_the_model in [true, false] {
        let (started, mut started_rx) = mpsc::unbounded_channel();
        let engine = engine(Arc::new(BlockingProvider { started }), vec![]);
        let run = engine.start(&agent, input()).await.unwrap();
        if wait_for_the_model {
            started_rx.recv().await.expect("model started");
        }
        tokio::time::timeout(bounded, engine.shutdown())
            .await
            .expect("shutdown drains the started run");
        let error = run.wait().await.expect_err("cancelled");
        assert!(error.is_cancelled(), "{wait_for_the_model}: {error}");
        assert_eq!(run.status(), RunStatus::Cancelled);
        assert_eq!(engine.live_runs(), 0);
        assert_eq!(
            engine.start(&agent, input()).await.unwrap_err(),
            StartError::Closed
        );
    }
}

#[tokio::test]
async fn final_answer_is_kept_in_history() {
    let provider = Arc::new(ScriptedProvider::new(|_: &ModelRequest| {
        vec![
            StreamEvent::TextDelta("Hel".into()),
            StreamEvent::TextDelta("lo.".into()),
            StreamEvent::Completed {
                usage: Usage::default(),
            },
        ]
    }));
    let engine = engine(provider, vec![]);
    let agent = AgentDefinition::new("a", "m", 3).unwrap();
    let run = engine.start(&agent, input()).await.unwrap();
    assert_eq!(run.wait().await.unwrap().answer, "Hello.");
    let snapshot = run.snapshot().unwrap();
    let last = snapshot.history().last().unwrap();
    assert_eq!(
        (last.role(), last.text().as_ref()),
        (Role::Assistant, "Hello.")
    );
    let deltas: Vec<String> = events(&run)
        .into_iter()
        .filter_map(|e| match e {
            Event::ModelDelta { text } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["Hel", "lo."]);
}

#[tokio::test]
async fn max_turns_exceeded_fails_the_run() {
    let engine = engine(tool_round_provider(), vec![Arc::new(ReadTool::new())]);
    let agent = AgentDefinition::new("a", "m", 1).unwrap();
    let run = engine.start(&agent, input()).await.unwrap();
    let error = run.wait().await.unwrap_err();
    assert_eq!(error.code(), FailureCode::MaxTurnsExceeded);
    let events = events(&run);
    assert_eq!(
        events.last(),
        Some(&Event::RunFailed {
            code: FailureCode::MaxTurnsExceeded
        })
    );
}

#[tokio::test]
async fn undeclared_tool_and_duplicate_ids_fail_before_running() {
    let provider = Arc::new(ScriptedProvider::new(|_: &ModelRequest| {
        vec![
            StreamEvent::ToolCall(Call::new("c1", "nope", json!({})).unwrap()),
            StreamEvent::Completed {
                usage: Usage::default(),
            },
        ]
    }));
    let engine1 = engine(provider, vec![Arc::new(ReadTool::new())]);
    let agent = AgentDefinition::new("a", "m", 3).unwrap();
    let run = engine1.start(&agent, input()).await.unwrap();
    assert_eq!(
        run.wait().await.unwrap_err().code(),
        FailureCode::UndeclaredTool
    );
    let kinds = kinds(&run);
    assert!(kinds.contains(&EventKind::ToolStarted) && kinds.contains(&EventKind::ToolFailed));

    let provider = Arc::new(ScriptedProvider::new(|_: &ModelRequest| {
        vec![
            StreamEvent::ToolCall(Call::new("c1", "read", json!({})).unwrap()),
            StreamEvent::ToolCall(Call::new("c1", "read", json!({})).unwrap()),
            StreamEvent::Completed {
                usage: Usage::default(),
            },
        ]
    }));
    let engine2 = engine(provider, vec![Arc::new(ReadTool::new())]);
    let run = engine2.start(&agent, input()).await.unwrap();
    assert_eq!(
        run.wait().await.unwrap_err().code(),
        FailureCode::DuplicateCallId
    );
    assert!(!kinds_of(&run).contains(&EventKind::ToolStarted));
}

fn kinds_of(run: &agent_core::agent::Run) -> Vec<EventKind> {
    kinds(run)
}

#[tokio::test]
async fn prepare_then_abort_leaves_nothing_behind() {
    let provider = Arc::new(ScriptedProvider::new(|_: &ModelRequest| Vec::new()));
    let engine = engine(provider, vec![]);
    let agent = AgentDefinition::new("a", "m", 1).unwrap();
    let prepared = engine.prepare(&agent, input()).await.unwrap();
    assert_eq!(prepared.run_id(), "run-1");
    assert_eq!(engine.live_runs(), 1);
    prepared.abort().await.unwrap();
    assert_eq!(engine.live_runs(), 0);

    let root = tokio_util::sync::CancellationToken::new();
    root.cancel();
    let prepared = engine.prepare(&agent, input()).await.unwrap();
    assert_eq!(prepared.commit(&root).unwrap_err(), StartError::Cancelled);
    assert_eq!(engine.live_runs(), 0);

    assert_eq!(
        engine
            .prepare(&agent, Message::assistant("x").unwrap())
            .await
            .unwrap_err(),
        StartError::Input
    );
    engine.close().await;
    assert_eq!(
        engine.prepare(&agent, input()).await.unwrap_err(),
        StartError::Closed
    );
}

/// A continued conversation: the model sees the earlier run's whole history (its tool round
/// too) and the new question; the run's own events start from 1.
#[tokio::test]
async fn a_run_continues_an_earlier_conversation() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let provider = Arc::new(ScriptedProvider::new(move |request: &ModelRequest| {
        let roles: Vec<Role> = request.messages().iter().map(Message::role).collect();
        record.lock().unwrap().push(roles);
        let last = request.messages().last().expect("history");
        if last.role() == Role::User && last.text() == "hello" {
            vec![
                StreamEvent::ToolCall(Call::new("call-1", "read", json!({})).unwrap()),
                StreamEvent::Completed {
                    usage: Usage::new(1, 1),
                },
            ]
        } else {
            vec![
                StreamEvent::TextDelta(format!("answer to {}", last.text())),
                StreamEvent::Completed {
                    usage: Usage::new(1, 1),
                },
            ]
        }
    }));
    let engine = engine(provider, vec![Arc::new(ReadTool::new())]);
    let agent = AgentDefinition::new("chat", "scripted", 3).unwrap();
    let first = engine.start(&agent, input()).await.unwrap();
    first.wait().await.unwrap();
    let earlier = first.snapshot().unwrap().history().to_vec();
    assert_eq!(earlier.len(), 4, "question, call, result, answer");

    let next = Message::user("and then?").unwrap();
    let second = engine
        .start_continuing(&agent, earlier.clone(), next)
        .await
        .unwrap();
    let output = second.wait().await.unwrap();
    assert_eq!(output.answer, "answer to and then?");
    assert_eq!(output.turns, 1, "turns count for this run only");
    assert_ne!(second.id(), first.id());
    use Role::{Assistant, Tool, User};
    assert_eq!(
        seen.lock().unwrap().last().unwrap(),
        &[User, Assistant, Tool, Assistant, User]
    );
    assert_eq!(
        kinds(&second),
        [
            EventKind::RunStarted,
            EventKind::TurnStarted,
            EventKind::ModelStarted,
            EventKind::ModelDelta,
            EventKind::ModelCompleted,
            EventKind::TurnCompleted,
            EventKind::RunCompleted,
        ]
    );
    // Its snapshot holds the whole conversation, so it continues again.
    let history = second.snapshot().unwrap().history().to_vec();
    assert_eq!(&history[..4], &earlier[..]);
    assert_eq!(history.len(), 6);
    engine.shutdown().await;
}

/// A conversation that is not settled is refused before anything is leased or started.
#[tokio::test]
async fn an_unsettled_conversation_is_refused_before_the_run_starts() {
    let engine = engine(text_provider(), vec![]);
    let agent = AgentDefinition::new("chat", "scripted", 3).unwrap();
    let call = Call::new("call-1", "read", json!({})).unwrap();
    let open_round = vec![
        input(),
        Message::new(Role::Assistant, vec![Part::ToolCall(call)]).unwrap(),
    ];
    let next = || Message::user("next").unwrap();
    let cases: Vec<(&str, Vec<Message>, Message, StartError)> = vec![
        (
            "an unanswered call",
            open_round,
            next(),
            StartError::Conversation("a tool call was left without its result"),
        ),
        (
            "an assistant first",
            vec![Message::assistant("hi").unwrap()],
            next(),
            StartError::Conversation("a conversation starts with the user's message"),
        ),
        (
            "too many messages",
            vec![input(); agent_core::model::MAX_MESSAGES],
            next(),
            StartError::Conversation("a conversation holds 1 to 4096 messages"),
        ),
        (
            "an input from the assistant",
            vec![input()],
            Message::assistant("no").unwrap(),
            StartError::Input,
        ),
    ];
    for (name, earlier, next, expected) in cases {
        let refused = engine.start_continuing(&agent, earlier, next).await;
        assert_eq!(refused.err(), Some(expected), "{name}");
    }
    // Nothing was reserved: the next run takes the engine's first id.
    let run = engine.start(&agent, input()).await.unwrap();
    assert_eq!(run.id(), "run-1");
    // At the bound exactly: 4095 earlier messages and the input are accepted.
    let mut earlier = vec![input(); agent_core::model::MAX_MESSAGES - 1];
    earlier[1] = Message::assistant("ok").unwrap();
    assert!(
        engine
            .start_continuing(&agent, earlier, next())
            .await
            .is_ok()
    );
    engine.shutdown().await;
}
