//! The managed attach-or-start connector with fake discovery, starter and
//! lock; discovered and launched daemons are fake `EngineService`s on Unix
//! sockets (docs/client.md, "Attach or start").

mod support;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client::{self as c, Connector as _, Session as _};
use agent_client_grpc::GrpcConnector;
use agent_client_grpc::managed::*;
use support::*;

#[derive(Clone, Copy)]
enum Answer {
    /// Whatever `published` says.
    Live,
    NotFound,
    Failed,
}

#[derive(Default)]
struct World {
    /// The socket of the daemon discovery finds.
    published: Mutex<Option<PathBuf>>,
    /// Scripted answers before falling back to `Live`.
    script: Mutex<VecDeque<Answer>>,
    discoveries: AtomicUsize,
    starts: AtomicUsize,
    acquired: AtomicUsize,
    fail_release: AtomicBool,
    launched: Mutex<Vec<Arc<Probe>>>,
    started: tokio::sync::Notify,
}

#[derive(Clone)]
struct Discover(Arc<World>);

impl Discovery for Discover {
    type Connector = GrpcConnector;
    async fn discover(&self) -> Result<GrpcConnector, DiscoveryError> {
        self.0.discoveries.fetch_add(1, Ordering::SeqCst);
        let answer = self
            .0
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Answer::Live);
        match answer {
            Answer::Failed => Err(DiscoveryError::Failed),
            Answer::NotFound => Err(DiscoveryError::EndpointNotFound),
            Answer::Live => match self.0.published.lock().unwrap().as_ref() {
                Some(socket) => Ok(GrpcConnector::new(
                    agent_client_grpc::Config::unix(socket, TOKEN).unwrap(),
                )),
                None => Err(DiscoveryError::EndpointNotFound),
            },
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Launch {
    /// Serve and publish the endpoint.
    Serve,
    /// Exit at once without serving.
    ExitEarly,
    /// Run without ever publishing.
    Silent,
}

struct Start {
    world: Arc<World>,
    launch: Launch,
    join: Result<(), JoinError>,
}

#[derive(Default)]
struct Probe {
    shutdowns: AtomicUsize,
    waits: AtomicUsize,
}

struct Daemon {
    server: Mutex<Option<Server>>,
    exited: bool,
    probe: Arc<Probe>,
    join: Result<(), JoinError>,
}

impl Candidate for Daemon {
    fn has_exited(&self) -> bool {
        self.exited
    }
    fn begin_shutdown(&self) {
        self.probe.shutdowns.fetch_add(1, Ordering::SeqCst);
    }
    async fn wait(&self) -> Result<(), JoinError> {
        self.probe.waits.fetch_add(1, Ordering::SeqCst);
        // Taking the server out drops (kills) it after the lock is released.
        let server = self.server.lock().unwrap().take();
        drop(server);
        self.join.clone()
    }
}

impl Starter for Start {
    type Candidate = Daemon;
    async fn start(&self) -> Result<Daemon, ManagedError> {
        self.world.starts.fetch_add(1, Ordering::SeqCst);
        let probe = Arc::new(Probe::default());
        self.world.launched.lock().unwrap().push(probe.clone());
        self.world.started.notify_waiters();
        let server = match self.launch {
            Launch::Serve => {
                let server = Server::start();
                *self.world.published.lock().unwrap() = Some(server.socket.clone());
                Some(server)
            }
            Launch::ExitEarly | Launch::Silent => None,
        };
        Ok(Daemon {
            server: Mutex::new(server),
            exited: self.launch == Launch::ExitEarly,
            probe,
            join: self.join.clone(),
        })
    }
}

struct Lock(Arc<World>);
struct Lease(Arc<World>);

impl StartupLock for Lock {
    type Lease = Lease;
    async fn acquire(&self) -> Result<Lease, ManagedError> {
        self.0.acquired.fetch_add(1, Ordering::SeqCst);
        Ok(Lease(self.0.clone()))
    }
}

impl StartupLease for Lease {
    async fn release(self) -> Result<(), ManagedError> {
        if self.0.fail_release.load(Ordering::SeqCst) {
            Err(ManagedError::StartupLock)
        } else {
            Ok(())
        }
    }
}

type Managed = ManagedConnector<Discover, Start, Lock>;

fn managed(
    world: &Arc<World>,
    launch: Launch,
    join: Result<(), JoinError>,
    startup: Duration,
) -> Arc<Managed> {
    let config = ManagedConfig::new(startup, Duration::from_millis(10), None).unwrap();
    Arc::new(ManagedConnector::new(
        Discover(world.clone()),
        Start {
            world: world.clone(),
            launch,
            join,
        },
        Lock(world.clone()),
        config,
    ))
}

const LONG: Duration = Duration::from_secs(120);

#[test]
fn config_bounds() {
    let ms = Duration::from_millis;
    assert!(ManagedConfig::new(ms(0), ms(0), None).is_err());
    assert!(ManagedConfig::new(ms(10), ms(0), None).is_err());
    assert!(ManagedConfig::new(ms(10), ms(11), None).is_err());
    assert!(ManagedConfig::new(ms(10), ms(10), None).is_ok());
    assert!(ManagedConfig::new(ms(10), ms(10), Some(ms(0))).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_serializes_rechecks_and_starts_once() {
    let world = Arc::new(World::default());
    let m = managed(&world, Launch::Serve, Ok(()), LONG);
    let (a, b) = tokio::join!(m.initialize(fresh()), m.initialize(fresh()));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(
        world.starts.load(Ordering::SeqCst),
        1,
        "exactly one daemon started"
    );
    assert_ne!(a.connection().client_id(), b.connection().client_id());
    m.shutdown().await.unwrap();

    // An endpoint that appears while we wait for the lock is attached to.
    let world = Arc::new(World::default());
    let external = Server::start();
    *world.published.lock().unwrap() = Some(external.socket.clone());
    world.script.lock().unwrap().push_back(Answer::NotFound);
    let m = managed(&world, Launch::Serve, Ok(()), LONG);
    m.initialize(fresh()).await.unwrap();
    assert_eq!(world.acquired.load(Ordering::SeqCst), 1, "took the lock");
    assert_eq!(
        world.starts.load(Ordering::SeqCst),
        0,
        "re-discovered under it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_never_starts_over_existing_failure() {
    let world = Arc::new(World::default());
    world.script.lock().unwrap().push_back(Answer::Failed);
    let m = managed(&world, Launch::Serve, Ok(()), LONG);
    assert_eq!(
        m.initialize_managed(fresh()).await.unwrap_err(),
        ManagedError::Discovery
    );
    assert_eq!(world.starts.load(Ordering::SeqCst), 0);
    assert_eq!(world.acquired.load(Ordering::SeqCst), 0);

    // A failure on re-discovery under the lock is as hard.
    world
        .script
        .lock()
        .unwrap()
        .extend([Answer::NotFound, Answer::Failed]);
    assert_eq!(
        m.initialize_managed(fresh()).await.unwrap_err(),
        ManagedError::Discovery
    );
    assert_eq!(world.starts.load(Ordering::SeqCst), 0);

    // An attached daemon's refusal is returned, never answered by starting one.
    let external = Server::start();
    external
        .script
        .initialize
        .lock()
        .unwrap()
        .push_back(InitStep::Fail(tonic::Status::unavailable("busy")));
    *world.published.lock().unwrap() = Some(external.socket.clone());
    let err = m.initialize_managed(fresh()).await.unwrap_err();
    assert!(matches!(err, ManagedError::Client(_)), "{err:?}");
    assert_eq!(world.starts.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_shutdown_owns_only_launched_candidate() {
    // Discovered: shutdown leaves it serving.
    let world = Arc::new(World::default());
    let external = Server::start();
    *world.published.lock().unwrap() = Some(external.socket.clone());
    let m = managed(&world, Launch::Serve, Ok(()), LONG);
    let session = m.initialize(fresh()).await.unwrap();
    m.shutdown().await.unwrap();
    assert_eq!(world.starts.load(Ordering::SeqCst), 0);
    drop(session);
    let again = external.connector().initialize(fresh()).await;
    assert!(again.is_ok(), "the discovered daemon still serves");
    assert_eq!(
        m.initialize_managed(fresh()).await.unwrap_err(),
        ManagedError::Closed
    );

    // Launched: shutdown stops and joins it, once.
    let world = Arc::new(World::default());
    let m = managed(&world, Launch::Serve, Ok(()), LONG);
    m.initialize(fresh()).await.unwrap();
    m.shutdown().await.unwrap();
    m.shutdown().await.unwrap();
    let probe = world.launched.lock().unwrap()[0].clone();
    assert_eq!(probe.shutdowns.load(Ordering::SeqCst), 1);
    assert_eq!(
        probe.waits.load(Ordering::SeqCst),
        1,
        "ownership released after a clean join"
    );
}

const FATAL: JoinError = JoinError {
    retryable: false,
    message: "daemon exited with a failure",
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_non_retryable_join_failure_is_terminal_and_retained() {
    let world = Arc::new(World::default());
    let m = managed(&world, Launch::Serve, Err(FATAL), LONG);
    m.initialize(fresh()).await.unwrap();
    assert_eq!(m.shutdown().await, Err(ManagedError::Join(FATAL)));
    assert_eq!(m.shutdown().await, Err(ManagedError::Join(FATAL)));
    let probe = world.launched.lock().unwrap()[0].clone();
    assert_eq!(probe.shutdowns.load(Ordering::SeqCst), 1, "not repeated");
    assert_eq!(probe.waits.load(Ordering::SeqCst), 1, "not repeated");

    // A retryable failure is not cached: the next shutdown tries again.
    let world = Arc::new(World::default());
    let transient = JoinError {
        retryable: true,
        message: "still stopping",
    };
    let m = managed(&world, Launch::Serve, Err(transient.clone()), LONG);
    m.initialize(fresh()).await.unwrap();
    assert_eq!(
        m.shutdown().await,
        Err(ManagedError::Join(transient.clone()))
    );
    assert_eq!(m.shutdown().await, Err(ManagedError::Join(transient)));
    let probe = world.launched.lock().unwrap()[0].clone();
    assert_eq!(probe.waits.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_fails_promptly_and_joins_early_candidate_exit() {
    let world = Arc::new(World::default());
    let m = managed(&world, Launch::ExitEarly, Ok(()), LONG);
    assert_eq!(
        m.initialize_managed(fresh()).await.unwrap_err(),
        ManagedError::CandidateExited
    );
    let probe = world.launched.lock().unwrap()[0].clone();
    assert_eq!(probe.shutdowns.load(Ordering::SeqCst), 1);
    assert_eq!(probe.waits.load(Ordering::SeqCst), 1);
    // Ownership was released by the clean join: the next attempt starts anew.
    let _ = m.initialize_managed(fresh()).await;
    assert_eq!(world.starts.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_startup_timeout_cleans_up_the_candidate() {
    let world = Arc::new(World::default());
    let m = managed(&world, Launch::Silent, Ok(()), Duration::from_millis(50));
    assert_eq!(
        m.initialize_managed(fresh()).await.unwrap_err(),
        ManagedError::StartupTimeout
    );
    let probe = world.launched.lock().unwrap()[0].clone();
    assert_eq!(probe.shutdowns.load(Ordering::SeqCst), 1);
    let err: c::Error = ManagedError::StartupTimeout.into();
    assert_eq!(err.status_code(), Some(c::StatusCode::DeadlineExceeded));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_release_failure_closes_the_session_and_cleans_up() {
    let world = Arc::new(World::default());
    world.fail_release.store(true, Ordering::SeqCst);
    let m = managed(&world, Launch::Serve, Ok(()), LONG);
    assert_eq!(
        m.initialize_managed(fresh()).await.unwrap_err(),
        ManagedError::StartupLock
    );
    let probe = world.launched.lock().unwrap()[0].clone();
    assert_eq!(probe.shutdowns.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_an_in_flight_initialize_and_stops_its_candidate() {
    let world = Arc::new(World::default());
    let m = managed(&world, Launch::Silent, Ok(()), LONG);
    let started = world.started.notified();
    let pending = tokio::spawn({
        let m = m.clone();
        async move { m.initialize_managed(fresh()).await }
    });
    started.await;
    m.shutdown().await.unwrap();
    assert_eq!(pending.await.unwrap().unwrap_err(), ManagedError::Closed);
    let probe = world.launched.lock().unwrap()[0].clone();
    assert_eq!(probe.shutdowns.load(Ordering::SeqCst), 1);
    assert_eq!(probe.waits.load(Ordering::SeqCst), 1);
}
