//! Your first agent: a model provider of your own (scripted, no network), a stage that
//! tidies the question, two typed tools, one `compose!` with the starter, and a run whose
//! events are printed as they happen.
//!
//! ```sh
//! cargo run -p examples --example first_agent
//! ```

use std::sync::Arc;

use agent_core::agent::AgentDefinition;
use agent_core::event::{Envelope, Event, Observer, ObserverError};
use agent_core::message::{Message, Part};
use agent_core::model::{
    EventStream, ModelProvider, ModelRequest, ProviderError, ScriptedStream, StreamEvent, Usage,
};
use agent_core::stage::{Stage, StageError};
use agent_core::tool::typed::Problem;
use agent_core::tool::{BoxFuture, Call};
use agent_core::{bean, compose, model_provider, stage, tool};

/// A model that needs no network: the first turn asks for both tools, the next one answers
/// with what they returned.
pub struct Scripted;

impl ModelProvider for Scripted {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        let results: Vec<String> = request
            .messages()
            .iter()
            .flat_map(Message::parts)
            .filter_map(|part| match part {
                Part::ToolResult(result) => {
                    Some(format!("{} said {}", result.name, result.content))
                }
                _ => None,
            })
            .collect();
        let events = if results.is_empty() {
            let call = |id: &str, name: &str, arguments| Call::new(id, name, arguments);
            match (
                call("c1", "add", serde_json::json!({"a": 2, "b": 3})),
                call("c2", "shout", serde_json::json!({"text": "hello"})),
            ) {
                (Ok(add), Ok(shout)) => {
                    vec![StreamEvent::ToolCall(add), StreamEvent::ToolCall(shout)]
                }
                _ => vec![StreamEvent::TextDelta("could not build the calls".into())],
            }
        } else {
            vec![StreamEvent::TextDelta(results.join("; "))]
        };
        let stream = ScriptedStream::new(events.into_iter().chain([StreamEvent::Completed {
            usage: Usage::new(10, 5),
        }]));
        Box::pin(async move { Ok(Box::new(stream) as Box<dyn EventStream>) })
    }
}

/// The model provider bean: its name is the model an agent definition asks for.
#[model_provider(name = "scripted")]
pub fn scripted() -> Arc<dyn ModelProvider> {
    Arc::new(Scripted)
}

/// Tidies the user's question before the run: trims it and ends it with a question mark.
pub struct Tidy;

impl Stage<String, String> for Tidy {
    fn process(&self, input: String) -> BoxFuture<'_, Result<String, StageError>> {
        let question = input.trim().trim_end_matches('?').to_owned();
        Box::pin(async move {
            if question.is_empty() {
                return Err(StageError::new("the question is empty"));
            }
            Ok(format!("{question}?"))
        })
    }
}

/// The stage bean.
#[stage(name = "tidy")]
pub fn tidy() -> Arc<dyn Stage<String, String>> {
    Arc::new(Tidy)
}

/// What `add` takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    /// The first number.
    pub a: i64,
    /// The second number.
    pub b: i64,
}

/// Adds two numbers.
#[tool(effect = read_only, replay = safe)]
pub fn add(#[args] args: AddArgs) -> Result<String, Problem> {
    args.a
        .checked_add(args.b)
        .map(|sum| sum.to_string())
        .ok_or_else(|| Problem::new("the sum overflows"))
}

/// What `shout` takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct ShoutArgs {
    /// The text to shout.
    pub text: String,
}

/// Upper-cases a text.
#[tool(effect = read_only, replay = safe)]
pub fn shout(#[args] args: ShoutArgs) -> Result<String, Problem> {
    Ok(args.text.to_uppercase())
}

/// Prints every event of every run as the engine commits it.
pub struct Printer;

impl Observer for Printer {
    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), ObserverError>> {
        match envelope.event() {
            Event::ModelDelta { text } => {
                println!("{:>3} {} {text:?}", envelope.sequence(), envelope.kind())
            }
            _ => println!("{:>3} {}", envelope.sequence(), envelope.kind()),
        }
        Box::pin(async { Ok(()) })
    }
}

/// The observer bean: the starter's engine takes every `Arc<dyn Observer>`.
#[bean(name = "printer")]
pub fn printer() -> Arc<dyn Observer> {
    Arc::new(Printer)
}

compose! {
    /// The application: the provider, the stage, the tools, the printer and the starter
    /// (tool plan, interaction hub, engine).
    pub struct FirstAgent {
        beans: [scripted, tidy, add, shout, printer, agent_core::starter::beans],
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let app = FirstAgent::build().await?;
    let question = app
        .components()
        .tidy
        .process("  what do the tools say  ".into())
        .await?;

    let agent = AgentDefinition::new("first-agent", "scripted", 4)?;
    let run = app
        .components()
        .engine
        .start(&agent, Message::user(question)?)
        .await?;
    let output = tokio::time::timeout(std::time::Duration::from_secs(10), run.wait()).await??;
    println!("answer after {} turns: {}", output.turns, output.answer);
    assert_eq!(output.answer, "add said 5; shout said HELLO");

    app.stop().await?;
    Ok(())
}

#[test]
fn the_example_runs() {
    main().expect("the first agent runs");
}
