//! Fixture definitions for client tests (issue 16, point 4): a bean set a daemon can be
//! started with, serving two definitions with fixed ids and revisions.
//!
//! | id | revision | model | behaviour |
//! | --- | --- | --- | --- |
//! | [`TEXT_DEFINITION_ID`] `00-fixture-text` | [`REVISION`] `fixture-v1` | [`TEXT_MODEL`] | one ordinary text turn ([`TEXT_REPLY`]), then the run completes |
//! | [`PENDING_DEFINITION_ID`] `01-fixture-pending` | [`REVISION`] | [`PENDING_MODEL`] | the model stream stays pending, so the run stays active until it is cancelled |
//!
//! The text definition sorts first in the catalogue (definitions are ordered by id, and
//! `0` sorts before every letter). Both are `AgentDefinition` beans gathered by
//! `compose!` into [`FixtureGraph`]; [`FixtureProvider`] answers their two models and
//! hands every other model to an optional fallback provider, so a real graph can serve the
//! fixture next to its own definitions.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_authority::{AuthorityError, Store, StoreOptions, diagnose_directory};
use agent_core::agent::{AgentDefinition, AgentDefinitionError, Engine};
use agent_core::bean;
use agent_core::model::{
    EventStream, ModelProblem, ModelProvider, ModelRequest, ProviderError, ScriptedStream,
    StreamError, StreamEvent, Usage,
};
use agent_core::stage::{Dispatcher, StaticToolPlanSource};
use agent_core::tool::BoxFuture;
use agent_daemon::definition::{DefinitionError, DefinitionSet};
use agent_daemon::host::HostLimits;
use agent_daemon::ledger::Ledger;
use agent_daemon::pending::{PendingLimits, PendingRouter};
use agent_daemon::session::{DEFAULT_IDLE_AFTER, SessionStore};
use agent_daemon::{RunHost, RunHostConfig};
use tokio_util::sync::CancellationToken;

/// The id of the definition whose run completes one text turn at once.
pub const TEXT_DEFINITION_ID: &str = "00-fixture-text";
/// The id of the definition whose run stays active until cancelled.
pub const PENDING_DEFINITION_ID: &str = "01-fixture-pending";
/// The revision both fixture definitions are served at.
pub const REVISION: &str = "fixture-v1";
/// The text definition's model.
pub const TEXT_MODEL: &str = "fixture-text";
/// The pending definition's model.
pub const PENDING_MODEL: &str = "fixture-pending";
/// What the text definition's model answers.
pub const TEXT_REPLY: &str = "fixture reply";
/// Turns per fixture run at most.
pub const MAX_TURNS: u32 = 2;

/// The text definition's bean.
#[bean(name = "fixture-text-definition")]
pub fn fixture_text_definition() -> Result<AgentDefinition, AgentDefinitionError> {
    AgentDefinition::new(TEXT_DEFINITION_ID, TEXT_MODEL, MAX_TURNS)
}

/// The pending definition's bean.
#[bean(name = "fixture-pending-definition")]
pub fn fixture_pending_definition() -> Result<AgentDefinition, AgentDefinitionError> {
    AgentDefinition::new(PENDING_DEFINITION_ID, PENDING_MODEL, MAX_TURNS)
}

/// The served set: every definition bean of the graph at [`REVISION`].
#[bean(name = "fixture-definitions")]
pub fn fixture_definitions(agents: Vec<AgentDefinition>) -> Result<DefinitionSet, DefinitionError> {
    DefinitionSet::from_agents(agents, REVISION)
}

agent_core::compose! {
    /// The fixture graph: the two fixture definitions and the set that serves them.
    pub struct FixtureGraph {
        beans: [
            crate::fixture::fixture_text_definition,
            crate::fixture::fixture_pending_definition,
            crate::fixture::fixture_definitions,
        ],
    }
}

/// A model stream that never yields: the run waits in its model call until cancelled
/// (dropping the stream is how the engine cancels it).
struct PendingStream;

impl EventStream for PendingStream {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<StreamEvent>, StreamError>> {
        Box::pin(std::future::pending())
    }
}

/// Answers the two fixture models; any other model goes to the fallback (or fails with
/// `fixture_unknown_model`).
#[derive(Clone, Default)]
pub struct FixtureProvider {
    fallback: Option<Arc<dyn ModelProvider>>,
}

impl FixtureProvider {
    /// A provider for the fixture models only.
    pub fn new() -> FixtureProvider {
        FixtureProvider::default()
    }

    /// A provider that serves the fixture models and hands every other to `fallback`.
    pub fn with_fallback(fallback: Arc<dyn ModelProvider>) -> FixtureProvider {
        FixtureProvider {
            fallback: Some(fallback),
        }
    }
}

impl ModelProvider for FixtureProvider {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        Box::pin(async move {
            match request.model() {
                TEXT_MODEL => Ok(Box::new(ScriptedStream::new([
                    StreamEvent::TextDelta(TEXT_REPLY.to_owned()),
                    StreamEvent::Completed {
                        usage: Usage::new(1, 1),
                    },
                ])) as Box<dyn EventStream>),
                PENDING_MODEL => Ok(Box::new(PendingStream) as Box<dyn EventStream>),
                _ => match &self.fallback {
                    Some(fallback) => fallback.stream(request).await,
                    None => Err(ProviderError::new(ModelProblem::new(
                        "fixture_unknown_model",
                        "the fixture provider serves only the fixture models",
                    ))),
                },
            }
        })
    }
}

/// Why a run host (the fixture's, or one [`run_host`] builds over other definitions) could
/// not be built. The messages say "fixture" only for what only the fixture builds.
#[derive(Debug)]
#[non_exhaustive]
pub enum FixtureError {
    /// The fixture graph or its definitions did not build.
    Definitions,
    /// The engine did not build.
    Engine,
    /// The run authority did not open.
    Authority {
        /// The store directory it was asked to open.
        directory: PathBuf,
        /// The store's own error (which carries no path).
        error: AuthorityError,
    },
    /// The host's pieces refused their configuration.
    Host,
}

impl std::fmt::Display for FixtureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FixtureError::Definitions => f.write_str("the fixture definitions did not build"),
            FixtureError::Engine => f.write_str("the engine did not build"),
            FixtureError::Authority { directory, error } => {
                match diagnose_directory(directory) {
                    // The directory breaks a rule the store checks: say which, and the fix.
                    Some(problem) => write!(f, "{problem}"),
                    None => write!(
                        f,
                        "the run authority directory {} did not open: {error}",
                        directory.display()
                    ),
                }
            }
            FixtureError::Host => f.write_str("the run host did not build"),
        }
    }
}

impl std::error::Error for FixtureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FixtureError::Authority { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// The fixture's served set, from the composed graph.
pub async fn definitions() -> Result<DefinitionSet, FixtureError> {
    let graph = FixtureGraph::build()
        .await
        .map_err(|_| FixtureError::Definitions)?;
    let set = graph.components().fixture_definitions.clone();
    graph.stop().await.map_err(|_| FixtureError::Definitions)?;
    Ok(set)
}

/// An engine over [`FixtureProvider`] with no tools, brokering through `pending`.
pub fn engine(pending: Arc<PendingRouter>) -> Result<Engine, FixtureError> {
    let dispatcher = Dispatcher::new(Default::default()).map_err(|_| FixtureError::Engine)?;
    Engine::builder(
        Arc::new(FixtureProvider::new()),
        StaticToolPlanSource::from_dispatcher(dispatcher),
    )
    .broker(pending)
    .build()
    .map_err(|_| FixtureError::Engine)
}

/// The sizes of a fixture host.
#[derive(Debug, Clone, Copy)]
pub struct FixtureOptions {
    /// The run host's budgets.
    pub limits: HostLimits,
    /// Session-table entries at most.
    pub sessions: usize,
    /// Ledger clients and operations per client.
    pub ledger: (usize, usize),
    /// How long a session with nothing in flight lives before the store reclaims it.
    pub idle_after: Duration,
}

impl Default for FixtureOptions {
    fn default() -> Self {
        FixtureOptions {
            limits: HostLimits::default(),
            sessions: 256,
            ledger: (256, 1024),
            idle_after: DEFAULT_IDLE_AFTER,
        }
    }
}

/// A complete run host serving the fixture, with its run authority under `authority_dir`
/// (a private directory). Cancelling `root` shuts the host down.
pub async fn host(
    root: &CancellationToken,
    authority_dir: &Path,
    options: FixtureOptions,
) -> Result<RunHost, FixtureError> {
    run_host(root, authority_dir, options, definitions().await?, engine)
}

/// A run host over `definitions` and the engine `engine` builds around the host's pending
/// router (the engine's broker must be that router), with its run authority under
/// `authority_dir`. [`host`] is this with the fixture's definitions and engine.
pub fn run_host(
    root: &CancellationToken,
    authority_dir: &Path,
    options: FixtureOptions,
    definitions: DefinitionSet,
    engine: impl FnOnce(Arc<PendingRouter>) -> Result<Engine, FixtureError>,
) -> Result<RunHost, FixtureError> {
    let authority = Store::open(StoreOptions::new().directory(authority_dir)).map_err(|error| {
        FixtureError::Authority {
            directory: authority_dir.to_owned(),
            error,
        }
    })?;
    let pending = PendingRouter::new(PendingLimits::default()).map_err(|_| FixtureError::Host)?;
    let sessions = SessionStore::with_idle_after(root, options.sessions, options.idle_after)
        .map_err(|_| FixtureError::Host)?;
    let ledger = Ledger::new(options.ledger.0, options.ledger.1).ok_or(FixtureError::Host)?;
    RunHost::new(RunHostConfig {
        root: root.clone(),
        engine: engine(pending.clone())?,
        authority: Arc::new(authority),
        sessions,
        ledger: Arc::new(ledger),
        pending,
        definitions,
        limits: options.limits,
        health_sources: Vec::new(),
    })
    .map_err(|_| FixtureError::Host)
}
