//! A guard that asks before every mutating tool, answered through the starter's interaction
//! hub, and a run suspended at a turn boundary, exported as a snapshot, and resumed by a
//! second build of the application (as a later process would).
//!
//! ```sh
//! cargo run -p examples --example guard_and_snapshot
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::agent::{AgentDefinition, EngineIdentity, IdentityError, Snapshot};
use agent_core::compose::Override;
use agent_core::interaction::{InteractionRequest, InteractionResponse, PendingDelta, PendingHub};
use agent_core::message::{Message, Part, Role};
use agent_core::model::{ModelProvider, ModelRequest, ScriptedProvider, StreamEvent, Usage};
use agent_core::stage::{DispatchError, GuardRequest, Next, ToolDispatchGuard};
use agent_core::starter::EngineSettings;
use agent_core::tool::typed::Problem;
use agent_core::tool::{BoxFuture, Call, Effect, ToolResult};
use agent_core::{bean, compose, model_provider, tool};
use serde_json::{Value, json};

/// Every wait of this example.
const PATIENCE: Duration = Duration::from_secs(10);

/// Asks the user (through the run's requester) before any mutating call; read-only calls
/// pass straight through.
pub struct AskBeforeChanges;

impl ToolDispatchGuard for AskBeforeChanges {
    fn guard<'a>(
        &'a self,
        request: GuardRequest<'a>,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        if request.definition.effect() == Effect::ReadOnly {
            return next.run();
        }
        Box::pin(async move {
            let call_id = request.call.id();
            let question = InteractionRequest::new(
                format!("approve-{call_id}"),
                "approval",
                format!("Allow `{}`?", request.call.name()),
                json!({"type": "boolean"}),
            );
            let answer = match question {
                Ok(question) => {
                    request
                        .scope
                        .requester()
                        .request(question, request.cancel)
                        .await
                }
                Err(e) => return Ok(ToolResult::problem(call_id, format!("refused: {e}"))),
            };
            match answer {
                Ok(answer) if answer.value() == &Value::Bool(true) => next.run().await,
                _ => Ok(ToolResult::problem(call_id, "refused: not approved")),
            }
        })
    }
}

/// The guard bean: the starter's tool plan puts every guard bean around the tools.
#[bean(name = "ask-before-changes")]
pub fn ask_before_changes() -> Arc<dyn ToolDispatchGuard> {
    Arc::new(AskBeforeChanges)
}

/// The notes the tools share.
#[derive(Default)]
pub struct Notes(pub Mutex<Vec<String>>);

/// The notes bean.
#[bean]
pub fn notes() -> Arc<Notes> {
    Arc::new(Notes::default())
}

/// What `add_note` takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct NoteArgs {
    /// The note.
    pub text: String,
}

/// Adds a note.
#[tool(effect = mutating, replay = unsafe)]
pub fn add_note(notes: Arc<Notes>, #[args] args: NoteArgs) -> Result<String, Problem> {
    let mut notes = notes
        .0
        .lock()
        .map_err(|_| Problem::new("the notes are unavailable"))?;
    notes.push(args.text);
    Ok(format!("{} notes", notes.len()))
}

/// No arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}

/// Counts the notes.
#[tool(effect = read_only, replay = safe)]
pub fn count_notes(notes: Arc<Notes>, #[args] _args: NoArgs) -> Result<String, Problem> {
    let notes = notes
        .0
        .lock()
        .map_err(|_| Problem::new("the notes are unavailable"))?;
    Ok(notes.len().to_string())
}

/// Turn 1 adds a note, turn 2 counts them, turn 3 answers with every tool result. It
/// decides from the history alone, so a resumed run continues exactly where it stopped.
#[model_provider(name = "scripted")]
pub fn scripted() -> Arc<dyn ModelProvider> {
    Arc::new(ScriptedProvider::new(|request: &ModelRequest| {
        let turn = request
            .messages()
            .iter()
            .filter(|m| m.role() == Role::Assistant)
            .count();
        let done = StreamEvent::Completed {
            usage: Usage::new(1, 1),
        };
        let call = |name: &str, arguments| Call::new(format!("c{turn}"), name, arguments);
        let first = match turn {
            0 => call("add_note", json!({"text": "buy milk"})).map(StreamEvent::ToolCall),
            1 => call("count_notes", json!({})).map(StreamEvent::ToolCall),
            _ => {
                let results: Vec<String> = request
                    .messages()
                    .iter()
                    .flat_map(Message::parts)
                    .filter_map(|part| match part {
                        Part::ToolResult(r) => Some(format!("{}: {}", r.name, r.content)),
                        _ => None,
                    })
                    .collect();
                Ok(StreamEvent::TextDelta(results.join("; ")))
            }
        };
        vec![
            first.unwrap_or_else(|e| StreamEvent::TextDelta(e.to_string())),
            done,
        ]
    }))
}

/// Snapshots move between engines that state the same compatibility identity and the same
/// compiled graph, so this replaces the starter's settings.
#[bean(name = "resumable")]
pub fn resumable() -> Result<Arc<EngineSettings>, IdentityError> {
    let identity = EngineIdentity::new(Notebook::compiled_identities())?
        .with_compatibility("guard-and-snapshot/1")?;
    Ok(Arc::new(EngineSettings::new().identity(identity)))
}

compose! {
    /// The notebook agent: a guard, two tools, a model, resumable settings, the starter.
    pub struct Notebook {
        beans: [ask_before_changes, notes, add_note, count_notes, scripted, resumable, agent_core::starter::beans],
    }
}

/// Answers every question the hub receives with `approve`, printing it; ends when the hub
/// closes (the application stopped).
async fn answer_everything(hub: Arc<PendingHub>, approve: bool) {
    let (_, mut questions) = hub.subscribe();
    while let Some(delta) = questions.next().await {
        if let PendingDelta::Opened { pending, .. } = delta {
            println!("asked: {} -> {approve}", pending.request().prompt());
            let answer = InteractionResponse::new(pending.request().id(), Value::Bool(approve));
            if let Ok(answer) = answer {
                let _ = hub.respond(pending.scope(), answer);
            }
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let agent = AgentDefinition::new("notebook", "scripted", 5)?;

    // The notes outlive both builds, as a file or a database would: the typed override
    // hands the same store to each.
    let notes = Arc::new(Notes::default());
    let shared = || NotebookOverrides {
        notes: Override::value(notes.clone()),
        ..Default::default()
    };

    // The first process: run until the first turn boundary, then suspend and export.
    let app = Notebook::build_with(shared()).await?;
    tokio::spawn(answer_everything(
        app.components().pending_hub.clone(),
        true,
    ));
    let run = app
        .components()
        .engine
        .start(&agent, Message::user("take a note")?)
        .await?;
    tokio::time::timeout(PATIENCE, run.suspend()).await??;
    let bytes = run.snapshot()?.to_json();
    println!(
        "suspended {} after turn 1: {} bytes of snapshot",
        run.id(),
        bytes.len()
    );
    app.stop().await?;

    // The second process: a new build of the same graph resumes the snapshot.
    let app = Notebook::build_with(shared()).await?;
    let resumed = app
        .components()
        .engine
        .resume(Snapshot::from_json(&bytes)?)
        .await?;
    let output = tokio::time::timeout(PATIENCE, resumed.wait()).await??;
    println!("resumed {} and answered: {}", resumed.id(), output.answer);
    assert_eq!(output.answer, "add_note: 1 notes; count_notes: 1");
    app.stop().await?;
    Ok(())
}

#[test]
fn the_example_runs() {
    main().expect("the example runs");
}

/// Declining the question refuses the change: the model sees a problem, not a result.
#[tokio::test]
async fn a_declined_change_does_not_run() {
    let app = Notebook::build().await.expect("the app builds");
    tokio::spawn(answer_everything(
        app.components().pending_hub.clone(),
        false,
    ));
    let agent = AgentDefinition::new("notebook", "scripted", 5).unwrap();
    let run = app
        .components()
        .engine
        .start(&agent, Message::user("take a note").unwrap())
        .await
        .unwrap();
    let output = tokio::time::timeout(PATIENCE, run.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        output.answer,
        "add_note: refused: not approved; count_notes: 0"
    );
    assert!(app.components().notes.0.lock().unwrap().is_empty());
    app.stop().await.expect("the app stops");
}
