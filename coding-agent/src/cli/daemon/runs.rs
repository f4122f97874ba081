//! `agent runs`: the run index with each run's state.

use std::process::ExitCode;

use agent_client as c;
use agent_client::{EventStream as _, Session as _};

use super::index::RunEntry;
use crate::cli::error::CliError;

use super::client::Endpoint;
use super::io_error;

/// `agent runs`: lists the runs in this user's run index with their state (`RUN STATE
/// DEFINITION`). A run whose client another process is attached to is shown as
/// `attached` without asking the daemon (asking would fence that process); the others
/// are asked by reconnecting as their owner.
pub async fn runs() -> Result<ExitCode, CliError> {
    let endpoint = Endpoint::open()?;
    let index = endpoint
        .index
        .read()
        .map_err(|e| io_error("run index", e))?;
    let mut rows: Vec<(&String, &RunEntry)> = index.runs.iter().collect();
    rows.sort_by_key(|(run, e)| (e.recorded, run.as_str()));
    for (run, entry) in rows {
        let state = match endpoint.index.try_attach(&entry.client) {
            Ok(None) => "attached".to_owned(),
            Ok(Some(_held)) if is_final(&entry.state) => entry.state.clone(),
            Ok(Some(_held)) => match probe_state(&endpoint, run).await {
                Some(state) => {
                    endpoint.record_state(run, &state);
                    state
                }
                None => "unknown".to_owned(),
            },
            Err(_) => "unknown".to_owned(),
        };
        crate::cli::output::println(&format!("{run}\t{state}\t{}", entry.definition))
            .map_err(|e| io_error("stdout", e))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn is_final(state: &str) -> bool {
    matches!(state, "completed" | "failed" | "cancelled" | "exported")
}

/// The run's state from its last retained event: a terminal kind, `suspended` when the
/// index says so and it has not ended, else `running`.
async fn probe_state(endpoint: &Endpoint, run: &str) -> Option<String> {
    let (session, entry) = endpoint.reconnect(run, "runs").await.ok()?;
    let run_ref = c::RunRef::new(run).ok()?;
    let limits = *session.connection().limits();
    let options = c::EventStreamOptions::new(1, false, &limits).ok()?;
    let mut stream = session
        .events(c::Cursor::new(run_ref.clone(), 0), options)
        .await
        .ok()?;
    let mut latest = 0;
    while let Ok(Some(frame)) = stream.next().await {
        if let c::EventFrame::Control(control) = frame {
            latest = control.latest();
        }
    }
    let mut last = None;
    if latest > 0 {
        let mut stream = session
            .events(c::Cursor::new(run_ref, latest - 1), options)
            .await
            .ok()?;
        while let Ok(Some(frame)) = stream.next().await {
            if let c::EventFrame::Event(event) = frame {
                last = Some(event.kind());
            }
        }
    }
    session.close();
    Some(match last {
        Some(c::EventKind::RunCompleted) => "completed".to_owned(),
        Some(c::EventKind::RunFailed) => "failed".to_owned(),
        Some(c::EventKind::RunCancelled) => "cancelled".to_owned(),
        _ if entry.state == "suspended" => "suspended".to_owned(),
        _ => "running".to_owned(),
    })
}
