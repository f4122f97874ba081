//! The subcommands the local daemon answers: the one module the daemon wiring replaces.
//!
//! Each function receives its parsed arguments and returns the process exit code. Until the
//! daemon's server and client crates are linked into the coding agent, each answers
//! [`CliError::Unsupported`] (exit code 10) before touching anything. The contract each one
//! must meet when wired is in its documentation and in docs/coding-agent.md.

use std::process::ExitCode;

use super::args::{AttachArgs, ExportArgs, ImportArgs, RunArgs, RunRef, ServeArgs};
use super::error::{CliError, DaemonCommand};

/// `agent serve [--fixture]`: runs the daemon in the foreground on the per-user socket,
/// logging to stderr, until SIGINT/SIGTERM, then shuts down within its bound. `--fixture`
/// adds the two fixture definitions client tests use.
pub async fn serve(args: &ServeArgs) -> Result<ExitCode, CliError> {
    let _ = args.fixture;
    Err(CliError::Unsupported(DaemonCommand::Serve))
}

/// `agent run --daemon TASK`: attaches to the running daemon or starts one, starts the
/// task there, streams its events like the one-shot form, answers approvals on the
/// terminal; Ctrl-C sends a cancel and exits 130 after exactly one terminal event.
pub async fn run(args: &RunArgs) -> Result<ExitCode, CliError> {
    let _ = &args.task;
    Err(CliError::Unsupported(DaemonCommand::RunDaemon))
}

/// `agent runs`: lists the daemon's runs of this client (id, status, last sequence).
pub async fn runs() -> Result<ExitCode, CliError> {
    Err(CliError::Unsupported(DaemonCommand::Runs))
}

/// `agent attach RUN [--from SEQ]`: replays the run's events after `SEQ` and follows them
/// until the run ends.
pub async fn attach(args: &AttachArgs) -> Result<ExitCode, CliError> {
    let _ = (&args.run.run, args.from);
    Err(CliError::Unsupported(DaemonCommand::Attach))
}

/// `agent suspend RUN`: suspends the run at its next turn boundary.
pub async fn suspend(args: &RunRef) -> Result<ExitCode, CliError> {
    let _ = &args.run;
    Err(CliError::Unsupported(DaemonCommand::Suspend))
}

/// `agent resume RUN`: resumes a suspended run in the daemon.
pub async fn resume(args: &RunRef) -> Result<ExitCode, CliError> {
    let _ = &args.run;
    Err(CliError::Unsupported(DaemonCommand::Resume))
}

/// `agent export RUN [-o FILE]`: writes the run's signed snapshot envelope to FILE (or
/// stdout).
pub async fn export(args: &ExportArgs) -> Result<ExitCode, CliError> {
    let _ = (&args.run.run, &args.output);
    Err(CliError::Unsupported(DaemonCommand::Export))
}

/// `agent import FILE`: imports a signed snapshot envelope into the daemon (once: a
/// second import of the same snapshot is refused).
pub async fn import(args: &ImportArgs) -> Result<ExitCode, CliError> {
    let _ = &args.file;
    Err(CliError::Unsupported(DaemonCommand::Import))
}
