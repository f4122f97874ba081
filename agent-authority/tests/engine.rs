//! The kernel traits over the real engine: a local resume aborted before the invalidation
//! leaves the engine's suspended snapshot byte-identical, a committed one continues the run
//! and the old envelope is dead; an import into a second engine (same identity) runs the
//! snapshot once.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_authority::engine::{EngineImport, EngineLocalResume};
use agent_authority::{Lifecycle, Phase, Reason, Step, Store, StoreOptions, TerminalPhase};
use agent_core::agent::{AgentDefinition, Engine, EngineIdentity, RunStatus};
use agent_core::message::Message;
use agent_core::model::{ModelRequest, ScriptedProvider, StreamEvent, Usage};
use agent_core::stage::{Dispatcher, StaticToolPlanSource};
use agent_core::tool::{
    BoxFuture, Call, Definition, Effect, ExecutionError, ReplaySafety, Tool, ToolContext,
    ToolResult,
};
use support::TempDir;
use tokio_util::sync::CancellationToken;

struct Echo(Definition);

impl Tool for Echo {
    fn definition(&self) -> &Definition {
        &self.0
    }
    fn execute<'a>(
        &'a self,
        call: Call,
        _ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move { Ok(ToolResult::success(call.id(), "ok")) })
    }
}

/// An engine whose model calls `echo` once, then answers; one identity for every engine
/// made here, so snapshots move between them.
fn engine() -> Engine {
    let echo = Definition::builder("echo", "Echoes.")
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .build()
        .unwrap();
    let tools = BTreeMap::from([("echo".to_owned(), Arc::new(Echo(echo)) as Arc<dyn Tool>)]);
    let provider = Arc::new(ScriptedProvider::new(|request: &ModelRequest| {
        if request.messages().len() == 1 {
            vec![
                StreamEvent::ToolCall(Call::new("c1", "echo", serde_json::json!({})).unwrap()),
                StreamEvent::Completed {
                    usage: Usage::new(1, 1),
                },
            ]
        } else {
            vec![StreamEvent::Completed {
                usage: Usage::new(1, 1),
            }]
        }
    }));
    let identity = EngineIdentity::new(["tool:echo@1"])
        .unwrap()
        .with_compatibility("authority-test/1")
        .unwrap();
    Engine::builder(
        provider,
        StaticToolPlanSource::from_dispatcher(Dispatcher::new(tools).unwrap()),
    )
    .identity(identity)
    .build()
    .unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn local_resume_over_the_engine_keeps_the_ordering() {
    let temp = TempDir::new("engine-local");
    let armed = Arc::new(AtomicBool::new(false));
    let store = Store::open(StoreOptions::new().directory(temp.store_dir()).step_hook({
        let armed = armed.clone();
        Arc::new(move |step| {
            if step == Step::LocalReserved && armed.load(Ordering::SeqCst) {
                Err(())
            } else {
                Ok(())
            }
        })
    }))
    .unwrap();
    let engine = engine();
    let agent = AgentDefinition::new("a", "scripted", 3).unwrap();
    let prepared = engine
        .prepare(&agent, Message::user("hi").unwrap())
        .await
        .unwrap();
    let mut owner = store.start(prepared.run_id().as_str()).unwrap();
    let run = prepared.commit(&CancellationToken::new()).unwrap();
    run.suspend().await.unwrap();
    let snapshot = run.snapshot().unwrap();
    let before = snapshot.to_json();
    let envelope = owner
        .issue_snapshot(
            Lifecycle::Suspended,
            snapshot.last_sequence(),
            before.clone(),
        )
        .unwrap();

    // The authority refuses before the invalidation: the kernel reservation is aborted.
    armed.store(true, Ordering::SeqCst);
    let reservation = EngineLocalResume::new(run.prepare_local_resume().unwrap());
    assert!(owner.resume_local(reservation).is_err());
    assert_eq!(run.snapshot().unwrap().to_json(), before, "byte-identical");
    assert_eq!(envelope.payload(), before.as_slice());
    assert_eq!(
        store.inspect(run.id().as_str()).unwrap().unwrap().phase,
        Phase::Suspended
    );

    // Now the full order: reservation, durable invalidation, kernel commit.
    armed.store(false, Ordering::SeqCst);
    let reservation = EngineLocalResume::new(run.prepare_local_resume().unwrap());
    owner.resume_local(reservation).unwrap();
    run.wait().await.unwrap();
    assert_eq!(run.status(), RunStatus::Completed);
    let status = store.inspect(run.id().as_str()).unwrap().unwrap();
    assert_eq!((status.phase, status.run_generation), (Phase::Active, 2));
    owner.terminal(TerminalPhase::Completed).unwrap();
    assert_eq!(
        store.prepare_import(&envelope).unwrap_err().reason(),
        Reason::NotSuspended
    );
}

#[tokio::test(flavor = "current_thread")]
async fn an_import_commits_paused_then_activates_the_engine_run_once() {
    let temp = TempDir::new("engine-import");
    let store = support::open(&temp.store_dir());
    let first = engine();
    let agent = AgentDefinition::new("a", "scripted", 3).unwrap();
    let prepared = first
        .prepare(&agent, Message::user("hi").unwrap())
        .await
        .unwrap();
    let mut owner = store.start(prepared.run_id().as_str()).unwrap();
    let run = prepared.commit(&CancellationToken::new()).unwrap();
    run.suspend().await.unwrap();
    let snapshot = run.snapshot().unwrap();
    let envelope = owner
        .issue_snapshot(
            Lifecycle::Suspended,
            snapshot.last_sequence(),
            snapshot.to_json(),
        )
        .unwrap();
    run.cancel();
    let _ = run.wait().await;
    owner.close().unwrap();

    let second = engine();
    let import = store.prepare_import(&envelope).unwrap();
    let snapshot = agent_core::agent::Snapshot::from_json(import.envelope().payload()).unwrap();
    let prepared = second.prepare_resume(snapshot).await.unwrap();
    let (mut owner, resumed) = import
        .complete(EngineImport::new(prepared, CancellationToken::new()))
        .unwrap();
    resumed.wait().await.unwrap();
    assert_eq!(resumed.status(), RunStatus::Completed);
    owner.terminal(TerminalPhase::Completed).unwrap();
    assert_eq!(
        store.prepare_import(&envelope).unwrap_err().reason(),
        Reason::NotSuspended
    );
}
