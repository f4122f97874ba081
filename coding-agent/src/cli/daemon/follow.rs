//! Following a run over the client seam, whatever adapter the session comes from: starting
//! it, replaying and tailing its events, printing them, answering its approvals on the
//! terminal, and the exit code of how it ended.
//!
//! Everything here is generic over [`agent_client::Session`]. What only the local daemon
//! has (discovery, starting `agent serve`, reconnecting as a run's owner, the run index,
//! the workspace it works in) stays with the gRPC callers in `run.rs`, `control.rs` and
//! `runs.rs`, and reaches in through [`AdapterHooks`].

use std::future::Future;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use agent_client as c;
use agent_client::{EventStream as _, InteractionStream as _};

use crate::approval::ApprovalMode;
use crate::cli::approve::{Approver, Refusals, StdinApprover};
use crate::cli::args::{AttachArgs, RunArgs};
use crate::cli::error::{CliError, EXIT_CANCELLED};
use crate::cli::output::{self, Stdout};
use crate::cli::progress::Spinner;
use crate::cli::render::{MAX_LINE_DETAIL_CHARS, Renderer, Style, Tone, ToolLine, bounded};

use super::{
    CODING_AGENT_DEFINITION, INTERRUPT_REASON, client_error, io_error, operation, random_token,
};

/// What a client adds around the seam for one adapter: how it starts a run and what it
/// records about the runs it follows. The defaults are the seam's alone (start with
/// [`c::Session::start`], record nothing), and `()` takes all of them; the local daemon's
/// hooks keep the CLI's run index and name the run's workspace.
pub(crate) trait AdapterHooks<S: c::Session>: Sync {
    /// Starts a run.
    fn start(
        &self,
        session: &S,
        request: c::StartRequest,
    ) -> impl Future<Output = Result<c::StartResult, CliError>> + Send {
        let started = session.start(request);
        async move { started.await.map_err(|e| client_error("start", &e)) }
    }

    /// Records a run just started from the definition `definition` (its id).
    fn started(
        &self,
        _connection: &c::Connection,
        _run: &c::RunRef,
        _definition: &str,
    ) -> Result<(), CliError> {
        Ok(())
    }

    /// Records the state a run was seen to end in (`completed`, `failed`, `cancelled`).
    fn ended(&self, _run: &str, _state: &str) {}

    /// The subcommand that took `run` over (reconnected as its owner, which fences this
    /// follower), so the fenced follower can say who did.
    fn taken_over_by(&self, _run: &str) -> Option<String> {
        None
    }

    /// Where the runs run, as the CLI names it (`agent: run RUN in the daemon`).
    fn host(&self) -> &'static str {
        "the daemon"
    }
}

/// The seam alone: runs start with [`c::Session::start`] and nothing is recorded.
impl<S: c::Session> AdapterHooks<S> for () {}

/// Ctrl-C as a follower waits for it.
pub(crate) trait Interrupts: Send {
    /// Resolves at the next interrupt.
    fn recv(&mut self) -> impl Future<Output = Option<()>> + Send;
}

impl Interrupts for tokio::signal::unix::Signal {
    fn recv(&mut self) -> impl Future<Output = Option<()>> + Send {
        tokio::signal::unix::Signal::recv(self)
    }
}

/// Where a followed run meets its user: the interrupts it listens for and the output its
/// events go to (the rendered text, or one JSON line per event).
pub(crate) struct Console<I, W> {
    pub(crate) interrupts: I,
    pub(crate) out: W,
}

impl Console<tokio::signal::unix::Signal, Stdout> {
    /// The process's terminal: SIGINT and stdout. The Ctrl-C handler is installed here, so
    /// a caller makes its console before anything starts and an early Ctrl-C is seen (not
    /// the default action, which would kill the process without a cancel).
    pub(crate) fn terminal() -> Result<Self, CliError> {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupts =
            signal(SignalKind::interrupt()).map_err(|e| io_error("signal handler", e))?;
        Ok(Console {
            interrupts,
            out: Stdout,
        })
    }
}

/// What [`follow_run`] does on Ctrl-C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnInterrupt {
    /// Send a cancel and keep following until the terminal event.
    Cancel,
    /// Stop following.
    Detach,
}

/// How [`follow_run`] follows a run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Follow {
    /// The events up to this sequence are skipped (0: from the start).
    pub(crate) after: u64,
    /// One JSON line per event instead of the rendered text.
    pub(crate) json: bool,
    /// How the run's approvals are answered on the terminal.
    pub(crate) approvals: ApprovalMode,
    /// What Ctrl-C does.
    pub(crate) on_interrupt: OnInterrupt,
}

/// `agent run --daemon`'s generic part: starts `args`' task from its definition (default
/// the coding agent's) through `hooks`, then follows the run, cancelling it on Ctrl-C.
/// Exit codes: 0 completed, 1 failed, 130 cancelled.
pub(crate) async fn start_and_follow<S, H>(
    session: Arc<S>,
    args: &RunArgs,
    console: Console<impl Interrupts, impl Write + Clone + Send>,
    hooks: &H,
) -> Result<ExitCode, CliError>
where
    S: c::Session + 'static,
    H: AdapterHooks<S>,
{
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
            CliError::Daemon(format!(
                "{} serves no definition {definition_id}",
                hooks.host()
            ))
        })?;
    let task = args.task.task().unwrap_or_default();
    let input = c::Input::new(&random_token("msg"), &task).map_err(|e| io_error("task", e))?;
    let request = c::StartRequest {
        operation: operation()?,
        definition,
        input,
    };
    let started = hooks.start(&session, request).await?;
    let run = started.run().clone();
    hooks.started(session.connection(), &run, &definition_id)?;
    output::eprintln(&format!("agent: run {run} in {}", hooks.host()));
    let how = Follow {
        after: 0,
        json: args.task.json,
        approvals: args.task.mode(),
        on_interrupt: OnInterrupt::Cancel,
    };
    follow_run(session, run, how, console, hooks).await
}

/// `agent attach`'s generic part: says so (`took_over`: another process was following
/// the run), then follows the run from `args.from`, answering its approvals on the
/// terminal; Ctrl-C detaches (exit 130) without cancelling it.
pub(crate) async fn attach_run<S, H>(
    session: Arc<S>,
    args: &AttachArgs,
    took_over: bool,
    console: Console<impl Interrupts, impl Write + Clone + Send>,
    hooks: &H,
) -> Result<ExitCode, CliError>
where
    S: c::Session + 'static,
    H: AdapterHooks<S>,
{
    let name = &args.run.run;
    if took_over {
        output::eprintln(&format!("agent: took over run {name} from another client"));
    } else {
        output::eprintln(&format!(
            "agent: attached to run {name}; Ctrl-C detaches (the run goes on)"
        ));
    }
    let run = c::RunRef::new(name).map_err(|e| io_error("run", e))?;
    let how = Follow {
        after: args.from,
        json: false,
        approvals: ApprovalMode::Ask,
        on_interrupt: OnInterrupt::Detach,
    };
    follow_run(session, run, how, console, hooks).await
}

/// Follows `run` until it ends, answering its approvals meanwhile, records how it ended
/// through `hooks`, closes the session, says how it ended on stderr and returns the exit
/// code: 0 completed, 1 failed, 130 cancelled or detached; an error when the stream was
/// lost or another client took the run over.
pub(crate) async fn follow_run<S, H>(
    session: Arc<S>,
    run: c::RunRef,
    how: Follow,
    console: Console<impl Interrupts, impl Write + Clone + Send>,
    hooks: &H,
) -> Result<ExitCode, CliError>
where
    S: c::Session + 'static,
    H: AdapterHooks<S>,
{
    let refusals = Refusals::default();
    let approver = Approver::stdin(how.approvals, refusals.clone());
    let answering = tokio::spawn(answer_interactions(session.clone(), run.clone(), approver));
    let ending = follow(&*session, &run, how, &refusals, console).await;
    answering.abort();
    let ending = ending?;
    if let Some(state) = ending_state(&ending) {
        hooks.ended(run.as_str(), state);
    }
    session.close();
    exit_for(ending, run.as_str(), || hooks.taken_over_by(run.as_str()))
}

/// Answers the run's pending interactions until the stream ends
/// (`crate::cli::approve`, as the one-shot form does).
async fn answer_interactions<S: c::Session>(
    session: Arc<S>,
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
fn render<W: Write>(
    event: &c::Event,
    renderer: &mut Renderer<W>,
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

/// `line` and a newline in one write, as [`output::println`] writes stdout.
fn write_line(out: &mut impl Write, line: &str) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    out.write_all(&bytes)
}

/// Follows `run` from `how.after`: replays and tails its events (reopening the stream at
/// the last delivered sequence when a page ends), printing each, until its terminal event.
async fn follow<S: c::Session>(
    session: &S,
    run: &c::RunRef,
    how: Follow,
    refusals: &Refusals,
    console: Console<impl Interrupts, impl Write + Clone>,
) -> Result<Ending, CliError> {
    let Console {
        mut interrupts,
        mut out,
    } = console;
    let Follow {
        mut after,
        json,
        on_interrupt,
        ..
    } = how;
    let limits = *session.connection().limits();
    let options = c::EventStreamOptions::new(limits.replay_events(), true, &limits)
        .map_err(|e| io_error("event stream", e))?;
    let mut renderer = Renderer::new(out.clone(), Spinner::stderr(), Style::detect());
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
                _ = interrupts.recv() => {
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
                            write_line(&mut out, &event_json(&event))
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

/// What a fenced process says: who took its run over (`by`, the subcommand that
/// reconnected as the run's owner, when known).
fn fenced_message(by: Option<String>, run: &str) -> String {
    match by.as_deref() {
        Some("attach") => format!("another attach took over run {run} (this one detached)"),
        Some(command) => format!("`agent {command}` took over run {run} (this one detached)"),
        None => format!("another client took over run {run} (this one detached)"),
    }
}

/// The summary line (the renderer ended stdout on a line boundary) and the exit code.
/// `taken_over_by` is asked only when the run was taken over.
fn exit_for(
    ending: Ending,
    run: &str,
    taken_over_by: impl FnOnce() -> Option<String>,
) -> Result<ExitCode, CliError> {
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
        Ending::Fenced => Err(CliError::Daemon(fenced_message(taken_over_by(), run))),
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

/// The state `run` ended in (`completed`, `failed`, `cancelled`): its events after
/// `after` are read, and followed, until its terminal event.
pub(crate) async fn terminal_state<S: c::Session>(
    session: &S,
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

#[cfg(test)]
mod tests {
    //! The generic path driven by an adapter that is not gRPC: a scripted in-memory
    //! session.

    use std::collections::VecDeque;
    use std::future::{Future, ready};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, PoisonError};
    use std::time::{Duration, UNIX_EPOCH};

    use agent_client as c;

    use super::*;

    const RUN: &str = "run-scripted-1";

    /// A session whose one run has a fixed list of events; it starts that run, and every
    /// other call says the session is closed.
    struct ScriptedSession {
        connection: c::Connection,
        events: Vec<c::Event>,
        /// The cursor of the last `events` call.
        cursor: AtomicU64,
        closed: AtomicBool,
    }

    impl ScriptedSession {
        fn new(events: Vec<c::Event>) -> Self {
            let limits = c::Limits::new(1 << 20, 64, 256, 8 << 20, 8, 8).unwrap();
            let definition = c::Definition::new(
                c::DefinitionRef::new(CODING_AGENT_DEFINITION, "v1").unwrap(),
                "scripted-model",
                10,
            )
            .unwrap();
            let connection = c::Connection::new(c::ConnectionSpec {
                protocol: c::ProtocolVersion::new(1, 3, 0).unwrap(),
                server: c::Build::new("scripted", "0.0.0", "none", "rustc").unwrap(),
                capabilities: vec![],
                limits,
                health: c::Health::new(c::HealthState::Ready, vec![], 0, limits).unwrap(),
                client_id: "client-scripted".to_owned(),
                epoch: 1,
                catalog: c::Catalog::new("catalog-1", vec![definition], &limits).unwrap(),
            })
            .unwrap();
            ScriptedSession {
                connection,
                events,
                cursor: AtomicU64::new(u64::MAX),
                closed: AtomicBool::new(false),
            }
        }
    }

    struct ScriptedEvents(VecDeque<c::EventFrame>);

    impl c::EventStream for ScriptedEvents {
        fn next(&mut self) -> impl Future<Output = Result<Option<c::EventFrame>, c::Error>> + Send {
            ready(Ok(self.0.pop_front()))
        }
        fn close(&self) {}
    }

    /// Nothing is ever pending.
    struct NoInteractions;

    impl c::InteractionStream for NoInteractions {
        fn next(
            &mut self,
        ) -> impl Future<Output = Result<Option<c::InteractionFrame>, c::Error>> + Send {
            ready(Ok(None))
        }
        fn close(&self) {}
    }

    impl c::Session for ScriptedSession {
        type Events = ScriptedEvents;
        type Interactions = NoInteractions;

        fn connection(&self) -> &c::Connection {
            &self.connection
        }
        fn start(
            &self,
            _: c::StartRequest,
        ) -> impl Future<Output = Result<c::StartResult, c::Error>> + Send {
            ready(Ok(c::StartResult::new(
                c::RunRef::new(RUN).unwrap(),
                1,
                false,
                "plan-1",
            )
            .unwrap()))
        }
        fn events(
            &self,
            cursor: c::Cursor,
            _: c::EventStreamOptions,
        ) -> impl Future<Output = Result<ScriptedEvents, c::Error>> + Send {
            self.cursor.store(cursor.after(), Ordering::SeqCst);
            let frames = self
                .events
                .iter()
                .filter(|e| e.run() == cursor.run() && e.sequence() > cursor.after())
                .cloned()
                .map(c::EventFrame::Event)
                .collect();
            ready(Ok(ScriptedEvents(frames)))
        }
        fn interactions(
            &self,
            _: c::InteractionStreamOptions,
        ) -> impl Future<Output = Result<NoInteractions, c::Error>> + Send {
            ready(Ok(NoInteractions))
        }
        fn cancel(
            &self,
            _: c::OperationId,
            _: c::RunRef,
            _: Option<c::CancelReason>,
        ) -> impl Future<Output = Result<c::CancelResult, c::Error>> + Send {
            ready(Err(c::Error::Closed))
        }
        fn respond(
            &self,
            _: c::OperationId,
            _: c::RunRef,
            _: c::InteractionId,
            _: c::StructuredValue,
        ) -> impl Future<Output = Result<c::RespondResult, c::Error>> + Send {
            ready(Err(c::Error::Closed))
        }
        fn suspend(
            &self,
            _: c::OperationId,
            _: c::RunRef,
        ) -> impl Future<Output = Result<c::SuspendResult, c::Error>> + Send {
            ready(Err(c::Error::Closed))
        }
        fn resume(
            &self,
            _: c::OperationId,
            _: c::RunRef,
        ) -> impl Future<Output = Result<c::ResumeResult, c::Error>> + Send {
            ready(Err(c::Error::Closed))
        }
        fn export(
            &self,
            _: c::RunRef,
        ) -> impl Future<Output = Result<c::Snapshot, c::Error>> + Send {
            ready(Err(c::Error::Closed))
        }
        fn import(
            &self,
            _: c::OperationId,
            _: c::Snapshot,
        ) -> impl Future<Output = Result<c::ImportResult, c::Error>> + Send {
            ready(Err(c::Error::Closed))
        }
        fn health(&self) -> impl Future<Output = Result<c::Health, c::Error>> + Send {
            ready(Ok(self.connection.health().clone()))
        }
        fn close(&self) {
            self.closed.store(true, Ordering::SeqCst);
        }
    }

    fn event(sequence: u64, kind: c::EventKind, detail: c::EventDetail) -> c::Event {
        let run = c::RunRef::new(RUN).unwrap();
        let time = UNIX_EPOCH + Duration::from_secs(1_700_000_000 + sequence);
        c::Event::new(run, sequence, time, kind, detail).unwrap()
    }

    /// run.started, model.delta "hello", run.completed.
    fn completed_run() -> Vec<c::Event> {
        vec![
            event(
                1,
                c::EventKind::RunStarted,
                c::EventDetail::RunStarted {
                    definition: CODING_AGENT_DEFINITION.to_owned(),
                },
            ),
            event(
                2,
                c::EventKind::ModelDelta,
                c::EventDetail::ModelDelta {
                    text: "hello".to_owned(),
                },
            ),
            event(3, c::EventKind::RunCompleted, c::EventDetail::RunCompleted),
        ]
    }

    /// Never interrupted.
    struct NoInterrupts;

    impl Interrupts for NoInterrupts {
        fn recv(&mut self) -> impl Future<Output = Option<()>> + Send {
            std::future::pending()
        }
    }

    /// What the follower wrote, kept for the test.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Captured {
        fn text(&self) -> String {
            let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            String::from_utf8(bytes.clone()).unwrap()
        }
    }

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            bytes.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Records what the generic path reports through its hooks.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<String>>);

    impl AdapterHooks<ScriptedSession> for Recorded {
        fn ended(&self, run: &str, state: &str) {
            let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            seen.push(format!("{run} {state}"));
        }
    }

    #[tokio::test]
    async fn a_non_grpc_session_is_followed_to_its_ending() {
        let session = Arc::new(ScriptedSession::new(completed_run()));
        let out = Captured::default();
        let console = Console {
            interrupts: NoInterrupts,
            out: out.clone(),
        };
        let how = Follow {
            after: 0,
            json: false,
            approvals: ApprovalMode::Ask,
            on_interrupt: OnInterrupt::Cancel,
        };
        let recorded = Recorded::default();
        let run = c::RunRef::new(RUN).unwrap();
        let code = follow_run(session.clone(), run, how, console, &recorded)
            .await
            .expect("the run completed");
        assert_eq!(code, ExitCode::SUCCESS);
        assert_eq!(out.text(), "hello\n", "the delta, ended on a line boundary");
        assert_eq!(session.cursor.load(Ordering::SeqCst), 0, "from the start");
        assert_eq!(
            *recorded.0.lock().unwrap(),
            [format!("{RUN} completed")],
            "the ending reached the hooks"
        );
        assert!(session.closed.load(Ordering::SeqCst), "closed at the end");
    }

    #[tokio::test]
    async fn a_non_grpc_session_starts_a_run_with_the_seam_alone_and_prints_json() {
        let session = Arc::new(ScriptedSession::new(completed_run()));
        let out = Captured::default();
        let console = Console {
            interrupts: NoInterrupts,
            out: out.clone(),
        };
        let mut args = RunArgs::default();
        args.task.task = vec!["say".to_owned(), "hello".to_owned()];
        args.task.json = true;
        let code = start_and_follow(session.clone(), &args, console, &())
            .await
            .expect("the run completed");
        assert_eq!(code, ExitCode::SUCCESS);
        let kinds: Vec<(u64, String)> = out
            .text()
            .lines()
            .map(|line| {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                assert_eq!(v["run"], RUN);
                (
                    v["sequence"].as_u64().unwrap(),
                    v["kind"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (1, "run.started".to_owned()),
                (2, "model.delta".to_owned()),
                (3, "run.completed".to_owned()),
            ]
        );
        assert!(out.text().contains(r#""data":{"text":"hello"}"#));
    }

    #[tokio::test]
    async fn a_failed_run_of_a_non_grpc_session_exits_1() {
        let mut events = completed_run();
        events[2] = event(
            3,
            c::EventKind::RunFailed,
            c::EventDetail::Status {
                text: "the model failed".to_owned(),
            },
        );
        let session = Arc::new(ScriptedSession::new(events));
        let console = Console {
            interrupts: NoInterrupts,
            out: Captured::default(),
        };
        let how = Follow {
            after: 1,
            json: false,
            approvals: ApprovalMode::ReadOnly,
            on_interrupt: OnInterrupt::Detach,
        };
        let run = c::RunRef::new(RUN).unwrap();
        let code = follow_run(session.clone(), run, how, console, &())
            .await
            .expect("the run failed");
        assert_eq!(code, ExitCode::FAILURE);
        assert_eq!(session.cursor.load(Ordering::SeqCst), 1, "after --from");
    }
}
