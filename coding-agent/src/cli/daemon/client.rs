//! The client side every other subcommand shares: starting `agent serve` in the
//! background, the Initialize request, and the `Endpoint` that connects and reconnects.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_client as c;
use agent_client::Session as _;
use agent_client_grpc::local::{LocalDiscovery, LocalStartupLock};
use agent_client_grpc::managed::{
    Candidate, JoinError, ManagedConfig, ManagedConnector, ManagedError, Starter,
};
use agent_client_grpc::{GrpcSession, new_attempt_id};
use agent_endpoint::{Store, UserScope};

use super::follow::AdapterHooks;
use super::index::{RunEntry, RunIndex};
use super::state::DaemonState;
use crate::cli::error::CliError;

use super::{
    CLIENT_COMPONENT, DAEMON_LOG, SCOPE_DIR_ENV, STARTUP_RETRY, STARTUP_TIMEOUT, client_error,
    io_error, now_secs, scope,
};

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
///
/// The daemon works in `workspace` (its current directory), and the pid of the process it
/// launched is kept for [`launched`](ProcessStarter::launched), so the CLI can announce it.
#[derive(Debug, Clone)]
pub struct ProcessStarter {
    scope_dir: PathBuf,
    workspace: PathBuf,
    launched: Arc<Mutex<Option<u32>>>,
}

impl ProcessStarter {
    /// A starter for the daemon of `scope_dir`, working in `workspace`.
    pub fn new(scope_dir: &Path, workspace: &Path) -> ProcessStarter {
        ProcessStarter {
            scope_dir: scope_dir.to_path_buf(),
            workspace: workspace.to_path_buf(),
            launched: Arc::default(),
        }
    }

    /// The pid of the daemon this starter launched, if it launched one.
    pub fn launched(&self) -> Option<u32> {
        *self.launched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The log file of a daemon it launches.
    pub fn log_path(&self) -> PathBuf {
        self.scope_dir.join(DAEMON_LOG)
    }
}

impl Starter for ProcessStarter {
    type Candidate = ServeProcess;

    async fn start(&self) -> Result<ServeProcess, ManagedError> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::process::CommandExt;
        let exe = std::env::current_exe().map_err(|_| ManagedError::Start)?;
        use std::os::unix::fs::PermissionsExt;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(self.log_path())
            .map_err(|_| ManagedError::Start)?;
        // A log left by an older build may be wider; the daemon's log is the user's only.
        log.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|_| ManagedError::Start)?;
        let child = std::process::Command::new(exe)
            .arg("serve")
            .current_dir(&self.workspace)
            .env(SCOPE_DIR_ENV, &self.scope_dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .map_err(|_| ManagedError::Start)?;
        *self.launched.lock().unwrap_or_else(PoisonError::into_inner) = Some(child.id());
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

pub(super) fn initialize_request(
    claim: Option<c::ReconnectClaim>,
) -> Result<c::InitializeRequest, CliError> {
    let build = c::Build::new(
        CLIENT_COMPONENT,
        env!("CARGO_PKG_VERSION"),
        option_env!("AGENT_BUILD_COMMIT").unwrap_or("unknown"),
        "rustc",
    )
    .map_err(|e| io_error("client build", e))?;
    // From protocol 1.2 on a client requests at least the server's message size and
    // collection count (the whole pending set fits one frame); this CLI talks to this
    // build's daemon, so it requests the most `agent serve` accepts for either: the
    // negotiated value is then the daemon's, whatever it was started with.
    let limits = c::Limits::new(
        super::MESSAGE_BYTES_RANGE.1,
        super::COLLECTION_ITEMS_RANGE.1,
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
pub(super) struct Endpoint {
    scope: UserScope,
    store: Store,
    pub(super) index: RunIndex,
}

impl Endpoint {
    pub(super) fn open() -> Result<Endpoint, CliError> {
        let scope = scope()?;
        let store = Store::open(scope.dir()).map_err(|e| io_error("endpoint store", e))?;
        let index = RunIndex::new(scope.dir());
        Ok(Endpoint {
            scope,
            store,
            index,
        })
    }

    /// Attaches to the running daemon or starts one working in `workspace`; the starter
    /// says whether it launched one.
    pub(super) fn managed(&self, workspace: &Path) -> Result<(Managed, ProcessStarter), CliError> {
        let config = ManagedConfig::new(STARTUP_TIMEOUT, STARTUP_RETRY, None)
            .map_err(|e| io_error("managed connector", e))?;
        let starter = ProcessStarter::new(self.scope.dir(), workspace);
        Ok((
            ManagedConnector::new(
                LocalDiscovery::new(self.store.clone()),
                starter.clone(),
                LocalStartupLock::new(self.store.clone()),
                config,
            ),
            starter,
        ))
    }

    /// The scope directory.
    pub(super) fn scope_dir(&self) -> &Path {
        self.scope.dir()
    }

    /// The live daemon's endpoint record (never starts one).
    pub(super) fn live_record(&self) -> Result<agent_endpoint::Metadata, CliError> {
        let deadline = std::time::Instant::now() + super::ATTACH_LOCK_TIMEOUT;
        self.store.discover(deadline).map_err(|e| match e {
            agent_endpoint::StoreError::NotFound => CliError::NoDaemon(format!(
                "no local daemon is running (scope {})",
                self.scope.dir().display()
            )),
            other => io_error("endpoint store", other),
        })
    }

    /// The workspace the live daemon works in, when it says so (`daemon.json`, trusted
    /// only while it names the live endpoint record's process).
    pub(super) fn daemon_workspace(&self) -> Option<PathBuf> {
        let record = self.live_record().ok()?;
        let state = DaemonState::read(self.scope.dir())?;
        (state.process_id == record.process_id)
            .then(|| state.workspace_path())
            .flatten()
    }

    /// A session with the running daemon (never starts one).
    pub(super) async fn attach_only(
        &self,
        claim: Option<c::ReconnectClaim>,
    ) -> Result<GrpcSession, CliError> {
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
    /// with the run's index entry. `by` (the subcommand, e.g. `attach`) is recorded first,
    /// so a process this fences can say who took the run over.
    pub(super) async fn reconnect(
        &self,
        run: &str,
        by: &str,
    ) -> Result<(GrpcSession, RunEntry), CliError> {
        let _ = self.index.update(|i| {
            if let Some(entry) = i.runs.get_mut(run) {
                entry.taken_over_by = Some(by.to_owned());
            }
        });
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

    pub(super) fn record_epoch(&self, connection: &c::Connection) -> Result<(), CliError> {
        let client = connection.client_id().to_owned();
        let epoch = connection.epoch();
        self.index
            .update(|i| {
                i.clients.insert(client, epoch);
            })
            .map_err(|e| io_error("run index", e))
    }

    pub(super) fn record_run(
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
            taken_over_by: None,
        };
        self.index
            .update(|i| {
                i.clients.insert(client, epoch);
                i.runs.insert(run.to_owned(), entry);
            })
            .map_err(|e| io_error("run index", e))
    }

    pub(super) fn record_state(&self, run: &str, state: &str) {
        let _ = self.index.update(|i| {
            if let Some(entry) = i.runs.get_mut(run) {
                entry.state = state.to_owned();
            }
        });
    }
}

/// The local daemon's hooks for a run this process reconnected to (`attach`, `cancel`):
/// the run index records how it ended and says who took it over. Such a run is never
/// started through them (`agent run --daemon` has its own, which name the workspace).
impl AdapterHooks<GrpcSession> for Endpoint {
    fn started(
        &self,
        connection: &c::Connection,
        run: &c::RunRef,
        definition: &str,
    ) -> Result<(), CliError> {
        self.record_run(connection, run.as_str(), definition, "running")
    }

    fn ended(&self, run: &str, state: &str) {
        self.record_state(run, state);
    }

    fn taken_over_by(&self, run: &str) -> Option<String> {
        self.index
            .read()
            .ok()
            .and_then(|index| index.runs.get(run).and_then(|e| e.taken_over_by.clone()))
    }
}
