//! Server construction and lifecycle (docs/transport.md, "The daemon: boot and shutdown"): configuration bounds, serving
//! on a caller-owned Unix listener, and a shutdown that stops gracefully and forces a stop
//! at the deadline. The server never closes the run host.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use agent_daemon::RunHost;
use agent_endpoint::EndpointToken;
use agent_protocol::initialize::validate_server_inputs;
use agent_protocol::negotiate::{implemented_range, validate_range, version};
use agent_protocol::pb::common::v1::{BuildIdentity, Limits, ProtocolRange};
use agent_protocol::pb::engine::v1::engine_service_server::EngineServiceServer;
use tokio::task::JoinHandle;
use tokio_stream::StreamExt as _;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::service::interceptor::InterceptedService;

use crate::connection::Closable;

use crate::registry::Registry;
use crate::service::{Authenticator, Service, Shared};

/// The fewest and most negotiated sessions a server may hold.
pub const MAXIMUM_SESSIONS_RANGE: (usize, usize) = (1, 4096);
/// The smallest message size the transport accepts in either direction.
pub const MIN_TRANSPORT_MESSAGE_BYTES: usize = 1 << 20;
/// The most collection items the server offers by default.
pub const DEFAULT_COLLECTION_ITEMS: u32 = 1024;
/// The default largest message (tool output crosses the socket).
pub const DEFAULT_MESSAGE_BYTES: u64 = 16 << 20;
/// How long a forced stop waits for the closed connections and their stream tasks to end
/// before it gives up on them (they hold no lock the caller needs; closing the socket
/// already failed every read and write).
pub const FORCED_STOP_WAIT: Duration = Duration::from_secs(5);

/// Why a server could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerError {
    /// `maximum_sessions` lies outside [`MAXIMUM_SESSIONS_RANGE`].
    MaximumSessions,
    /// The protocol range is not a supported prefix of production (1.0.0 to 1.x.0, x ≤ 3).
    ProtocolRange,
    /// The host's description, limits or definitions do not validate.
    Host,
    /// The capability names do not validate.
    Capabilities,
    /// `serve` was called twice, or the server was shut down.
    State,
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerError::MaximumSessions => "maximum sessions out of range",
            ServerError::ProtocolRange => "protocol range is not a supported prefix",
            ServerError::Host => "run host description does not validate",
            ServerError::Capabilities => "server capabilities do not validate",
            ServerError::State => "server is not in a state to do that",
        })
    }
}

impl std::error::Error for ServerError {}

/// What a [`Server`] serves.
pub struct ServerConfig {
    /// The endpoint credential every RPC must present.
    pub token: EndpointToken,
    /// The run host (the server never closes it).
    pub host: RunHost,
    /// The server's build identity.
    pub build: BuildIdentity,
    /// Capability names (the server sorts them).
    pub capabilities: Vec<String>,
    /// Negotiated sessions at most (1..=4096).
    pub maximum_sessions: usize,
    /// The protocol range offered; `None` is production (1.0.0 to 1.3.0).
    pub protocol: Option<ProtocolRange>,
    /// The largest message offered to clients.
    pub max_message_bytes: u64,
    /// The most collection items offered to clients.
    pub max_collection_items: u32,
    /// The peer uid every connection must have (the daemon's effective uid in production).
    pub expected_uid: u32,
    /// The one workspace root this daemon's runs work in, if it has one: a StartRun whose
    /// [`WORKSPACE_METADATA`](crate::WORKSPACE_METADATA) names another directory is refused
    /// (a request without it, like the original client's, runs here). `None`: no check.
    pub workspace: Option<std::path::PathBuf>,
}

impl ServerConfig {
    /// A production configuration over `host`: the current protocol range, the default
    /// bounds, the effective uid as the only peer.
    pub fn new(token: EndpointToken, host: RunHost, build: BuildIdentity) -> ServerConfig {
        ServerConfig {
            token,
            host,
            build,
            // The run host suspends, resumes, exports and imports runs; a client may ask
            // for the kernel's richer event facts (our own capability).
            capabilities: vec![
                agent_protocol::event_payload::CAPABILITY_RICH_EVENTS.to_owned(),
                agent_protocol::limits::CAPABILITY_SNAPSHOT_AUTHORITY.to_owned(),
                agent_protocol::limits::CAPABILITY_SNAPSHOTS.to_owned(),
            ],
            maximum_sessions: 64,
            protocol: None,
            max_message_bytes: DEFAULT_MESSAGE_BYTES,
            max_collection_items: DEFAULT_COLLECTION_ITEMS,
            expected_uid: agent_endpoint::localipc::effective_uid(),
            workspace: None,
        }
    }
}

/// Whether `range` is a supported prefix of production: minimum exactly 1.0.0, maximum
/// 1.x.0 with x ≤ 3.
///
/// ```
/// use agent_protocol::negotiate::version;
/// use agent_protocol::pb::common::v1::ProtocolRange;
/// use agent_server::server::is_supported_prefix;
/// let range = |lo, hi| ProtocolRange { minimum: Some(lo), maximum: Some(hi) };
/// assert!(is_supported_prefix(&range(version(1, 0, 0), version(1, 2, 0))));
/// assert!(!is_supported_prefix(&range(version(1, 1, 0), version(1, 3, 0))));
/// assert!(!is_supported_prefix(&range(version(1, 0, 0), version(1, 4, 0))));
/// ```
pub fn is_supported_prefix(range: &ProtocolRange) -> bool {
    let Ok((min, max)) = validate_range(Some(range)) else {
        return false;
    };
    *min == version(1, 0, 0) && max.major == 1 && max.minor <= 3 && max.patch == 0
}

/// The gRPC server over one run host.
pub struct Server {
    shared: Arc<Shared>,
    token: Arc<EndpointToken>,
    expected_uid: u32,
    message_bytes: usize,
    graceful: CancellationToken,
    force: CancellationToken,
    connections: TaskTracker,
    task: Option<JoinHandle<()>>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("serving", &self.task.is_some())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Validates the configuration against the host's description.
    pub fn new(config: ServerConfig) -> Result<Server, ServerError> {
        if !(MAXIMUM_SESSIONS_RANGE.0..=MAXIMUM_SESSIONS_RANGE.1).contains(&config.maximum_sessions)
        {
            return Err(ServerError::MaximumSessions);
        }
        let range = config.protocol.unwrap_or_else(implemented_range);
        if !is_supported_prefix(&range) {
            return Err(ServerError::ProtocolRange);
        }
        let mut capabilities = config.capabilities;
        capabilities.sort();
        if agent_protocol::negotiate::validate_capability_names(&capabilities).is_err() {
            return Err(ServerError::Capabilities);
        }
        let description = config.host.describe();
        let host_limits = description.limits;
        let limits = Limits {
            max_message_bytes: config.max_message_bytes,
            max_collection_items: config.max_collection_items,
            max_replay_events: u32::try_from(host_limits.replay_events).unwrap_or(u32::MAX),
            max_replay_bytes: host_limits.replay_bytes as u64,
            max_concurrent_streams: u32::try_from(host_limits.concurrent_streams)
                .unwrap_or(u32::MAX),
            max_active_runs: u32::try_from(host_limits.active_runs).unwrap_or(u32::MAX),
        };
        let message_bytes = usize::try_from(config.max_message_bytes)
            .unwrap_or(usize::MAX)
            .max(MIN_TRANSPORT_MESSAGE_BYTES);
        let shared = Arc::new(Shared {
            host: config.host,
            root: CancellationToken::new(),
            registry: Registry::new(config.maximum_sessions),
            build: config.build,
            capabilities,
            limits,
            range,
            tasks: TaskTracker::new(),
            open_streams: Arc::new(tokio::sync::watch::Sender::new(0)),
            workspace: config.workspace,
        });
        let service = Service {
            shared: shared.clone(),
        };
        if validate_server_inputs(&service.inputs()).is_err() {
            return Err(ServerError::Host);
        }
        Ok(Server {
            shared,
            token: Arc::new(config.token),
            expected_uid: config.expected_uid,
            message_bytes,
            graceful: CancellationToken::new(),
            force: CancellationToken::new(),
            connections: TaskTracker::new(),
            task: None,
        })
    }

    /// The transport's message bound in both directions: max(configured, 1 MiB).
    pub fn message_bytes(&self) -> usize {
        self.message_bytes
    }

    /// How many negotiated sessions and initialization attempt records the registry holds.
    pub fn registry_sizes(&self) -> (usize, usize) {
        self.shared.registry.sizes()
    }

    /// How many Initialize calls wait on `client_id`'s reconnect gate (at most
    /// [`MAX_RECONNECT_WAITERS`](crate::MAX_RECONNECT_WAITERS) are admitted), as a watch an
    /// operator or a test can wait on; `None` for a client the registry does not hold.
    pub fn reconnect_waiters(
        &self,
        client_id: &str,
    ) -> Option<tokio::sync::watch::Receiver<usize>> {
        self.shared
            .registry
            .entry(client_id)
            .map(|e| e.gate.waiters())
    }

    /// How many server streams (StreamEvents, tailing StreamInteractions) are open, as a
    /// watch: a stream counts until its task has dropped its host observation, so once the
    /// count falls, that stream's lease is free.
    pub fn open_streams(&self) -> tokio::sync::watch::Receiver<usize> {
        self.shared.open_streams.subscribe()
    }

    /// The most negotiated sessions.
    pub fn maximum_sessions(&self) -> usize {
        self.shared.registry.maximum()
    }

    /// Serves on `listener` (the caller owns the socket file) on a background task.
    pub fn serve(&mut self, listener: tokio::net::UnixListener) -> Result<(), ServerError> {
        if self.task.is_some() || self.shared.root.is_cancelled() {
            return Err(ServerError::State);
        }
        let service = EngineServiceServer::new(Service {
            shared: self.shared.clone(),
        })
        .max_decoding_message_size(self.message_bytes)
        .max_encoding_message_size(self.message_bytes);
        let service = InterceptedService::new(
            service,
            Authenticator {
                token: self.token.clone(),
                expected_uid: self.expected_uid,
            },
        );
        let force = self.force.clone();
        let connections = self.connections.clone();
        let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener)
            .map(move |io| io.map(|io| Closable::new(io, force.clone(), connections.token())));
        let graceful = self.graceful.clone();
        self.task = Some(tokio::spawn(async move {
            // A failed accept loop ends serving; the daemon's shutdown still runs.
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, graceful.cancelled_owned())
                .await;
        }));
        Ok(())
    }

    /// Stops serving (docs/transport.md, "The daemon: boot and shutdown"): cancels the adapter root (stream observations
    /// end, new RPCs are `Unavailable` "local daemon is stopping"), stops gracefully, and
    /// at `deadline` forces a stop: every connection is closed, which ends every RPC still
    /// blocked on a client (a tail whose client stopped reading), and the server waits
    /// (at most [`FORCED_STOP_WAIT`]) for the connections and the stream tasks to end.
    /// The registry closes last. Returns whether the stop was graceful. Idempotent.
    pub async fn shutdown(&mut self, deadline: Duration) -> bool {
        self.shared.root.cancel();
        self.graceful.cancel();
        let graceful = match self.task.take() {
            Some(mut task) => match tokio::time::timeout(deadline, &mut task).await {
                Ok(_) => true,
                Err(_) => {
                    self.force.cancel();
                    // With every connection failing, tonic's graceful wait ends by itself.
                    if tokio::time::timeout(FORCED_STOP_WAIT, &mut task)
                        .await
                        .is_err()
                    {
                        task.abort();
                        let _ = task.await;
                    }
                    false
                }
            },
            None => true,
        };
        self.connections.close();
        self.shared.tasks.close();
        let joined = async {
            self.connections.wait().await;
            self.shared.tasks.wait().await;
        };
        // Stream tasks end once their connection is gone, or once the root fence reaches
        // them; the bound only guards against a task that never polls again.
        let _ = tokio::time::timeout(FORCED_STOP_WAIT, joined).await;
        self.shared.registry.close();
        graceful
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.root.cancel();
        self.graceful.cancel();
        self.force.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
