//! `agent runs`: the runs with each one's state.

use std::future::Future;
use std::process::ExitCode;

use agent_client as c;
use agent_client::{EventStream as _, Session as _};

use super::index::RunEntry;
use crate::cli::error::CliError;

use super::client::Endpoint;
use super::io_error;

/// One line of `agent runs`: `RUN STATE DEFINITION`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunSummary {
    /// The run's id.
    pub(crate) run: String,
    /// `running`, `suspended`, `completed`, `failed`, `cancelled`, `exported`, `attached`
    /// (another process follows it) or `unknown`.
    pub(crate) state: String,
    /// The id of the definition it was started from (`import` for an imported run).
    pub(crate) definition: String,
}

/// Where `agent runs` finds the runs it lists. The seam has no call that lists runs (a
/// session reaches a run by its id only), so each adapter implements this: the local
/// daemon's [`Endpoint`] reads the CLI's run index; another adapter asks its own store of
/// runs and may tell each one's state with [`probe_run_state`] over its session.
pub(crate) trait RunLister {
    /// The runs, oldest first, with their states.
    fn list_runs(&self) -> impl Future<Output = Result<Vec<RunSummary>, CliError>> + Send;
}

/// `agent runs`: lists the runs in this user's run index with their state (`RUN STATE
/// DEFINITION`). A run whose client another process is attached to is shown as
/// `attached` without asking the daemon (asking would fence that process); the others
/// are asked by reconnecting as their owner.
pub async fn runs() -> Result<ExitCode, CliError> {
    let endpoint = Endpoint::open()?;
    print_runs(&endpoint).await
}

/// `agent runs`' generic part: one line per run `lister` lists.
pub(crate) async fn print_runs(lister: &impl RunLister) -> Result<ExitCode, CliError> {
    for summary in lister.list_runs().await? {
        let RunSummary {
            run,
            state,
            definition,
        } = summary;
        crate::cli::output::println(&format!("{run}\t{state}\t{definition}"))
            .map_err(|e| io_error("stdout", e))?;
    }
    Ok(ExitCode::SUCCESS)
}

impl RunLister for Endpoint {
    /// The run index's runs, oldest first. A run whose client another process is attached
    /// to is `attached` without asking the daemon (asking would fence that process); a run
    /// the index knows ended keeps that state; the others are asked by reconnecting as
    /// their owner, and what the daemon says is recorded.
    async fn list_runs(&self) -> Result<Vec<RunSummary>, CliError> {
        let index = self.index.read().map_err(|e| io_error("run index", e))?;
        let mut rows: Vec<(&String, &RunEntry)> = index.runs.iter().collect();
        rows.sort_by_key(|(run, e)| (e.recorded, run.as_str()));
        let mut summaries = Vec::with_capacity(rows.len());
        for (run, entry) in rows {
            let state = match self.index.try_attach(&entry.client) {
                Ok(None) => "attached".to_owned(),
                Ok(Some(_held)) if is_final(&entry.state) => entry.state.clone(),
                Ok(Some(_held)) => match probe_state(self, run).await {
                    Some(state) => {
                        self.record_state(run, &state);
                        state
                    }
                    None => "unknown".to_owned(),
                },
                Err(_) => "unknown".to_owned(),
            };
            summaries.push(RunSummary {
                run: run.clone(),
                state,
                definition: entry.definition.clone(),
            });
        }
        Ok(summaries)
    }
}

fn is_final(state: &str) -> bool {
    matches!(state, "completed" | "failed" | "cancelled" | "exported")
}

/// The state of an indexed run, asked of the daemon as the run's owner.
async fn probe_state(endpoint: &Endpoint, run: &str) -> Option<String> {
    let (session, entry) = endpoint.reconnect(run, "runs").await.ok()?;
    let run_ref = c::RunRef::new(run).ok()?;
    let state = probe_run_state(&session, &run_ref, entry.state == "suspended").await?;
    session.close();
    Some(state.to_owned())
}

/// The state of `run` by its last retained event, over any session: the terminal kind
/// (`completed`, `failed`, `cancelled`), else `suspended` when the caller knows it was
/// suspended (the events do not say), else `running`; `None` when its events cannot be
/// read.
pub(crate) async fn probe_run_state<S: c::Session>(
    session: &S,
    run: &c::RunRef,
    suspended: bool,
) -> Option<&'static str> {
    let limits = *session.connection().limits();
    let options = c::EventStreamOptions::new(1, false, &limits).ok()?;
    let mut stream = session
        .events(c::Cursor::new(run.clone(), 0), options)
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
            .events(c::Cursor::new(run.clone(), latest - 1), options)
            .await
            .ok()?;
        while let Ok(Some(frame)) = stream.next().await {
            if let c::EventFrame::Event(event) = frame {
                last = Some(event.kind());
            }
        }
    }
    Some(match last {
        Some(c::EventKind::RunCompleted) => "completed",
        Some(c::EventKind::RunFailed) => "failed",
        Some(c::EventKind::RunCancelled) => "cancelled",
        _ if suspended => "suspended",
        _ => "running",
    })
}
