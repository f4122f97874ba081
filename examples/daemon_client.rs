//! A program that talks to the engine daemon through `agent-client`: it starts a run,
//! streams its events, answers the question the run asks, and cancels a second run.
//!
//! To be self-contained the example serves its own agent (a guard that asks before a
//! mutating tool) from a daemon started in-process on a Unix socket in a private temp
//! directory; against `agent serve`, only the connector's metadata would differ.
//!
//! ```sh
//! cargo run -p examples --example daemon_client
//! ```

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_client as c;
use agent_client::{Connector as _, EventStream as _, Session as _};
use agent_client_grpc::local::LocalConnector;
use agent_core::agent::{AgentDefinition, Engine};
use agent_core::interaction::InteractionRequest;
use agent_core::message::{Message, Part};
use agent_core::model::{ModelProvider, ModelRequest, ScriptedProvider, StreamEvent, Usage};
use agent_core::stage::{DispatchError, GuardRequest, Next, ToolDispatchGuard};
use agent_core::tool::typed::Problem;
use agent_core::tool::{BoxFuture, Call, Effect, ToolResult};
use agent_core::{bean, compose, model_provider, tool};
use agent_daemon::definition::DefinitionSet;
use agent_server::fixture::{FixtureError, FixtureOptions, run_host};
use agent_server::{Daemon, DaemonConfig};
use tokio_util::sync::CancellationToken;

/// Every wait of this example.
const PATIENCE: Duration = Duration::from_secs(30);

/// Asks before every mutating call.
pub struct Ask;

impl ToolDispatchGuard for Ask {
    fn guard<'a>(
        &'a self,
        request: GuardRequest<'a>,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        if request.definition.effect() == Effect::ReadOnly {
            return next.run();
        }
        Box::pin(async move {
            let id = request.call.id();
            let prompt = format!("Allow `{}`?", request.call.name());
            let asked = match InteractionRequest::new(
                format!("approve-{id}"),
                "approval",
                prompt,
                serde_json::json!({"type": "boolean"}),
            ) {
                Ok(question) => {
                    request
                        .scope
                        .requester()
                        .request(question, request.cancel)
                        .await
                }
                Err(e) => return Ok(ToolResult::problem(id, e.to_string())),
            };
            match asked {
                Ok(answer) if answer.value() == &serde_json::Value::Bool(true) => next.run().await,
                Err(agent_core::interaction::InteractionError::Cancelled) => {
                    Err(DispatchError::Cancelled {
                        call_id: id.to_owned(),
                    })
                }
                _ => Ok(ToolResult::problem(id, "refused")),
            }
        })
    }
}

/// The guard bean.
#[bean]
pub fn ask() -> Arc<dyn ToolDispatchGuard> {
    Arc::new(Ask)
}

/// What `save` takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct SaveArgs {
    /// What to save.
    pub text: String,
}

/// Saves a text (pretends to).
#[tool(effect = mutating, replay = idempotent)]
pub fn save(#[args] args: SaveArgs) -> Result<String, Problem> {
    Ok(format!("saved {:?}", args.text))
}

/// Calls `save` once, then answers with its result.
#[model_provider(name = "scripted")]
pub fn scripted() -> Arc<dyn ModelProvider> {
    Arc::new(ScriptedProvider::new(|request: &ModelRequest| {
        let result =
            request
                .messages()
                .iter()
                .flat_map(Message::parts)
                .find_map(|part| match part {
                    Part::ToolResult(r) => Some(r.content.clone()),
                    _ => None,
                });
        let first = match result {
            Some(text) => StreamEvent::TextDelta(text),
            None => Call::new("c1", "save", serde_json::json!({"text": "hello"})).map_or_else(
                |e| StreamEvent::TextDelta(e.to_string()),
                StreamEvent::ToolCall,
            ),
        };
        vec![
            first,
            StreamEvent::Completed {
                usage: Usage::new(1, 1),
            },
        ]
    }))
}

compose! {
    /// The served agent's parts; the daemon's engine is built over them below.
    pub struct Served { beans: [ask, save, scripted, agent_core::starter::beans] }
}

/// A private directory under `/tmp` (socket paths are short), removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        let path = PathBuf::from(format!("/tmp/agent-example-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(TempDir(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts a daemon serving the definition `notebook` over `app`'s provider and tool plan.
async fn serve(
    app: &Served,
    dir: &Path,
    root: &CancellationToken,
) -> Result<Daemon, Box<dyn std::error::Error>> {
    let definitions =
        DefinitionSet::from_agents(vec![AgentDefinition::new("notebook", "scripted", 4)?], "v1")?;
    let (provider, plans) = (
        app.components().scripted.clone(),
        app.components().agent_tool_plan.clone(),
    );
    let authority = dir.join("authority");
    std::fs::DirBuilder::new().mode(0o700).create(&authority)?;
    // The daemon answers interactions itself, so its engine's broker is the host's router.
    let host = run_host(
        root,
        &authority,
        FixtureOptions::default(),
        definitions,
        |router| {
            Engine::builder(provider, plans)
                .broker(router)
                .build()
                .map_err(|_| FixtureError::Engine)
        },
    )?;
    let build = agent_protocol::pb::common::v1::BuildIdentity {
        component: "daemon-client-example".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        commit: "example".into(),
        go_version: "rustc".into(),
    };
    let scope = agent_endpoint::UserScope::at(&dir.join("scope"))?;
    Ok(Daemon::start(DaemonConfig::new(scope, host, build)).await?)
}

/// What this client supports and asks for.
fn initialize_request() -> Result<c::InitializeRequest, Box<dyn std::error::Error>> {
    let v = |minor| c::ProtocolVersion::new(1, minor, 0);
    let limits = c::Limits::new(
        agent_server::server::DEFAULT_MESSAGE_BYTES,
        agent_server::server::DEFAULT_COLLECTION_ITEMS,
        256,
        8 << 20,
        8,
        8,
    )?;
    Ok(c::InitializeRequest::with_attempt(
        c::ProtocolRange::new(v(0)?, v(3)?)?,
        c::Build::new(
            "daemon-client-example",
            env!("CARGO_PKG_VERSION"),
            "example",
            "rustc",
        )?,
        vec![],
        vec![],
        limits,
        None,
        agent_client_grpc::new_attempt_id()?,
    )?)
}

/// Waits for the first question of `run` on the interaction stream.
async fn question_of(
    stream: &mut impl c::InteractionStream,
    run: &c::RunRef,
) -> Result<c::PendingInteraction, Box<dyn std::error::Error>> {
    while let Some(frame) = stream.next().await? {
        let found = match frame {
            c::InteractionFrame::Snapshot(snapshot) => {
                snapshot.pending().iter().find(|p| p.run() == run).cloned()
            }
            c::InteractionFrame::Update(update)
                if update.kind() == c::InteractionUpdateKind::Opened
                    && update.interaction().run() == run =>
            {
                Some(update.interaction().clone())
            }
            _ => None,
        };
        if let Some(question) = found {
            return Ok(question);
        }
    }
    Err("the interaction stream ended".into())
}

/// Prints `run`'s events until its terminal one, and returns that one's kind.
async fn stream_events(
    session: &impl c::Session,
    run: &c::RunRef,
) -> Result<c::EventKind, Box<dyn std::error::Error>> {
    let limits = *session.connection().limits();
    let options = c::EventStreamOptions::new(limits.replay_events(), true, &limits)?;
    let mut events = session
        .events(c::Cursor::new(run.clone(), 0), options)
        .await?;
    while let Some(frame) = events.next().await? {
        if let c::EventFrame::Event(event) = frame {
            println!("  {:>2} {:?}", event.sequence(), event.kind());
            if matches!(
                event.kind(),
                c::EventKind::RunCompleted | c::EventKind::RunFailed | c::EventKind::RunCancelled
            ) {
                return Ok(event.kind());
            }
        }
    }
    Err("the event stream ended before the run".into())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = TempDir::new()?;
    let root = CancellationToken::new();
    let app = Served::build().await?;
    let daemon = serve(&app, dir.path(), &root).await?;

    // The client side: everything below uses only `agent-client` and its gRPC connector.
    let connector = LocalConnector::new(daemon.metadata().clone())?;
    let session =
        tokio::time::timeout(PATIENCE, connector.initialize(initialize_request()?)).await??;
    let definition = session
        .connection()
        .catalog()
        .definitions()
        .first()
        .ok_or("no definitions")?
        .reference()
        .clone();
    let mut questions = session
        .interactions(c::InteractionStreamOptions { tail: true })
        .await?;
    let op = |name: &str| c::OperationId::new(name);

    // Run 1: answer its question with `true`, and stream it to the end.
    let start = |n: &str| -> Result<c::StartRequest, Box<dyn std::error::Error>> {
        Ok(c::StartRequest {
            operation: op(n)?,
            definition: definition.clone(),
            input: c::Input::new(n, "save hello")?,
        })
    };
    let run = session.start(start("run-1")?).await?.run().clone();
    let question = tokio::time::timeout(PATIENCE, question_of(&mut questions, &run)).await??;
    println!("run 1 asks: {}", question.prompt());
    session
        .respond(
            op("answer-1")?,
            run.clone(),
            question.id().clone(),
            c::StructuredValue::parse(b"true".to_vec())?,
        )
        .await?;
    let ended = tokio::time::timeout(PATIENCE, stream_events(&session, &run)).await??;
    assert_eq!(ended, c::EventKind::RunCompleted);

    // Run 2: cancel it while its question is pending.
    let run = session.start(start("run-2")?).await?.run().clone();
    tokio::time::timeout(PATIENCE, question_of(&mut questions, &run)).await??;
    session.cancel(op("cancel-2")?, run.clone(), None).await?;
    let ended = tokio::time::timeout(PATIENCE, stream_events(&session, &run)).await??;
    println!("run 2 ended: {ended:?}");
    assert_eq!(ended, c::EventKind::RunCancelled);

    session.close();
    daemon.shutdown(Duration::from_secs(5)).await?;
    root.cancel();
    app.stop().await?;
    Ok(())
}

#[test]
fn the_example_runs() {
    main().expect("the example runs");
}
