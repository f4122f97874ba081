//! The `EngineService` handlers over a [`RunHost`] (docs/transport.md, "What the server serves").

mod envelope;
mod events;
mod initialize;
mod interactions;
mod lifecycle;

use std::sync::Arc;

use agent_daemon::host::HealthStatus;
use agent_daemon::{HostError, RunHost};
use agent_endpoint::EndpointToken;
use agent_protocol::Negotiated;
use agent_protocol::initialize::ServerInputs;
use agent_protocol::negotiate::version;
use agent_protocol::pb::common::v1::{
    BuildIdentity, Health, HealthState, Limits, ProtocolRange, Status,
};
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::pb::engine::v1::engine_service_server::EngineService;
use agent_protocol::requests::check_snapshot_transfer;
use agent_protocol::status::Violation;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response};

use crate::registry::{Entry, Registry};
use crate::status::{lifecycle_failure, session_unavailable};

pub use self::envelope::{
    CANCELLED_TEXT, INTERACTION_CANCELLED_TEXT, INTERACTION_FAILED_TEXT, MODEL_FAILED_CODE,
    MODEL_FAILED_MESSAGE, check_wire_event, envelope_from_wire, envelope_to_wire, event_to_wire,
    event_to_wire_with, model_operation_id, project_event, project_payload, rich_facts,
};
use self::events::BoxStream;
pub use self::initialize::attempt_fingerprint;
use self::lifecycle::invalid_status;

/// The fixed message of every authentication failure.
pub const UNAUTHENTICATED_MESSAGE: &str = "local daemon authentication failed";
/// The fixed message of an RPC refused while the daemon stops.
pub const STOPPING_MESSAGE: &str = "local daemon is stopping";
/// Frames buffered per server stream before a send waits for the client.
pub const STREAM_BUFFER: usize = 64;
/// The fixed error text of a failed tool's projected payload.
pub const TOOL_FAILED_TEXT: &str = "tool execution failed";

/// The marker the interceptor leaves on an authenticated request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Authenticated;

/// The authentication interceptor: exactly one `authorization` value equal to the bearer
/// form of the server token, and a peer whose uid is the expected one. Runs before any
/// handler, on unary and stream paths alike.
#[derive(Clone)]
pub(crate) struct Authenticator {
    pub(crate) token: Arc<EndpointToken>,
    pub(crate) expected_uid: u32,
}

impl tonic::service::Interceptor for Authenticator {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, tonic::Status> {
        let refuse = || tonic::Status::unauthenticated(UNAUTHENTICATED_MESSAGE);
        let peer = request
            .extensions()
            .get::<tonic::transport::server::UdsConnectInfo>()
            .and_then(|info| info.peer_cred)
            .map(|cred| cred.uid());
        if peer != Some(self.expected_uid) {
            return Err(refuse());
        }
        let mut values = request.metadata().get_all("authorization").iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(refuse());
        };
        let Ok(text) = value.to_str() else {
            return Err(refuse());
        };
        if !self.token.verify_authorization(text) {
            return Err(refuse());
        }
        request.extensions_mut().insert(Authenticated);
        Ok(request)
    }
}

pub(crate) struct Shared {
    pub(crate) host: RunHost,
    pub(crate) root: CancellationToken,
    pub(crate) registry: Arc<Registry>,
    pub(crate) build: BuildIdentity,
    pub(crate) capabilities: Vec<String>,
    pub(crate) limits: Limits,
    pub(crate) range: ProtocolRange,
    /// The stream tasks, so a shutdown can wait for them.
    pub(crate) tasks: tokio_util::task::TaskTracker,
    /// How many stream tasks run now (each holds its host observation and stream lease).
    pub(crate) open_streams: Arc<tokio::sync::watch::Sender<usize>>,
    /// The workspace root StartRun checks its request's workspace against (our extension).
    pub(crate) workspace: Option<std::path::PathBuf>,
}

/// Counts one stream task in [`Shared::open_streams`] until it drops, which the task makes
/// the last thing it drops, after its observation (and so its stream lease).
pub(crate) struct OpenStream(Arc<tokio::sync::watch::Sender<usize>>);

impl OpenStream {
    fn new(count: &Arc<tokio::sync::watch::Sender<usize>>) -> OpenStream {
        count.send_modify(|n| *n += 1);
        OpenStream(count.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// The service; cheap to clone.
#[derive(Clone)]
pub(crate) struct Service {
    pub(crate) shared: Arc<Shared>,
}

type Reply<T> = Result<Response<T>, tonic::Status>;

/// Where a stream task writes its frames.
type FrameSender<T> = tokio::sync::mpsc::Sender<Result<T, tonic::Status>>;

impl Service {
    /// Starts a stream, the same way for every streaming RPC: counts it in
    /// [`Shared::open_streams`], opens a channel of [`STREAM_BUFFER`] frames, and spawns a task
    /// that sends the validated first `frames` and then runs `tail` with the observation, the
    /// channel and the server's root token. The observation (and its stream lease) drops
    /// before the count, whether the subscriber left during the first frames or the tail ended.
    fn start_stream<T, O, F, Fut>(
        &self,
        observation: O,
        frames: Vec<T>,
        tail: F,
    ) -> Reply<events::BoxStream<T>>
    where
        T: Send + 'static,
        O: Send + 'static,
        F: FnOnce(O, FrameSender<T>, CancellationToken) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let (tx, rx) = tokio::sync::mpsc::channel(STREAM_BUFFER);
        let root = self.shared.root.clone();
        let open = OpenStream::new(&self.shared.open_streams);
        self.shared.tasks.spawn(async move {
            // Locals drop in reverse: the observation before the count.
            let _open = open;
            let observation = observation;
            for frame in frames {
                if tx.send(Ok(frame)).await.is_err() {
                    return;
                }
            }
            tail(observation, tx, root).await;
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

fn reply<T>(value: T) -> Reply<T> {
    Ok(Response::new(value))
}

impl Service {
    fn host(&self) -> &RunHost {
        &self.shared.host
    }

    /// The authenticated marker, then the adapter root.
    fn admit<T>(&self, request: &Request<T>) -> Result<(), tonic::Status> {
        if request.extensions().get::<Authenticated>().is_none() {
            return Err(tonic::Status::unauthenticated(UNAUTHENTICATED_MESSAGE));
        }
        if self.shared.root.is_cancelled() {
            return Err(tonic::Status::unavailable(STOPPING_MESSAGE));
        }
        Ok(())
    }

    /// What the server validates against before a session is known: the newest protocol,
    /// the server limits, every capability.
    fn server_contract(&self) -> Negotiated {
        Negotiated {
            protocol: self
                .shared
                .range
                .maximum
                .unwrap_or_else(|| version(1, 3, 0)),
            limits: self.shared.limits,
            capabilities: self.shared.capabilities.clone(),
        }
    }

    pub(crate) fn inputs(&self) -> ServerInputs {
        let description = self.host().describe();
        let state = match description.status {
            HealthStatus::Ready => HealthState::Ready,
            HealthStatus::Degraded => HealthState::Degraded,
            HealthStatus::Stopping => HealthState::Stopping,
        };
        let definitions = self
            .host()
            .definitions()
            .definitions()
            .iter()
            .map(|d| pb::Definition {
                id: d.id().to_owned(),
                revision: d.revision().to_owned(),
                model: d.agent().model().to_owned(),
                max_turns: d.agent().max_turns(),
            })
            .collect();
        ServerInputs {
            range: self.shared.range,
            build: self.shared.build.clone(),
            capabilities: self.shared.capabilities.clone(),
            limits: self.shared.limits,
            health: Health {
                state: state as i32,
                degraded_reasons: description.reasons,
                active_runs: description.active_runs as u64,
                limits: Some(self.shared.limits),
            },
            definitions: pb::DefinitionSet {
                revision: description.definitions_revision,
                definitions,
            },
        }
    }

    /// Registry lookup, then the session store's check. A missing entry is unavailable; a
    /// known client at another epoch is stale with the facts.
    fn session(&self, client_id: &str, epoch: u64) -> Result<Entry, Box<Status>> {
        let Some(entry) = self.shared.registry.lookup(client_id, epoch) else {
            // Only a client the registry knows may learn its current epoch.
            if self.shared.registry.entry(client_id).is_some()
                && let Err(error) = self.host().sessions().check_epoch(client_id, epoch)
            {
                return Err(Box::new(
                    lifecycle_failure(&HostError::from(error), None)
                        .unwrap_or_else(|_| session_unavailable()),
                ));
            }
            return Err(Box::new(session_unavailable()));
        };
        if let Err(error) = self.host().sessions().check(&entry.session) {
            return Err(Box::new(
                lifecycle_failure(&HostError::from(error), None)
                    .unwrap_or_else(|_| session_unavailable()),
            ));
        }
        Ok(entry)
    }

    /// Steps 2-5 of the common order (docs/transport.md, "What the server serves") for one request.
    fn prepare(
        &self,
        client_id: &str,
        epoch: u64,
        validate: impl Fn(&Negotiated) -> Result<(), Violation>,
        snapshots: bool,
    ) -> Result<Entry, Box<Status>> {
        let boxed = |v: Violation| Box::new(invalid_status(v));
        validate(&self.server_contract()).map_err(boxed)?;
        let entry = self.session(client_id, epoch)?;
        if snapshots {
            check_snapshot_transfer(&entry.negotiated).map_err(|v| Box::new(v.into_status()))?;
        }
        validate(&entry.negotiated).map_err(boxed)?;
        Ok(entry)
    }

    fn ctx(&self) -> CancellationToken {
        self.shared.root.child_token()
    }
}

#[tonic::async_trait]
impl EngineService for Service {
    async fn initialize(
        &self,
        request: Request<pb::InitializeRequest>,
    ) -> Reply<pb::InitializeResponse> {
        self.admit(&request)?;
        self.initialize_inner(request.into_inner()).await
    }

    async fn health(&self, request: Request<pb::HealthRequest>) -> Reply<pb::HealthResponse> {
        self.health_call(request).await
    }

    async fn start_run(
        &self,
        request: Request<pb::StartRunRequest>,
    ) -> Reply<pb::StartRunResponse> {
        self.start_run_call(request).await
    }

    type StreamEventsStream = BoxStream<pb::StreamEventsResponse>;

    async fn stream_events(
        &self,
        request: Request<pb::StreamEventsRequest>,
    ) -> Reply<Self::StreamEventsStream> {
        self.open_event_stream(request).await
    }

    type StreamInteractionsStream = BoxStream<pb::StreamInteractionsResponse>;

    async fn stream_interactions(
        &self,
        request: Request<pb::StreamInteractionsRequest>,
    ) -> Reply<Self::StreamInteractionsStream> {
        self.open_interaction_stream(request).await
    }

    async fn cancel_run(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Reply<pb::CancelRunResponse> {
        self.cancel_run_call(request).await
    }

    async fn respond_interaction(
        &self,
        request: Request<pb::RespondInteractionRequest>,
    ) -> Reply<pb::RespondInteractionResponse> {
        self.respond_interaction_call(request).await
    }

    async fn suspend_run(
        &self,
        request: Request<pb::SuspendRunRequest>,
    ) -> Reply<pb::SuspendRunResponse> {
        self.suspend_run_call(request).await
    }

    async fn resume_run(
        &self,
        request: Request<pb::ResumeRunRequest>,
    ) -> Reply<pb::ResumeRunResponse> {
        self.resume_run_call(request).await
    }

    async fn export_snapshot(
        &self,
        request: Request<pb::ExportSnapshotRequest>,
    ) -> Reply<pb::ExportSnapshotResponse> {
        self.export_snapshot_call(request).await
    }

    async fn import_snapshot(
        &self,
        request: Request<pb::ImportSnapshotRequest>,
    ) -> Reply<pb::ImportSnapshotResponse> {
        self.import_snapshot_call(request).await
    }
}
