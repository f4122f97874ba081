//! A negotiated gRPC session: unary calls with the bearer token and the
//! negotiated bounds, and the event and interaction streams with their page
//! and tail validation (docs/client.md, "Sessions" and "Streams").

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use agent_client as c;
use agent_protocol::Negotiated;
use agent_protocol::pb::common::v1 as pbc;
use agent_protocol::pb::engine::v1 as pbe;
use agent_protocol::pb::engine::v1::engine_service_client::EngineServiceClient;
use agent_protocol::responses as vr;
use agent_protocol::status::{is_ok, validate_status};
use agent_protocol::stream::{
    InteractionTailValidator, validate_event_page, validate_interaction_stream_page,
    validate_run_event,
};
use prost::Message as _;
use tokio::sync::{mpsc, watch};
use tonic::metadata::{Ascii, Binary, MetadataValue};
use tonic::transport::Channel;

use crate::convert::{self, protocol};
use crate::status::{Correlation, mutation_transport_error, status_error, transport_error};

/// Frames a stream's background reader may buffer ahead of its reader.
pub const STREAM_BUFFER_FRAMES: usize = 16;

/// The metadata key of the bearer credential.
pub const AUTHORIZATION_HEADER: &str = "authorization";

/// The metadata key (binary) under which [`GrpcSession::start_in_workspace`] names the
/// run's workspace; this project's daemon checks it (`agent_server::WORKSPACE_METADATA`).
pub const WORKSPACE_METADATA: &str = "agent-workspace-bin";

/// What every session of one connector shares with it: the channel, the credential and the
/// live local session per client id (the connector fences the prior one on reconnect). It is
/// defined here, below the connector, so that a session never names its connector.
pub(crate) struct Link {
    pub(crate) channel: Channel,
    pub(crate) authorization: MetadataValue<Ascii>,
    pub(crate) sessions: Mutex<HashMap<String, Weak<Shared>>>,
}

pub(crate) struct Shared {
    inner: Arc<Link>,
    pub(crate) connection: c::Connection,
    negotiated: Negotiated,
    closed: watch::Sender<bool>,
    /// Stream RPCs in flight (opening or with a live background reader).
    streams: watch::Sender<usize>,
}

impl Shared {
    pub(crate) fn new(
        inner: Arc<Link>,
        connection: c::Connection,
        negotiated: Negotiated,
    ) -> Arc<Self> {
        Arc::new(Self {
            inner,
            connection,
            negotiated,
            closed: watch::Sender::new(false),
            streams: watch::Sender::new(0),
        })
    }

    pub(crate) fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// Marks the session closed (streams observe it) and releases its
    /// registry slot. Local, non-blocking, idempotent.
    pub(crate) fn close(self: &Arc<Self>) {
        if self.closed.send_replace(true) {
            return;
        }
        let mut sessions = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let ours = sessions
            .get(self.connection.client_id())
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(self)));
        if ours {
            sessions.remove(self.connection.client_id());
        }
    }

    /// Waits until every stream RPC of this session has finished.
    pub(crate) async fn join_streams(&self) {
        let mut rx = self.streams.subscribe();
        // The sender lives in `self`, so `wait_for` cannot fail.
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    fn client(&self) -> EngineServiceClient<Channel> {
        let bound = usize::try_from(self.negotiated.limits.max_message_bytes).unwrap_or(usize::MAX);
        EngineServiceClient::new(self.inner.channel.clone())
            .max_encoding_message_size(bound)
            .max_decoding_message_size(bound)
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(message);
        r.metadata_mut()
            .insert(AUTHORIZATION_HEADER, self.inner.authorization.clone());
        r
    }

    fn check_open(&self) -> Result<(), c::Error> {
        if self.is_closed() {
            Err(c::Error::Closed)
        } else {
            Ok(())
        }
    }

    fn client_id(&self) -> String {
        self.connection.client_id().to_owned()
    }

    fn epoch(&self) -> u64 {
        self.connection.epoch()
    }

    fn stream_guard(self: &Arc<Self>) -> StreamGuard {
        self.streams.send_modify(|n| *n += 1);
        StreamGuard(Arc::downgrade(self), self.streams.clone())
    }
}

/// Counts one stream RPC; dropping it (when the reader exits) releases it.
struct StreamGuard(#[allow(dead_code)] Weak<Shared>, watch::Sender<usize>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.1.send_modify(|n| *n -= 1);
    }
}

/// Implements [`c::Session`] over gRPC.
pub struct GrpcSession {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for GrpcSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GrpcSession([redacted])")
    }
}

impl GrpcSession {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

impl Drop for GrpcSession {
    fn drop(&mut self) {
        self.shared.close();
    }
}

/// A unary response's typed status: `Ok(())` on OK, the translated error
/// otherwise. `validated` is the response validator's verdict.
fn unary_outcome(
    validated: Result<(), agent_protocol::Violation>,
    status: Option<&pbc::Status>,
    corr: Correlation<'_>,
) -> Result<(), c::Error> {
    validated.map_err(protocol)?;
    match status {
        s if is_ok(s) => Ok(()),
        Some(s) => Err(status_error(s, corr)),
        None => Err(protocol(())),
    }
}

macro_rules! mutation {
    ($self:ident, $rpc:ident, $req:expr, $op:expr, $kind:literal, $validate:path) => {{
        let request = $self.shared.request($req);
        mutation!(@request $self, $rpc, request, $op, $kind, $validate)
    }};
    (@request $self:ident, $rpc:ident, $request:expr, $op:expr, $kind:literal, $validate:path) => {{
        let shared = &$self.shared;
        shared.check_open()?;
        let op: &c::OperationId = $op;
        let response = match shared.client().$rpc($request).await {
            Ok(r) => r.into_inner(),
            Err(status) => return Err(mutation_transport_error(&status, op, $kind)),
        };
        let corr = Correlation {
            operation: Some(op),
            epoch: Some(shared.epoch()),
            cursor: None,
        };
        unary_outcome(
            $validate(&response, &shared.negotiated),
            response.status.as_ref(),
            corr,
        )?;
        response
    }};
}

impl GrpcSession {
    /// [`c::Session::start`], naming the directory the run should work in: the path's
    /// bytes go under the [`WORKSPACE_METADATA`] key beside the unchanged StartRun message.
    /// This project's daemon refuses (CONFLICT) a run for another directory than its own;
    /// a daemon that does not know the key ignores it.
    pub async fn start_in_workspace(
        &self,
        request: c::StartRequest,
        workspace: &std::path::Path,
    ) -> Result<c::StartResult, c::Error> {
        use std::os::unix::ffi::OsStrExt;
        self.start_with(
            request,
            Some(MetadataValue::from_bytes(workspace.as_os_str().as_bytes())),
        )
        .await
    }

    async fn start_with(
        &self,
        request: c::StartRequest,
        workspace: Option<MetadataValue<Binary>>,
    ) -> Result<c::StartResult, c::Error> {
        let input = pbe::Message {
            id: request.input.message_id().to_owned(),
            role: pbe::MessageRole::User as i32,
            parts: vec![pbe::ContentPart {
                value: Some(pbe::content_part::Value::Text(
                    request.input.text().to_owned(),
                )),
            }],
        };
        let wire = pbe::StartRunRequest {
            client_id: self.shared.client_id(),
            ownership_epoch: self.shared.epoch(),
            client_operation_id: request.operation.as_str().to_owned(),
            definition: Some(pbe::AgentDefinitionRef {
                id: request.definition.id().to_owned(),
                revision: request.definition.revision().to_owned(),
            }),
            input: Some(input),
        };
        let mut wire = self.shared.request(wire);
        if let Some(workspace) = workspace {
            wire.metadata_mut()
                .insert_bin(WORKSPACE_METADATA, workspace);
        }
        let r = mutation!(
            @request self,
            start_run,
            wire,
            &request.operation,
            "start",
            vr::validate_start_run_response
        );
        c::StartResult::new(
            c::RunRef::new(&r.run_id).map_err(protocol)?,
            r.initial_sequence,
            r.duplicate_operation,
            &r.plan_id,
        )
        .map_err(protocol)
    }
}

impl c::Session for GrpcSession {
    type Events = GrpcEventStream;
    type Interactions = GrpcInteractionStream;

    fn connection(&self) -> &c::Connection {
        &self.shared.connection
    }

    async fn start(&self, request: c::StartRequest) -> Result<c::StartResult, c::Error> {
        self.start_with(request, None).await
    }

    async fn events(
        &self,
        cursor: c::Cursor,
        options: c::EventStreamOptions,
    ) -> Result<GrpcEventStream, c::Error> {
        open_events(&self.shared, cursor, options).await
    }

    async fn interactions(
        &self,
        options: c::InteractionStreamOptions,
    ) -> Result<GrpcInteractionStream, c::Error> {
        open_interactions(&self.shared, options).await
    }

    async fn cancel(
        &self,
        operation: c::OperationId,
        run: c::RunRef,
        reason: Option<c::CancelReason>,
    ) -> Result<c::CancelResult, c::Error> {
        let wire = pbe::CancelRunRequest {
            client_id: self.shared.client_id(),
            ownership_epoch: self.shared.epoch(),
            client_operation_id: operation.as_str().to_owned(),
            run_id: run.as_str().to_owned(),
            reason: reason.map(|r| r.as_str().to_owned()).unwrap_or_default(),
        };
        let r = mutation!(
            self,
            cancel_run,
            wire,
            &operation,
            "cancel",
            vr::validate_cancel_run_response
        );
        c::CancelResult::new(
            r.cancellation_requested,
            r.already_terminal,
            r.terminal_sequence,
        )
        .map_err(protocol)
    }

    async fn respond(
        &self,
        operation: c::OperationId,
        run: c::RunRef,
        interaction: c::InteractionId,
        value: c::StructuredValue,
    ) -> Result<c::RespondResult, c::Error> {
        let wire = pbe::RespondInteractionRequest {
            client_id: self.shared.client_id(),
            ownership_epoch: self.shared.epoch(),
            client_operation_id: operation.as_str().to_owned(),
            run_id: run.as_str().to_owned(),
            interaction_id: interaction.as_str().to_owned(),
            value_json: value.encode_transfer().to_vec(),
        };
        let r = mutation!(
            self,
            respond_interaction,
            wire,
            &operation,
            "respond",
            vr::validate_respond_interaction_response
        );
        Ok(if r.duplicate_operation {
            c::RespondResult::Duplicate
        } else {
            c::RespondResult::Accepted
        })
    }

    async fn suspend(
        &self,
        operation: c::OperationId,
        run: c::RunRef,
    ) -> Result<c::SuspendResult, c::Error> {
        let wire = pbe::SuspendRunRequest {
            client_id: self.shared.client_id(),
            ownership_epoch: self.shared.epoch(),
            client_operation_id: operation.as_str().to_owned(),
            run_id: run.as_str().to_owned(),
        };
        let r = mutation!(
            self,
            suspend_run,
            wire,
            &operation,
            "suspend",
            vr::validate_suspend_run_response
        );
        c::SuspendResult::new(r.boundary_sequence, r.duplicate_operation).map_err(protocol)
    }

    async fn resume(
        &self,
        operation: c::OperationId,
        run: c::RunRef,
    ) -> Result<c::ResumeResult, c::Error> {
        let wire = pbe::ResumeRunRequest {
            client_id: self.shared.client_id(),
            ownership_epoch: self.shared.epoch(),
            client_operation_id: operation.as_str().to_owned(),
            run_id: run.as_str().to_owned(),
        };
        let r = mutation!(
            self,
            resume_run,
            wire,
            &operation,
            "resume",
            vr::validate_resume_run_response
        );
        c::ResumeResult::new(r.next_sequence, r.duplicate_operation).map_err(protocol)
    }

    async fn export(&self, run: c::RunRef) -> Result<c::Snapshot, c::Error> {
        let shared = &self.shared;
        shared.check_open()?;
        let wire = pbe::ExportSnapshotRequest {
            client_id: shared.client_id(),
            ownership_epoch: shared.epoch(),
            run_id: run.as_str().to_owned(),
        };
        let r = shared
            .client()
            .export_snapshot(shared.request(wire))
            .await
            .map_err(|s| transport_error(&s))?
            .into_inner();
        let corr = Correlation {
            operation: None,
            epoch: Some(shared.epoch()),
            cursor: None,
        };
        unary_outcome(
            vr::validate_export_snapshot_response(&r, &shared.negotiated),
            r.status.as_ref(),
            corr,
        )?;
        let envelope = r.snapshot.ok_or_else(|| protocol(()))?;
        c::Snapshot::new(envelope.encode_to_vec()).map_err(protocol)
    }

    async fn import(
        &self,
        operation: c::OperationId,
        snapshot: c::Snapshot,
    ) -> Result<c::ImportResult, c::Error> {
        let envelope = pbe::SnapshotEnvelope::decode(snapshot.bytes())
            .map_err(|_| c::Error::Invalid(c::ValueError::new("snapshot is not an envelope")))?;
        let wire = pbe::ImportSnapshotRequest {
            client_id: self.shared.client_id(),
            ownership_epoch: self.shared.epoch(),
            client_operation_id: operation.as_str().to_owned(),
            snapshot: Some(envelope),
        };
        let r = mutation!(
            self,
            import_snapshot,
            wire,
            &operation,
            "import",
            vr::validate_import_snapshot_response
        );
        c::ImportResult::new(
            c::RunRef::new(&r.run_id).map_err(protocol)?,
            r.next_sequence,
            r.duplicate_operation,
        )
        .map_err(protocol)
    }

    async fn health(&self) -> Result<c::Health, c::Error> {
        let shared = &self.shared;
        shared.check_open()?;
        let wire = pbe::HealthRequest {
            client_id: shared.client_id(),
            ownership_epoch: shared.epoch(),
        };
        let r = shared
            .client()
            .health(shared.request(wire))
            .await
            .map_err(|s| transport_error(&s))?
            .into_inner();
        let corr = Correlation {
            operation: None,
            epoch: Some(shared.epoch()),
            cursor: None,
        };
        unary_outcome(
            vr::validate_health_response(&r, &shared.negotiated),
            r.status.as_ref(),
            corr,
        )?;
        // The daemon must still be the one this connection negotiated with.
        let server = convert::build_from_wire(r.server.as_ref())?;
        let protocol_version = convert::version_from_wire(r.protocol.as_ref())?;
        if server != *shared.connection.server() || protocol_version != shared.connection.protocol()
        {
            return Err(c::Error::Protocol(
                "health names another server build or protocol",
            ));
        }
        convert::health_from_wire(r.health.as_ref())
    }

    fn close(&self) {
        self.shared.close();
    }
}

/// A stream's own close signal plus the session's.
struct Lifetime {
    own: watch::Sender<bool>,
    session: watch::Receiver<bool>,
}

impl Lifetime {
    fn new(shared: &Shared) -> Self {
        Self {
            own: watch::Sender::new(false),
            session: shared.closed.subscribe(),
        }
    }
    fn closed(&self) -> bool {
        *self.own.borrow() || *self.session.borrow()
    }
    /// Resolves once the stream or its session is closed.
    fn wait(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut own = self.own.subscribe();
        let mut session = self.session.clone();
        async move {
            tokio::select! {
                _ = own.wait_for(|c| *c) => {}
                _ = session.wait_for(|c| *c) => {}
            }
        }
    }
}

/// A lifetime's end as the background readers watch it across loop turns.
///
/// The readers race it in two `select!`s per turn; once it has resolved it
/// must not be polled again (an `async` block panics when resumed after
/// completion), so this remembers that it fired and answers at once after.
struct Stop {
    wait: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    fired: bool,
}

impl Stop {
    fn new(life: &Lifetime) -> Self {
        Self {
            wait: Box::pin(life.wait()),
            fired: false,
        }
    }
    /// Resolves once the lifetime has ended; cancel-safe, and again at once after.
    async fn fired(&mut self) {
        if !self.fired {
            self.wait.as_mut().await;
            self.fired = true;
        }
    }
}

/// Runs `fut` unless the lifetime ends first.
async fn until_closed<T>(
    life: &Lifetime,
    fut: impl std::future::Future<Output = T>,
) -> Result<T, c::Error> {
    tokio::select! {
        biased;
        _ = life.wait() => Err(c::Error::Closed),
        v = fut => Ok(v),
    }
}

/// What both streams are: the validated initial page, then the tail the background reader
/// forwards, until it ends, fails or the lifetime closes.
struct Frames<F> {
    buffered: std::collections::VecDeque<F>,
    tail: mpsc::Receiver<Result<F, c::Error>>,
    life: Lifetime,
    done: bool,
}

impl<F> Frames<F> {
    async fn next(&mut self) -> Result<Option<F>, c::Error> {
        if self.life.closed() {
            return Err(c::Error::Closed);
        }
        if let Some(f) = self.buffered.pop_front() {
            return Ok(Some(f));
        }
        if self.done {
            return Ok(None);
        }
        match self.tail.recv().await {
            Some(Ok(f)) => Ok(Some(f)),
            Some(Err(e)) => {
                self.done = true;
                Err(e)
            }
            None => {
                self.done = true;
                if self.life.closed() {
                    Err(c::Error::Closed)
                } else {
                    Ok(None)
                }
            }
        }
    }

    fn close(&self) {
        self.life.own.send_replace(true);
    }
}

impl<F> Drop for Frames<F> {
    fn drop(&mut self) {
        self.close();
    }
}

/// Implements [`c::EventStream`].
pub struct GrpcEventStream(Frames<c::EventFrame>);

impl std::fmt::Debug for GrpcEventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GrpcEventStream")
    }
}

async fn open_events(
    shared: &Arc<Shared>,
    cursor: c::Cursor,
    options: c::EventStreamOptions,
) -> Result<GrpcEventStream, c::Error> {
    shared.check_open()?;
    let guard = shared.stream_guard();
    let life = Lifetime::new(shared);
    let after = cursor.after();
    let wire = pbe::StreamEventsRequest {
        client_id: shared.client_id(),
        ownership_epoch: shared.epoch(),
        run_id: cursor.run().as_str().to_owned(),
        after_sequence: after,
        replay_limit: options.limit(),
        tail: options.tail(),
    };
    let mut stream = until_closed(&life, shared.client().stream_events(shared.request(wire)))
        .await?
        .map_err(|s| transport_error(&s))?
        .into_inner();
    let corr = Correlation {
        operation: None,
        epoch: Some(shared.epoch()),
        cursor: Some((cursor.run(), after)),
    };
    let limits = &shared.negotiated.limits;
    // Read the initial page up to its control, bounding what is buffered
    // before the page-level validator runs over it.
    let mut frames: Vec<pbe::StreamEventsResponse> = Vec::new();
    let mut bytes: u64 = 0;
    loop {
        let frame = until_closed(&life, stream.message())
            .await?
            .map_err(|s| transport_error(&s))?
            .ok_or_else(|| protocol(()))?;
        match &frame.payload {
            Some(pbe::stream_events_response::Payload::Event(e)) => {
                bytes = bytes.saturating_add(e.encoded_len() as u64);
                if frames.len() >= options.limit() as usize
                    || frames.len() >= limits.max_replay_events as usize
                    || bytes > limits.max_replay_bytes
                {
                    return Err(c::Error::Protocol(
                        "event page exceeds the negotiated replay bounds",
                    ));
                }
                frames.push(frame);
            }
            Some(pbe::stream_events_response::Payload::Control(ctl)) => {
                let status = ctl.status.as_ref();
                if !is_ok(status) {
                    // An error control only before any event.
                    if !frames.is_empty() {
                        return Err(protocol(()));
                    }
                    let status = status.ok_or_else(|| protocol(()))?;
                    validate_status(status).map_err(protocol)?;
                    return Err(status_error(status, corr));
                }
                frames.push(frame);
                break;
            }
            None => return Err(protocol(())),
        }
    }
    let control = validate_event_page(after, &frames, &shared.negotiated).map_err(protocol)?;
    let last = match frames.len().checked_sub(2).map(|i| &frames[i].payload) {
        None => after,
        Some(Some(pbe::stream_events_response::Payload::Event(e))) => e.sequence,
        // The page validator admits only events before the control.
        Some(_) => return Err(protocol(())),
    };
    if control.last_delivered_sequence != last
        || control.page_last_sequence.is_some_and(|p| p != last)
    {
        return Err(c::Error::Protocol(
            "event page control does not close at the last event",
        ));
    }
    if control.tailing && !options.tail() {
        return Err(c::Error::Protocol(
            "a non-tail request got a tailing control",
        ));
    }
    let tailing = control.tailing;
    let mut buffered = std::collections::VecDeque::with_capacity(frames.len());
    for f in &frames {
        buffered.push_back(match &f.payload {
            Some(pbe::stream_events_response::Payload::Event(e)) => {
                c::EventFrame::Event(convert::event_from_wire(e)?)
            }
            Some(pbe::stream_events_response::Payload::Control(ctl)) => {
                c::EventFrame::Control(convert::event_control_from_wire(ctl)?)
            }
            None => return Err(protocol(())),
        });
    }
    let (tx, rx) = mpsc::channel(STREAM_BUFFER_FRAMES);
    let mut stop = Stop::new(&life);
    let run = cursor.run().clone();
    let epoch = shared.epoch();
    tokio::spawn(async move {
        let _guard = guard;
        let mut expected = last;
        loop {
            let item = tokio::select! {
                biased;
                () = stop.fired() => Err(c::Error::Closed),
                m = stream.message() => match m {
                    Err(s) => Err(transport_error(&s)),
                    Ok(None) => break,
                    Ok(Some(frame)) => tail_frame(frame, tailing, &run, &mut expected, epoch),
                },
            };
            let end = item.is_err();
            // A full buffer must not keep a closed stream's reader alive:
            // a fence waits for it.
            let sent = tokio::select! {
                biased;
                () = stop.fired() => false,
                r = tx.send(item) => r.is_ok(),
            };
            if !sent || end {
                break;
            }
        }
    });
    Ok(GrpcEventStream(Frames {
        buffered,
        tail: rx,
        life,
        done: false,
    }))
}

fn tail_frame(
    frame: pbe::StreamEventsResponse,
    tailing: bool,
    run: &c::RunRef,
    expected: &mut u64,
    epoch: u64,
) -> Result<c::EventFrame, c::Error> {
    if !tailing {
        return Err(c::Error::Protocol("a frame followed a non-tailing control"));
    }
    match frame.payload {
        Some(pbe::stream_events_response::Payload::Event(e)) => {
            validate_run_event(&e).map_err(protocol)?;
            let next = expected.checked_add(1).ok_or_else(|| protocol(()))?;
            if e.run_id != run.as_str() || e.sequence != next {
                return Err(c::Error::Protocol("tail events are not contiguous"));
            }
            *expected = next;
            convert::event_from_wire(&e).map(c::EventFrame::Event)
        }
        Some(pbe::stream_events_response::Payload::Control(ctl)) => {
            let status = ctl.status.as_ref();
            if is_ok(status) {
                return Err(c::Error::Protocol("a tail control must carry an error"));
            }
            let status = status.ok_or_else(|| protocol(()))?;
            validate_status(status).map_err(protocol)?;
            let corr = Correlation {
                operation: None,
                epoch: Some(epoch),
                cursor: Some((run, *expected)),
            };
            Err(status_error(status, corr))
        }
        None => Err(protocol(())),
    }
}

impl c::EventStream for GrpcEventStream {
    async fn next(&mut self) -> Result<Option<c::EventFrame>, c::Error> {
        self.0.next().await
    }

    fn close(&self) {
        self.0.close();
    }
}

/// Implements [`c::InteractionStream`].
pub struct GrpcInteractionStream(Frames<c::InteractionFrame>);

impl std::fmt::Debug for GrpcInteractionStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GrpcInteractionStream")
    }
}

async fn open_interactions(
    shared: &Arc<Shared>,
    options: c::InteractionStreamOptions,
) -> Result<GrpcInteractionStream, c::Error> {
    shared.check_open()?;
    let guard = shared.stream_guard();
    let life = Lifetime::new(shared);
    let wire = pbe::StreamInteractionsRequest {
        client_id: shared.client_id(),
        ownership_epoch: shared.epoch(),
        tail: options.tail,
    };
    let mut stream = until_closed(
        &life,
        shared.client().stream_interactions(shared.request(wire)),
    )
    .await?
    .map_err(|s| transport_error(&s))?
    .into_inner();
    let corr = Correlation {
        operation: None,
        epoch: Some(shared.epoch()),
        cursor: None,
    };
    let mut frames = Vec::with_capacity(2);
    for _ in 0..2 {
        let frame = until_closed(&life, stream.message())
            .await?
            .map_err(|s| transport_error(&s))?
            .ok_or_else(|| protocol(()))?;
        if frames.is_empty()
            && let Some(pbe::stream_interactions_response::Payload::Control(ctl)) = &frame.payload
            && !is_ok(ctl.status.as_ref())
        {
            let status = ctl.status.as_ref().ok_or_else(|| protocol(()))?;
            validate_status(status).map_err(protocol)?;
            return Err(status_error(status, corr));
        }
        frames.push(frame);
    }
    let (snapshot, control) =
        validate_interaction_stream_page(options.tail, &frames, &shared.negotiated)
            .map_err(protocol)?;
    let items = shared.negotiated.limits.max_collection_items;
    let buffered = std::collections::VecDeque::from([
        c::InteractionFrame::Snapshot(convert::interaction_snapshot_from_wire(snapshot, items)?),
        c::InteractionFrame::Control(convert::interaction_control_from_wire(control)?),
    ]);
    let mut validator = if options.tail {
        Some(InteractionTailValidator::new(&frames, &shared.negotiated).map_err(protocol)?)
    } else {
        None
    };
    let (tx, rx) = mpsc::channel(STREAM_BUFFER_FRAMES);
    let mut stop = Stop::new(&life);
    tokio::spawn(async move {
        let _guard = guard;
        loop {
            let item = tokio::select! {
                biased;
                () = stop.fired() => Err(c::Error::Closed),
                m = stream.message() => match m {
                    Err(s) => Err(transport_error(&s)),
                    Ok(None) => break,
                    Ok(Some(frame)) => match validator.as_mut() {
                        None => Err(c::Error::Protocol("a frame followed a non-tailing control")),
                        Some(v) => interaction_tail_frame(v, &frame),
                    },
                },
            };
            let end = item.is_err();
            // A full buffer must not keep a closed stream's reader alive:
            // a fence waits for it.
            let sent = tokio::select! {
                biased;
                () = stop.fired() => false,
                r = tx.send(item) => r.is_ok(),
            };
            if !sent || end {
                break;
            }
        }
    });
    Ok(GrpcInteractionStream(Frames {
        buffered,
        tail: rx,
        life,
        done: false,
    }))
}

fn interaction_tail_frame(
    validator: &mut InteractionTailValidator,
    frame: &pbe::StreamInteractionsResponse,
) -> Result<c::InteractionFrame, c::Error> {
    if let Some(pbe::stream_interactions_response::Payload::Control(ctl)) = &frame.payload {
        let status = ctl.status.as_ref();
        if is_ok(status) {
            return Err(c::Error::Protocol("a tail control must carry an error"));
        }
        let status = status.ok_or_else(|| protocol(()))?;
        validate_status(status).map_err(protocol)?;
        return Err(status_error(status, Correlation::default()));
    }
    validator.accept(frame).map_err(protocol)?;
    match &frame.payload {
        Some(pbe::stream_interactions_response::Payload::Delta(d)) => {
            convert::interaction_delta_from_wire(d).map(c::InteractionFrame::Update)
        }
        _ => Err(protocol(())),
    }
}

impl c::InteractionStream for GrpcInteractionStream {
    async fn next(&mut self) -> Result<Option<c::InteractionFrame>, c::Error> {
        self.0.next().await
    }

    fn close(&self) {
        self.0.close();
    }
}
