//! The subcommands the local daemon answers (`docs/running-the-daemon.md`).
//!
//! - `agent serve` runs [`agent_server::Daemon`] in the foreground over the coding agent's
//!   composed definitions (plus the fixture's with `--fixture`) until SIGINT or SIGTERM.
//! - Every other subcommand is a client: it finds the daemon through the endpoint store
//!   ([`agent_client_grpc::local`]); `agent run --daemon` starts one when none answers
//!   ([`agent_client_grpc::managed`] with a [`ProcessStarter`] that launches `agent serve`
//!   from this executable as a background process in its own process group). A daemon the
//!   CLI started keeps running after the CLI exits: it is the user's local service, stopped
//!   with SIGTERM (see the docs page).
//! - Runs are owned by a client id and an ownership epoch. Each `agent run --daemon` and
//!   `agent import` is a fresh client; the run, its client and the client's latest epoch go
//!   into the CLI's [`index`], and `attach`, `suspend`, `resume`, `export` and `runs`
//!   reconnect as that client. A reconnect fences the earlier session of that client, so
//!   an `agent run --daemon` still streaming the run stops (exit 1) when another process
//!   attaches to it.
//!
//! Where files live: the endpoint scope (`$AGENT_SCOPE_DIR`, else
//! `$XDG_RUNTIME_DIR/spice-agent`, else `/tmp/spice-agent-<uid>`) holds the socket, the
//! endpoint files, the run index and `daemon.log` (the stderr of a daemon the CLI started);
//! the run authority is `--authority DIR`, else `$AGENT_AUTHORITY_DIR`, else the default
//! under the user's state directory.

pub mod index;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_client as c;
use agent_client::{EventStream as _, InteractionStream as _, Session as _};
use agent_client_grpc::local::{LocalDiscovery, LocalStartupLock};
use agent_client_grpc::managed::{
    Candidate, JoinError, ManagedConfig, ManagedConnector, ManagedError, Starter,
};
use agent_client_grpc::{GrpcSession, new_attempt_id};
use agent_core::compose::Override;
use agent_endpoint::{Store, UserScope};
use tokio_util::sync::CancellationToken;

use self::index::{RunEntry, RunIndex};
use super::args::{AttachArgs, ExportArgs, ImportArgs, RunArgs, RunRef, ServeArgs};
use super::error::{CliError, EXIT_CANCELLED};
use super::progress::Spinner;
use crate::app::{CodingAgent, CodingAgentOverrides};
use crate::approval::ApprovalMode;

/// The environment variable that overrides the endpoint scope directory.
pub const SCOPE_DIR_ENV: &str = "AGENT_SCOPE_DIR";
/// The environment variable that overrides the run authority's directory.
pub const AUTHORITY_DIR_ENV: &str = "AGENT_AUTHORITY_DIR";
/// The id the coding agent's own definition is served under.
pub const CODING_AGENT_DEFINITION: &str = "coding-agent";
/// The revision the coding agent's own definition is served at.
pub const CODING_AGENT_REVISION: &str = "coding-agent-v1";
/// How long `agent serve` waits for open streams and calls after a signal.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);
/// How long `agent run --daemon` waits for a daemon it started to answer.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often it polls a starting daemon.
pub const STARTUP_RETRY: Duration = Duration::from_millis(50);
/// How long a command waits for a fenced process to let go of a run it reconnects to.
pub const ATTACH_LOCK_TIMEOUT: Duration = Duration::from_secs(5);
/// The sessions the daemon keeps at once: one per CLI run, so more than the server default
/// (ended and idle sessions make room; see docs/decisions.md).
pub const DAEMON_SESSIONS: usize = 4096;
/// The daemon log of a daemon the CLI started, in the scope directory.
pub const DAEMON_LOG: &str = "daemon.log";
/// The client's build component.
const CLIENT_COMPONENT: &str = "agent-cli";
/// The cancel reason sent on Ctrl-C.
const INTERRUPT_REASON: &str = "interrupted";

fn io_error(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Daemon(format!("{what}: {e}"))
}

fn client_error(what: &str, e: &c::Error) -> CliError {
    CliError::Daemon(format!("{what}: {e}"))
}

/// The endpoint scope: `$AGENT_SCOPE_DIR` (created 0700; its parent must be trusted), else
/// the user's default scope.
pub fn scope() -> Result<UserScope, CliError> {
    match std::env::var_os(SCOPE_DIR_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = std::path::absolute(PathBuf::from(dir))
                .map_err(|e| io_error("endpoint scope", e))?;
            UserScope::at(&dir).map_err(|e| io_error("endpoint scope", e))
        }
        None => UserScope::current().map_err(|e| io_error("endpoint scope", e)),
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn random_token(prefix: &str) -> String {
    let mut bytes = [0u8; 12];
    // A failing CSPRNG leaves zeros; the time and pid still make the id unique enough for
    // an idempotency key, which the daemon only compares.
    let _ = getrandom::fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}-{:x}-{}-{hex}", now_secs(), std::process::id())
}

fn operation() -> Result<c::OperationId, CliError> {
    c::OperationId::new(&random_token("op")).map_err(|e| io_error("operation id", e))
}

/// The model the coding agent's definition names (the OpenAI model with that provider).
fn model_name() -> String {
    if cfg!(feature = "openai") {
        std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".to_owned())
    } else {
        crate::offline::OFFLINE_MODEL.to_owned()
    }
}

// ---------------------------------------------------------------------------------------
// agent serve
// ---------------------------------------------------------------------------------------

fn authority_dir(args: &ServeArgs) -> Result<PathBuf, CliError> {
    let dir = match (&args.authority, std::env::var_os(AUTHORITY_DIR_ENV)) {
        (Some(dir), _) => dir.clone(),
        (None, Some(dir)) if !dir.is_empty() => PathBuf::from(dir),
        _ => agent_authority::default_directory().map_err(|e| io_error("run authority", e))?,
    };
    std::path::absolute(&dir).map_err(|e| io_error("run authority", e))
}

fn definitions(fixture: bool) -> Result<agent_daemon::definition::DefinitionSet, CliError> {
    use agent_daemon::definition::{Definition, DefinitionSet};
    let agent = agent_core::agent::AgentDefinition::new(
        CODING_AGENT_DEFINITION,
        model_name(),
        super::args::DEFAULT_MAX_TURNS,
    )
    .map_err(|e| io_error("definitions", e))?;
    let mut values = vec![
        Definition::new(CODING_AGENT_DEFINITION, CODING_AGENT_REVISION, agent)
            .map_err(|e| io_error("definitions", e))?,
    ];
    if fixture {
        use agent_server::fixture;
        for agent in [
            fixture::fixture_text_definition(),
            fixture::fixture_pending_definition(),
        ] {
            let agent = agent.map_err(|e| io_error("fixture definitions", e))?;
            values.push(
                Definition::new(agent.name().to_owned(), fixture::REVISION, agent)
                    .map_err(|e| io_error("fixture definitions", e))?,
            );
        }
    }
    DefinitionSet::new(values).map_err(|e| io_error("definitions", e))
}

fn build_identity() -> agent_protocol::pb::common::v1::BuildIdentity {
    agent_protocol::pb::common::v1::BuildIdentity {
        component: "coding-agent".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        commit: option_env!("AGENT_BUILD_COMMIT")
            .unwrap_or("unknown")
            .to_owned(),
        go_version: "rustc".to_owned(),
    }
}

/// A future that completes on the first SIGINT or SIGTERM.
fn termination() -> Result<impl std::future::Future<Output = ()>, CliError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| io_error("signal handler", e))?;
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| io_error("signal handler", e))?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}

/// `agent serve [--fixture] [--authority DIR]`: runs the daemon in the foreground on the
/// scope's socket, logging to stderr, until SIGINT/SIGTERM, then shuts down within
/// [`SHUTDOWN_DEADLINE`] and exits 0. `--fixture` adds the two fixture definitions client
/// tests use (their models are answered by the fixture provider; every other model by the
/// coding agent's provider).
pub async fn serve(args: &ServeArgs) -> Result<ExitCode, CliError> {
    let stop = termination()?;
    let scope = scope()?;
    let authority = authority_dir(args)?;
    {
        use std::os::unix::fs::DirBuilderExt;
        // The authority refuses a directory others can read; create it private.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&authority)
            .map_err(|e| io_error("run authority", e))?;
    }
    let overrides = CodingAgentOverrides {
        approval_mode: Override::value(Arc::new(ApprovalMode::Ask)),
        ..CodingAgentOverrides::default()
    };
    let app = CodingAgent::build_with(overrides)
        .await
        .map_err(|e| io_error("could not assemble the agent", e))?;
    let root = CancellationToken::new();
    let fixture = args.fixture;
    let host = agent_server::fixture::run_host(
        &root,
        &authority,
        agent_server::fixture::FixtureOptions {
            sessions: DAEMON_SESSIONS,
            ..Default::default()
        },
        definitions(fixture)?,
        |pending| {
            crate::app::daemon_engine(&app, pending, |provider| {
                if fixture {
                    Arc::new(agent_server::fixture::FixtureProvider::with_fallback(
                        provider,
                    ))
                } else {
                    provider
                }
            })
            .map_err(|_| agent_server::fixture::FixtureError::Engine)
        },
    )
    .map_err(|e| io_error("run host", e))?;
    let mut config = agent_server::DaemonConfig::new(scope, host, build_identity());
    config.server = Box::new(|server| server.maximum_sessions = DAEMON_SESSIONS);
    let daemon = agent_server::Daemon::start(config)
        .await
        .map_err(|e| io_error("daemon", e))?;
    tracing::info!(
        target: "agent_serve",
        pid = std::process::id(),
        "daemon serving"
    );
    eprintln!(
        "agent: serving on {} (pid {}); stop with Ctrl-C or SIGTERM",
        daemon.scope().address().display(),
        std::process::id()
    );
    stop.await;
    eprintln!("agent: stopping");
    let stopped = daemon.shutdown(SHUTDOWN_DEADLINE).await;
    root.cancel();
    let _ = app.stop().await;
    stopped.map_err(|e| io_error("daemon shutdown", e))?;
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------------------
// The client side
// ---------------------------------------------------------------------------------------

/// A daemon process `agent run --daemon` launched: `agent serve` from this executable.
#[derive(Debug)]
pub struct ServeProcess {
    child: Mutex<std::process::Child>,
}

impl Candidate for ServeProcess {
    fn has_exited(&self) -> bool {
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        !matches!(child.try_wait(), Ok(None))
    }

    fn begin_shutdown(&self) {
        // Only a failed start shuts a launched daemon down; it has served nobody.
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = child.kill();
    }

    async fn wait(&self) -> Result<(), JoinError> {
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tick.tick().await;
            let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
            match child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => {}
                Err(_) => {
                    return Err(JoinError {
                        retryable: false,
                        message: "daemon process could not be waited for",
                    });
                }
            }
        }
    }
}

/// Starts `agent serve` from the current executable as a background daemon: its own
/// process group (a terminal's Ctrl-C to the CLI does not reach it), stdin and stdout
/// closed, stderr appended to [`DAEMON_LOG`] in the scope directory. The environment is
/// inherited, so `AGENT_SCOPE_DIR` and `AGENT_AUTHORITY_DIR` reach it.
#[derive(Debug, Clone)]
pub struct ProcessStarter {
    scope_dir: PathBuf,
}

impl ProcessStarter {
    /// A starter for the daemon of `scope_dir`.
    pub fn new(scope_dir: &Path) -> ProcessStarter {
        ProcessStarter {
            scope_dir: scope_dir.to_path_buf(),
        }
    }
}

impl Starter for ProcessStarter {
    type Candidate = ServeProcess;

    async fn start(&self) -> Result<ServeProcess, ManagedError> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::process::CommandExt;
        let exe = std::env::current_exe().map_err(|_| ManagedError::Start)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(self.scope_dir.join(DAEMON_LOG))
            .map_err(|_| ManagedError::Start)?;
        let child = std::process::Command::new(exe)
            .arg("serve")
            .env(SCOPE_DIR_ENV, &self.scope_dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .map_err(|_| ManagedError::Start)?;
        Ok(ServeProcess {
            child: Mutex::new(child),
        })
    }
}

fn protocol_range() -> Result<c::ProtocolRange, CliError> {
    let v = |minor| c::ProtocolVersion::new(1, minor, 0);
    let range = (|| c::ProtocolRange::new(v(0)?, v(3)?))();
    range.map_err(|e| io_error("protocol", e))
}

fn initialize_request(claim: Option<c::ReconnectClaim>) -> Result<c::InitializeRequest, CliError> {
    let build = c::Build::new(
        CLIENT_COMPONENT,
        env!("CARGO_PKG_VERSION"),
        option_env!("AGENT_BUILD_COMMIT").unwrap_or("unknown"),
        "rustc",
    )
    .map_err(|e| io_error("client build", e))?;
    // From protocol 1.2 on a client requests at least the server's message size and
    // collection count (the whole pending set fits one frame); this CLI talks to this
    // build's daemon, so it requests exactly those.
    let limits = c::Limits::new(
        agent_server::server::DEFAULT_MESSAGE_BYTES,
        agent_server::server::DEFAULT_COLLECTION_ITEMS,
        256,
        8 << 20,
        8,
        8,
    )
    .map_err(|e| io_error("client limits", e))?;
    let supported = vec![
        agent_protocol::limits::CAPABILITY_SNAPSHOT_AUTHORITY.to_owned(),
        agent_protocol::limits::CAPABILITY_SNAPSHOTS.to_owned(),
    ];
    let attempt = new_attempt_id().map_err(|e| io_error("attempt id", e))?;
    c::InitializeRequest::with_attempt(
        protocol_range()?,
        build,
        supported,
        vec![],
        limits,
        claim,
        attempt,
    )
    .map_err(|e| io_error("initialize request", e))
}

type Managed = ManagedConnector<LocalDiscovery, ProcessStarter, LocalStartupLock>;

/// The daemon's endpoint, as the client commands see it.
struct Endpoint {
    scope: UserScope,
    store: Store,
    index: RunIndex,
}

impl Endpoint {
    fn open() -> Result<Endpoint, CliError> {
        let scope = scope()?;
        let store = Store::open(scope.dir()).map_err(|e| io_error("endpoint store", e))?;
        let index = RunIndex::new(scope.dir());
        Ok(Endpoint {
            scope,
            store,
            index,
        })
    }

    /// Attaches to the running daemon or starts one.
    fn managed(&self) -> Result<Managed, CliError> {
        let config = ManagedConfig::new(STARTUP_TIMEOUT, STARTUP_RETRY, None)
            .map_err(|e| io_error("managed connector", e))?;
        Ok(ManagedConnector::new(
            LocalDiscovery::new(self.store.clone()),
            ProcessStarter::new(self.scope.dir()),
            LocalStartupLock::new(self.store.clone()),
            config,
        ))
    }

    /// A session with the running daemon (never starts one).
    async fn attach_only(&self, claim: Option<c::ReconnectClaim>) -> Result<GrpcSession, CliError> {
        use agent_client::Connector as _;
        use agent_client_grpc::managed::Discovery as _;
        let discovery = LocalDiscovery::new(self.store.clone());
        let connector = discovery.discover().await.map_err(|e| match e {
            agent_client_grpc::managed::DiscoveryError::EndpointNotFound => CliError::Daemon(
                "no local daemon is running (start one with `agent serve`)".to_owned(),
            ),
            agent_client_grpc::managed::DiscoveryError::Failed => {
                CliError::Daemon("endpoint discovery failed".to_owned())
            }
        })?;
        connector
            .initialize(initialize_request(claim)?)
            .await
            .map_err(|e| client_error("initialize", &e))
    }

    /// Reconnects as the owner of `run`, records the new epoch, and returns the session
    /// with the run's index entry.
    async fn reconnect(&self, run: &str) -> Result<(GrpcSession, RunEntry), CliError> {
        let index = self.index.read().map_err(|e| io_error("run index", e))?;
        let (Some(entry), epoch) = (
            index.runs.get(run).cloned(),
            index
                .runs
                .get(run)
                .and_then(|e| index.clients.get(&e.client))
                .copied(),
        ) else {
            return Err(CliError::Daemon(format!(
                "run {run} is not in this user's run index (see `agent runs`)"
            )));
        };
        let epoch = epoch.ok_or_else(|| CliError::Daemon(format!("run {run}: no epoch")))?;
        let claim = c::ReconnectClaim::new(&entry.client, epoch)
            .map_err(|e| io_error("reconnect claim", e))?;
        let session = self.attach_only(Some(claim)).await?;
        self.record_epoch(session.connection())?;
        Ok((session, entry))
    }

    fn record_epoch(&self, connection: &c::Connection) -> Result<(), CliError> {
        let client = connection.client_id().to_owned();
        let epoch = connection.epoch();
        self.index
            .update(|i| {
                i.clients.insert(client, epoch);
            })
            .map_err(|e| io_error("run index", e))
    }

    fn record_run(
        &self,
        connection: &c::Connection,
        run: &str,
        definition: &str,
        state: &str,
    ) -> Result<(), CliError> {
        let client = connection.client_id().to_owned();
        let epoch = connection.epoch();
        let entry = RunEntry {
            client: client.clone(),
            definition: definition.to_owned(),
            recorded: now_secs(),
            state: state.to_owned(),
        };
        self.index
            .update(|i| {
                i.clients.insert(client, epoch);
                i.runs.insert(run.to_owned(), entry);
            })
            .map_err(|e| io_error("run index", e))
    }

    fn record_state(&self, run: &str, state: &str) {
        let _ = self.index.update(|i| {
            if let Some(entry) = i.runs.get_mut(run) {
                entry.state = state.to_owned();
            }
        });
    }
}

/// How the CLI answers the run's approval questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answers {
    /// Ask on the terminal (y/N).
    Ask,
    /// Approve all.
    Approve,
    /// Decline all.
    Decline,
}

/// Answers the run's pending interactions until the stream ends.
async fn answer_interactions(session: Arc<GrpcSession>, run: c::RunRef, answers: Answers) {
    use tokio::io::AsyncBufReadExt;
    let Ok(mut stream) = session
        .interactions(c::InteractionStreamOptions { tail: true })
        .await
    else {
        return;
    };
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
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
            let approved = match answers {
                Answers::Approve => true,
                Answers::Decline => false,
                Answers::Ask => {
                    let _ = super::progress::write_stderr(
                        format!("\n? {} [y/N] ", interaction.prompt()).as_bytes(),
                    );
                    matches!(
                        lines.next_line().await,
                        Ok(Some(line)) if matches!(line.trim(), "y" | "Y" | "yes")
                    )
                }
            };
            let value = if approved { "true" } else { "false" };
            let (Ok(value), Ok(op)) = (
                c::StructuredValue::parse(value.as_bytes().to_vec()),
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
    Failed,
    Cancelled,
    /// Another process reconnected as the run's owner.
    Fenced,
    /// The daemon went away or refused the stream (why, in its safe words).
    Lost(String),
    /// Ctrl-C while attached (no cancel sent).
    Detached,
}

/// Prints one event for a human (the one-shot form's rendering).
fn render(event: &c::Event, spinner: &mut Spinner, out: &mut impl Write) {
    use c::EventDetail as D;
    let _ = match event.detail() {
        D::ModelStarted { .. } => {
            spinner.start();
            Ok(())
        }
        D::ModelDelta { text } => spinner.write_text(out, text),
        D::ModelCompleted { .. } => {
            spinner.stop();
            Ok(())
        }
        D::ToolStarted { call_id, name } => write!(out, "\n  -> {name} ({call_id})"),
        D::ToolTerminal(t) => match t.outcome() {
            c::ToolOutcome::Completed => writeln!(out, " ok"),
            _ => writeln!(out, " refused or failed (the model was told)"),
        },
        D::ModelFailed(f) => {
            spinner.stop();
            writeln!(out, "\nmodel failed: {}", f.code())
        }
        _ => Ok(()),
    };
    let _ = out.flush();
}

fn event_json(event: &c::Event) -> String {
    serde_json::json!({
        "run": event.run().as_str(),
        "sequence": event.sequence(),
        "kind": event.kind().name(),
    })
    .to_string()
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
    (mut interrupt, on_interrupt): (tokio::signal::unix::Signal, OnInterrupt),
) -> Result<Ending, CliError> {
    let limits = *session.connection().limits();
    let options = c::EventStreamOptions::new(limits.replay_events(), true, &limits)
        .map_err(|e| io_error("event stream", e))?;
    let mut spinner = Spinner::stderr();
    let stdout = std::io::stdout();
    let mut cancelled = false;
    loop {
        let mut stream = match session
            .events(c::Cursor::new(run.clone(), after), options)
            .await
        {
            Ok(stream) => stream,
            // The retained window starts later (an imported run keeps only what follows
            // its snapshot): read on from where the daemon says to.
            Err(c::Error::CursorGap(gap)) if gap.recovery() > after => {
                let _ = super::progress::write_stderr(
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
                            spinner.stop();
                            return Ok(Ending::Detached);
                        }
                        OnInterrupt::Cancel if !cancelled => {
                            cancelled = true;
                            let reason = c::CancelReason::new(INTERRUPT_REASON).ok();
                            if let Err(e) = session.cancel(operation()?, run.clone(), reason).await {
                                let _ = super::progress::write_stderr(
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
                    let mut out = stdout.lock();
                    if json {
                        let _ = writeln!(out, "{}", event_json(&event));
                    } else {
                        render(&event, &mut spinner, &mut out);
                    }
                    if is_run_terminal(&event) {
                        spinner.stop();
                        return Ok(match event.kind() {
                            c::EventKind::RunCompleted => Ending::Completed,
                            c::EventKind::RunCancelled => Ending::Cancelled,
                            _ => Ending::Failed,
                        });
                    }
                }
                Ok(Some(c::EventFrame::Control(_))) => {}
                // The page ended without tailing: read on from the last sequence.
                Ok(None) => break,
                Err(e) => {
                    spinner.stop();
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

fn exit_for(ending: Ending, run: &str) -> Result<ExitCode, CliError> {
    // The summary goes on its own line after streamed text.
    let _ = writeln!(std::io::stdout());
    match ending {
        Ending::Completed => {
            eprintln!("done: run {run}");
            Ok(ExitCode::SUCCESS)
        }
        Ending::Cancelled => {
            eprintln!("cancelled: run {run}");
            Ok(ExitCode::from(EXIT_CANCELLED))
        }
        Ending::Failed => {
            eprintln!("failed: run {run}");
            Ok(ExitCode::FAILURE)
        }
        Ending::Detached => {
            eprintln!("detached from run {run}; it keeps running (`agent attach {run}`)");
            Ok(ExitCode::from(EXIT_CANCELLED))
        }
        Ending::Fenced => Err(CliError::Daemon(format!(
            "run {run}: another process attached to it (this stream was fenced)"
        ))),
        Ending::Lost(why) => Err(CliError::Daemon(format!("run {run}: events: {why}"))),
    }
}

fn ending_state(ending: &Ending) -> Option<&'static str> {
    match ending {
        Ending::Completed => Some("completed"),
        Ending::Failed => Some("failed"),
        Ending::Cancelled => Some("cancelled"),
        _ => None,
    }
}

/// `agent run --daemon [--definition ID] TASK`: attaches to the running daemon or starts
/// one, starts the task there, streams its events like the one-shot form, answers
/// approvals on the terminal (`--yes` approves all, `--read-only` declines all); Ctrl-C
/// sends a cancel and exits 130 after the run's one terminal event. Exit codes: 0
/// completed, 1 failed, 130 cancelled.
pub async fn run(args: &RunArgs) -> Result<ExitCode, CliError> {
    // The daemon has its own workspace, tools, authority and definitions.
    let task = &args.task;
    for (given, flag) in [
        (task.workspace.is_some(), "--workspace"),
        (task.mcp_config.is_some(), "--mcp-config"),
        (task.suspend.is_some(), "--suspend"),
        (task.resume.is_some(), "--resume"),
        (task.authority.is_some(), "--authority"),
        (
            task.max_turns != super::args::DEFAULT_MAX_TURNS,
            "--max-turns",
        ),
    ] {
        if given {
            return Err(CliError::Usage(format!(
                "{flag} does not apply to --daemon (the daemon's definition decides; see `agent suspend`/`export`)"
            )));
        }
    }
    let interrupted = interrupt()?;
    let endpoint = Endpoint::open()?;
    let managed = endpoint.managed()?;
    let session = managed
        .initialize_managed(initialize_request(None)?)
        .await
        .map_err(|e| io_error("attach or start", e))?;
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
        .start(c::StartRequest {
            operation: operation()?,
            definition,
            input,
        })
        .await
        .map_err(|e| client_error("start", &e))?;
    let run = started.run().clone();
    endpoint.record_run(
        session.connection(),
        run.as_str(),
        &definition_id,
        "running",
    )?;
    eprintln!("agent: run {run} in the daemon");
    let session = Arc::new(session);
    let answers = match args.task.mode() {
        ApprovalMode::Ask => Answers::Ask,
        ApprovalMode::ApproveAll => Answers::Approve,
        ApprovalMode::ReadOnly => Answers::Decline,
    };
    let answering = tokio::spawn(answer_interactions(session.clone(), run.clone(), answers));
    let ending = follow(
        &session,
        &run,
        0,
        args.task.json,
        (interrupted, OnInterrupt::Cancel),
    )
    .await;
    answering.abort();
    let ending = ending?;
    if let Some(state) = ending_state(&ending) {
        endpoint.record_state(run.as_str(), state);
    }
    session.close();
    exit_for(ending, run.as_str())
}

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
    let mut out = std::io::stdout().lock();
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
        writeln!(out, "{run}\t{state}\t{}", entry.definition).map_err(|e| io_error("stdout", e))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn is_final(state: &str) -> bool {
    matches!(state, "completed" | "failed" | "cancelled" | "exported")
}

/// The run's state from its last retained event: a terminal kind, `suspended` when the
/// index says so and it has not ended, else `running`.
async fn probe_state(endpoint: &Endpoint, run: &str) -> Option<String> {
    let (session, entry) = endpoint.reconnect(run).await.ok()?;
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

/// `agent attach RUN [--from SEQ]`: reconnects as the run's owner (fencing any other
/// process streaming it), replays the run's events after `SEQ` and follows them until
/// the run ends, answering its approvals on the terminal. Ctrl-C detaches (exit 130)
/// without cancelling the run.
pub async fn attach(args: &AttachArgs) -> Result<ExitCode, CliError> {
    let interrupted = interrupt()?;
    let endpoint = Endpoint::open()?;
    let (session, entry) = endpoint.reconnect(&args.run.run).await?;
    // The fenced process lets go of the lock when it exits.
    let _attached = endpoint
        .index
        .attach(&entry.client, ATTACH_LOCK_TIMEOUT)
        .map_err(|e| io_error("run index", e))?;
    let run = c::RunRef::new(&args.run.run).map_err(|e| io_error("run", e))?;
    let session = Arc::new(session);
    let answering = tokio::spawn(answer_interactions(
        session.clone(),
        run.clone(),
        Answers::Ask,
    ));
    let ending = follow(
        &session,
        &run,
        args.from,
        false,
        (interrupted, OnInterrupt::Detach),
    )
    .await;
    answering.abort();
    let ending = ending?;
    if let Some(state) = ending_state(&ending) {
        endpoint.record_state(run.as_str(), state);
    }
    session.close();
    exit_for(ending, run.as_str())
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
    println!(
        "suspended {} at sequence {}",
        args.run,
        result.boundary_sequence()
    );
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
    println!(
        "resumed {} at sequence {}",
        args.run,
        result.next_sequence()
    );
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
        None => std::io::stdout()
            .write_all(snapshot.bytes())
            .map_err(|e| io_error("stdout", e))?,
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
    println!("{}", result.run());
    Ok(ExitCode::SUCCESS)
}
