//! `agent suspend`, `agent resume`, `agent export` and `agent import`.

use std::process::ExitCode;

use agent_client as c;
use agent_client::Session as _;

use crate::cli::args::{ExportArgs, ImportArgs, RunRef};
use crate::cli::error::CliError;
use crate::cli::snapshot::{self, SnapshotFile};

use super::client::Endpoint;
use super::{client_error, io_error, operation};

/// A line on stdout; a closed stdout ends the command quietly (see `crate::cli::output`).
fn println(line: &str) -> Result<(), CliError> {
    crate::cli::output::println(line).map_err(|e| io_error("stdout", e))
}

/// `agent suspend RUN`: suspends the run at its next turn boundary and prints the boundary
/// sequence.
pub async fn suspend(args: &RunRef) -> Result<ExitCode, CliError> {
    let endpoint = Endpoint::open()?;
    let (session, _) = endpoint.reconnect(&args.run).await?;
    let run = c::RunRef::new(&args.run).map_err(|e| io_error("run", e))?;
    let result = session
        .suspend(operation()?, run)
        .await
        .map_err(|e| client_error("suspend", &e));
    session.close();
    let result = result?;
    endpoint.record_state(&args.run, "suspended");
    println(&format!(
        "suspended {} at sequence {}",
        args.run,
        result.boundary_sequence()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// `agent resume RUN`: resumes a suspended run in the daemon and prints the next sequence
/// (follow it with `agent attach RUN --from SEQ`).
pub async fn resume(args: &RunRef) -> Result<ExitCode, CliError> {
    let endpoint = Endpoint::open()?;
    let (session, _) = endpoint.reconnect(&args.run).await?;
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
    let (session, _) = endpoint.reconnect(&args.run.run).await?;
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
