//! `agent worker`: the coding agent's runs as a worker of a Restate cluster
//! (docs/scale-out.md). Every execution builds an engine over the composed graph with the
//! execution's hooks, as `agent serve` builds its one engine with the daemon's broker.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_core::agent::{AgentDefinition, Engine};
use agent_core::event::Observer;
use agent_restate::execution::{DurableRuns, Hooks, RunFactory};
use agent_restate::record::CatalogEntry;
use agent_restate::worker::WorkerConfig;

use crate::app::CodingAgent;
use crate::cli::args::{DEFAULT_MAX_TURNS, WorkerArgs};
use crate::cli::error::CliError;

use super::{CODING_AGENT_DEFINITION, io_error};

/// The coding agent's definition, served by a worker.
struct CodingWorker {
    app: Arc<CodingAgent>,
    agent: AgentDefinition,
}

impl RunFactory for CodingWorker {
    fn catalog(&self) -> Vec<CatalogEntry> {
        vec![CatalogEntry {
            id: CODING_AGENT_DEFINITION.to_owned(),
            model: self.agent.model().to_owned(),
            max_turns: self.agent.max_turns(),
        }]
    }

    fn definition(&self, id: &str) -> Option<AgentDefinition> {
        (id == CODING_AGENT_DEFINITION).then(|| self.agent.clone())
    }

    fn durable_runs(&self) -> Arc<DurableRuns> {
        self.app.components().durable_runs.clone()
    }

    fn engine(&self, hooks: &Hooks) -> Result<Engine, String> {
        let components = self.app.components();
        let observer: Arc<dyn Observer> = components.event_logger.clone();
        let builder = components.coding_engine_settings.apply(Engine::builder(
            hooks.provider(components.model_provider.clone()),
            components.mcp_source.clone(),
        ));
        // The log sees each event once, when the cluster publishes it.
        hooks.observe_published(observer);
        hooks.apply(builder).build().map_err(|e| e.to_string())
    }
}

/// `agent worker`: builds the graph (approvals are asked through the cluster), registers
/// with the admin API and serves until SIGINT or SIGTERM.
pub async fn worker(args: &WorkerArgs) -> Result<ExitCode, CliError> {
    let settings =
        crate::settings::load(&args.model).map_err(|e| CliError::Usage(e.to_string()))?;
    let agent = AgentDefinition::new(
        CODING_AGENT_DEFINITION,
        settings.model_name(),
        DEFAULT_MAX_TURNS,
    )
    .map_err(|e| io_error("definitions", e))?;
    if let Some(notice) = settings.offline_notice() {
        crate::cli::output::eprintln(&notice);
    }
    let stop = super::serve::termination()?;
    let app = Arc::new(super::serve::host_graph(settings).await?);
    let config = WorkerConfig {
        listen: args.listen,
        advertised: args
            .advertise
            .clone()
            .unwrap_or_else(|| format!("http://{}", args.listen)),
        admin: args.admin.clone(),
        ingress: args.ingress.clone(),
        suspend_after: Duration::from_secs(args.suspend_after),
        max_executions: args.max_executions,
    };
    crate::cli::output::eprintln(&format!(
        "agent: worker for {} on {} (advertised as {}), registering with {} (pid {}); stop with Ctrl-C or SIGTERM",
        app.components().workspace_root.path().display(),
        config.listen,
        config.advertised,
        config.admin,
        std::process::id()
    ));
    let factory = Arc::new(CodingWorker {
        app: app.clone(),
        agent,
    });
    let served = agent_restate::worker::serve(factory, config, stop).await;
    crate::cli::output::eprintln("agent: worker stopping");
    if let Ok(app) = Arc::try_unwrap(app) {
        let _ = app.stop().await;
    }
    served.map_err(|e| CliError::Daemon(e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}
