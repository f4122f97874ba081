//! The `EngineService` handlers over a [`RunHost`] (contract sections 3.3 and 3.5-3.9).

use std::pin::Pin;
use std::sync::Arc;

use agent_core::event::{Envelope, Event, EventKind as CoreKind, ReplayRequest};
use agent_core::interaction::{InteractionResponse, Pending, PendingDelta, PendingSnapshot};
use agent_daemon::host::{HealthStatus, StartRequest, Success};
use agent_daemon::{HostError, RunHost};
use agent_endpoint::EndpointToken;
use agent_protocol::Negotiated;
use agent_protocol::initialize::{
    OwnershipGrant, ServerInputs, complete_initialize, initialize_failure_response,
    preflight_initialize, validate_initialize_request,
};
use agent_protocol::limits::{INITIALIZATION_ATTEMPT_ID_BYTES, INTERACTION_STREAM_MINIMUM_MINOR};
use agent_protocol::negotiate::version;
use agent_protocol::pb::common::v1::{
    BuildIdentity, ErrorCode, Health, HealthState, Limits, ProtocolRange, Status,
};
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::pb::engine::v1::engine_service_server::EngineService;
use agent_protocol::pb::engine::v1::stream_events_response::Payload as EventPayload;
use agent_protocol::requests::{
    check_snapshot_transfer, validate_cancel_run_request, validate_health_request,
    validate_respond_interaction_request, validate_resume_run_request, validate_start_run_request,
    validate_stream_events_request, validate_suspend_run_request,
};
use agent_protocol::responses::{
    validate_cancel_run_response, validate_health_response, validate_respond_interaction_response,
    validate_resume_run_response, validate_start_run_response, validate_suspend_run_response,
};
use agent_protocol::status::{Violation, ok_status, overload_status};
use agent_protocol::stream::{
    InteractionTailValidator, check_replay_cursor, failed_stream_control, validate_event_page,
    validate_interaction_stream_page, validate_run_event,
};
use prost::Message as _;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response};

use crate::registry::{AttemptReservation, Entry, Gate, Registry, Reserve, SESSIONS_RESOURCE};
use crate::status::{
    ATTEMPT_CONFLICT_MESSAGE, MutationKind, START_INPUT_MESSAGE, internal, lifecycle_failure,
    session_failure, session_unavailable,
};

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

fn reply<T>(value: T) -> Reply<T> {
    Ok(Response::new(value))
}

/// A response carrying only `status`.
trait Failed: Default {
    fn failed(status: Status) -> Self;
}

macro_rules! failed {
    ($($t:ty),*) => {$(
        impl Failed for $t {
            fn failed(status: Status) -> Self {
                Self { status: Some(status), ..Default::default() }
            }
        }
    )*};
}

failed!(
    pb::HealthResponse,
    pb::StartRunResponse,
    pb::CancelRunResponse,
    pb::RespondInteractionResponse,
    pb::SuspendRunResponse,
    pb::ResumeRunResponse,
    pb::ExportSnapshotResponse,
    pb::ImportSnapshotResponse
);

fn invalid_status(v: Violation) -> Status {
    v.recode(ErrorCode::InvalidArgument).into_status()
}

fn map_kind(kind: CoreKind) -> pb::EventKind {
    use pb::EventKind as K;
    match kind {
        CoreKind::RunStarted => K::RunStarted,
        CoreKind::RunCompleted => K::RunCompleted,
        CoreKind::RunFailed => K::RunFailed,
        CoreKind::RunCancelled => K::RunCancelled,
        CoreKind::TurnStarted => K::TurnStarted,
        CoreKind::TurnCompleted => K::TurnCompleted,
        CoreKind::TurnFailed => K::TurnFailed,
        CoreKind::ModelStarted => K::ModelStarted,
        CoreKind::ModelDelta => K::ModelDelta,
        CoreKind::ModelCompleted => K::ModelCompleted,
        CoreKind::ModelFailed => K::ModelFailed,
        CoreKind::ToolStarted => K::ToolStarted,
        CoreKind::ToolProgress => K::ToolProgress,
        CoreKind::ToolCompleted => K::ToolCompleted,
        CoreKind::ToolFailed => K::ToolFailed,
        CoreKind::InteractionStarted => K::InteractionStarted,
        CoreKind::InteractionCompleted => K::InteractionCompleted,
        CoreKind::InteractionFailed => K::InteractionFailed,
        CoreKind::InteractionCancelled => K::InteractionCancelled,
        _ => K::Unspecified,
    }
}

/// The wire payload of an event: tool occurrences are projected to their safe fields;
/// every other event carries the kernel's payload (its serialized `data`) unchanged.
pub fn project_payload(event: &Event) -> Option<Vec<u8>> {
    let value = match event {
        Event::ToolStarted(started) => serde_json::json!({
            "call_id": started.call_id,
            "name": started.name,
        }),
        Event::ToolCompleted(completed) => serde_json::json!({
            "call_id": completed.call_id,
            "name": completed.name,
            "error": "",
            "outcome": completed.outcome,
        }),
        Event::ToolFailed(failed) => {
            let mut value = serde_json::json!({
                "call_id": failed.call_id,
                "name": failed.name,
                "error": TOOL_FAILED_TEXT,
            });
            if let Some(retry) = failed.retry {
                value["retry"] = serde_json::to_value(retry).ok()?;
            }
            value
        }
        other => {
            // An event without data (`run.completed`) has an empty payload.
            let mut whole = serde_json::to_value(other).ok()?;
            match whole.get_mut("data") {
                Some(data) => data.take(),
                None => return Some(Vec::new()),
            }
        }
    };
    serde_json::to_vec(&value).ok()
}

/// One kernel envelope as a wire event; `None` when it cannot be represented.
pub fn event_to_wire(envelope: &Envelope) -> Option<pb::RunEvent> {
    let kind = map_kind(envelope.kind());
    if kind == pb::EventKind::Unspecified {
        return None;
    }
    let event = pb::RunEvent {
        run_id: envelope.run_id().to_owned(),
        sequence: envelope.sequence(),
        unix_nano: i64::try_from(envelope.at().unix_nanos()).ok()?,
        kind: kind as i32,
        payload_json: project_payload(envelope.event())?,
        // On the wire `terminal` marks every event that ends its scope (run, turn, model,
        // tool, interaction), not only the run's end.
        terminal: agent_protocol::stream::is_terminal_kind(kind),
    };
    validate_run_event(&event).ok()?;
    Some(event)
}

/// The single text of a Start input, if it is exactly one user text part.
fn single_text(message: Option<&pb::Message>) -> Option<String> {
    let message = message?;
    if message.role != pb::MessageRole::User as i32 {
        return None;
    }
    match message.parts.as_slice() {
        [part] => match &part.value {
            Some(pb::content_part::Value::Text(text)) => Some(text.clone()),
            _ => None,
        },
        _ => None,
    }
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

    /// Steps 2-5 of section 3.7 for one request.
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

    async fn initialize_inner(&self, r: pb::InitializeRequest) -> Reply<pb::InitializeResponse> {
        let registry = &self.shared.registry;
        // A closing registry keeps its entries until this transaction ends.
        let Some(_transaction) = registry.begin() else {
            return Err(tonic::Status::unavailable(STOPPING_MESSAGE));
        };
        let mut attempt: Option<AttemptReservation> = None;
        if !r.initialization_attempt_id.is_empty()
            && r.initialization_attempt_id.len() == INITIALIZATION_ATTEMPT_ID_BYTES
            && validate_initialize_request(&r).is_ok()
        {
            let fingerprint = attempt_fingerprint(&r);
            let reserved = tokio::select! {
                reserved = registry.reserve_attempt(&r.initialization_attempt_id, fingerprint) => reserved,
                () = self.shared.root.cancelled() => return Err(tonic::Status::unavailable(STOPPING_MESSAGE)),
            };
            match reserved {
                Reserve::Replay(response) => return reply(*response),
                Reserve::Conflict => {
                    return reply(initialize_failure_response(
                        Violation::new(ErrorCode::Conflict, ATTEMPT_CONFLICT_MESSAGE).into_status(),
                    ));
                }
                Reserve::Overload(resource, limit) => {
                    return reply(initialize_failure_response(overload_status(
                        resource,
                        limit,
                        limit + 1,
                    )));
                }
                Reserve::Closed => return Err(tonic::Status::unavailable(STOPPING_MESSAGE)),
                Reserve::Owner(reservation) => attempt = Some(reservation),
            }
        }
        let inputs = self.inputs();
        let plan = match preflight_initialize(&r, &inputs) {
            Ok(plan) => plan,
            Err(violation) => return reply(initialize_failure_response(violation.into_status())),
        };
        let sessions = self.host().sessions();
        match &plan.reconnect {
            None => {
                let mut slot = registry.reserve_slot();
                if matches!(slot, Err(Some(_))) {
                    // Full: make room from sessions that ended (idle ones the store reclaims
                    // now included) before refusing.
                    sessions.reclaim_idle();
                    if registry.prune_ended() > 0 {
                        slot = registry.reserve_slot();
                    }
                }
                let slot = match slot {
                    Ok(slot) => slot,
                    Err(Some(max)) => {
                        return reply(initialize_failure_response(overload_status(
                            SESSIONS_RESOURCE,
                            max,
                            max + 1,
                        )));
                    }
                    Err(None) => return Err(tonic::Status::unavailable(STOPPING_MESSAGE)),
                };
                let session = match sessions.fresh() {
                    Ok(session) => session,
                    Err(error) => {
                        return reply(initialize_failure_response(session_failure(&error)));
                    }
                };
                let response = complete_initialize(
                    &plan,
                    &inputs,
                    OwnershipGrant {
                        client_id: session.client_id().to_owned(),
                        epoch: session.epoch(),
                    },
                );
                let entry = Entry {
                    session,
                    negotiated: plan.negotiated.clone(),
                    gate: Arc::new(Gate::default()),
                };
                let attempt = attempt.map(|a| (a, response.clone()));
                if !registry.install_fresh(slot, entry, attempt) {
                    return Err(tonic::Status::unavailable(STOPPING_MESSAGE));
                }
                reply(response)
            }
            Some(claim) => {
                let expected = claim.expected_ownership_epoch;
                let Some(current) = registry.entry(&claim.client_id) else {
                    return reply(initialize_failure_response(session_unavailable()));
                };
                let held = tokio::select! {
                    held = current.gate.acquire() => held,
                    () = self.shared.root.cancelled() => return Err(tonic::Status::unavailable(STOPPING_MESSAGE)),
                };
                let Ok(_held) = held else {
                    let limit = crate::registry::MAX_RECONNECT_WAITERS as u64;
                    return reply(initialize_failure_response(overload_status(
                        crate::registry::RECONNECT_WAITERS_RESOURCE,
                        limit,
                        limit + 1,
                    )));
                };
                match registry.entry(&claim.client_id) {
                    Some(e) if e.session.epoch() == expected => {}
                    Some(e) => {
                        let status = session_failure(&agent_daemon::session::SessionError::Stale(
                            Some(agent_daemon::session::StaleFacts {
                                client_id: claim.client_id.clone(),
                                expected: e.session.epoch(),
                                observed: expected,
                            }),
                        ));
                        return reply(initialize_failure_response(status));
                    }
                    None => return reply(initialize_failure_response(session_unavailable())),
                }
                let ctx = self.ctx();
                let session = match sessions.reconnect(&ctx, &claim.client_id, expected).await {
                    Ok(session) => session,
                    Err(error) => {
                        return reply(initialize_failure_response(session_failure(&error)));
                    }
                };
                let response = complete_initialize(
                    &plan,
                    &inputs,
                    OwnershipGrant {
                        client_id: session.client_id().to_owned(),
                        epoch: session.epoch(),
                    },
                );
                let entry = Entry {
                    session,
                    negotiated: plan.negotiated.clone(),
                    gate: current.gate.clone(),
                };
                let attempt = attempt.map(|a| (a, response.clone()));
                if !registry.replace(expected, entry, attempt) {
                    return reply(initialize_failure_response(session_unavailable()));
                }
                reply(response)
            }
        }
    }
}

/// One kernel pending interaction on the wire.
fn pending_to_wire(pending: &Pending) -> Option<pb::PendingInteraction> {
    let request = pending.request();
    let value = pb::PendingInteraction {
        run_id: pending.scope().run_id().to_owned(),
        interaction_id: request.id().to_owned(),
        kind: request.kind().to_owned(),
        prompt: request.prompt().to_owned(),
        schema_json: serde_json::to_vec(request.schema()).ok()?,
    };
    agent_protocol::stream::validate_pending_interaction(&value).ok()?;
    Some(value)
}

/// One kernel delta on the wire; a close names the interaction the tail last saw opened.
fn delta_to_wire(
    delta: &PendingDelta,
    validator: &InteractionTailValidator,
) -> Option<pb::StreamInteractionsResponse> {
    let (revision, kind, interaction) = match delta {
        PendingDelta::Opened { revision, pending } => (
            *revision,
            pb::InteractionDeltaKind::Opened,
            pending_to_wire(pending)?,
        ),
        PendingDelta::Closed {
            revision,
            run_id,
            id,
            ..
        } => (
            *revision,
            pb::InteractionDeltaKind::Closed,
            validator
                .pending()
                .find(|p| p.run_id == **run_id && p.interaction_id == *id)?
                .clone(),
        ),
    };
    Some(pb::StreamInteractionsResponse {
        payload: Some(pb::stream_interactions_response::Payload::Delta(
            pb::InteractionDelta {
                revision,
                kind: kind as i32,
                interaction: Some(interaction),
            },
        )),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The run authority's JSON envelope as the wire envelope (same fields, bytes for hex).
pub fn envelope_to_wire(json: &[u8]) -> Option<pb::SnapshotEnvelope> {
    let envelope = agent_authority::SnapshotEnvelope::decode(json).ok()?;
    let authority = envelope.authority();
    Some(pb::SnapshotEnvelope {
        format: agent_protocol::limits::SNAPSHOT_FORMAT.to_owned(),
        run_id: envelope.run_id().to_owned(),
        last_sequence: envelope.last_sequence(),
        lifecycle: i32::try_from(envelope.lifecycle().number()).ok()?,
        payload: envelope.payload().to_vec(),
        sha256: envelope.payload_sha256().to_vec(),
        authority: Some(pb::SnapshotAuthority {
            scope_id: authority.scope_id().as_bytes().to_vec(),
            generation: authority.generation(),
            hmac_sha256: authority.mac().to_vec(),
        }),
    })
}

/// The wire envelope as the run authority's JSON envelope, which the host decodes and
/// verifies (the payload must be JSON; its bytes are kept exactly, so its digest holds).
pub fn envelope_from_wire(envelope: &pb::SnapshotEnvelope) -> Option<Vec<u8>> {
    let authority = envelope.authority.as_ref()?;
    let payload = std::str::from_utf8(&envelope.payload).ok()?;
    serde_json::from_str::<serde_json::Value>(payload).ok()?;
    let text = |value: &str| serde_json::to_string(value).ok();
    let json = format!(
        "{{\"format\":{},\"run_id\":{},\"last_sequence\":{},\"lifecycle\":{},\"payload\":{},\"sha256\":{},\"authority\":{{\"scope_id\":{},\"generation\":{},\"hmac_sha256\":{}}}}}",
        text(&envelope.format)?,
        text(&envelope.run_id)?,
        envelope.last_sequence,
        u32::try_from(envelope.lifecycle).ok()?,
        payload,
        text(&hex(&envelope.sha256))?,
        text(&hex(&authority.scope_id))?,
        authority.generation,
        text(&hex(&authority.hmac_sha256))?,
    );
    agent_authority::SnapshotEnvelope::decode(json.as_bytes()).ok()?;
    Some(json.into_bytes())
}

/// SHA-256 of the request's deterministic encoding with the attempt id cleared.
pub fn attempt_fingerprint(request: &pb::InitializeRequest) -> [u8; 32] {
    let mut cleared = request.clone();
    cleared.initialization_attempt_id.clear();
    Sha256::digest(cleared.encode_to_vec()).into()
}

/// An interaction control carrying only `status`.
fn failure_control(status: Status) -> pb::InteractionStreamControl {
    pb::InteractionStreamControl {
        status: Some(status),
        ..Default::default()
    }
}

/// A failure control as a frame that fits `max_message_bytes` (contract section 3.9): the
/// control itself; if it does not fit, an `INTERNAL` control; if that does not fit either,
/// gRPC `ResourceExhausted` instead of a frame.
pub(crate) fn interaction_failure_frame(
    control: pb::InteractionStreamControl,
    max_message_bytes: u64,
) -> Result<pb::StreamInteractionsResponse, tonic::Status> {
    let frame = |control| pb::StreamInteractionsResponse {
        payload: Some(pb::stream_interactions_response::Payload::Control(control)),
    };
    let fits = |frame: &pb::StreamInteractionsResponse| {
        u64::try_from(frame.encoded_len()).is_ok_and(|len| len <= max_message_bytes)
    };
    let first = frame(control);
    if fits(&first) {
        return Ok(first);
    }
    let fallback = frame(failure_control(internal()));
    if fits(&fallback) {
        return Ok(fallback);
    }
    Err(tonic::Status::resource_exhausted(
        "interaction stream failure exceeds the message size",
    ))
}

type BoxStream<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, tonic::Status>> + Send>>;

fn control_frame(control: pb::StreamControl) -> pb::StreamEventsResponse {
    pb::StreamEventsResponse {
        payload: Some(EventPayload::Control(control)),
    }
}

fn one_frame<T: Send + 'static>(frame: T) -> BoxStream<T> {
    Box::pin(tokio_stream::once(Ok(frame)))
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
        self.admit(&request)?;
        let r = request.into_inner();
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_health_request(&r, n),
            false,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(pb::HealthResponse::failed(*status)),
        };
        if let Err(error) = self.host().health(&entry.session) {
            return reply(pb::HealthResponse::failed(lifecycle_failure(&error, None)?));
        }
        let inputs = self.inputs();
        let response = pb::HealthResponse {
            status: Some(ok_status()),
            server: Some(inputs.build),
            protocol: Some(entry.negotiated.protocol),
            health: Some(inputs.health),
        };
        if validate_health_response(&response, &entry.negotiated).is_err() {
            return reply(pb::HealthResponse::failed(internal()));
        }
        reply(response)
    }

    async fn start_run(
        &self,
        request: Request<pb::StartRunRequest>,
    ) -> Reply<pb::StartRunResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::StartRunResponse::failed(status)
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_start_run_request(&r, n),
            false,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let Some(text) = single_text(r.input.as_ref()) else {
            return reply(echo(Violation::invalid(START_INPUT_MESSAGE).into_status()));
        };
        let definition = r.definition.clone().unwrap_or_default();
        let start = StartRequest {
            operation_id: op.clone(),
            definition_id: definition.id,
            revision: definition.revision,
            text,
        };
        let response = match self.host().start(&self.ctx(), &entry.session, start).await {
            Ok((
                Success::Started {
                    run_id,
                    sequence,
                    plan_id,
                },
                duplicate,
            )) => pb::StartRunResponse {
                status: Some(ok_status()),
                run_id,
                initial_sequence: sequence,
                duplicate_operation: duplicate,
                plan_id,
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::StartRunResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Start)),
            )?),
        };
        if validate_start_run_response(&response, &entry.negotiated).is_err() {
            return reply(echo(internal()));
        }
        reply(response)
    }

    type StreamEventsStream = BoxStream<pb::StreamEventsResponse>;

    async fn stream_events(
        &self,
        request: Request<pb::StreamEventsRequest>,
    ) -> Reply<Self::StreamEventsStream> {
        self.admit(&request)?;
        let r = request.into_inner();
        let fail = |status: Status| -> Reply<Self::StreamEventsStream> {
            Ok(Response::new(one_frame(control_frame(
                failed_stream_control(status),
            ))))
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_stream_events_request(&r, n),
            false,
        ) {
            Ok(entry) => entry,
            Err(status) => return fail(*status),
        };
        let negotiated = entry.negotiated.clone();
        let replay = ReplayRequest {
            after: r.after_sequence,
            max_events: r.replay_limit as usize,
            max_bytes: usize::try_from(negotiated.limits.max_replay_bytes).unwrap_or(usize::MAX),
            tail: r.tail,
        };
        let ctx = self.ctx();
        let observation = match self
            .host()
            .replay_events(&ctx, &entry.session, &r.run_id, replay)
            .await
        {
            Ok(observation) => observation,
            Err(HostError::OutOfRange { earliest, latest }) => {
                let violation = match check_replay_cursor(r.after_sequence, earliest, latest) {
                    Err(v) => v,
                    Ok(()) => Violation::internal("replay cursor check disagrees"),
                };
                let status = violation.into_status();
                let recovery = match &status.detail {
                    Some(agent_protocol::pb::common::v1::status::Detail::ReplayBounds(b)) => {
                        b.recovery_sequence
                    }
                    _ => 0,
                };
                return Ok(Response::new(one_frame(control_frame(pb::StreamControl {
                    status: Some(status),
                    last_delivered_sequence: recovery,
                    ..Default::default()
                }))));
            }
            Err(error) => return fail(lifecycle_failure(&error, None)?),
        };
        // Pre-validate the whole page before anything is disclosed.
        let mut frames = Vec::with_capacity(observation.events.len() + 1);
        for envelope in &observation.events {
            match event_to_wire(envelope) {
                Some(event) => frames.push(pb::StreamEventsResponse {
                    payload: Some(EventPayload::Event(event)),
                }),
                None => return fail(internal()),
            }
        }
        let page_last = observation
            .events
            .last()
            .map_or(r.after_sequence, Envelope::sequence);
        let tailing = observation.is_tailing();
        frames.push(control_frame(pb::StreamControl {
            status: Some(ok_status()),
            earliest_sequence: observation.earliest,
            latest_sequence: observation.latest,
            last_delivered_sequence: page_last,
            tailing,
            page_last_sequence: Some(page_last),
            has_more: observation.has_more,
        }));
        if validate_event_page(r.after_sequence, &frames, &negotiated).is_err() {
            return fail(internal());
        }
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let root = self.shared.root.clone();
        let open = OpenStream::new(&self.shared.open_streams);
        self.shared.tasks.spawn(async move {
            // Locals drop in reverse: the observation (and its lease) before the count.
            let _open = open;
            let mut observation = observation;
            for frame in frames {
                if tx.send(Ok(frame)).await.is_err() {
                    return;
                }
            }
            if !tailing {
                observation.close();
                return;
            }
            let mut last = page_last;
            loop {
                let next = tokio::select! {
                    next = observation.next_or_lag() => next,
                    () = tx.closed() => return,
                    () = root.cancelled() => return,
                };
                let envelope = match next {
                    Ok(Some(envelope)) => envelope,
                    // The log ended, or a fence (reconnect, shutdown): end quietly.
                    Ok(None) => return,
                    // The subscriber fell behind the bounded tail: say so, with the exact
                    // cursor to replay from, rather than end as if the run had.
                    Err(lag) => {
                        let control = pb::StreamControl {
                            status: Some(overload_status(lag.resource, lag.limit, lag.observed)),
                            last_delivered_sequence: lag.last_delivered,
                            ..Default::default()
                        };
                        let _ = tx.send(Ok(control_frame(control))).await;
                        return;
                    }
                };
                let Some(event) = event_to_wire(&envelope).filter(|e| e.sequence == last + 1)
                else {
                    let _ = tx
                        .send(Ok(control_frame(failed_stream_control(internal()))))
                        .await;
                    return;
                };
                last = event.sequence;
                let frame = pb::StreamEventsResponse {
                    payload: Some(EventPayload::Event(event)),
                };
                if tx.send(Ok(frame)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    type StreamInteractionsStream = BoxStream<pb::StreamInteractionsResponse>;

    async fn stream_interactions(
        &self,
        request: Request<pb::StreamInteractionsRequest>,
    ) -> Reply<Self::StreamInteractionsStream> {
        self.admit(&request)?;
        let r = request.into_inner();
        let server_bound = self.shared.limits.max_message_bytes;
        let fail = |status: Status| -> Reply<Self::StreamInteractionsStream> {
            let frame = interaction_failure_frame(failure_control(status), server_bound)?;
            Ok(Response::new(one_frame(frame)))
        };
        if let Err(v) =
            agent_protocol::requests::validate_client_fields(&r.client_id, r.ownership_epoch)
        {
            return fail(invalid_status(v));
        }
        let entry = match self.session(&r.client_id, r.ownership_epoch) {
            Ok(entry) => entry,
            Err(status) => return fail(*status),
        };
        if entry.negotiated.protocol.minor < INTERACTION_STREAM_MINIMUM_MINOR {
            let server = ProtocolRange {
                minimum: Some(version(1, 2, 0)),
                maximum: Some(version(1, 2, 0)),
            };
            let client = ProtocolRange {
                minimum: Some(entry.negotiated.protocol),
                maximum: Some(entry.negotiated.protocol),
            };
            return fail(Status {
                code: ErrorCode::IncompatibleVersion as i32,
                message: agent_protocol::negotiate::INCOMPATIBLE_VERSION_MESSAGE.to_owned(),
                detail: Some(
                    agent_protocol::pb::common::v1::status::Detail::VersionMismatch(
                        agent_protocol::pb::common::v1::VersionMismatch {
                            client: Some(client),
                            server: Some(server),
                        },
                    ),
                ),
                ..Status::default()
            });
        }
        let negotiated = entry.negotiated.clone();
        // From here on a failure control must fit the negotiated bound.
        let bound = negotiated.limits.max_message_bytes;
        let fail = |status: Status| -> Reply<Self::StreamInteractionsStream> {
            let frame = interaction_failure_frame(failure_control(status), bound)?;
            Ok(Response::new(one_frame(frame)))
        };
        let ctx = self.ctx();
        let control = |revision: u64, tailing: bool| pb::StreamInteractionsResponse {
            payload: Some(pb::stream_interactions_response::Payload::Control(
                pb::InteractionStreamControl {
                    status: Some(ok_status()),
                    latest_revision: revision,
                    page_last_revision: revision,
                    has_more: false,
                    tailing,
                },
            )),
        };
        let snapshot_frame =
            |snapshot: &PendingSnapshot| -> Option<pb::StreamInteractionsResponse> {
                let pending = snapshot
                    .pending()
                    .iter()
                    .map(pending_to_wire)
                    .collect::<Option<Vec<_>>>()?;
                Some(pb::StreamInteractionsResponse {
                    payload: Some(pb::stream_interactions_response::Payload::Snapshot(
                        pb::InteractionSnapshot {
                            revision: snapshot.revision(),
                            pending,
                        },
                    )),
                })
            };
        if !r.tail {
            let snapshot = match self
                .host()
                .snapshot_interactions(&ctx, &entry.session)
                .await
            {
                Ok(snapshot) => snapshot,
                Err(error) => return fail(lifecycle_failure(&error, None)?),
            };
            let Some(first) = snapshot_frame(&snapshot) else {
                return fail(internal());
            };
            let frames = vec![first, control(snapshot.revision(), false)];
            if validate_interaction_stream_page(false, &frames, &negotiated).is_err() {
                return fail(internal());
            }
            return Ok(Response::new(Box::pin(tokio_stream::iter(
                frames.into_iter().map(Ok),
            ))));
        }
        let mut observation = match self
            .host()
            .subscribe_interactions(&ctx, &entry.session)
            .await
        {
            Ok(observation) => observation,
            Err(error) => return fail(lifecycle_failure(&error, None)?),
        };
        let Some(snapshot) = observation.take_snapshot() else {
            return fail(internal());
        };
        let Some(first) = snapshot_frame(&snapshot) else {
            return fail(internal());
        };
        // Both initial frames are built and validated before either is sent, so a fence
        // can never fall between them.
        let frames = vec![first, control(snapshot.revision(), true)];
        let Ok(mut validator) = InteractionTailValidator::new(&frames, &negotiated) else {
            return fail(internal());
        };
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let root = self.shared.root.clone();
        let open = OpenStream::new(&self.shared.open_streams);
        self.shared.tasks.spawn(async move {
            // Locals drop in reverse: the observation (and its lease) before the count.
            let _open = open;
            let mut observation = observation;
            for frame in frames {
                if tx.send(Ok(frame)).await.is_err() {
                    return;
                }
            }
            loop {
                let next = tokio::select! {
                    next = observation.next() => next,
                    () = tx.closed() => return,
                    () = root.cancelled() => return,
                };
                let Some(delta) = next else {
                    // Cut off for a queue bound: say so with the exact facts. Otherwise
                    // fenced (reconnect, shutdown) or closed: end quietly.
                    if let Some(exhausted) = observation.exhausted() {
                        let control = pb::InteractionStreamControl {
                            status: Some(overload_status(
                                exhausted.resource,
                                exhausted.limit as u64,
                                exhausted.observed as u64,
                            )),
                            latest_revision: exhausted.last_delivered,
                            page_last_revision: exhausted.last_delivered,
                            ..Default::default()
                        };
                        let _ = tx.send(interaction_failure_frame(control, bound)).await;
                    }
                    return;
                };
                let frame = delta_to_wire(&delta, &validator);
                let accepted = frame
                    .as_ref()
                    .is_some_and(|frame| validator.accept(frame).is_ok());
                let Some(frame) = frame.filter(|_| accepted) else {
                    let failure = interaction_failure_frame(failure_control(internal()), bound);
                    let _ = tx.send(failure).await;
                    return;
                };
                if tx.send(Ok(frame)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn cancel_run(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Reply<pb::CancelRunResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::CancelRunResponse::failed(status)
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_cancel_run_request(&r, n),
            false,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let response = match self
            .host()
            .cancel(&self.ctx(), &entry.session, &op, &r.run_id)
            .await
        {
            Ok(Success::CancelRequested) => pb::CancelRunResponse {
                status: Some(ok_status()),
                cancellation_requested: true,
                ..Default::default()
            },
            Ok(Success::AlreadyTerminal { sequence }) => pb::CancelRunResponse {
                status: Some(ok_status()),
                already_terminal: true,
                terminal_sequence: sequence,
                ..Default::default()
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::CancelRunResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Cancel)),
            )?),
        };
        if validate_cancel_run_response(&response, &entry.negotiated).is_err() {
            return reply(echo(internal()));
        }
        reply(response)
    }

    async fn respond_interaction(
        &self,
        request: Request<pb::RespondInteractionRequest>,
    ) -> Reply<pb::RespondInteractionResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::RespondInteractionResponse::failed(status)
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_respond_interaction_request(&r, n),
            false,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let value = serde_json::from_slice::<serde_json::Value>(&r.value_json).ok();
        let Some(response) =
            value.and_then(|v| InteractionResponse::new(r.interaction_id.clone(), v).ok())
        else {
            return reply(echo(crate::status::invalid()));
        };
        let response = match self
            .host()
            .respond(&self.ctx(), &entry.session, &op, &r.run_id, response)
            .await
        {
            Ok(Success::Responded) => pb::RespondInteractionResponse {
                status: Some(ok_status()),
                accepted: true,
                ..Default::default()
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::RespondInteractionResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Respond)),
            )?),
        };
        if validate_respond_interaction_response(&response, &entry.negotiated).is_err() {
            return reply(echo(internal()));
        }
        reply(response)
    }

    async fn suspend_run(
        &self,
        request: Request<pb::SuspendRunRequest>,
    ) -> Reply<pb::SuspendRunResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::SuspendRunResponse::failed(status)
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_suspend_run_request(&r, n),
            true,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let response = match self
            .host()
            .suspend(&self.ctx(), &entry.session, &op, &r.run_id)
            .await
        {
            Ok((Success::Suspended { sequence }, duplicate)) => pb::SuspendRunResponse {
                status: Some(ok_status()),
                suspended: true,
                boundary_sequence: sequence,
                duplicate_operation: duplicate,
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::SuspendRunResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Suspend)),
            )?),
        };
        if validate_suspend_run_response(&response, &entry.negotiated).is_err() {
            return reply(echo(internal()));
        }
        reply(response)
    }

    async fn resume_run(
        &self,
        request: Request<pb::ResumeRunRequest>,
    ) -> Reply<pb::ResumeRunResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::ResumeRunResponse::failed(status)
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_resume_run_request(&r, n),
            true,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let response = match self
            .host()
            .resume(&self.ctx(), &entry.session, &op, &r.run_id)
            .await
        {
            Ok((Success::Resumed { next_sequence }, duplicate)) => pb::ResumeRunResponse {
                status: Some(ok_status()),
                resumed: true,
                next_sequence,
                duplicate_operation: duplicate,
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::ResumeRunResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Resume)),
            )?),
        };
        if validate_resume_run_response(&response, &entry.negotiated).is_err() {
            return reply(echo(internal()));
        }
        reply(response)
    }

    async fn export_snapshot(
        &self,
        request: Request<pb::ExportSnapshotRequest>,
    ) -> Reply<pb::ExportSnapshotResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| agent_protocol::requests::validate_export_snapshot_request(&r, n),
            true,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(pb::ExportSnapshotResponse::failed(*status)),
        };
        let bytes = match self
            .host()
            .export(&self.ctx(), &entry.session, &r.run_id)
            .await
        {
            Ok(bytes) => bytes,
            Err(error) => {
                return reply(pb::ExportSnapshotResponse::failed(lifecycle_failure(
                    &error, None,
                )?));
            }
        };
        let Some(snapshot) = envelope_to_wire(&bytes) else {
            return reply(pb::ExportSnapshotResponse::failed(internal()));
        };
        let response = pb::ExportSnapshotResponse {
            status: Some(ok_status()),
            snapshot: Some(snapshot),
        };
        if agent_protocol::responses::validate_export_snapshot_response(
            &response,
            &entry.negotiated,
        )
        .is_err()
        {
            return reply(pb::ExportSnapshotResponse::failed(internal()));
        }
        reply(response)
    }

    async fn import_snapshot(
        &self,
        request: Request<pb::ImportSnapshotRequest>,
    ) -> Reply<pb::ImportSnapshotResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::ImportSnapshotResponse::failed(status)
        };
        // The structural validator only: keyed verification is the run host's.
        let raw = r.encode_to_vec();
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| {
                agent_protocol::snapshot::validate_import_snapshot_request_structure(&raw, n)
                    .map(drop)
            },
            true,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let Some(bytes) = r.snapshot.as_ref().and_then(envelope_from_wire) else {
            return reply(echo(crate::status::invalid()));
        };
        let response = match self
            .host()
            .import(&self.ctx(), &entry.session, &op, &bytes)
            .await
        {
            Ok((Success::Imported { run_id, sequence }, duplicate)) => pb::ImportSnapshotResponse {
                status: Some(ok_status()),
                run_id,
                next_sequence: sequence,
                duplicate_operation: duplicate,
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::ImportSnapshotResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Import)),
            )?),
        };
        if agent_protocol::responses::validate_import_snapshot_response(
            &response,
            &entry.negotiated,
        )
        .is_err()
        {
            return reply(echo(internal()));
        }
        reply(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::event::{
        FailureCode, Timestamp, ToolCompleted, ToolFailed, ToolOutcome, ToolStarted,
        ToolStartedVersion,
    };
    use agent_core::tool::{ExecutionState, RetryDisposition};

    fn wire(sequence: u64, event: Event) -> pb::RunEvent {
        let envelope = Envelope::new(
            Arc::from("run-1"),
            sequence,
            Timestamp::from_unix_nanos(1_700_000_000_000_000_000),
            event,
        );
        event_to_wire(&envelope).expect("representable")
    }

    fn json(event: &pb::RunEvent) -> serde_json::Value {
        serde_json::from_slice(&event.payload_json).unwrap()
    }

    #[test]
    fn event_to_wire_projects_only_the_safe_tool_fields() {
        let started = wire(
            1,
            Event::ToolStarted(ToolStarted {
                version: ToolStartedVersion,
                call_id: "c1".into(),
                name: "write".into(),
                turn: 1,
                plan_id: Arc::from("plan-secret"),
                plan_fingerprint: Arc::from("fingerprint-secret"),
                plan_identity: Arc::from("identity-secret"),
                workspace: Some(Arc::from("/home/secret")),
                declared: None,
            }),
        );
        assert_eq!(started.kind, pb::EventKind::ToolStarted as i32);
        assert_eq!(
            json(&started),
            serde_json::json!({"call_id": "c1", "name": "write"})
        );
        let completed = wire(
            2,
            Event::ToolCompleted(ToolCompleted::new("c1", "write", ToolOutcome::Problem)),
        );
        assert_eq!(
            json(&completed),
            serde_json::json!({"call_id": "c1", "name": "write", "error": "", "outcome": "problem"})
        );
        assert!(completed.terminal);
        let failed = wire(
            3,
            Event::ToolFailed(ToolFailed::new(
                "c1",
                "write",
                FailureCode::ToolFailed,
                Some((ExecutionState::Uncertain, RetryDisposition::Allowed)),
            )),
        );
        let value = json(&failed);
        assert_eq!(value["error"], TOOL_FAILED_TEXT);
        assert_eq!(value["call_id"], "c1");
        assert!(value.get("retry").is_some(), "{value}");
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert!(
            keys.iter()
                .all(|k| ["call_id", "name", "error", "retry"].contains(k)),
            "{keys:?}"
        );
        // Every other event carries the kernel's payload unchanged.
        let turn = wire(4, Event::TurnStarted { turn: 2 });
        assert_eq!(json(&turn), serde_json::json!({"turn": 2}));
        assert!(!turn.terminal);
    }

    #[test]
    fn a_failure_control_falls_back_to_internal_then_to_a_grpc_status() {
        let overload = failure_control(overload_status("pending_observer_queue_entries", 8, 9));
        let len = |control: &pb::InteractionStreamControl| {
            pb::StreamInteractionsResponse {
                payload: Some(pb::stream_interactions_response::Payload::Control(
                    control.clone(),
                )),
            }
            .encoded_len() as u64
        };
        let full = len(&overload);
        let internal_len = len(&failure_control(internal()));
        assert!(internal_len < full, "the fallback is the smaller frame");
        // Exactly at the bound the control itself is sent.
        let sent = interaction_failure_frame(overload.clone(), full).unwrap();
        assert_eq!(sent.encoded_len() as u64, full);
        // One byte short: the INTERNAL control.
        let sent = interaction_failure_frame(overload.clone(), full - 1).unwrap();
        let Some(pb::stream_interactions_response::Payload::Control(control)) = sent.payload else {
            panic!("a control");
        };
        assert_eq!(control.status, Some(internal()));
        // The fallback exactly fits; one byte less and no frame fits.
        assert!(interaction_failure_frame(overload.clone(), internal_len).is_ok());
        let status = interaction_failure_frame(overload, internal_len - 1).unwrap_err();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    }
}
