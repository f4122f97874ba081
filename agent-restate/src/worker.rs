//! Serving a worker: the services on an HTTP/2 endpoint, registered with the cluster.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use restate_sdk::hyper::HyperEndpoint;
use restate_sdk::prelude::{Endpoint, IntoServiceDefinition as _, ServiceOptions};

use crate::execution::{RunFactory, Worker};
use crate::ingress::{Ingress, IngressError};
use crate::services::{AgentRun, Executor, RunIndex, RunRecord, Runs};

/// How long registration keeps trying an admin endpoint that does not answer yet.
pub const REGISTRATION_BUDGET: Duration = Duration::from_secs(30);

/// Where a worker listens and which cluster it joins.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The address the endpoint listens on.
    pub listen: SocketAddr,
    /// The address the cluster reaches the endpoint at (`http://host:port`).
    pub advertised: String,
    /// The cluster's admin API (`http://host:9070`).
    pub admin: String,
    /// The cluster's ingress (`http://host:8080`): the worker writes run records through it.
    pub ingress: String,
    /// How long a run may wait (for an answer or cancellation) before the engine suspends
    /// it and it holds no worker; [`DEFAULT_SUSPEND_AFTER`] unless set.
    pub suspend_after: Duration,
    /// Most executions this worker runs at once ([`DEFAULT_MAX_EXECUTIONS`] unless set): a
    /// run's model and tools hold memory and connections while it executes. Executions past
    /// the bound wait for a turn; runs waiting for an answer do not count.
    pub max_executions: usize,
}

/// The default of [`WorkerConfig::max_executions`].
pub const DEFAULT_MAX_EXECUTIONS: usize = 256;

/// The default of [`WorkerConfig::suspend_after`]: the engine's own inactivity default.
pub const DEFAULT_SUSPEND_AFTER: Duration = Duration::from_secs(60);

/// Why a worker could not serve.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The listen address could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
    /// The cluster refused or never answered the registration.
    #[error("cannot register with the cluster's admin API: {0}")]
    Register(String),
    /// The ingress address is unusable.
    #[error(transparent)]
    Ingress(#[from] IngressError),
}

/// Serves `factory`'s definitions until `shutdown` resolves: binds, registers the endpoint
/// with the admin API (again on every start: registration is idempotent), then serves.
pub async fn serve<F: RunFactory>(
    factory: Arc<F>,
    config: WorkerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), WorkerError> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| WorkerError::Listen(config.listen, e))?;
    let executor: Arc<dyn Executor> = Arc::new(Worker::new(
        factory,
        Ingress::new(&config.ingress)?,
        config.max_executions,
    ));
    let endpoint = Endpoint::builder()
        .bind(
            AgentRun::new(executor.clone())
                .into_service_definition()
                .options(ServiceOptions::new().inactivity_timeout(config.suspend_after)),
        )
        .bind(RunRecord)
        .bind(Runs::new(executor))
        .bind(RunIndex)
        .build();
    let server = tokio::spawn(serve_http2(
        listener,
        HyperEndpoint::new(endpoint),
        shutdown,
    ));
    if let Err(error) = register(&config.admin, &config.advertised).await {
        server.abort();
        return Err(error);
    }
    server
        .await
        .map_err(|e| WorkerError::Register(format!("the endpoint stopped: {e}")))
}

/// How long a stopping worker lets its open invocations finish (as the SDK's `HttpServer`).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves `endpoint` on `listener` until `shutdown` resolves, as the SDK's `HttpServer` does,
/// but with `TCP_NODELAY` on every connection. The engine and the endpoint exchange small
/// HTTP/2 frames both ways; with Nagle's algorithm, a frame written while an earlier one is
/// unacknowledged waits for the engine's delayed ACK, about 40 ms on Linux, several times a
/// run (docs/performance.md, "Runs on a Restate cluster").
async fn serve_http2(
    listener: tokio::net::TcpListener,
    endpoint: HyperEndpoint,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        // Out of descriptors, say: pause rather than spin.
                        tracing::warn!("accepting a connection failed: {error}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::warn!("cannot set TCP_NODELAY: {error}");
                }
                let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), endpoint.clone());
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(error) = connection.await {
                        tracing::warn!("serving a connection failed: {error}");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::warn!("open connections did not finish within {SHUTDOWN_GRACE:?}");
        }
    }
}

/// Registers `uri` with the admin API at `admin`, retrying while it does not answer.
pub async fn register(admin: &str, uri: &str) -> Result<(), WorkerError> {
    let http = crate::ingress::http_client(admin, Duration::from_secs(10))
        .map_err(WorkerError::Register)?;
    let url = format!("{}/deployments", admin.trim_end_matches('/'));
    let body = serde_json::json!({ "uri": uri, "force": true });
    let deadline = tokio::time::Instant::now() + REGISTRATION_BUDGET;
    loop {
        let failure = match http.post(&url).json(&body).send().await {
            Ok(response) if response.status().is_success() => return Ok(()),
            Ok(response) => {
                let status = response.status();
                let text = response.text().await.unwrap_or_default();
                if status.is_client_error() {
                    return Err(WorkerError::Register(format!("{status}: {text}")));
                }
                format!("{status}: {text}")
            }
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(WorkerError::Register(failure));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
