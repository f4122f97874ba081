//! `agent run`, `runs`, `attach` and `cancel` with `--restate URL` (or `AGENT_RESTATE_URL`):
//! the same seam-generic paths as against the local daemon (`follow.rs`, `cancel_run`,
//! `print_runs`), over a session of `agent_restate::client` on the cluster's ingress
//! (docs/scale-out.md, "Clients"). The cluster keeps its own run index and fences nobody,
//! so there is no CLI run index, attachment lock or reconnect here.

use std::process::ExitCode;
use std::sync::Arc;

use agent_client::Connector as _;
use agent_restate::client::{RestateConnector, RestateSession};

use crate::cli::args::{AttachArgs, RunArgs, RunRef};
use crate::cli::error::CliError;

use super::client::initialize_request;
use super::control::cancel_run;
use super::follow::{AdapterHooks, Console, attach_run, start_and_follow};
use super::runs::{RunLister, RunSummary, print_runs};

/// `agent run --restate URL TASK`: starts the task (from `--definition`, default the coding
/// agent's) on the cluster's workers and follows it as `agent run --daemon` does: its
/// events on stdout, approvals on the terminal, Ctrl-C cancels. Exit codes: 0 completed, 1
/// failed, 130 cancelled.
pub async fn run(args: &RunArgs, url: &str) -> Result<ExitCode, CliError> {
    let console = Console::terminal()?;
    let session = connect(url).await?;
    start_and_follow(Arc::new(session), args, console, &Cluster).await
}

/// `agent runs --restate URL`: the cluster's runs, oldest first (`RUN STATE DEFINITION`).
pub async fn runs(url: &str) -> Result<ExitCode, CliError> {
    let connector = connector(url)?;
    // A wrong or stopped cluster is said at once, not after the ingress's retry budget
    // (`initialize` checks the same for the other subcommands).
    if !connector.ingress().healthy().await {
        return Err(CliError::Daemon(format!(
            "the Restate cluster at {url}: unavailable: its ingress does not answer its health check"
        )));
    }
    print_runs(&ClusterRuns { connector }).await
}

/// `agent attach --restate URL RUN [--from SEQ]`: replays the run's events after `SEQ` and
/// follows them until it ends, answering its approvals on the terminal; Ctrl-C detaches.
pub async fn attach(args: &AttachArgs, url: &str) -> Result<ExitCode, CliError> {
    let console = Console::terminal()?;
    let session = connect(url).await?;
    attach_run(Arc::new(session), args, false, console, &Cluster).await
}

/// `agent cancel --restate URL RUN`: cancels the run and waits for its terminal event.
pub async fn cancel(run: &RunRef, url: &str) -> Result<ExitCode, CliError> {
    let session = connect(url).await?;
    cancel_run(&session, &run.run, &Cluster).await
}

fn connector(url: &str) -> Result<RestateConnector, CliError> {
    RestateConnector::new(url)
        .map_err(|e| CliError::Daemon(format!("the Restate cluster at {url}: {e}")))
}

async fn connect(url: &str) -> Result<RestateSession, CliError> {
    connector(url)?
        .initialize(initialize_request(None)?)
        .await
        .map_err(|e| CliError::Daemon(format!("the Restate cluster at {url}: {e}")))
}

/// The cluster's hooks: runs start with the seam alone, and nothing is recorded here (the
/// cluster indexes its runs).
struct Cluster;

impl AdapterHooks<RestateSession> for Cluster {
    fn host(&self) -> &'static str {
        "the cluster"
    }
}

/// The cluster's run index as `agent runs` lists it.
struct ClusterRuns {
    connector: RestateConnector,
}

impl RunLister for ClusterRuns {
    /// The index's runs, oldest first: an ended run by its terminal kind (`completed`,
    /// `failed`, `cancelled`), the others `running` (a run waiting for an answer holds no
    /// worker, but it has not ended).
    async fn list_runs(&self) -> Result<Vec<RunSummary>, CliError> {
        let runs = self
            .connector
            .list_runs()
            .await
            .map_err(|e| CliError::Daemon(format!("runs: {e}")))?;
        Ok(runs
            .into_iter()
            .map(|run| RunSummary {
                state: match run.ended.as_deref() {
                    Some(kind) => kind.strip_prefix("run.").unwrap_or(kind).to_owned(),
                    None => "running".to_owned(),
                },
                run: run.run_id,
                definition: run.definition,
            })
            .collect())
    }
}
