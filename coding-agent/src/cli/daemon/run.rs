//! `agent run --daemon` and `agent attach`: following a run's events, answering its
//! approvals, and the exit code of how it ended.

use std::process::ExitCode;
use std::sync::Arc;

use agent_client as c;
use agent_client::{EventStream as _, InteractionStream as _, Session as _};
use agent_client_grpc::GrpcSession;

use crate::approval::ApprovalMode;
use crate::cli::approve::{Approver, Refusals, StdinApprover};
use crate::cli::args::{AttachArgs, RunArgs};
use crate::cli::error::{CliError, EXIT_CANCELLED};
use crate::cli::output::{self, Stdout};
use crate::cli::progress::Spinner;
use crate::cli::render::{MAX_LINE_DETAIL_CHARS, Renderer, Style, Tone, ToolLine, bounded};

use super::client::{Endpoint, initialize_request};
use super::{
    ATTACH_LOCK_TIMEOUT, CODING_AGENT_DEFINITION, INTERRUPT_REASON, client_error, io_error,
    operation, random_token,
};

/// Answers the run's pending interactions until the stream ends
/// (`crate::cli::approve`, as the one-shot form does).
async fn answer_interactions(
    session: Arc<GrpcSession>,
    run: c::RunRef,
    mut approver: StdinApprover,
) {
    let Ok(mut stream) = session
        .interactions(c::InteractionStreamOptions { tail: true })
        .await
    else {
        return;
    };
    let mut answered = std::collections::BTreeSet::new();
    loop {
        let pending: Vec<c::PendingInteraction> = match stream.next().await {
            Ok(Some(c::InteractionFrame::Snapshot(snapshot))) => snapshot.pending().to_vec(),
            Ok(Some(c::InteractionFrame::Update(update)))
                if update.kind() == c::InteractionUpdateKind::Opened =>
            {
                vec![update.interaction().clone()]
            }
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => return,
        };
        for interaction in pending {
            if interaction.run() != &run || !answered.insert(interaction.id().clone()) {
                continue;
            }
            let value = approver
                .answer_on_terminal(interaction.id().as_str(), interaction.prompt())
                .await;
            let (Ok(value), Ok(op)) = (
                c::StructuredValue::parse(value.to_string().into_bytes()),
                operation(),
            ) else {
                continue;
            };
            let _ = session
                .respond(op, run.clone(), interaction.id().clone(), value)
                .await;
        }
    }
}

/// How a followed run ended for the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ending {
    Completed,
    /// The run failed, with the reason its `run.failed` event gives.
    Failed(String),
    Cancelled,
    /// Another process reconnected as the run's owner.
    Fenced,
    /// The daemon went away or refused the stream (why, in its safe words).
    Lost(String),
    /// Ctrl-C while attached (no cancel sent).
    Detached,
}

/// Prints one event for a human, through the one-shot form's renderer. The daemon's events
/// carry no tool arguments or results, so a tool line says the name and the outcome; what
/// this client refused is known here (the wire does not tell a refusal from a success).
fn render(
    event: &c::Event,
    renderer: &mut Renderer<Stdout>,
    refusals: &Refusals,
) -> std::io::Result<()> {
    use c::EventDetail as D;
    match event.detail() {
        D::ModelStarted { .. } => renderer.model_started(),
        D::ModelDelta { text } => renderer.text(text)?,
        // A model failure is said once, by the summary line.
        D::ModelCompleted { .. } | D::ModelFailed(_) => renderer.model_ended(),
        D::ToolTerminal(t) => {
            let line = match (refusals.take(t.call_id()), t.outcome(), t.problem()) {
                (Some(refused), _, _) => ToolLine::from_event(t.name(), Tone::Refused, refused),
                (None, c::ToolOutcome::Completed, _) => {
                    ToolLine::from_event(t.name(), Tone::Ok, "ok")
                }
                (None, _, Some(problem)) => ToolLine::from_event(
                    t.name(),
                    Tone::Failed,
                    format!("failed: {}", bounded(problem, MAX_LINE_DETAIL_CHARS)),
                ),
                (None, _, None) => ToolLine::from_event(t.name(), Tone::Failed, "failed"),
            };
            renderer.tool(&line)?;
        }
        _ => {}
    }
    Ok(())
}

/// One event as a JSON line: run, sequence, kind and the event's data (`model.delta` with
/// its text), in the one-shot form's field names where they exist.
fn event_json(event: &c::Event) -> String {
    serde_json::json!({
        "run": event.run().as_str(),
        "sequence": event.sequence(),
        "kind": event.kind().name(),
        "data": detail_json(event.detail()),
    })
    .to_string()
}

fn detail_json(detail: &c::EventDetail) -> serde_json::Value {
    use c::EventDetail as D;
    use serde_json::json;
    match detail {
        D::RunStarted { definition } => json!({ "agent": definition }),
        D::RunCompleted => json!({}),
        D::Status { text } => json!({ "text": text }),
        D::Turn { turn } => json!({ "turn": turn }),
        D::ModelStarted { turn, operation } => json!({ "turn": turn, "operation": operation }),
        D::ModelDelta { text } => json!({ "text": text }),
        D::ModelCompleted { usage } => json!({
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
        }),
        D::ModelFailed(f) => json!({
            "problem": f.code(),
            "message": f.message(),
            "retryable": f.retryable(),
            "before_stream": f.before_stream(),
        }),
        D::ToolStarted { call_id, name } => json!({ "call_id": call_id, "name": name }),
        D::ToolProgress { call_id, message } => {
            json!({ "call_id": call_id, "message": message })
        }
        D::ToolTerminal(t) => json!({
            "call_id": t.call_id(),
            "name": t.name(),
            "outcome": match t.outcome() {
                c::ToolOutcome::Completed => "completed",
                c::ToolOutcome::Failed => "failed",
                c::ToolOutcome::Uncertain => "uncertain",
            },
            "problem": t.problem(),
        }),
        D::InteractionStarted { id, kind } => json!({ "id": id, "kind": kind }),
        D::InteractionTerminal { id, problem } => json!({ "id": id, "problem": problem }),
    }
}

/// The Ctrl-C handler, installed before anything starts, so an early Ctrl-C is seen
/// (not the default action, which would kill the process without a cancel).
fn interrupt() -> Result<tokio::signal::unix::Signal, CliError> {
    use tokio::signal::unix::{SignalKind, signal};
    signal(SignalKind::interrupt()).map_err(|e| io_error("signal handler", e))
}

/// What [`follow`] does on Ctrl-C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnInterrupt {
    /// Send a cancel and keep following until the terminal event.
    Cancel,
    /// Stop following.
    Detach,
}

/// Follows `run` from `after`: replays and tails its events (reopening the stream at the
/// last delivered sequence when a page ends), printing each, until its terminal event.
async fn follow(
    session: &GrpcSession,
    run: &c::RunRef,
    mut after: u64,
    json: bool,
    refusals: &Refusals,
    (mut interrupt, on_interrupt): (tokio::signal::unix::Signal, OnInterrupt),
) -> Result<Ending, CliError> {
    let limits = *session.connection().limits();
    let options = c::EventStreamOptions::new(limits.replay_events(), true, &limits)
        .map_err(|e| io_error("event stream", e))?;
    let mut renderer = Renderer::new(Stdout, Spinner::stderr(), Style::detect());
    let mut cancelled = false;
    // Events up to here were asked to be skipped; only a re-read of the terminal (below)
    // delivers any of them again, and it is not printed twice.
    let printed_after = after;
    let mut rewound = false;
    loop {
        let mut stream = match session
            .events(c::Cursor::new(run.clone(), after), options)
            .await
        {
            Ok(stream) => stream,
            // The retained window starts later (an imported run keeps only what follows
            // its snapshot): read on from where the daemon says to.
            Err(c::Error::CursorGap(gap)) if gap.recovery() > after => {
                let _ = crate::cli::progress::write_stderr(
                    format!(
                        "agent: events up to {} are not retained; from {}\n",
                        gap.recovery(),
                        gap.recovery() + 1
                    )
                    .as_bytes(),
                );
                after = gap.recovery();
                continue;
            }
            Err(e) => return Ok(stream_ending(&e)),
        };
        loop {
            let frame = tokio::select! {
                frame = stream.next() => frame,
                _ = interrupt.recv() => {
                    match on_interrupt {
                        OnInterrupt::Detach => {
                            let _ = renderer.finish();
                            return Ok(Ending::Detached);
                        }
                        OnInterrupt::Cancel if !cancelled => {
                            cancelled = true;
                            let reason = c::CancelReason::new(INTERRUPT_REASON).ok();
                            if let Err(e) = session.cancel(operation()?, run.clone(), reason).await {
                                let _ = crate::cli::progress::write_stderr(
                                    format!("agent: cancel: {e}\n").as_bytes(),
                                );
                            }
                        }
                        OnInterrupt::Cancel => {}
                    }
                    continue;
                }
            };
            match frame {
                Ok(Some(c::EventFrame::Event(event))) => {
                    after = event.sequence();
                    if after > printed_after {
                        let written = if json {
                            output::println(&event_json(&event))
                        } else {
                            render(&event, &mut renderer, refusals)
                        };
                        // Nobody reads stdout any more: stop following (the run goes on
                        // in the daemon; `main` ends quietly).
                        if written.is_err() && output::stdout_closed() {
                            return Ok(Ending::Detached);
                        }
                    }
                    if is_run_terminal(&event) {
                        if !json {
                            let _ = renderer.finish();
                        }
                        return Ok(match (event.kind(), event.detail()) {
                            (c::EventKind::RunCompleted, _) => Ending::Completed,
                            (c::EventKind::RunCancelled, _) => Ending::Cancelled,
                            (_, c::EventDetail::Status { text }) => Ending::Failed(text.clone()),
                            _ => Ending::Failed(String::new()),
                        });
                    }
                }
                // Nothing follows the cursor and nothing will: the run ended at or before
                // it (`attach --from` its last event). Re-read its last event, once, for
                // the ending.
                Ok(Some(c::EventFrame::Control(control)))
                    if !control.tailing()
                        && !control.has_more()
                        && control.last_delivered() >= control.latest() =>
                {
                    if rewound || control.latest() == 0 {
                        let _ = renderer.finish();
                        return Ok(Ending::Lost(format!(
                            "run {} has no terminal event after sequence {after}",
                            run.as_str()
                        )));
                    }
                    rewound = true;
                    after = control.latest() - 1;
                    break;
                }
                Ok(Some(c::EventFrame::Control(_))) => {}
                // The page ended without tailing: read on from the last sequence.
                Ok(None) => break,
                Err(e) => {
                    let _ = renderer.finish();
                    return Ok(stream_ending(&e));
                }
            }
        }
    }
}

/// Whether `event` ends the run (not just its turn, model call or tool call).
fn is_run_terminal(event: &c::Event) -> bool {
    matches!(
        event.kind(),
        c::EventKind::RunCompleted | c::EventKind::RunFailed | c::EventKind::RunCancelled
    )
}

fn stream_ending(error: &c::Error) -> Ending {
    match error {
        c::Error::Closed | c::Error::StaleSession(_) => Ending::Fenced,
        other => Ending::Lost(other.to_string()),
    }
}

/// What a fenced process says: who took its run over (the subcommand the run index
/// records for the reconnect that fenced it).
fn fenced_message(endpoint: &Endpoint, run: &str) -> String {
    let by = endpoint
        .index
        .read()
        .ok()
        .and_then(|index| index.runs.get(run).and_then(|e| e.taken_over_by.clone()));
    match by.as_deref() {
        Some("attach") => format!("another attach took over run {run} (this one detached)"),
        Some(command) => format!("`agent {command}` took over run {run} (this one detached)"),
        None => format!("another client took over run {run} (this one detached)"),
    }
}

/// The summary line (the renderer ended stdout on a line boundary) and the exit code.
fn exit_for(ending: Ending, run: &str, endpoint: &Endpoint) -> Result<ExitCode, CliError> {
    // Nobody reads stdout any more: end quietly.
    if output::stdout_closed() {
        return Ok(ExitCode::SUCCESS);
    }
    let say = |line: String| output::eprintln(&line);
    match ending {
        Ending::Completed => {
            say(format!("done: run {run}"));
            Ok(ExitCode::SUCCESS)
        }
        Ending::Cancelled => {
            say(format!("cancelled: run {run}"));
            Ok(ExitCode::from(EXIT_CANCELLED))
        }
        // Says why, as the one-shot form does.
        Ending::Failed(why) if !why.is_empty() => {
            say(format!("failed ({why}): run {run}"));
            Ok(ExitCode::FAILURE)
        }
        Ending::Failed(_) => {
            say(format!("failed: run {run}"));
            Ok(ExitCode::FAILURE)
        }
        Ending::Detached => {
            say(format!(
                "detached from run {run}; it keeps running (`agent attach {run}`)"
            ));
            Ok(ExitCode::from(EXIT_CANCELLED))
        }
        Ending::Fenced => Err(CliError::Daemon(fenced_message(endpoint, run))),
        Ending::Lost(why) => Err(CliError::Daemon(format!("run {run}: events: {why}"))),
    }
}

fn ending_state(ending: &Ending) -> Option<&'static str> {
    match ending {
        Ending::Completed => Some("completed"),
        Ending::Failed(_) => Some("failed"),
        Ending::Cancelled => Some("cancelled"),
        _ => None,
    }
}

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
    let interrupted = interrupt()?;
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
    let definition_id = args
        .definition
        .clone()
        .unwrap_or_else(|| CODING_AGENT_DEFINITION.to_owned());
    let definition = session
        .connection()
        .catalog()
        .definitions()
        .iter()
        .find(|d| d.reference().id() == definition_id)
        .map(|d| d.reference().clone())
        .ok_or_else(|| {
            CliError::Daemon(format!("the daemon serves no definition {definition_id}"))
        })?;
    let task = args.task.task().unwrap_or_default();
    let input = c::Input::new(&random_token("msg"), &task).map_err(|e| io_error("task", e))?;
    // Held while this process streams the run, so `agent runs` does not fence it.
    let client = session.connection().client_id().to_owned();
    let _attached = endpoint
        .index
        .try_attach(&client)
        .map_err(|e| io_error("run index", e))?;
    let started = session
        .start_in_workspace(
            c::StartRequest {
                operation: operation()?,
                definition,
                input,
            },
            &workspace,
        )
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
        })?;
    let run = started.run().clone();
    endpoint.record_run(
        session.connection(),
        run.as_str(),
        &definition_id,
        "running",
    )?;
    output::eprintln(&format!("agent: run {run} in the daemon"));
    let session = Arc::new(session);
    let refusals = Refusals::default();
    let approver = Approver::stdin(args.task.mode(), refusals.clone());
    let answering = tokio::spawn(answer_interactions(session.clone(), run.clone(), approver));
    let ending = follow(
        &session,
        &run,
        0,
        args.task.json,
        &refusals,
        (interrupted, OnInterrupt::Cancel),
    )
    .await;
    answering.abort();
    let ending = ending?;
    if let Some(state) = ending_state(&ending) {
        endpoint.record_state(run.as_str(), state);
    }
    session.close();
    exit_for(ending, run.as_str(), &endpoint)
}

/// `agent attach RUN [--from SEQ]`: reconnects as the run's owner (fencing any other
/// process streaming it), replays the run's events after `SEQ` and follows them until
/// the run ends, answering its approvals on the terminal. Ctrl-C detaches (exit 130)
/// without cancelling the run.
pub async fn attach(args: &AttachArgs) -> Result<ExitCode, CliError> {
    let interrupted = interrupt()?;
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
    if held_elsewhere {
        crate::cli::output::eprintln(&format!(
            "agent: took over run {} from another client",
            args.run.run
        ));
    } else {
        crate::cli::output::eprintln(&format!(
            "agent: attached to run {}; Ctrl-C detaches (the run goes on)",
            args.run.run
        ));
    }
    let run = c::RunRef::new(&args.run.run).map_err(|e| io_error("run", e))?;
    let session = Arc::new(session);
    let refusals = Refusals::default();
    let approver = Approver::stdin(ApprovalMode::Ask, refusals.clone());
    let answering = tokio::spawn(answer_interactions(session.clone(), run.clone(), approver));
    let ending = follow(
        &session,
        &run,
        args.from,
        false,
        &refusals,
        (interrupted, OnInterrupt::Detach),
    )
    .await;
    answering.abort();
    let ending = ending?;
    if let Some(state) = ending_state(&ending) {
        endpoint.record_state(run.as_str(), state);
    }
    session.close();
    exit_for(ending, run.as_str(), &endpoint)
}

/// The state `run` ended in (`completed`, `failed`, `cancelled`): its events after
/// `after` are read, and followed, until its terminal event.
pub(super) async fn terminal_state(
    session: &GrpcSession,
    run: &c::RunRef,
    mut after: u64,
) -> Result<&'static str, CliError> {
    let limits = *session.connection().limits();
    let options = c::EventStreamOptions::new(limits.replay_events(), true, &limits)
        .map_err(|e| io_error("event stream", e))?;
    let mut rewound = false;
    loop {
        let mut stream = match session
            .events(c::Cursor::new(run.clone(), after), options)
            .await
        {
            Ok(stream) => stream,
            Err(c::Error::CursorGap(gap)) if gap.recovery() > after => {
                after = gap.recovery();
                continue;
            }
            Err(e) => return Err(client_error("events", &e)),
        };
        loop {
            match stream.next().await {
                Ok(Some(c::EventFrame::Event(event))) => {
                    after = event.sequence();
                    match event.kind() {
                        c::EventKind::RunCompleted => return Ok("completed"),
                        c::EventKind::RunFailed => return Ok("failed"),
                        c::EventKind::RunCancelled => return Ok("cancelled"),
                        _ => {}
                    }
                }
                // Nothing follows the cursor: the run ended at or before it. Re-read its
                // last event, once.
                Ok(Some(c::EventFrame::Control(control)))
                    if !control.tailing()
                        && !control.has_more()
                        && control.last_delivered() >= control.latest() =>
                {
                    if rewound || control.latest() == 0 {
                        return Err(CliError::Daemon(format!(
                            "run {}: no terminal event",
                            run.as_str()
                        )));
                    }
                    rewound = true;
                    after = control.latest() - 1;
                    break;
                }
                Ok(Some(c::EventFrame::Control(_))) => {}
                Ok(None) => break,
                Err(e) => return Err(client_error("events", &e)),
            }
        }
    }
}
