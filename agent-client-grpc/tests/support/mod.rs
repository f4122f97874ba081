//! A scripted fake `EngineService` on a Unix socket in a temp dir, run on
//! its own thread and runtime so a test can kill it (every connection drops
//! at once, as when the daemon dies mid-call).
#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_client as c;
use agent_client_grpc::{Config, GrpcConnector};
use agent_protocol::pb::common::v1 as pbc;
use agent_protocol::pb::engine::v1 as pbe;
use agent_protocol::pb::engine::v1::engine_service_server::{EngineService, EngineServiceServer};
use prost::Message as _;
use tokio::sync::{Notify, mpsc};
use tonic::{Request, Response, Status};

pub const TOKEN: &str = "test-endpoint-token";

type Unary<Q, R> = Box<dyn Fn(&Q) -> Result<R, Status> + Send + Sync>;
type Frames<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

/// A server-side stream whose drop the test can observe.
pub struct Tracked<T> {
    rx: mpsc::Receiver<Result<T, Status>>,
    dropped: Arc<StreamProbe>,
}

#[derive(Default)]
pub struct StreamProbe {
    pub opened: AtomicUsize,
    pub dropped: AtomicUsize,
    pub notify: Notify,
}

impl StreamProbe {
    pub async fn wait_dropped(&self, n: usize) {
        loop {
            let notified = self.notify.notified();
            if self.dropped.load(Ordering::SeqCst) >= n {
                return;
            }
            notified.await;
        }
    }
    pub async fn wait_opened(&self, n: usize) {
        loop {
            let notified = self.notify.notified();
            if self.opened.load(Ordering::SeqCst) >= n {
                return;
            }
            notified.await;
        }
    }
}

impl<T> Drop for Tracked<T> {
    fn drop(&mut self) {
        self.dropped.dropped.fetch_add(1, Ordering::SeqCst);
        self.dropped.notify.notify_waiters();
    }
}

impl<T> tokio_stream::Stream for Tracked<T> {
    type Item = Result<T, Status>;
    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// The script: handlers per RPC plus what the server saw.
#[derive(Default)]
pub struct Script {
    pub initialize: Mutex<VecDeque<InitStep>>,
    pub initialize_seen: Mutex<Vec<Vec<u8>>>,
    pub initialize_calls: AtomicUsize,
    pub unauthorized: AtomicUsize,
    pub start: Mutex<Option<Unary<pbe::StartRunRequest, pbe::StartRunResponse>>>,
    pub health: Mutex<Option<Unary<pbe::HealthRequest, pbe::HealthResponse>>>,
    pub cancel: Mutex<Option<Unary<pbe::CancelRunRequest, pbe::CancelRunResponse>>>,
    /// Frames for the next StreamEvents calls; the sender end stays with
    /// the test so it can keep the stream open or push a tail.
    pub events: Mutex<VecDeque<mpsc::Receiver<Result<pbe::StreamEventsResponse, Status>>>>,
    pub interactions:
        Mutex<VecDeque<mpsc::Receiver<Result<pbe::StreamInteractionsResponse, Status>>>>,
    pub streams: Arc<StreamProbe>,
    /// Signalled when a held unary call arrives.
    pub held: Notify,
    pub epoch: AtomicU64,
}

pub enum InitStep {
    /// Answer success built from the request.
    Accept,
    /// Answer this response.
    Respond(Box<pbe::InitializeResponse>),
    /// Fail with this gRPC status.
    Fail(Status),
    /// Never answer (until the server dies).
    Hold,
}

#[derive(Clone)]
pub struct Fake(pub Arc<Script>);

fn authorized<T>(script: &Script, r: &Request<T>) -> Result<(), Status> {
    let ok = r
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    if ok {
        Ok(())
    } else {
        script.unauthorized.fetch_add(1, Ordering::SeqCst);
        Err(Status::unauthenticated("no"))
    }
}

pub fn server_limits() -> pbc::Limits {
    pbc::Limits {
        max_message_bytes: 4 << 20,
        max_collection_items: 64,
        max_replay_events: 8,
        max_replay_bytes: 4096,
        max_concurrent_streams: 8,
        max_active_runs: 8,
    }
}

pub fn server_build() -> pbc::BuildIdentity {
    pbc::BuildIdentity {
        component: "fake-daemon".into(),
        version: "0.1.0".into(),
        commit: "abc".into(),
        go_version: "rustc".into(),
    }
}

/// A success response for `r` as a conforming daemon would build it.
pub fn accept(r: &pbe::InitializeRequest, epoch_base: u64) -> pbe::InitializeResponse {
    let range = r.protocol.unwrap();
    let selected = range.maximum.unwrap();
    let limits = r.requested_limits.unwrap();
    let (client_id, epoch) = match &r.reconnect_claim {
        Some(claim) => (claim.client_id.clone(), claim.expected_ownership_epoch + 1),
        None => (format!("client-{epoch_base}"), 1),
    };
    pbe::InitializeResponse {
        status: Some(agent_protocol::status::ok_status()),
        protocol: Some(selected),
        server: Some(server_build()),
        capabilities: Some(pbc::CapabilitySet { names: vec![] }),
        limits: Some(limits),
        health: Some(pbc::Health {
            state: pbc::HealthState::Ready as i32,
            degraded_reasons: vec![],
            active_runs: 0,
            limits: Some(limits),
        }),
        client_id,
        ownership_epoch: epoch,
        definitions: Some(pbe::DefinitionSet {
            revision: "r1".into(),
            definitions: vec![pbe::Definition {
                id: "echo".into(),
                revision: "1".into(),
                model: "scripted".into(),
                max_turns: 4,
            }],
        }),
        initialization_attempt_id: r.initialization_attempt_id.clone(),
    }
}

#[tonic::async_trait]
impl EngineService for Fake {
    async fn initialize(
        &self,
        request: Request<pbe::InitializeRequest>,
    ) -> Result<Response<pbe::InitializeResponse>, Status> {
        authorized(&self.0, &request)?;
        let r = request.into_inner();
        self.0.initialize_calls.fetch_add(1, Ordering::SeqCst);
        self.0
            .initialize_seen
            .lock()
            .unwrap()
            .push(r.encode_to_vec());
        let step = self
            .0
            .initialize
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(InitStep::Accept);
        match step {
            InitStep::Accept => {
                let n = self.0.epoch.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(Response::new(accept(&r, n)))
            }
            InitStep::Respond(resp) => Ok(Response::new(*resp)),
            InitStep::Fail(s) => Err(s),
            InitStep::Hold => {
                self.0.held.notify_waiters();
                std::future::pending().await
            }
        }
    }

    async fn health(
        &self,
        request: Request<pbe::HealthRequest>,
    ) -> Result<Response<pbe::HealthResponse>, Status> {
        authorized(&self.0, &request)?;
        let h = self.0.health.lock().unwrap();
        (h.as_ref().expect("scripted health"))(request.get_ref()).map(Response::new)
    }

    async fn start_run(
        &self,
        request: Request<pbe::StartRunRequest>,
    ) -> Result<Response<pbe::StartRunResponse>, Status> {
        authorized(&self.0, &request)?;
        let outcome = {
            let h = self.0.start.lock().unwrap();
            h.as_ref().map(|h| h(request.get_ref()))
        };
        match outcome {
            Some(r) => r.map(Response::new),
            None => {
                self.0.held.notify_waiters();
                std::future::pending().await
            }
        }
    }

    type StreamEventsStream = Frames<pbe::StreamEventsResponse>;

    async fn stream_events(
        &self,
        request: Request<pbe::StreamEventsRequest>,
    ) -> Result<Response<Self::StreamEventsStream>, Status> {
        authorized(&self.0, &request)?;
        let rx = self
            .0
            .events
            .lock()
            .unwrap()
            .pop_front()
            .expect("scripted events");
        self.0.streams.opened.fetch_add(1, Ordering::SeqCst);
        self.0.streams.notify.notify_waiters();
        Ok(Response::new(Box::pin(Tracked {
            rx,
            dropped: self.0.streams.clone(),
        })))
    }

    type StreamInteractionsStream = Frames<pbe::StreamInteractionsResponse>;

    async fn stream_interactions(
        &self,
        request: Request<pbe::StreamInteractionsRequest>,
    ) -> Result<Response<Self::StreamInteractionsStream>, Status> {
        authorized(&self.0, &request)?;
        let rx = self
            .0
            .interactions
            .lock()
            .unwrap()
            .pop_front()
            .expect("scripted interactions");
        self.0.streams.opened.fetch_add(1, Ordering::SeqCst);
        self.0.streams.notify.notify_waiters();
        Ok(Response::new(Box::pin(Tracked {
            rx,
            dropped: self.0.streams.clone(),
        })))
    }

    async fn cancel_run(
        &self,
        request: Request<pbe::CancelRunRequest>,
    ) -> Result<Response<pbe::CancelRunResponse>, Status> {
        authorized(&self.0, &request)?;
        let h = self.0.cancel.lock().unwrap();
        (h.as_ref().expect("scripted cancel"))(request.get_ref()).map(Response::new)
    }

    async fn respond_interaction(
        &self,
        _: Request<pbe::RespondInteractionRequest>,
    ) -> Result<Response<pbe::RespondInteractionResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn suspend_run(
        &self,
        _: Request<pbe::SuspendRunRequest>,
    ) -> Result<Response<pbe::SuspendRunResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn resume_run(
        &self,
        _: Request<pbe::ResumeRunRequest>,
    ) -> Result<Response<pbe::ResumeRunResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn export_snapshot(
        &self,
        _: Request<pbe::ExportSnapshotRequest>,
    ) -> Result<Response<pbe::ExportSnapshotResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn import_snapshot(
        &self,
        _: Request<pbe::ImportSnapshotRequest>,
    ) -> Result<Response<pbe::ImportSnapshotResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
}

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A fresh private temp directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> Self {
        let n = NEXT_DIR.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("acg-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running fake daemon.
pub struct Server {
    pub script: Arc<Script>,
    pub dir: TempDir,
    pub socket: PathBuf,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start() -> Self {
        let dir = TempDir::new();
        let socket = dir.0.join("engine.sock");
        Self::start_at(dir, socket)
    }

    pub fn start_at(dir: TempDir, socket: PathBuf) -> Self {
        let script = Arc::new(Script::default());
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let fake = Fake(script.clone());
        let path = socket.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.spawn(async move {
                let listener = tokio::net::UnixListener::bind(&path).unwrap();
                ready_tx.send(()).unwrap();
                tonic::transport::Server::builder()
                    .add_service(EngineServiceServer::new(fake))
                    .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
                    .await
                    .unwrap();
            });
            let _ = stopped.recv();
            // Dropping the runtime drops every connection task: the peer
            // sees the transport break mid-call.
            rt.shutdown_background();
        });
        ready_rx.recv().unwrap();
        Self {
            script,
            dir,
            socket,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Kills the daemon: every connection breaks.
    pub fn kill(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        let _ = std::fs::remove_file(&self.socket);
    }

    pub fn connector(&self) -> GrpcConnector {
        GrpcConnector::new(Config::unix(&self.socket, TOKEN).unwrap())
    }

    /// A sender whose frames the next StreamEvents call serves.
    pub fn script_events(&self) -> mpsc::Sender<Result<pbe::StreamEventsResponse, Status>> {
        let (tx, rx) = mpsc::channel(64);
        self.script.events.lock().unwrap().push_back(rx);
        tx
    }

    pub fn script_interactions(
        &self,
    ) -> mpsc::Sender<Result<pbe::StreamInteractionsResponse, Status>> {
        let (tx, rx) = mpsc::channel(64);
        self.script.interactions.lock().unwrap().push_back(rx);
        tx
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn path_of(s: &Server) -> &Path {
    &s.socket
}

pub fn v(minor: u32) -> c::ProtocolVersion {
    c::ProtocolVersion::new(1, minor, 0).unwrap()
}

pub fn client_limits() -> c::Limits {
    c::Limits::new(4 << 20, 64, 8, 4096, 8, 8).unwrap()
}

pub fn build() -> c::Build {
    c::Build::new("test-ui", "0.1.0", "abc", "rustc").unwrap()
}

pub fn fresh() -> c::InitializeRequest {
    c::InitializeRequest::new(
        c::ProtocolRange::new(v(0), v(2)).unwrap(),
        build(),
        vec![],
        vec![],
        client_limits(),
    )
    .unwrap()
}

pub fn fresh_with_attempt(bytes: [u8; 16]) -> c::InitializeRequest {
    c::InitializeRequest::with_attempt(
        c::ProtocolRange::new(v(0), v(3)).unwrap(),
        build(),
        vec![],
        vec![],
        client_limits(),
        None,
        c::InitializationAttemptId::new(bytes).unwrap(),
    )
    .unwrap()
}

pub fn reconnect(claim: c::ReconnectClaim) -> c::InitializeRequest {
    c::InitializeRequest::reconnect(
        c::ProtocolRange::new(v(0), v(2)).unwrap(),
        build(),
        vec![],
        vec![],
        client_limits(),
        claim,
    )
    .unwrap()
}

pub fn event(
    run: &str,
    sequence: u64,
    kind: pbe::EventKind,
    payload: &[u8],
) -> pbe::StreamEventsResponse {
    pbe::StreamEventsResponse {
        payload: Some(pbe::stream_events_response::Payload::Event(pbe::RunEvent {
            run_id: run.into(),
            sequence,
            unix_nano: 1_700_000_000_000_000_000,
            kind: kind as i32,
            payload_json: payload.to_vec(),
            terminal: agent_protocol::stream::is_terminal_kind(kind),
        })),
    }
}

pub fn delta(run: &str, sequence: u64) -> pbe::StreamEventsResponse {
    event(
        run,
        sequence,
        pbe::EventKind::ModelDelta,
        br#"{"text":"hi"}"#,
    )
}

pub fn control(earliest: u64, latest: u64, last: u64, tailing: bool) -> pbe::StreamEventsResponse {
    pbe::StreamEventsResponse {
        payload: Some(pbe::stream_events_response::Payload::Control(
            pbe::StreamControl {
                status: Some(agent_protocol::status::ok_status()),
                earliest_sequence: earliest,
                latest_sequence: latest,
                last_delivered_sequence: last,
                tailing,
                page_last_sequence: Some(last),
                has_more: last < latest,
            },
        )),
    }
}

pub fn error_control(status: pbc::Status) -> pbe::StreamEventsResponse {
    pbe::StreamEventsResponse {
        payload: Some(pbe::stream_events_response::Payload::Control(
            agent_protocol::stream::failed_stream_control(status),
        )),
    }
}
