#![allow(
    unreachable_pub,
    reason = "a test support module: its items are used by the test files that include it"
)]
//! The fixture worker's composition: a scripted model that follows a plan in the run's
//! input, counting tools, and an approval guard. Every real model request and every tool
//! execution appends a line to a file in `FIXTURE_DIR`, so tests count them across
//! processes. The cluster bench serves the same model and tools from the local daemon
//! ([`model`], [`tools`]), logging to a directory of its own.
//!
//! The plan is the input's words after the first (a tag naming the run in the logs); model
//! turn `k` plays word `k`:
//! `text` (a short answer), `slow` (a delta, then `FIXTURE_SLOW_MS` before the rest),
//! `wait50` (50 ms, then an answer), `unsafe` / `safe` (a call of the counting tools,
//! which sleep `FIXTURE_TOOL_MS`), `ask` (a call the guard asks about). Past the plan the
//! model answers `done`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_core::BoxFuture;
use agent_core::agent::{AgentDefinition, Engine};
use agent_core::interaction::InteractionRequest;
use agent_core::message::Role;
use agent_core::model::{
    EventStream, ModelProblem, ModelProvider, ModelRequest, ProviderError, StreamError,
    StreamEvent, Usage,
};
use agent_core::stage::{
    DispatchError, Dispatcher, GuardRequest, Next, StaticToolPlanSource, ToolDispatchGuard,
    compose_pipeline,
};
use agent_core::tool::{
    Call, Definition, Effect, ExecutionError, ReplaySafety, Tool, ToolContext, ToolResult,
};
use agent_restate::execution::{DurableRuns, Hooks, RunFactory, ToolClaims};
use agent_restate::record::CatalogEntry;

pub const DEFINITION: &str = "fixture";

fn dir() -> PathBuf {
    PathBuf::from(std::env::var("FIXTURE_DIR").unwrap_or_else(|_| ".".into()))
}

fn millis(var: &str) -> Duration {
    Duration::from_millis(
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    )
}

fn append(dir: &Path, file: &str, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(file))
    {
        let _ = writeln!(f, "{line} {}", std::process::id());
    }
}

struct Script {
    dir: PathBuf,
}

struct Slow {
    items: std::collections::VecDeque<(Duration, StreamEvent)>,
}

impl EventStream for Slow {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<StreamEvent>, StreamError>> {
        Box::pin(async move {
            match self.items.pop_front() {
                Some((pause, item)) => {
                    // A zero sleep still waits for the timer's next tick (up to 1 ms).
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                    Ok(Some(item))
                }
                None => Ok(None),
            }
        })
    }
}

fn done(text: &str) -> Vec<(Duration, StreamEvent)> {
    vec![
        (Duration::ZERO, StreamEvent::TextDelta(text.to_owned())),
        (
            Duration::ZERO,
            StreamEvent::Completed {
                usage: Usage::new(1, 1),
            },
        ),
    ]
}

fn call(turn: usize, tool: &str) -> Vec<(Duration, StreamEvent)> {
    let call = Call::new(format!("call-{turn}"), tool, serde_json::json!({})).expect("call");
    vec![
        (Duration::ZERO, StreamEvent::ToolCall(call)),
        (
            Duration::ZERO,
            StreamEvent::Completed {
                usage: Usage::new(1, 1),
            },
        ),
    ]
}

impl ModelProvider for Script {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        let messages = request.messages();
        let input = messages
            .first()
            .map(|m| m.text().into_owned())
            .unwrap_or_default();
        let mut words = input.split_whitespace();
        let tag = words.next().unwrap_or("untagged").to_owned();
        let plan: Vec<String> = words.map(str::to_owned).collect();
        let turn = messages
            .iter()
            .filter(|m| m.role() == Role::Assistant)
            .count();
        let word = plan.get(turn).cloned().unwrap_or_default();
        append(&self.dir, "model.log", &format!("{tag} {turn} {word}"));
        if format!("{messages:?}").contains(agent_restate::execution::UNCERTAIN_CALL) {
            append(&self.dir, "uncertain.log", &format!("{tag} {turn}"));
        }
        let items = match word.as_str() {
            "text" => done("hello from the cluster"),
            "slow" => vec![
                (Duration::ZERO, StreamEvent::TextDelta("partial ".into())),
                (
                    millis("FIXTURE_SLOW_MS"),
                    StreamEvent::TextDelta("rest".into()),
                ),
                (
                    Duration::ZERO,
                    StreamEvent::Completed {
                        usage: Usage::new(1, 1),
                    },
                ),
            ],
            "wait50" => {
                let mut items = done("waited");
                items[0].0 = Duration::from_millis(50);
                items
            }
            "unsafe" => call(turn, "count_unsafe"),
            "safe" => call(turn, "count_safe"),
            "ask" => call(turn, "guarded"),
            "refuse" => {
                return Box::pin(std::future::ready(Err(ProviderError::new(
                    ModelProblem::new("fixture_refused", "the fixture refuses"),
                ))));
            }
            _ => done("done"),
        };
        Box::pin(std::future::ready(Ok(Box::new(Slow {
            items: items.into(),
        }) as Box<dyn EventStream>)))
    }
}

struct Counting {
    definition: Definition,
    dir: PathBuf,
}

impl Tool for Counting {
    fn definition(&self) -> &Definition {
        &self.definition
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        _ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move {
            let name = self.definition.name().to_owned();
            append(&self.dir, &format!("{name}.count"), call.id());
            tokio::time::sleep(millis("FIXTURE_TOOL_MS")).await;
            Ok(ToolResult::success(call.id(), format!("{name} ran")))
        })
    }
}

/// Asks before every call of `guarded`.
struct Approval;

impl ToolDispatchGuard for Approval {
    fn guard<'a>(
        &'a self,
        request: GuardRequest<'a>,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        if request.call.name() != "guarded" {
            return next.run();
        }
        Box::pin(async move {
            let call_id = request.call.id();
            let question = InteractionRequest::new(
                format!("approve-{call_id}"),
                "approval",
                format!("May I run {call_id}?"),
                serde_json::json!({ "enum": [true, false] }),
            )
            .expect("question");
            match request
                .scope
                .requester()
                .request(question, request.cancel)
                .await
            {
                Ok(answer) if answer.value() == &serde_json::json!(true) => next.run().await,
                Ok(_) => Ok(ToolResult::problem(call_id, "refused by the user")),
                Err(_) => Err(DispatchError::Cancelled {
                    call_id: call_id.to_owned(),
                }),
            }
        })
    }
}

fn tool(dir: &Path, name: &str, effect: Effect, replay: ReplaySafety) -> Arc<dyn Tool> {
    let definition = Definition::builder(name, format!("The fixture's {name}."))
        .effect(effect)
        .replay_safety(replay)
        .build()
        .expect("definition");
    Arc::new(Counting {
        definition,
        dir: dir.to_owned(),
    })
}

/// The scripted model, logging its requests to `dir`.
pub fn model(dir: &Path) -> Arc<dyn ModelProvider> {
    Arc::new(Script {
        dir: dir.to_owned(),
    })
}

/// The counting tools, logging their executions to `dir`.
pub fn tools(dir: &Path) -> BTreeMap<String, Arc<dyn Tool>> {
    [
        tool(dir, "count_unsafe", Effect::Mutating, ReplaySafety::Unsafe),
        tool(dir, "count_safe", Effect::ReadOnly, ReplaySafety::Safe),
        tool(dir, "guarded", Effect::Mutating, ReplaySafety::Unsafe),
    ]
    .into_iter()
    .map(|t| (t.definition().name().to_owned(), t))
    .collect()
}

/// The fixture's factory.
pub struct Fixture {
    runs: Arc<DurableRuns>,
}

impl Fixture {
    pub fn new() -> Self {
        Fixture {
            runs: Arc::new(DurableRuns::new()),
        }
    }
}

impl RunFactory for Fixture {
    fn catalog(&self) -> Vec<CatalogEntry> {
        vec![CatalogEntry {
            id: DEFINITION.into(),
            model: "script".into(),
            max_turns: 32,
        }]
    }

    fn definition(&self, id: &str) -> Option<AgentDefinition> {
        (id == DEFINITION)
            .then(|| AgentDefinition::new(DEFINITION, "script", 32).expect("definition"))
    }

    fn durable_runs(&self) -> Arc<DurableRuns> {
        self.runs.clone()
    }

    fn engine(&self, hooks: &Hooks) -> Result<Engine, String> {
        let base = Arc::new(Dispatcher::new(tools(&dir())).map_err(|e| e.to_string())?);
        let guards: Vec<Arc<dyn ToolDispatchGuard>> = vec![
            Arc::new(Approval),
            Arc::new(ToolClaims::new(self.runs.clone())),
        ];
        let pipeline = compose_pipeline(base, guards, Vec::new()).map_err(|e| e.to_string())?;
        let plans = StaticToolPlanSource::new(pipeline).map_err(|e| e.to_string())?;
        hooks.observe_published(Arc::new(Observed(dir())));
        hooks
            .apply(Engine::builder(hooks.provider(model(&dir())), plans))
            .build()
            .map_err(|e| e.to_string())
    }
}

/// Logs each event it sees (`RUN SEQUENCE`) in `observed.log`: what an observer of
/// published events sees, across every execution of every worker.
struct Observed(PathBuf);

impl agent_core::event::Observer for Observed {
    fn publish<'a>(
        &'a self,
        envelope: &'a agent_core::event::Envelope,
    ) -> BoxFuture<'a, Result<(), agent_core::event::ObserverError>> {
        let line = format!("{} {}", envelope.run_id(), envelope.sequence());
        append(&self.0, "observed.log", &line);
        Box::pin(std::future::ready(Ok(())))
    }
}
