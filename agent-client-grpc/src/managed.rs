//! Attach-or-start (docs/client.md, "Attach or start"): [`ManagedConnector`] attaches to
//! a daemon that [`Discovery`] finds, and only when none answers starts one
//! through [`Starter`] under a [`StartupLock`], then polls until it answers.
//! It shuts down only a [`Candidate`] it launched itself.
//!
//! The concrete local discovery and startup lock (over the endpoint store)
//! are in [`crate::local`]; the process starter is the application's (the
//! `agent` CLI launches `agent serve`). This module holds the policy and the
//! traits they implement.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agent_client as c;
use agent_client::{Connector, Session as _};
use tokio::sync::{Mutex, watch};

/// Why discovery found no connector.
#[derive(Debug)]
pub enum DiscoveryError {
    /// Exactly "no endpoint is published": the only answer that authorizes
    /// starting a daemon.
    EndpointNotFound,
    /// Anything else (unreadable store, malformed or foreign metadata): a
    /// hard failure; never start a daemon over it.
    Failed,
}

/// Finds the running daemon's connector.
pub trait Discovery: Send + Sync {
    /// The connector of a discovered daemon.
    type Connector: c::Connector;
    /// Looks once.
    fn discover(&self) -> impl Future<Output = Result<Self::Connector, DiscoveryError>> + Send;
}

/// A failure joining a candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinError {
    /// Whether waiting again may succeed. A non-retryable failure is cached
    /// as the connector's terminal shutdown result.
    pub retryable: bool,
    /// A fixed description.
    pub message: &'static str,
}

/// A daemon process this connector launched.
pub trait Candidate: Send + Sync + 'static {
    /// Whether the process has already exited.
    fn has_exited(&self) -> bool;
    /// Asks it to stop (non-blocking).
    fn begin_shutdown(&self);
    /// Waits until it has stopped; the caller bounds the wait.
    fn wait(&self) -> impl Future<Output = Result<(), JoinError>> + Send;
}

/// Launches a daemon.
pub trait Starter: Send + Sync {
    /// The launched process.
    type Candidate: Candidate;
    /// Starts one.
    fn start(&self) -> impl Future<Output = Result<Self::Candidate, ManagedError>> + Send;
}

/// A held startup lock.
pub trait StartupLease: Send {
    /// Releases it.
    fn release(self) -> impl Future<Output = Result<(), ManagedError>> + Send;
}

/// Serializes startup between processes (for example a lock file).
pub trait StartupLock: Send + Sync {
    /// The held lock.
    type Lease: StartupLease;
    /// Acquires it; the caller bounds the wait.
    fn acquire(&self) -> impl Future<Output = Result<Self::Lease, ManagedError>> + Send;
}

/// Failures of the managed connector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManagedError {
    /// Discovery failed with anything but "not found".
    Discovery,
    /// The startup lock could not be acquired or released.
    StartupLock,
    /// The starter could not launch a daemon.
    Start,
    /// The launched daemon exited before it answered.
    CandidateExited,
    /// No daemon answered within the startup timeout.
    StartupTimeout,
    /// The launched daemon did not stop within the shutdown timeout.
    ShutdownTimeout,
    /// Joining the launched daemon failed.
    Join(JoinError),
    /// The connector was shut down.
    Closed,
    /// The daemon's connector refused.
    Client(c::Error),
}

impl fmt::Display for ManagedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Discovery => f.write_str("endpoint discovery failed"),
            Self::StartupLock => f.write_str("startup lock failed"),
            Self::Start => f.write_str("daemon could not be started"),
            Self::CandidateExited => f.write_str("started daemon exited before it answered"),
            Self::StartupTimeout => f.write_str("daemon startup timed out"),
            Self::ShutdownTimeout => f.write_str("daemon shutdown timed out"),
            Self::Join(e) => write!(f, "joining the daemon failed: {}", e.message),
            Self::Closed => f.write_str("connector is shut down"),
            Self::Client(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ManagedError {}

impl From<ManagedError> for c::Error {
    /// Seam callers see a status error with the fixed message of the
    /// failure (the managed policy adds no new seam error kinds).
    fn from(e: ManagedError) -> Self {
        use c::StatusCode as S;
        match e {
            ManagedError::Client(e) => e,
            ManagedError::Closed => c::Error::Closed,
            ManagedError::StartupTimeout => {
                c::Error::status(S::DeadlineExceeded, "daemon startup timed out", true)
            }
            ManagedError::CandidateExited => c::Error::status(
                S::Unavailable,
                "started daemon exited before it answered",
                false,
            ),
            ManagedError::Discovery => {
                c::Error::status(S::Internal, "endpoint discovery failed", false)
            }
            ManagedError::StartupLock => {
                c::Error::status(S::Internal, "startup lock failed", false)
            }
            ManagedError::Start => {
                c::Error::status(S::Internal, "daemon could not be started", false)
            }
            ManagedError::ShutdownTimeout | ManagedError::Join(_) => {
                c::Error::status(S::Internal, "daemon shutdown failed", false)
            }
        }
    }
}

/// Timing of a [`ManagedConnector`].
#[derive(Clone, Copy, Debug)]
pub struct ManagedConfig {
    startup_timeout: Duration,
    retry_interval: Duration,
    shutdown_timeout: Duration,
}

impl ManagedConfig {
    /// `startup_timeout > 0`, `0 < retry_interval <= startup_timeout`;
    /// the shutdown timeout defaults to the startup timeout.
    pub fn new(
        startup_timeout: Duration,
        retry_interval: Duration,
        shutdown_timeout: Option<Duration>,
    ) -> Result<Self, c::ValueError> {
        if startup_timeout.is_zero() || retry_interval.is_zero() || retry_interval > startup_timeout
        {
            return Err(c::ValueError::new(
                "need 0 < retry interval <= startup timeout",
            ));
        }
        let shutdown_timeout = shutdown_timeout.unwrap_or(startup_timeout);
        if shutdown_timeout.is_zero() {
            return Err(c::ValueError::new("shutdown timeout is zero"));
        }
        Ok(Self {
            startup_timeout,
            retry_interval,
            shutdown_timeout,
        })
    }
}

/// The attach-or-start connector.
pub struct ManagedConnector<D, S: Starter, L> {
    discovery: D,
    starter: S,
    lock: L,
    config: ManagedConfig,
    /// One Initialize at a time.
    gate: Mutex<()>,
    /// The candidate this connector launched, while it owns one.
    owned: Mutex<Option<Arc<S::Candidate>>>,
    /// A non-retryable join failure, returned by every later shutdown.
    terminal: Mutex<Option<JoinError>>,
    closed: watch::Sender<bool>,
}

impl<D, S: Starter, L> fmt::Debug for ManagedConnector<D, S, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ManagedConnector([redacted])")
    }
}

/// Whether an Initialize failure means "the daemon is not answering yet".
/// A replayable 1.3 attempt counts too: resending the same attempt is what
/// it allows.
fn not_ready(e: &c::Error) -> bool {
    matches!(e, c::Error::InitializationReplay(_))
        || (e.status_code() == Some(c::StatusCode::Unavailable) && e.retryable())
}

impl<D, S, L> ManagedConnector<D, S, L>
where
    D: Discovery,
    S: Starter,
    L: StartupLock,
{
    /// A connector with the given parts.
    pub fn new(discovery: D, starter: S, lock: L, config: ManagedConfig) -> Self {
        Self {
            discovery,
            starter,
            lock,
            config,
            gate: Mutex::new(()),
            owned: Mutex::new(None),
            terminal: Mutex::new(None),
            closed: watch::Sender::new(false),
        }
    }

    /// Initialize with the managed policy and its own error type.
    pub async fn initialize_managed(
        &self,
        request: c::InitializeRequest,
    ) -> Result<<D::Connector as Connector>::Session, ManagedError> {
        let mut closed = self.closed.subscribe();
        if *closed.borrow() {
            return Err(ManagedError::Closed);
        }
        let session = tokio::select! {
            biased;
            _ = closed.wait_for(|c| *c) => return Err(ManagedError::Closed),
            r = async {
                let _turn = self.gate.lock().await;
                self.attach_or_start(request).await
            } => r?,
        };
        if *self.closed.borrow() {
            session.close();
            return Err(ManagedError::Closed);
        }
        Ok(session)
    }

    async fn attach_or_start(
        &self,
        request: c::InitializeRequest,
    ) -> Result<<D::Connector as Connector>::Session, ManagedError> {
        match self.discovery.discover().await {
            Ok(connector) => {
                return connector
                    .initialize(request)
                    .await
                    .map_err(ManagedError::Client);
            }
            Err(DiscoveryError::EndpointNotFound) => {}
            Err(DiscoveryError::Failed) => return Err(ManagedError::Discovery),
        }
        let started =
            tokio::time::timeout(self.config.startup_timeout, self.start_locked(request)).await;
        let result = match started {
            Ok(r) => r,
            Err(_) => Err(ManagedError::StartupTimeout),
        };
        if result.is_err() {
            // Never leave a daemon we launched running after a failed start.
            let _ = self.shutdown_owned().await;
        }
        result
    }

    async fn start_locked(
        &self,
        request: c::InitializeRequest,
    ) -> Result<<D::Connector as Connector>::Session, ManagedError> {
        let lease = self.lock.acquire().await?;
        let attached = self.start_and_poll(request).await;
        let released = lease.release().await;
        match (attached, released) {
            (Ok(session), Ok(())) => Ok(session),
            (Ok(session), Err(e)) => {
                session.close();
                Err(e)
            }
            (Err(e), _) => Err(e),
        }
    }

    async fn start_and_poll(
        &self,
        request: c::InitializeRequest,
    ) -> Result<<D::Connector as Connector>::Session, ManagedError> {
        // Another process may have started one while we waited for the lock.
        match self.discovery.discover().await {
            Ok(connector) => {
                return connector
                    .initialize(request)
                    .await
                    .map_err(ManagedError::Client);
            }
            Err(DiscoveryError::EndpointNotFound) => {}
            Err(DiscoveryError::Failed) => return Err(ManagedError::Discovery),
        }
        let candidate = self.ensure_candidate().await?;
        // Poll at once, then every retry interval.
        let mut interval = tokio::time::interval(self.config.retry_interval);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            if candidate.has_exited() {
                return Err(ManagedError::CandidateExited);
            }
            match self.discovery.discover().await {
                Ok(connector) => match connector.initialize(request.clone()).await {
                    Ok(session) => return Ok(session),
                    Err(e) if not_ready(&e) => {}
                    Err(e) => return Err(ManagedError::Client(e)),
                },
                Err(DiscoveryError::EndpointNotFound) => {}
                Err(DiscoveryError::Failed) => return Err(ManagedError::Discovery),
            }
        }
    }

    async fn ensure_candidate(&self) -> Result<Arc<S::Candidate>, ManagedError> {
        let mut owned = self.owned.lock().await;
        if let Some(c) = owned.as_ref() {
            return Ok(Arc::clone(c));
        }
        let c = Arc::new(self.starter.start().await?);
        *owned = Some(Arc::clone(&c));
        Ok(c)
    }

    /// Stops and joins the candidate this connector launched, if any.
    async fn shutdown_owned(&self) -> Result<(), ManagedError> {
        let mut terminal = self.terminal.lock().await;
        if let Some(e) = terminal.as_ref() {
            return Err(ManagedError::Join(e.clone()));
        }
        let mut owned = self.owned.lock().await;
        let Some(candidate) = owned.as_ref().map(Arc::clone) else {
            return Ok(());
        };
        candidate.begin_shutdown();
        match tokio::time::timeout(self.config.shutdown_timeout, candidate.wait()).await {
            Err(_) => Err(ManagedError::ShutdownTimeout),
            Ok(Ok(())) => {
                *owned = None;
                Ok(())
            }
            Ok(Err(e)) => {
                if !e.retryable {
                    *terminal = Some(e.clone());
                }
                Err(ManagedError::Join(e))
            }
        }
    }

    /// Marks the connector closed, cancels an in-flight Initialize (its
    /// session is closed), then stops and joins only the daemon this
    /// connector launched; a discovered daemon is never stopped.
    pub async fn shutdown(&self) -> Result<(), ManagedError> {
        self.closed.send_replace(true);
        // Wait out an Initialize that is finishing, so its candidate is known.
        let _turn = self.gate.lock().await;
        self.shutdown_owned().await
    }
}

impl<D, S, L> c::Connector for ManagedConnector<D, S, L>
where
    D: Discovery,
    S: Starter,
    L: StartupLock,
{
    type Session = <D::Connector as Connector>::Session;

    async fn initialize(&self, request: c::InitializeRequest) -> Result<Self::Session, c::Error> {
        self.initialize_managed(request).await.map_err(Into::into)
    }
}
