//! `agent serve`: the daemon in the foreground over the composed definitions, until a
//! signal.

use std::process::ExitCode;
use std::sync::Arc;

use agent_core::compose::Override;
use tokio_util::sync::CancellationToken;

use crate::app::{CodingAgent, CodingAgentOverrides};
use crate::approval::ApprovalMode;
use crate::cli::args::ServeArgs;
use crate::cli::error::CliError;

use super::state::{DAEMON_STATE, DaemonState};
use super::{
    CODING_AGENT_DEFINITION, CODING_AGENT_REVISION, SHUTDOWN_DEADLINE, ServeLimits, io_error, scope,
};

// ---------------------------------------------------------------------------------------
// agent serve
// ---------------------------------------------------------------------------------------

fn definitions(
    fixture: bool,
    model: String,
) -> Result<agent_daemon::definition::DefinitionSet, CliError> {
    use agent_daemon::definition::{Definition, DefinitionSet};
    let agent = agent_core::agent::AgentDefinition::new(
        CODING_AGENT_DEFINITION,
        model,
        crate::cli::args::DEFAULT_MAX_TURNS,
    )
    .map_err(|e| io_error("definitions", e))?;
    let mut values = vec![
        Definition::new(CODING_AGENT_DEFINITION, CODING_AGENT_REVISION, agent)
            .map_err(|e| io_error("definitions", e))?,
    ];
    if fixture {
        use agent_server::fixture;
        for agent in [
            fixture::fixture_text_definition(),
            fixture::fixture_pending_definition(),
        ] {
            let agent = agent.map_err(|e| io_error("fixture definitions", e))?;
            values.push(
                Definition::new(agent.name().to_owned(), fixture::REVISION, agent)
                    .map_err(|e| io_error("fixture definitions", e))?,
            );
        }
    }
    DefinitionSet::new(values).map_err(|e| io_error("definitions", e))
}

fn build_identity() -> agent_protocol::pb::common::v1::BuildIdentity {
    agent_protocol::pb::common::v1::BuildIdentity {
        component: "coding-agent".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        commit: option_env!("AGENT_BUILD_COMMIT")
            .unwrap_or("unknown")
            .to_owned(),
        go_version: "rustc".to_owned(),
    }
}

/// The graph a host (the daemon, a worker) serves runs from: the model `settings` chose,
/// and approvals asked of whoever answers the run's interactions.
pub(super) async fn host_graph(
    settings: crate::settings::ModelSettings,
) -> Result<CodingAgent, CliError> {
    let overrides = CodingAgentOverrides {
        approval_mode: Override::value(Arc::new(ApprovalMode::Ask)),
        model_settings: Override::value(Arc::new(settings)),
        ..CodingAgentOverrides::default()
    };
    CodingAgent::build_with(overrides)
        .await
        .map_err(|e| CliError::Daemon(crate::cli::error::assembly_failure(&e)))
}

/// A future that completes on the first SIGINT or SIGTERM.
pub(super) fn termination() -> Result<impl std::future::Future<Output = ()>, CliError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| io_error("signal handler", e))?;
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| io_error("signal handler", e))?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}

/// `agent serve [--fixture] [--authority DIR] [--max-* N]`: runs the daemon in the
/// foreground on the scope's socket, logging to stderr, until SIGINT/SIGTERM, then shuts
/// down within [`SHUTDOWN_DEADLINE`] and exits 0. `--fixture` adds the two fixture definitions client
/// tests use (their models are answered by the fixture provider; every other model by the
/// coding agent's provider). The `--max-*` limits are checked ([`ServeLimits`]) before
/// anything binds.
pub async fn serve(args: &ServeArgs) -> Result<ExitCode, CliError> {
    // Checked before anything binds: an impossible limit or model setting is a usage error.
    let limits = ServeLimits::from_args(&args.limits)?;
    let settings =
        crate::settings::load(&args.model).map_err(|e| CliError::Usage(e.to_string()))?;
    let definitions = definitions(args.fixture, settings.model_name())?;
    limits.check_catalog(definitions.len())?;
    let stop = termination()?;
    let scope = scope()?;
    let authority = crate::cli::snapshot::authority_directory(args.authority.as_deref())
        .map_err(|e| CliError::Daemon(e.to_string()))?;
    {
        use std::os::unix::fs::DirBuilderExt;
        // The authority refuses a directory others can read; create it private.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&authority)
            .map_err(|e| {
                CliError::Daemon(format!(
                    "the run authority directory {} could not be created: {e}",
                    authority.display()
                ))
            })?;
    }
    if let Some(notice) = settings.offline_notice() {
        crate::cli::output::eprintln(&notice);
    }
    let app = host_graph(settings).await?;
    let root = CancellationToken::new();
    let fixture = args.fixture;
    let host = agent_server::fixture::run_host(
        &root,
        &authority,
        agent_server::fixture::FixtureOptions {
            limits: limits.host,
            sessions: limits.sessions,
            ..Default::default()
        },
        definitions,
        |pending| {
            crate::app::daemon_engine(&app, pending, |provider| {
                if fixture {
                    Arc::new(agent_server::fixture::FixtureProvider::with_fallback(
                        provider,
                    ))
                } else {
                    provider
                }
            })
            .map_err(|_| agent_server::fixture::FixtureError::Engine)
        },
    )
    .map_err(|e| CliError::Daemon(e.to_string()))?;
    // The one root every run's tools are confined to: a start request naming another
    // directory is refused (docs/running-the-daemon.md).
    let workspace = app.components().workspace_root.path().to_path_buf();
    let scope_dir = scope.dir().to_path_buf();
    let mut config = agent_server::DaemonConfig::new(scope, host, build_identity());
    let server_workspace = workspace.clone();
    config.server = Box::new(move |server| {
        server.maximum_sessions = limits.sessions;
        server.max_message_bytes = limits.message_bytes;
        server.max_collection_items = limits.collection_items;
        server.workspace = Some(server_workspace);
    });
    let daemon = agent_server::Daemon::start(config)
        .await
        .map_err(|e| io_error("daemon", e))?;
    tracing::info!(
        target: "agent_serve",
        pid = std::process::id(),
        "daemon serving"
    );
    let state = DaemonState {
        process_id: std::process::id(),
        workspace: workspace.to_str().map(str::to_owned),
    };
    // Without it clients still work: the daemon checks every start request itself.
    if let Err(e) = state.write(&scope_dir) {
        crate::cli::output::eprintln(&format!("agent: could not write {DAEMON_STATE}: {e}"));
    }
    crate::cli::output::eprintln(&format!(
        "agent: serving on {} for {} (pid {}); stop with Ctrl-C, SIGTERM or `agent daemon stop`",
        daemon.scope().address().display(),
        workspace.display(),
        std::process::id()
    ));
    stop.await;
    crate::cli::output::eprintln("agent: stopping");
    DaemonState::remove(&scope_dir, state.process_id);
    let stopped = daemon.shutdown(SHUTDOWN_DEADLINE).await;
    root.cancel();
    let _ = app.stop().await;
    stopped.map_err(|e| io_error("daemon shutdown", e))?;
    Ok(ExitCode::SUCCESS)
}
