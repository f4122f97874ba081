#![allow(
    dead_code,
    unreachable_pub,
    reason = "a test support module: each test file that includes it uses part of it"
)]
//! Worker processes and the address in front of them.
//!
//! The cluster reaches a deployment at one address; workers are replicas behind it. Here
//! that address is a small TCP balancer: each new connection goes to the next worker that
//! accepts, so when one is killed the engine's retry lands on another.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The env var that turns the test binary into a worker process.
pub const WORKER_LISTEN: &str = "AGENT_RESTATE_WORKER_LISTEN";

pub fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Forwards each connection to the next backend that accepts.
pub struct Balancer {
    pub address: SocketAddr,
    backends: Arc<Mutex<Vec<SocketAddr>>>,
    /// The connections each backend was given so far.
    connections: Arc<Mutex<BTreeMap<SocketAddr, usize>>>,
    _runtime: tokio::runtime::Runtime,
}

impl Balancer {
    pub fn start() -> Balancer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        let backends: Arc<Mutex<Vec<SocketAddr>>> = Arc::default();
        let connections: Arc<Mutex<BTreeMap<SocketAddr, usize>>> = Arc::default();
        let next = Arc::new(AtomicUsize::new(0));
        let shared = backends.clone();
        let counted = connections.clone();
        runtime.spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                let (backends, next, counted) = (shared.clone(), next.clone(), counted.clone());
                tokio::spawn(async move {
                    let candidates = backends.lock().unwrap().clone();
                    for _ in 0..candidates.len() {
                        let i = next.fetch_add(1, Ordering::Relaxed) % candidates.len();
                        if let Ok(mut outbound) =
                            tokio::net::TcpStream::connect(candidates[i]).await
                        {
                            // HTTP/2 exchanges small frames both ways: with Nagle's algorithm
                            // on a relay, each waits for the peer's delayed ACK (about 40 ms).
                            let _ = inbound.set_nodelay(true);
                            let _ = outbound.set_nodelay(true);
                            *counted.lock().unwrap().entry(candidates[i]).or_default() += 1;
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                            return;
                        }
                    }
                });
            }
        });
        Balancer {
            address,
            backends,
            connections,
            _runtime: runtime,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn add(&self, backend: SocketAddr) {
        self.backends.lock().unwrap().push(backend);
    }

    /// The connections each backend was given so far (the cluster bench reads how the
    /// engine's connections spread).
    #[allow(dead_code, reason = "only the cluster bench reads it")]
    pub fn connections(&self) -> BTreeMap<SocketAddr, usize> {
        self.connections.lock().unwrap().clone()
    }
}

/// A worker: this test binary, re-run as the `worker_process` test.
pub struct Worker {
    pub child: Child,
    pub address: SocketAddr,
}

impl Worker {
    /// This test binary as a worker serving the fixture.
    pub fn start(
        fixture_dir: &Path,
        admin: &str,
        ingress: &str,
        advertised: &str,
        env: &[(&str, &str)],
    ) -> Worker {
        Worker::spawn(fixture_dir, |address| {
            let mut command = Command::new(std::env::current_exe().unwrap());
            command
                .args([
                    "worker_process",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(WORKER_LISTEN, address.to_string())
                .env("AGENT_RESTATE_ADMIN", admin)
                .env("AGENT_RESTATE_INGRESS", ingress)
                .env("AGENT_RESTATE_ADVERTISED", advertised)
                .env("FIXTURE_DIR", fixture_dir)
                .envs(env.iter().copied());
            command
        })
    }

    /// `command(address)` as a worker listening on a free port of its own, its stderr in
    /// `log_dir/worker-PORT.log`; waits until it listens.
    pub fn spawn(log_dir: &Path, command: impl FnOnce(SocketAddr) -> Command) -> Worker {
        let port = free_port();
        let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let log = std::fs::File::create(log_dir.join(format!("worker-{port}.log"))).unwrap();
        let mut command = command(address);
        let child = command.stdout(Stdio::null()).stderr(log).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(address).is_err() {
            assert!(Instant::now() < deadline, "worker did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Worker { child, address }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The worker process's main, when [`WORKER_LISTEN`] is set.
pub fn worker_main<F: agent_restate::execution::RunFactory>(factory: F) {
    let Ok(listen) = std::env::var(WORKER_LISTEN) else {
        return;
    };
    let var = |k: &str| std::env::var(k).unwrap();
    let config = agent_restate::worker::WorkerConfig {
        listen: listen.parse().unwrap(),
        advertised: var("AGENT_RESTATE_ADVERTISED"),
        admin: var("AGENT_RESTATE_ADMIN"),
        ingress: var("AGENT_RESTATE_INGRESS"),
        suspend_after: std::env::var("AGENT_RESTATE_SUSPEND_AFTER_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(
                agent_restate::worker::DEFAULT_SUSPEND_AFTER,
                Duration::from_millis,
            ),
        max_executions: std::env::var("AGENT_RESTATE_MAX_EXECUTIONS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(agent_restate::worker::DEFAULT_MAX_EXECUTIONS),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(agent_restate::worker::serve(
            Arc::new(factory),
            config,
            std::future::pending(),
        ))
        .unwrap();
}
