//! The engine: a deterministic single-agent loop over an already-composed graph.
//!
//! An [`Engine`] holds a [`ModelProvider`], its [`ToolPlans`], an [`IdSource`], a [`Clock`],
//! an interaction [`Broker`] and optional [`Observer`]s. It is not a container: everything
//! it runs was built by `compose!` (or by hand) before.
//!
//! A run starts transactionally: [`Engine::prepare`] validates the input, leases the current
//! tool plan, allocates the run id and builds an unpublished event log, with no event, task
//! or provider call; [`PreparedRun::commit`] starts it under a caller-owned cancellation root
//! and [`PreparedRun::abort`] releases what was acquired, exactly once. A host that must
//! decide after registration uses [`PreparedRun::commit_paused`]: the run is registered but
//! inert until [`PausedRun::activate`] or [`PausedRun::abort`]. Run ids are never reused
//! within an engine (see [`Engine::retire`] and [`MAX_RECORDED_RUN_IDS`]).
//!
//! Each turn asks the model, collects its tool calls, records `tool.started` before each
//! dispatch, dispatches through the leased plan, appends the results to the history and goes
//! on until a turn has no tool calls (the run completes) or the turn limit is reached (it
//! fails). Every run ends with exactly one terminal event, preceded by the release of its
//! lease. See `docs/run-lifecycle.md` for the state diagram and the event catalogue.
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//!
//! use agent_core::agent::{AgentDefinition, Engine};
//! use agent_core::event::EventKind;
//! use agent_core::message::Message;
//! use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
//! use agent_core::stage::{Dispatcher, StaticToolPlanSource};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let provider = Arc::new(ScriptedProvider::new(|_request| vec![
//!     StreamEvent::TextDelta("Hello!".into()),
//!     StreamEvent::Completed { usage: Usage::new(3, 2) },
//! ]));
//! let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
//! let engine = Engine::builder(provider, tools).build()?;
//!
//! let agent = AgentDefinition::new("greeter", "scripted", 4)?;
//! let run = engine.start(&agent, Message::user("hi")?).await?;
//! let output = run.wait().await?;
//! assert_eq!(output.answer, "Hello!");
//!
//! let page = run.events().replay(agent_core::event::ReplayRequest::after(0))?;
//! let kinds: Vec<EventKind> = page.events.iter().map(|e| e.kind()).collect();
//! assert_eq!(kinds, [
//!     EventKind::RunStarted, EventKind::TurnStarted, EventKind::ModelStarted,
//!     EventKind::ModelDelta, EventKind::ModelCompleted, EventKind::TurnCompleted,
//!     EventKind::RunCompleted,
//! ]);
//! engine.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! [`ModelProvider`]: crate::model::ModelProvider
//! [`ToolPlans`]: crate::stage::ToolPlans
//! [`Clock`]: crate::event::Clock
//! [`Broker`]: crate::interaction::Broker
//! [`Observer`]: crate::event::Observer

mod definition;
mod driver;
mod engine;
mod identity;
mod ids;
mod inner;
mod ledger;
mod options;
mod release;
mod run;
mod run_task;
mod snapshot;

pub use definition::{AgentDefinition, AgentDefinitionError, MAX_AGENT_NAME_BYTES, MAX_TURNS};
pub use engine::{
    Engine, EngineBuilder, Incompatibility, PausedRun, PreparedRun, RunIdentityCounts, StartError,
};
pub use identity::{
    EngineIdentity, IdentityError, MAX_COMPILED_IDENTITIES, MAX_IDENTITY_BYTES, PlanIdentity,
};
pub use ids::{AtomicIdSource, IdSource};
pub use ledger::{MAX_RECORDED_RUN_IDS, RetireError};
pub use options::{EngineError, EngineOptions};
pub use run::{LocalResume, Run, RunError, RunOutput, RunStatus, SuspendError};
pub use snapshot::{
    CallState, MAX_SNAPSHOT_BYTES, SNAPSHOT_VERSION, Snapshot, SnapshotError, SnapshotStatus,
    UNCERTAIN_CALL_NOT_RUN_AGAIN, UnfinishedCall,
};
