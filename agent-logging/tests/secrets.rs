//! A real agent run full of planted secrets, logged at TRACE in JSON and in text: every
//! line is searched for every secret, and the records a reader needs must be there.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::agent::{AgentDefinition, Engine};
use agent_core::message::{Message, Part};
use agent_core::model::{ModelProblem, ModelRequest, ScriptedProvider, StreamEvent, Usage};
use agent_core::stage::{
    Dispatcher, StaticToolPlanSource, ToolDispatchDecorator, compose_pipeline,
};
use agent_core::tool::{
    BoxFuture, Call, Definition, Effect, ExecutionError, ReplaySafety, Tool, ToolContext,
    ToolResult,
};
use agent_logging::{Config, DispatchSpans, EventLogger};
use serde_json::{Value, json};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;

const PROMPT: &str = "prompt-secret-7f3a";
const ARGUMENT: &str = "argument-secret-91bc";
const PATH: &str = "/home/secret-user-55/private.txt";
const RESULT: &str = "result-secret-4d2e";
const PROBLEM: &str = "problem-secret-aa01";
const ERROR: &str = "error-secret-c0de";
const API_KEY: &str = "sk-live-SECRETKEY0123456789abcdef";
const ANSWER: &str = "answer-secret-beef";
const PROGRESS: &str = "progress-secret-1234";
const PROVIDER_CODE: &str = "provider-secret-code";
const PROVIDER_MESSAGE: &str = "provider-secret-message";
const AGENT: &str = "agent-secret-name";
const CALL_ID: &str = "call-secret-id-0001";

const SECRETS: [&str; 13] = [
    PROMPT,
    ARGUMENT,
    PATH,
    RESULT,
    PROBLEM,
    ERROR,
    API_KEY,
    ANSWER,
    PROGRESS,
    PROVIDER_CODE,
    PROVIDER_MESSAGE,
    AGENT,
    CALL_ID,
];

const PATIENCE: Duration = Duration::from_secs(60);

/// A tool that reports progress and answers with `outcome`, both full of secrets. (A
/// read-only tool may not claim an uncertain failure, so `explode` is mutating.)
struct Leaky {
    definition: Definition,
    outcome: fn(&Call) -> Result<ToolResult, ExecutionError>,
}

impl Leaky {
    fn tool(
        name: &str,
        effect: Effect,
        outcome: fn(&Call) -> Result<ToolResult, ExecutionError>,
    ) -> Arc<dyn Tool> {
        let replay = match effect {
            Effect::ReadOnly => ReplaySafety::Safe,
            Effect::Mutating => ReplaySafety::Unsafe,
        };
        Arc::new(Leaky {
            definition: Definition::builder(name, format!("Touches {PATH} with {API_KEY}."))
                .effect(effect)
                .replay_safety(replay)
                .build()
                .unwrap(),
            outcome,
        })
    }
}

impl Tool for Leaky {
    fn definition(&self) -> &Definition {
        &self.definition
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move {
            let _ = ctx
                .report(call.id(), format!("{PROGRESS} reading {PATH}"))
                .await;
            (self.outcome)(&call)
        })
    }
}

fn leaked_arguments() -> Value {
    json!({"path": PATH, "token": API_KEY, "note": ARGUMENT})
}

/// Turn 1 calls `tools`; turn 2 answers with the secret answer and echoes the results.
/// A prompt naming `fail-model` makes the model fail with secret problem text instead.
fn provider(tools: &'static [&'static str]) -> Arc<dyn agent_core::model::ModelProvider> {
    Arc::new(ScriptedProvider::new(move |request: &ModelRequest| {
        let parts: Vec<&Part> = request.messages().iter().flat_map(Message::parts).collect();
        let asked_to_fail = parts
            .iter()
            .any(|p| matches!(p, Part::Text(text) if text.contains("fail-model")));
        if asked_to_fail {
            return vec![
                StreamEvent::TextDelta(format!("{ANSWER} ")),
                StreamEvent::Failed(
                    ModelProblem::new(PROVIDER_CODE, format!("{PROVIDER_MESSAGE} {API_KEY}"))
                        .retryable(false),
                ),
            ];
        }
        let results: Vec<String> = parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolResult(r) => Some(r.content.clone()),
                _ => None,
            })
            .collect();
        if results.is_empty() {
            let mut events: Vec<StreamEvent> = tools
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    StreamEvent::ToolCall(
                        Call::new(format!("{CALL_ID}-{i}"), *name, leaked_arguments()).unwrap(),
                    )
                })
                .collect();
            events.push(StreamEvent::Completed {
                usage: Usage::new(3, 4),
            });
            events
        } else {
            vec![
                StreamEvent::TextDelta(format!("{ANSWER}: {}", results.concat())),
                StreamEvent::Completed {
                    usage: Usage::new(5, 6),
                },
            ]
        }
    }))
}

/// A shared buffer the `fmt` layers write lines into.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

#[test]
fn no_planted_secret_reaches_any_log_line() {
    let (json, text) = (Lines::default(), Lines::default());
    let (json_out, text_out) = (json.clone(), text.clone());
    let subscriber = tracing_subscriber::registry()
        .with(LevelFilter::TRACE)
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .with_current_span(true)
                .with_span_list(true)
                .with_span_events(FmtSpan::FULL)
                .with_writer(move || json_out.clone()),
        )
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_span_events(FmtSpan::FULL)
                .with_writer(move || text_out.clone()),
        );
    let _scope = tracing::subscriber::set_default(subscriber);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let logger = Arc::new(EventLogger::start(Config::default().with_progress(true)).unwrap());
    runtime.block_on(async {
        let mut tools: BTreeMap<String, Arc<dyn Tool>> = BTreeMap::new();
        tools.insert(
            "leak".into(),
            Leaky::tool("leak", Effect::ReadOnly, |call| {
                Ok(ToolResult::success(
                    call.id(),
                    format!("{RESULT} {PATH} {API_KEY}"),
                ))
            }),
        );
        tools.insert(
            "refuse".into(),
            Leaky::tool("refuse", Effect::ReadOnly, |call| {
                Ok(ToolResult::problem(call.id(), format!("{PROBLEM} {PATH}")))
            }),
        );
        tools.insert(
            "explode".into(),
            Leaky::tool("explode", Effect::Mutating, |call| {
                Err(ExecutionError::uncertain(
                    call.id(),
                    format!("{ERROR} at {PATH} with {API_KEY}"),
                ))
            }),
        );
        let decorators: Vec<Arc<dyn ToolDispatchDecorator>> =
            vec![Arc::new(DispatchSpans::new(logger.pseudonyms().clone()))];
        let pipeline = compose_pipeline(
            Arc::new(Dispatcher::new(tools).unwrap()),
            Vec::new(),
            decorators,
        )
        .unwrap();
        let plans = Arc::new(StaticToolPlanSource::new(pipeline).unwrap());
        let agent = AgentDefinition::new(AGENT, "scripted", 4).unwrap();
        let mut outcomes = Vec::new();
        for (script, prompt) in [
            (
                &["leak", "refuse"][..],
                format!("{PROMPT} read {PATH} {API_KEY}"),
            ),
            (&["explode"][..], format!("{PROMPT} break")),
            (&[][..], format!("{PROMPT} fail-model")),
        ] {
            let engine = Engine::builder(provider(script), plans.clone())
                .observer(logger.clone())
                .build()
                .unwrap();
            let run = engine
                .start(&agent, Message::user(prompt).unwrap())
                .await
                .unwrap();
            let span = logger.run_span(run.id().as_str());
            let outcome = tokio::time::timeout(PATIENCE, run.wait())
                .await
                .expect("the run ends");
            drop(span);
            outcomes.push(outcome.is_ok());
            engine.shutdown().await;
        }
        assert_eq!(outcomes, [true, false, false]);
        logger.close(PATIENCE).await.expect("drained");
    });
    let snapshot = logger.snapshot();
    assert_eq!(
        (
            snapshot.dropped,
            snapshot.decode_failures,
            snapshot.log_failures
        ),
        (0, 0, 0)
    );

    let (json, text) = (json.text(), text.text());
    for (format, output) in [("json", &json), ("text", &text)] {
        assert!(output.lines().count() > 20, "{format}:\n{output}");
        for line in output.lines() {
            for secret in SECRETS {
                assert!(
                    !line.contains(secret),
                    "{format} line leaks {secret:?}: {line}"
                );
            }
            // Raw run ids (`run-<n>`) never appear either: only pseudonyms.
            assert!(!line.contains("\"run-"), "{format}: {line}");
        }
        for message in [
            "run started",
            "turn started",
            "model completed",
            "tool started",
            "tool progress",
            "tool completed",
            "tool failed",
            "model failed",
            "run completed",
            "run failed",
        ] {
            assert!(
                output.contains(message),
                "{format} lacks {message:?}:\n{output}"
            );
        }
        for span in ["agent.run", "agent.turn", "agent.dispatch"] {
            assert!(
                output.contains(span),
                "{format} lacks span {span}:\n{output}"
            );
        }
    }
    // Every JSON line parses, and the tool failure carries its typed facts only.
    let failure = json
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .find(|v| v["fields"]["message"] == "tool failed")
        .expect("a tool.failed record");
    assert_eq!(failure["level"], "ERROR", "{failure}");
    assert_eq!(
        failure["fields"]["execution_state"], "uncertain",
        "{failure}"
    );
    assert_eq!(failure["fields"]["retry_disposition"], "never");
    assert_eq!(
        failure["fields"]["tool_call_correlation"]
            .as_str()
            .map(str::len),
        Some(32)
    );
}
