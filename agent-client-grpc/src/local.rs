//! The local client (docs/client.md, "The local client"): a [`LocalConnector`] built from a daemon's
//! published endpoint metadata, the [`LocalDiscovery`] and [`ExplicitDiscovery`] that
//! find it through the endpoint store, and the [`LocalStartupLock`] the managed
//! connector serializes startup with.
//!
//! The connector dials through [`agent_endpoint::localipc::dial`], so every connection
//! re-checks that the socket is a private socket of ours in a private directory. tonic
//! has no proxy support on a custom connector and no retry policy, so neither can replay
//! a request behind the adapter's back.
//!
//! ```no_run
//! use agent_client_grpc::local::{LocalDiscovery, LocalStartupLock};
//! use agent_client_grpc::managed::Discovery as _;
//! use agent_endpoint::{Store, UserScope};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let scope = UserScope::current()?;
//! let store = Store::open(scope.dir())?;
//! let discovery = LocalDiscovery::new(store.clone());
//! let lock = LocalStartupLock::new(store);
//! let connector = discovery.discover().await.ok();
//! # let _ = (connector, lock);
//! # Ok(())
//! # }
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agent_client as c;
use agent_client::Session as _;
use agent_endpoint::localipc;
use agent_endpoint::{Metadata, Store, StoreError};
use hyper_util::rt::TokioIo;
use tonic::transport::{Endpoint, Uri};

use crate::managed::{Discovery, DiscoveryError, ManagedError, StartupLease, StartupLock};
use crate::{Config, GrpcConnector, GrpcSession};

/// The channel's target: a placeholder authority, since the connector dials the socket.
pub const LOCAL_TARGET: &str = "http://spice-agent-local";
/// How long discovery waits for the store's metadata lock.
pub const DISCOVERY_LOCK_TIMEOUT: Duration = Duration::from_secs(5);
/// The fixed message of a daemon whose advertised identity differs from its metadata.
pub const IDENTITY_MISMATCH_MESSAGE: &str =
    "daemon identity differs from its published endpoint metadata";

/// Why a [`LocalConnector`] could not be built from metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The metadata names another platform's transport or is invalid.
    #[error("endpoint metadata is not usable on this platform")]
    Metadata,
    /// The explicit address differs from the published one.
    #[error("published endpoint differs from the explicit address")]
    ExplicitEndpointMismatch,
}

struct LocalInner {
    metadata: Metadata,
    address: PathBuf,
    /// The one gRPC connector, created on the first Initialize (its channel's worker
    /// needs a runtime), then reused so reconnect fencing state is kept.
    grpc: Mutex<Option<GrpcConnector>>,
    closed: AtomicBool,
}

/// A connector to the daemon a metadata record describes. Clones share one channel and one
/// fencing state.
#[derive(Clone)]
pub struct LocalConnector {
    inner: Arc<LocalInner>,
}

impl std::fmt::Debug for LocalConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalConnector([redacted])")
    }
}

impl LocalConnector {
    /// A connector for `metadata`, which must name this platform's transport.
    pub fn new(metadata: Metadata) -> Result<LocalConnector, LocalError> {
        metadata
            .validate_for_platform()
            .map_err(|_| LocalError::Metadata)?;
        let address = PathBuf::from(&metadata.address);
        Ok(LocalConnector {
            inner: Arc::new(LocalInner {
                metadata,
                address,
                grpc: Mutex::new(None),
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// The metadata this connector was built from.
    pub fn metadata(&self) -> &Metadata {
        &self.inner.metadata
    }

    /// Whether `other` is a clone of this connector (one channel, one fencing state).
    pub fn shares_state_with(&self, other: &LocalConnector) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Whether an identity mismatch (or [`LocalConnector::close`]) closed it.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Closes the connector: later Initialize calls answer [`c::Error::Closed`].
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner
            .grpc
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    fn grpc(&self) -> Result<GrpcConnector, c::Error> {
        let mut grpc = self
            .inner
            .grpc
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = grpc.as_ref() {
            return Ok(existing.clone());
        }
        let address = self.inner.address.clone();
        let channel = Endpoint::from_static(LOCAL_TARGET).connect_with_connector_lazy(
            tower::service_fn(move |_: Uri| {
                let address = address.clone();
                async move {
                    let stream = tokio::task::spawn_blocking(move || localipc::dial(&address))
                        .await
                        .map_err(std::io::Error::other)?
                        .map_err(std::io::Error::other)?;
                    stream.set_nonblocking(true)?;
                    Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::from_std(stream)?))
                }
            }),
        );
        let connector = GrpcConnector::new(Config::with_channel(
            channel,
            &self.inner.metadata.token.expose_text(),
        )?);
        *grpc = Some(connector.clone());
        Ok(connector)
    }

    /// Whether the session's advertised identity is the published one: the server build
    /// equals the metadata's; the protocol has the same major and a lower minor, or the
    /// same minor and a patch no higher than the published one.
    fn identity_matches(&self, connection: &c::Connection) -> bool {
        let m = &self.inner.metadata;
        let server = connection.server();
        let protocol = connection.protocol();
        let (major, minor, patch) = m.protocol;
        server.component() == m.server_component
            && server.version() == m.server_version
            && server.commit() == m.server_commit
            && server.toolchain() == m.server_toolchain
            && protocol.major() == major
            && (protocol.minor() < minor
                || (protocol.minor() == minor && protocol.patch() <= patch))
    }
}

impl c::Connector for LocalConnector {
    type Session = GrpcSession;

    async fn initialize(&self, request: c::InitializeRequest) -> Result<GrpcSession, c::Error> {
        if self.is_closed() {
            return Err(c::Error::Closed);
        }
        // Dropping this future after the daemon answered drops the session, which closes it.
        let session = self.grpc()?.initialize(request).await?;
        if !self.identity_matches(session.connection()) {
            session.close();
            self.close();
            return Err(c::Error::Protocol(IDENTITY_MISMATCH_MESSAGE));
        }
        Ok(session)
    }
}

async fn discover_blocking(store: &Store) -> Result<Metadata, StoreError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || store.discover(Instant::now() + DISCOVERY_LOCK_TIMEOUT))
        .await
        .map_err(|_| StoreError::Io)?
}

/// Finds the published daemon: only "no endpoint is published" is
/// [`DiscoveryError::EndpointNotFound`] (it also drops the cached connector); one
/// connector is cached per exact metadata record (transport, address, token, build,
/// protocol, process id, start time, instance id) and replaced when any of them changes.
#[derive(Debug)]
pub struct LocalDiscovery {
    store: Store,
    cached: Mutex<Option<LocalConnector>>,
}

impl LocalDiscovery {
    /// Discovery over `store`.
    pub fn new(store: Store) -> LocalDiscovery {
        LocalDiscovery {
            store,
            cached: Mutex::new(None),
        }
    }
}

impl Discovery for LocalDiscovery {
    type Connector = LocalConnector;

    async fn discover(&self) -> Result<LocalConnector, DiscoveryError> {
        let found = discover_blocking(&self.store).await;
        let mut cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
        let metadata = match found {
            Ok(metadata) => metadata,
            Err(StoreError::NotFound) => {
                *cached = None;
                return Err(DiscoveryError::EndpointNotFound);
            }
            Err(_) => return Err(DiscoveryError::Failed),
        };
        if let Some(existing) = cached.as_ref()
            && existing.metadata() == &metadata
            && !existing.is_closed()
        {
            return Ok(existing.clone());
        }
        let connector = LocalConnector::new(metadata).map_err(|_| DiscoveryError::Failed)?;
        *cached = Some(connector.clone());
        Ok(connector)
    }
}

/// Discovery of the daemon at one explicit socket address: the published record must name
/// exactly that address, and absence is a hard failure (never the sentinel that lets the
/// managed connector start a daemon).
#[derive(Debug)]
pub struct ExplicitDiscovery {
    store: Store,
    address: String,
    cached: Mutex<Option<LocalConnector>>,
}

impl ExplicitDiscovery {
    /// Discovery of the daemon at `address` through `store`.
    pub fn new(store: Store, address: impl Into<String>) -> ExplicitDiscovery {
        ExplicitDiscovery {
            store,
            address: address.into(),
            cached: Mutex::new(None),
        }
    }

    /// The connector, or why there is none.
    pub async fn find(&self) -> Result<LocalConnector, ExplicitError> {
        let metadata = discover_blocking(&self.store)
            .await
            .map_err(ExplicitError::Store)?;
        if metadata.address != self.address {
            return Err(ExplicitError::Local(LocalError::ExplicitEndpointMismatch));
        }
        let mut cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = cached.as_ref()
            && existing.metadata() == &metadata
            && !existing.is_closed()
        {
            return Ok(existing.clone());
        }
        let connector = LocalConnector::new(metadata).map_err(ExplicitError::Local)?;
        *cached = Some(connector.clone());
        Ok(connector)
    }
}

/// Why [`ExplicitDiscovery`] found no connector. Absence is
/// `Store(StoreError::NotFound)`, which is not the managed startup sentinel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExplicitError {
    /// The store failed, found no live daemon, or holds malformed metadata.
    #[error("explicit endpoint: {0}")]
    Store(StoreError),
    /// The record is unusable or names another address.
    #[error("explicit endpoint: {0}")]
    Local(LocalError),
}

impl Discovery for ExplicitDiscovery {
    type Connector = LocalConnector;

    async fn discover(&self) -> Result<LocalConnector, DiscoveryError> {
        self.find().await.map_err(|_| DiscoveryError::Failed)
    }
}

/// The managed connector's startup lock over [`Store::acquire_startup`].
#[derive(Debug, Clone)]
pub struct LocalStartupLock {
    store: Store,
    timeout: Duration,
}

/// How long [`LocalStartupLock`] waits for the startup lock by default.
pub const STARTUP_LOCK_TIMEOUT: Duration = Duration::from_secs(30);

impl LocalStartupLock {
    /// The lock of `store`, waited for at most [`STARTUP_LOCK_TIMEOUT`].
    pub fn new(store: Store) -> LocalStartupLock {
        LocalStartupLock {
            store,
            timeout: STARTUP_LOCK_TIMEOUT,
        }
    }

    /// The same lock waited for at most `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> LocalStartupLock {
        self.timeout = timeout;
        self
    }
}

/// A held [`LocalStartupLock`].
#[derive(Debug)]
pub struct LocalStartupLease(agent_endpoint::StartupLease);

impl StartupLease for LocalStartupLease {
    async fn release(mut self) -> Result<(), ManagedError> {
        self.0.release();
        Ok(())
    }
}

impl StartupLock for LocalStartupLock {
    type Lease = LocalStartupLease;

    async fn acquire(&self) -> Result<LocalStartupLease, ManagedError> {
        let store = self.store.clone();
        let deadline = Instant::now() + self.timeout;
        tokio::task::spawn_blocking(move || store.acquire_startup(deadline))
            .await
            .map_err(|_| ManagedError::StartupLock)?
            .map(LocalStartupLease)
            .map_err(|_| ManagedError::StartupLock)
    }
}
