//! The daemon: the boot order and teardown (docs/transport.md, "The daemon: boot and shutdown") around a [`Server`].
//!
//! Boot: generate the endpoint token → listen on the scope's socket → build the server →
//! serve → publish the endpoint metadata. Teardown: withdraw the publication → shut the
//! server down → shut the run host down → close the socket. `agent serve` runs
//! [`Daemon::start`], waits for a signal, then runs [`Daemon::shutdown`].

use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_daemon::RunHost;
use agent_endpoint::localipc::{self, IpcError};
use agent_endpoint::{EndpointToken, Metadata, Publication, Store, StoreError, UserScope};
use agent_protocol::pb::common::v1::BuildIdentity;

use crate::server::{Server, ServerConfig, ServerError};

/// How long publishing and withdrawing the metadata may wait for the store's locks.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the daemon could not start or stop cleanly. Fixed messages.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DaemonError {
    /// The token could not be generated.
    Token,
    /// The socket could not be bound (in use, unsafe, invalid).
    Listen(IpcError),
    /// The server configuration was refused.
    Server(ServerError),
    /// Publishing or withdrawing the metadata failed (another daemon is active, ...).
    Store(StoreError),
    /// The run host's shutdown reported a failure.
    Host,
    /// A background task failed.
    Task,
}

impl fmt::Display for DaemonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DaemonError::Token => f.write_str("daemon token could not be generated"),
            DaemonError::Listen(e) => write!(f, "daemon socket: {e}"),
            DaemonError::Server(e) => write!(f, "daemon server: {e}"),
            DaemonError::Store(e) => write!(f, "daemon endpoint store: {e}"),
            DaemonError::Host => f.write_str("run host shutdown failed"),
            DaemonError::Task => f.write_str("daemon background task failed"),
        }
    }
}

impl std::error::Error for DaemonError {}

/// What a [`Daemon`] runs.
pub struct DaemonConfig {
    /// Where the socket and the endpoint files live.
    pub scope: UserScope,
    /// The run host (the daemon shuts it down in its teardown).
    pub host: RunHost,
    /// The server's build identity (its toolchain is written as `server_go_version`).
    pub build: BuildIdentity,
    /// Adjusts the server configuration the daemon derives (sessions, sizes, peer uid).
    pub server: Box<dyn FnOnce(&mut ServerConfig) + Send>,
    /// How long the store's locks may be waited for.
    pub lock_timeout: Duration,
}

impl DaemonConfig {
    /// The defaults over `scope` and `host`.
    pub fn new(scope: UserScope, host: RunHost, build: BuildIdentity) -> DaemonConfig {
        DaemonConfig {
            scope,
            host,
            build,
            server: Box::new(|_| {}),
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        }
    }
}

/// A running daemon.
pub struct Daemon {
    scope: UserScope,
    host: RunHost,
    server: Server,
    listener: Option<localipc::Listener>,
    publication: Option<Publication>,
    metadata: Metadata,
    lock_timeout: Duration,
}

impl fmt::Debug for Daemon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Daemon")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

fn now_unix_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(1)
        .max(1)
}

impl Daemon {
    /// Boots in order: token, socket, server, serve, publish. A failure undoes what was
    /// done (the socket is closed; the host is left to the caller).
    pub async fn start(config: DaemonConfig) -> Result<Daemon, DaemonError> {
        let token = EndpointToken::generate().map_err(|_| DaemonError::Token)?;
        let address = config.scope.address().to_path_buf();
        let listener = tokio::task::spawn_blocking(move || localipc::listen(&address))
            .await
            .map_err(|_| DaemonError::Task)?
            .map_err(DaemonError::Listen)?;
        let mut server_config =
            ServerConfig::new(token.clone(), config.host.clone(), config.build.clone());
        (config.server)(&mut server_config);
        let protocol = server_config
            .protocol
            .and_then(|r| r.maximum)
            .map_or((1, 3, 0), |v| (v.major, v.minor, v.patch));
        let mut server = Server::new(server_config).map_err(DaemonError::Server)?;
        let std_listener = listener
            .try_clone_nonblocking()
            .map_err(DaemonError::Listen)?;
        let tokio_listener = tokio::net::UnixListener::from_std(std_listener)
            .map_err(|_| DaemonError::Listen(IpcError::Io))?;
        server.serve(tokio_listener).map_err(DaemonError::Server)?;
        let metadata = Metadata {
            transport: config.scope.transport().to_owned(),
            address: config
                .scope
                .address()
                .to_str()
                .ok_or(DaemonError::Listen(IpcError::InvalidAddress))?
                .to_owned(),
            token,
            server_component: config.build.component.clone(),
            server_version: config.build.version.clone(),
            server_commit: config.build.commit.clone(),
            server_toolchain: config.build.go_version.clone(),
            protocol,
            process_id: std::process::id(),
            started_unix_nano: now_unix_nanos(),
            instance_id: Metadata::new_instance_id()
                .map_err(|e| DaemonError::Store(StoreError::Metadata(e)))?,
        };
        let dir = config.scope.dir().to_path_buf();
        let record = metadata.clone();
        let timeout = config.lock_timeout;
        let published = tokio::task::spawn_blocking(move || {
            let store = Store::open(&dir)?;
            store.publish(&record, Instant::now() + timeout)
        })
        .await
        .map_err(|_| DaemonError::Task)?;
        let publication = match published {
            Ok(publication) => publication,
            Err(error) => {
                server.shutdown(Duration::ZERO).await;
                listener.close();
                return Err(DaemonError::Store(error));
            }
        };
        Ok(Daemon {
            scope: config.scope,
            host: config.host,
            server,
            listener: Some(listener),
            publication: Some(publication),
            metadata,
            lock_timeout: config.lock_timeout,
        })
    }

    /// The published metadata (redacted in Debug; the token is inside).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The scope the daemon serves in.
    pub fn scope(&self) -> &UserScope {
        &self.scope
    }

    /// The server (for its registry sizes and bounds).
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The run host.
    pub fn host(&self) -> &RunHost {
        &self.host
    }

    /// Tears down in order: withdraw the publication, shut the server down (forced at
    /// `deadline`), shut the run host down, close the socket. Every step runs even when
    /// an earlier one failed; the first failure is returned.
    pub async fn shutdown(mut self, deadline: Duration) -> Result<(), DaemonError> {
        let mut result = Ok(());
        if let Some(mut publication) = self.publication.take() {
            let timeout = self.lock_timeout;
            let closed =
                tokio::task::spawn_blocking(move || publication.close(Instant::now() + timeout))
                    .await;
            match closed {
                Ok(Ok(())) => {}
                Ok(Err(error)) => result = Err(DaemonError::Store(error)),
                Err(_) => result = Err(DaemonError::Task),
            }
        }
        self.server.shutdown(deadline).await;
        if self.host.shutdown().await.is_err() && result.is_ok() {
            result = Err(DaemonError::Host);
        }
        if let Some(listener) = self.listener.take() {
            listener.close();
        }
        result
    }
}
