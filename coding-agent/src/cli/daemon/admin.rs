//! `agent daemon status` and `agent daemon stop`: the local daemon itself.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use agent_client::Session as _;

use crate::cli::error::CliError;

use super::client::Endpoint;
use super::{DAEMON_LOG, SHUTDOWN_DEADLINE, client_error, io_error};

/// How long `agent daemon stop` waits for the daemon to exit: its own shutdown deadline
/// and a margin for stopping its runs and closing the authority.
pub const STOP_WAIT: Duration = Duration::from_secs(SHUTDOWN_DEADLINE.as_secs() + 5);
/// How often it looks.
const STOP_POLL: Duration = Duration::from_millis(50);

/// `agent daemon status`: the live daemon's pid, scope, workspace, protocol version and
/// active runs (exit 0), or that none runs in this scope (exit 3). Never starts one.
pub async fn status() -> Result<ExitCode, CliError> {
    let endpoint = Endpoint::open()?;
    let record = endpoint.live_record()?;
    let session = endpoint.attach_only(None).await?;
    let protocol = session.connection().protocol();
    let health = session.health().await;
    session.close();
    let health = health.map_err(|e| client_error("health", &e))?;
    let workspace = endpoint
        .daemon_workspace()
        .map_or_else(|| "unknown".to_owned(), |p| p.display().to_string());
    let log = endpoint.scope_dir().join(DAEMON_LOG);
    let _ = crate::cli::output::println(&format!("daemon: running (pid {})", record.process_id));
    let _ = crate::cli::output::println(&format!("scope: {}", endpoint.scope_dir().display()));
    let _ = crate::cli::output::println(&format!("workspace: {workspace}"));
    let _ = crate::cli::output::println(&format!("protocol: {protocol}"));
    let _ = crate::cli::output::println(&format!("active runs: {}", health.active_runs()));
    if log.exists() {
        let _ = crate::cli::output::println(&format!("log: {}", log.display()));
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether process `pid` is gone (a zombie, not yet reaped by its parent, counts as gone).
fn has_exited(pid: rustix::process::Pid) -> bool {
    if rustix::process::test_kill_process(pid).is_err() {
        return true;
    }
    // `/proc/PID/stat`: `pid (comm) STATE ...`; the command may hold spaces or parens.
    std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero()))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|s| s == "Z"))
        })
        .unwrap_or(false)
}

/// `agent daemon stop`: sends SIGTERM to the daemon of this scope and waits (at most
/// [`STOP_WAIT`]) until it has exited. The pid is the live endpoint record's (its
/// liveness lock is held, in this user's private scope), and the daemon must answer an
/// Initialize with the record's credential first, so a stale record's pid, reused by
/// another process, is never signalled. Exit 0 when it stopped, 3 when none runs.
pub async fn stop() -> Result<ExitCode, CliError> {
    let endpoint = Endpoint::open()?;
    let record = endpoint.live_record()?;
    let session = endpoint.attach_only(None).await?;
    session.close();
    let raw = i32::try_from(record.process_id).ok();
    let pid = raw
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| {
            CliError::Daemon(format!(
                "the endpoint record's pid {} is invalid",
                record.process_id
            ))
        })?;
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).map_err(|e| {
        io_error(
            &format!("SIGTERM to the daemon (pid {})", record.process_id),
            e,
        )
    })?;
    crate::cli::output::eprintln(&format!(
        "agent: sent SIGTERM to the daemon (pid {}); waiting for it to stop…",
        record.process_id
    ));
    let deadline = Instant::now() + STOP_WAIT;
    while !has_exited(pid) {
        if Instant::now() >= deadline {
            return Err(CliError::Daemon(format!(
                "the daemon (pid {}) did not stop within {} s; `kill -KILL {}` ends it at once",
                record.process_id,
                STOP_WAIT.as_secs(),
                record.process_id
            )));
        }
        tokio::time::sleep(STOP_POLL).await;
    }
    let _ = crate::cli::output::println(&format!(
        "stopped the daemon (pid {}) of {}",
        record.process_id,
        endpoint.scope_dir().display()
    ));
    Ok(ExitCode::SUCCESS)
}
