//! `agent run --daemon` and `agent attach` against the local daemon: connecting (and
//! starting `agent serve` when none answers), reconnecting as a run's owner, and the CLI's
//! run index. Following the run itself is seam-generic ([`super::follow`]).

use std::fs::File;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use agent_client as c;
use agent_client::Session as _;
use agent_client_grpc::GrpcSession;

use crate::cli::args::{AttachArgs, RunArgs};
use crate::cli::error::CliError;

use super::client::{Endpoint, initialize_request};
use super::follow::{AdapterHooks, Console, attach_run, start_and_follow};
use super::{ATTACH_LOCK_TIMEOUT, client_error, io_error};

/// The directory the run asks to work in: `--workspace`, else the current directory,
/// canonicalized (the daemon compares it with its own canonical root).
fn requested_workspace(given: Option<&std::path::Path>) -> Result<std::path::PathBuf, CliError> {
    let path = match given {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().map_err(|e| io_error("current directory", e))?,
    };
    let canonical = std::fs::canonicalize(&path)
        .map_err(|e| CliError::Usage(format!("--workspace {}: {e}", path.display())))?;
    if !canonical.is_dir() {
        return Err(CliError::Usage(format!(
            "--workspace {}: not a directory",
            path.display()
        )));
    }
    Ok(canonical)
}

/// `agent run --daemon [--definition ID] TASK`: attaches to the running daemon or starts
/// one, starts the task there, streams its events like the one-shot form, answers
/// approvals on the terminal (`--yes` approves all, `--read-only` declines all); Ctrl-C
/// sends a cancel and exits 130 after the run's one terminal event. Exit codes: 0
/// completed, 1 failed, 130 cancelled.
pub async fn run(args: &RunArgs) -> Result<ExitCode, CliError> {
    // The daemon has its own tools, authority and definitions; the workspace is the
    // request's, checked against the daemon's.
    let task = &args.task;
    for (given, flag) in [
        (task.mcp_config.is_some(), "--mcp-config"),
        (task.suspend.is_some(), "--suspend"),
        (task.resume.is_some(), "--resume"),
        (task.authority.is_some(), "--authority"),
        (task.continue_last, "--continue"),
        (
            task.max_turns != crate::cli::args::DEFAULT_MAX_TURNS,
            "--max-turns",
        ),
    ] {
        if given {
            return Err(CliError::Usage(format!(
                "{flag} does not apply to --daemon (the daemon's definition decides; see `agent suspend`/`export`)"
            )));
        }
    }
    let workspace = requested_workspace(task.workspace.as_deref())?;
    let console = Console::terminal()?;
    let endpoint = Endpoint::open()?;
    let (managed, starter) = endpoint.managed(&workspace)?;
    let session = managed
        .initialize_managed(initialize_request(None)?)
        .await
        .map_err(|e| io_error("attach or start", e))?;
    if let Some(pid) = starter.launched() {
        crate::cli::output::eprintln(&format!(
            "agent: started a daemon (pid {pid}) for {}; its log is {}; stop it with `agent daemon stop`",
            workspace.display(),
            starter.log_path().display()
        ));
    }
    // Refused before anything starts; the daemon checks the request again itself.
    if let Some(root) = endpoint.daemon_workspace()
        && root != workspace
    {
        session.close();
        return Err(CliError::Daemon(agent_server::workspace_refusal(
            &root, &workspace,
        )));
    }
    let hooks = WorkspaceRun {
        endpoint: &endpoint,
        workspace: &workspace,
        attached: OnceLock::new(),
    };
    start_and_follow(Arc::new(session), args, console, &hooks).await
}

/// The local daemon's hooks for `agent run --daemon`: the run names the directory it
/// works in (the daemon refuses another than its own), its client's attachment lock is
/// held from the start on, and the run index records the run.
struct WorkspaceRun<'a> {
    endpoint: &'a Endpoint,
    workspace: &'a Path,
    /// Held while this process streams the run, so `agent runs` does not fence it.
    attached: OnceLock<Option<File>>,
}

impl AdapterHooks<GrpcSession> for WorkspaceRun<'_> {
    async fn start(
        &self,
        session: &GrpcSession,
        request: c::StartRequest,
    ) -> Result<c::StartResult, CliError> {
        let client = session.connection().client_id();
        let attached = self
            .endpoint
            .index
            .try_attach(client)
            .map_err(|e| io_error("run index", e))?;
        let _ = self.attached.set(attached);
        session
            .start_in_workspace(request, self.workspace)
            .await
            .map_err(|e| match e {
                // The daemon's own refusal names both directories; it is the whole message.
                c::Error::Status(refused)
                    if refused.code == c::StatusCode::Conflict
                        && refused.facts.message().starts_with("this daemon works in") =>
                {
                    CliError::Daemon(refused.facts.message().to_owned())
                }
                other => client_error("start", &other),
            })
    }

    fn started(
        &self,
        connection: &c::Connection,
        run: &c::RunRef,
        definition: &str,
    ) -> Result<(), CliError> {
        AdapterHooks::<GrpcSession>::started(self.endpoint, connection, run, definition)
    }

    fn ended(&self, run: &str, state: &str) {
        AdapterHooks::<GrpcSession>::ended(self.endpoint, run, state);
    }

    fn taken_over_by(&self, run: &str) -> Option<String> {
        AdapterHooks::<GrpcSession>::taken_over_by(self.endpoint, run)
    }
}

/// `agent attach RUN [--from SEQ]`: reconnects as the run's owner (fencing any other
/// process streaming it), replays the run's events after `SEQ` and follows them until
/// the run ends, answering its approvals on the terminal. Ctrl-C detaches (exit 130)
/// without cancelling the run.
pub async fn attach(args: &AttachArgs) -> Result<ExitCode, CliError> {
    let console = Console::terminal()?;
    let endpoint = Endpoint::open()?;
    // Whether another process streams the run now (it holds the client's attachment
    // lock): this attach takes the run over from it, and says so.
    let held_elsewhere = match endpoint
        .index
        .read()
        .ok()
        .and_then(|index| index.runs.get(&args.run.run).map(|e| e.client.clone()))
    {
        Some(client) => endpoint
            .index
            .try_attach(&client)
            .map_err(|e| io_error("run index", e))?
            .is_none(),
        None => false,
    };
    let (session, entry) = endpoint.reconnect(&args.run.run, "attach").await?;
    // The fenced process lets go of the lock when it exits.
    let _attached = endpoint
        .index
        .attach(&entry.client, ATTACH_LOCK_TIMEOUT)
        .map_err(|e| io_error("run index", e))?;
    attach_run(Arc::new(session), args, held_elsewhere, console, &endpoint).await
}
