//! `agent suspend`, `agent resume`, `agent cancel`, `agent export` and `agent import`.

use std::process::ExitCode;

use agent_client as c;
use agent_client::Session as _;

use crate::cli::args::{ExportArgs, ImportArgs, RunRef, SuspendArgs};
use crate::cli::error::CliError;
use crate::cli::snapshot::{self, SnapshotFile};

use super::client::Endpoint;
use super::follow::{AdapterHooks, terminal_state};
use super::{client_error, io_error, operation};

/// A line on stdout; a closed stdout ends the command quietly (see `crate::cli::output`).
fn println(line: &str) -> Result<(), CliError> {
    crate::cli::output::println(line).map_err(|e| io_error("stdout", e))
}

/// `agent suspend RUN [--timeout SECS]`: suspends the run at its next turn boundary and
/// prints the boundary sequence. A run waiting on its model or a tool reaches the boundary
/// only when that answers, so it says on stderr what it waits for, and after `--timeout`
/// it gives up: dropping the call withdraws the request (the daemon cancels the wait and
/// forgets the operation), and the exit code is [`EXIT_TIMED_OUT`](crate::cli::EXIT_TIMED_OUT).
pub async fn suspend(args: &SuspendArgs) -> Result<ExitCode, CliError> {
    let name = &args.run.run;
    let endpoint = Endpoint::open()?;
    let (session, _) = endpoint.reconnect(name, "suspend").await?;
    let run = c::RunRef::new(name).map_err(|e| io_error("run", e))?;
    crate::cli::output::eprintln(&format!(
        "agent: waiting for run {name} to reach a turn boundary…"
    ));
    let limit = std::time::Duration::from_secs(args.timeout);
    let result = tokio::time::timeout(limit, session.suspend(operation()?, run)).await;
    session.close();
    let result = match result {
        Ok(result) => result.map_err(|e| client_error("suspend", &e))?,
        Err(_) => {
            return Err(CliError::TimedOut(format!(
                "run {name} reached no turn boundary within {} s; the suspend request was withdrawn and the run goes on (try again with a longer --timeout, or `agent cancel {name}`)",
                args.timeout
            )));
        }
    };
    endpoint.record_state(name, "suspended");
    println(&format!(
        "suspended {name} at sequence {}",
        result.boundary_sequence()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// How long `agent cancel` waits for the run's terminal event after the daemon accepted
/// the cancel.
const CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// `agent cancel RUN`: reconnects as the run's owner (fencing a process streaming it),
/// asks the daemon to cancel it and waits for its terminal event: `cancelled: run RUN`, or
/// `run RUN already ended (STATE)` for a run that had ended (or ended otherwise first).
pub async fn cancel(args: &RunRef) -> Result<ExitCode, CliError> {
    let name = &args.run;
    let endpoint = Endpoint::open()?;
    let (session, _) = endpoint.reconnect(name, "cancel").await?;
    cancel_run(&session, name, &endpoint).await
}

/// `agent cancel`'s generic part, over a session that may cancel the run `name`: asks for
/// the cancel, waits (at most [`CANCEL_WAIT`]) for the run's terminal event, closes the
/// session, records the state through `hooks` and prints how the run ended.
pub(crate) async fn cancel_run<S, H>(
    session: &S,
    name: &str,
    hooks: &H,
) -> Result<ExitCode, CliError>
where
    S: c::Session,
    H: AdapterHooks<S>,
{
    let run = c::RunRef::new(name).map_err(|e| io_error("run", e))?;
    let reason = c::CancelReason::new("agent cancel").ok();
    let outcome = session.cancel(operation()?, run.clone(), reason).await;
    let requested = matches!(outcome, Ok(c::CancelResult::Requested));
    let state = match outcome {
        Ok(c::CancelResult::AlreadyTerminal(sequence)) => {
            terminal_state(session, &run, sequence - 1).await
        }
        Ok(c::CancelResult::Requested) => {
            match tokio::time::timeout(CANCEL_WAIT, terminal_state(session, &run, 0)).await {
                Ok(state) => state,
                Err(_) => Err(CliError::Daemon(format!(
                    "run {name}: the daemon accepted the cancel, but the run did not end within {} s",
                    CANCEL_WAIT.as_secs()
                ))),
            }
        }
        Err(e) => Err(client_error("cancel", &e)),
    };
    session.close();
    let state = state?;
    hooks.ended(name, state);
    if requested && state == "cancelled" {
        println(&format!("cancelled: run {name}"))?;
    } else {
        println(&format!("run {name} already ended ({state})"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `agent resume RUN`: resumes a suspended run in the daemon and prints the next sequence
/// (follow it with `agent attach RUN --from SEQ`).
pub async fn resume(args: &RunRef) -> Result<ExitCode, CliError> {
    let endpoint = Endpoint::open()?;
    let (session, _) = endpoint.reconnect(&args.run, "resume").await?;
    let run = c::RunRef::new(&args.run).map_err(|e| io_error("run", e))?;
    let result = session
        .resume(operation()?, run)
        .await
        .map_err(|e| client_error("resume", &e));
    session.close();
    let result = result?;
    endpoint.record_state(&args.run, "running");
    println(&format!(
        "resumed {} at sequence {}",
        args.run,
        result.next_sequence()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// `agent export RUN [-o FILE]`: writes the run's signed snapshot envelope, in the one
/// snapshot format (the run authority's JSON envelope, as `--suspend` writes it), to FILE
/// (mode 0600, atomically; checked before the daemon is asked) or stdout.
pub async fn export(args: &ExportArgs) -> Result<ExitCode, CliError> {
    let destination = match &args.output {
        Some(file) => {
            Some(SnapshotFile::reserve(file).map_err(|e| CliError::Usage(e.to_string()))?)
        }
        None => None,
    };
    let endpoint = Endpoint::open()?;
    let (session, _) = endpoint.reconnect(&args.run.run, "export").await?;
    let run = c::RunRef::new(&args.run.run).map_err(|e| io_error("run", e))?;
    let snapshot = session.export(run).await;
    session.close();
    let snapshot = snapshot.map_err(|e| client_error("export", &e))?;
    let json = snapshot::from_wire(snapshot.bytes()).ok_or_else(|| {
        CliError::Daemon("export: the daemon's snapshot is not a signed envelope".to_owned())
    })?;
    match destination {
        Some(file) => {
            let shown = file.path().display().to_string();
            file.commit(&json).map_err(|e| io_error(&shown, e))?;
        }
        None => crate::cli::output::write_stdout(&json).map_err(|e| io_error("stdout", e))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `agent import FILE`: imports a signed snapshot envelope (from `agent export` or
/// `agent --suspend`) into the daemon as a suspended run (once: the run authority refuses a
/// second import of the same snapshot), records it in the run index and prints its id.
pub async fn import(args: &ImportArgs) -> Result<ExitCode, CliError> {
    let shown = args.file.display().to_string();
    let bytes = std::fs::read(&args.file).map_err(|e| io_error(&shown, e))?;
    let envelope = snapshot::decode_envelope(&bytes).map_err(|e| {
        CliError::Daemon(format!(
            "{shown}: {}",
            agent_authority::AuthorityError::from(e)
        ))
    })?;
    let wire = snapshot::to_wire(&envelope).ok_or_else(|| {
        CliError::Daemon(format!(
            "{shown}: the envelope cannot be sent to the daemon (its payload is not JSON)"
        ))
    })?;
    let snapshot = c::Snapshot::new(wire).map_err(|e| io_error(&shown, e))?;
    let endpoint = Endpoint::open()?;
    let session = endpoint.attach_only(None).await?;
    let result = session.import(operation()?, snapshot).await;
    let result = match result {
        Ok(result) => result,
        Err(e) => {
            session.close();
            return Err(client_error("import", &e));
        }
    };
    endpoint.record_run(
        session.connection(),
        result.run().as_str(),
        "import",
        "suspended",
    )?;
    session.close();
    println(result.run().as_str())?;
    Ok(ExitCode::SUCCESS)
}
