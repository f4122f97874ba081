//! `agent suspend`, `agent resume`, `agent export` and `agent import`.

use std::io::Write;
use std::process::ExitCode;

use agent_client as c;
use agent_client::Session as _;

use crate::cli::args::{ExportArgs, ImportArgs, RunRef};
use crate::cli::error::CliError;

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

/// `agent export RUN [-o FILE]`: writes the run's signed snapshot envelope to FILE (mode
/// 0600) or stdout.
pub async fn export(args: &ExportArgs) -> Result<ExitCode, CliError> {
    let endpoint = Endpoint::open()?;
    let (session, _) = endpoint.reconnect(&args.run.run).await?;
    let run = c::RunRef::new(&args.run.run).map_err(|e| io_error("run", e))?;
    let snapshot = session.export(run).await;
    session.close();
    let snapshot = snapshot.map_err(|e| client_error("export", &e))?;
    match &args.output {
        Some(file) => {
            use std::os::unix::fs::OpenOptionsExt;
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(file)
                .map_err(|e| io_error(&file.display().to_string(), e))?;
            out.write_all(snapshot.bytes())
                .and_then(|()| out.sync_all())
                .map_err(|e| io_error(&file.display().to_string(), e))?;
        }
        None => {
            crate::cli::output::write_stdout(snapshot.bytes()).map_err(|e| io_error("stdout", e))?
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `agent import FILE`: imports a signed snapshot envelope into the daemon as a suspended
/// run (once: the run authority refuses a second import of the same snapshot), records it
/// in the run index and prints its id.
pub async fn import(args: &ImportArgs) -> Result<ExitCode, CliError> {
    let bytes =
        std::fs::read(&args.file).map_err(|e| io_error(&args.file.display().to_string(), e))?;
    let snapshot = c::Snapshot::new(bytes).map_err(|e| io_error("snapshot", e))?;
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
