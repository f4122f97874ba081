//! A scripted engine-protocol daemon that answers the way the original system's daemon does,
//! for driving the real `agent` binary against it.
//!
//! It binds `agent.sock` in a scope directory and publishes `endpoint.json` (holding the
//! liveness lock) through the same endpoint store the CLI discovers daemons with, so an
//! `agent` process whose `AGENT_SCOPE_DIR` names that directory connects to it instead of
//! starting a daemon of its own. It negotiates Initialize by the protocol's rules (fresh
//! clients and reconnect claims, which fence the claimed client's earlier session), serves
//! two definitions (`echo` and `coding-agent`), starts the runs the test scripted, pages and
//! tails their events, records every CancelRun and serves an empty pending-interaction set.
//!
//! The events are the test's: each payload is sent byte for byte as the test wrote it, so a
//! test states the original's payload shapes literally (docs/protocol.md, "Event payloads").
//! Pages hold at most [`PAGE_EVENTS`] events, so a long run is read over several pages.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use agent_endpoint::{EndpointToken, Metadata, Publication, Store, UserScope, localipc};
use agent_protocol::initialize::{
    OwnershipGrant, ServerInputs, complete_initialize, initialize_failure_response,
    preflight_initialize,
};
use agent_protocol::negotiate::implemented_range;
use agent_protocol::pb::common::v1 as pbc;
use agent_protocol::pb::engine::v1 as pbe;
use agent_protocol::pb::engine::v1::engine_service_server::{EngineService, EngineServiceServer};
use agent_protocol::status::{Violation, check_client_ownership, ok_status};
use agent_protocol::stream::{check_replay_cursor, failed_stream_control, is_terminal_kind};
use tokio::sync::{mpsc, watch};
use tonic::{Request, Response, Status};

/// The most events one page of StreamEvents carries (the daemon's `max_replay_events`).
pub(crate) const PAGE_EVENTS: u32 = 4;
/// The time every scripted event carries.
const EVENT_UNIX_NANO: i64 = 1_700_000_000_000_000_000;

/// What a StartRun asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Started {
    pub(crate) run: String,
    pub(crate) client: String,
    pub(crate) definition: String,
    pub(crate) task: String,
}

/// A CancelRun the daemon received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cancel {
    pub(crate) run: String,
    pub(crate) client: String,
    pub(crate) reason: String,
}

/// A run's events: each kind with its payload bytes, sequence 1 first.
type Events = Vec<(pbe::EventKind, Vec<u8>)>;

struct Run {
    owner: String,
    events: Events,
}

impl Run {
    fn latest(&self) -> u64 {
        self.events.len() as u64
    }

    /// The sequence of the run's terminal event, once it has one.
    fn terminal(&self) -> Option<u64> {
        use pbe::EventKind as K;
        self.events
            .iter()
            .position(|(kind, _)| matches!(kind, K::RunCompleted | K::RunFailed | K::RunCancelled))
            .map(|i| i as u64 + 1)
    }

    fn frame(&self, run: &str, sequence: u64) -> pbe::StreamEventsResponse {
        let (kind, payload) = &self.events[sequence as usize - 1];
        pbe::StreamEventsResponse {
            payload: Some(pbe::stream_events_response::Payload::Event(pbe::RunEvent {
                run_id: run.to_owned(),
                sequence,
                unix_nano: EVENT_UNIX_NANO,
                kind: *kind as i32,
                payload_json: payload.clone(),
                terminal: is_terminal_kind(*kind),
            })),
        }
    }
}

/// An open event tail: which run, for which client at which epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tail {
    run: String,
    client: String,
    epoch: u64,
}

#[derive(Default)]
struct State {
    next_client: u64,
    /// Each client's current ownership epoch.
    clients: BTreeMap<String, u64>,
    /// Runs scripted for the next StartRun calls: the run id and its first events.
    queued: VecDeque<(String, Events)>,
    runs: BTreeMap<String, Run>,
    started: Vec<Started>,
    cancels: Vec<Cancel>,
    tails: Vec<Tail>,
    reconnects: usize,
}

impl State {
    /// `Ok` when `client` is known at exactly `epoch`, else the STALE_CLIENT status.
    fn owner(&self, client: &str, epoch: u64) -> Result<(), Box<pbc::Status>> {
        let Some(&current) = self.clients.get(client) else {
            return Err(not_found("client not found"));
        };
        check_client_ownership(client, epoch, client, current)
            .map_err(|v| Box::new(v.into_status()))
    }

    /// The run if `client` owns it; another client's run is as unknown as a missing one.
    fn owned_run(&self, client: &str, run: &str) -> Result<&Run, Box<pbc::Status>> {
        self.runs
            .get(run)
            .filter(|r| r.owner == client)
            .ok_or_else(|| not_found("run not found"))
    }
}

fn not_found(message: &'static str) -> Box<pbc::Status> {
    Box::new(Violation::new(pbc::ErrorCode::NotFound, message).into_status())
}

struct Shared {
    token: EndpointToken,
    build: pbc::BuildIdentity,
    state: Mutex<State>,
    /// Wakes the test's waits on every change.
    changed: Condvar,
    /// Wakes the server's tails on every change.
    version: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn notify(&self) {
        self.changed.notify_all();
        self.version.send_modify(|v| *v += 1);
    }

    fn authorize<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let value = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if self.token.verify_authorization(value) {
            Ok(())
        } else {
            Err(Status::unauthenticated("endpoint token required"))
        }
    }

    fn inputs(&self) -> ServerInputs {
        let limits = pbc::Limits {
            max_message_bytes: 4 << 20,
            max_collection_items: 64,
            max_replay_events: PAGE_EVENTS,
            max_replay_bytes: 1 << 20,
            max_concurrent_streams: 16,
            max_active_runs: 8,
        };
        let definition = |id: &str, revision: &str| pbe::Definition {
            id: id.to_owned(),
            revision: revision.to_owned(),
            model: "scripted".to_owned(),
            max_turns: 8,
        };
        ServerInputs {
            range: implemented_range(),
            build: self.build.clone(),
            capabilities: vec![],
            limits,
            health: pbc::Health {
                state: pbc::HealthState::Ready as i32,
                degraded_reasons: vec![],
                active_runs: 0,
                limits: Some(limits),
            },
            definitions: pbe::DefinitionSet {
                revision: "definitions-1".to_owned(),
                definitions: vec![
                    definition("coding-agent", "coding-agent-v1"),
                    definition("echo", "1"),
                ],
            },
        }
    }
}

type Frames<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

fn frames<T: Send + 'static>(items: Vec<T>) -> Frames<T> {
    Box::pin(tokio_stream::iter(items.into_iter().map(Ok)))
}

fn event_control(status: pbc::Status, last_delivered: u64) -> pbe::StreamEventsResponse {
    pbe::StreamEventsResponse {
        payload: Some(pbe::stream_events_response::Payload::Control(
            pbe::StreamControl {
                last_delivered_sequence: last_delivered,
                ..failed_stream_control(status)
            },
        )),
    }
}

fn interaction_failure(status: pbc::Status) -> pbe::StreamInteractionsResponse {
    pbe::StreamInteractionsResponse {
        payload: Some(pbe::stream_interactions_response::Payload::Control(
            pbe::InteractionStreamControl {
                status: Some(status),
                ..Default::default()
            },
        )),
    }
}

#[derive(Clone)]
struct Service(Arc<Shared>);

impl Service {
    /// Sends the events after `last` as they are appended, until the run's terminal event
    /// was sent, the client reconnected (a fence: the stream ends quietly) or the peer left.
    async fn tail(
        self,
        tail: Tail,
        mut last: u64,
        tx: mpsc::Sender<Result<pbe::StreamEventsResponse, Status>>,
    ) {
        let mut version = self.0.version.subscribe();
        loop {
            let (frames, done) = {
                let state = self.0.lock();
                let fenced = state.clients.get(&tail.client) != Some(&tail.epoch);
                match state.runs.get(&tail.run) {
                    Some(run) if !fenced => {
                        let frames: Vec<_> = (last + 1..=run.latest())
                            .map(|s| run.frame(&tail.run, s))
                            .collect();
                        last = run.latest();
                        (frames, run.terminal().is_some_and(|t| t <= last))
                    }
                    _ => (vec![], true),
                }
            };
            for frame in frames {
                if tx.send(Ok(frame)).await.is_err() {
                    return self.untail(&tail);
                }
            }
            if done {
                return self.untail(&tail);
            }
            tokio::select! {
                changed = version.changed() => if changed.is_err() { return self.untail(&tail) },
                () = tx.closed() => return self.untail(&tail),
            }
        }
    }

    fn untail(&self, tail: &Tail) {
        let mut state = self.0.lock();
        if let Some(i) = state.tails.iter().position(|t| t == tail) {
            state.tails.remove(i);
        }
        drop(state);
        self.0.notify();
    }
}

#[tonic::async_trait]
impl EngineService for Service {
    async fn initialize(
        &self,
        request: Request<pbe::InitializeRequest>,
    ) -> Result<Response<pbe::InitializeResponse>, Status> {
        self.0.authorize(&request)?;
        let r = request.into_inner();
        let inputs = self.0.inputs();
        let plan = match preflight_initialize(&r, &inputs) {
            Ok(plan) => plan,
            Err(v) => return Ok(Response::new(initialize_failure_response(v.into_status()))),
        };
        let mut state = self.0.lock();
        let grant = match &plan.reconnect {
            None => {
                state.next_client += 1;
                let client = format!("client-{}", state.next_client);
                state.clients.insert(client.clone(), 1);
                OwnershipGrant {
                    client_id: client,
                    epoch: 1,
                }
            }
            Some(claim) => {
                let current = state.clients.get(&claim.client_id).copied();
                if current != Some(claim.expected_ownership_epoch) {
                    let status = check_client_ownership(
                        &claim.client_id,
                        claim.expected_ownership_epoch,
                        &claim.client_id,
                        current.unwrap_or(u64::MAX),
                    )
                    .err()
                    .map_or_else(ok_status, Violation::into_status);
                    return Ok(Response::new(initialize_failure_response(status)));
                }
                let epoch = claim.expected_ownership_epoch + 1;
                state.clients.insert(claim.client_id.clone(), epoch);
                state.reconnects += 1;
                OwnershipGrant {
                    client_id: claim.client_id.clone(),
                    epoch,
                }
            }
        };
        drop(state);
        // A reconnect fences the client's earlier session: its tails end.
        self.0.notify();
        Ok(Response::new(complete_initialize(&plan, &inputs, grant)))
    }

    async fn health(
        &self,
        request: Request<pbe::HealthRequest>,
    ) -> Result<Response<pbe::HealthResponse>, Status> {
        self.0.authorize(&request)?;
        let inputs = self.0.inputs();
        Ok(Response::new(pbe::HealthResponse {
            status: Some(ok_status()),
            server: Some(inputs.build),
            protocol: implemented_range().maximum,
            health: Some(inputs.health),
        }))
    }

    async fn start_run(
        &self,
        request: Request<pbe::StartRunRequest>,
    ) -> Result<Response<pbe::StartRunResponse>, Status> {
        self.0.authorize(&request)?;
        let r = request.into_inner();
        let failed = |status| {
            Ok(Response::new(pbe::StartRunResponse {
                status: Some(status),
                ..Default::default()
            }))
        };
        let mut state = self.0.lock();
        if let Err(status) = state.owner(&r.client_id, r.ownership_epoch) {
            return failed(*status);
        }
        let Some((run, events)) = state.queued.pop_front() else {
            return Err(Status::internal("the test scripted no run to start"));
        };
        let task = r
            .input
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match &p.value {
                Some(pbe::content_part::Value::Text(text)) => Some(text.clone()),
                _ => None,
            })
            .collect();
        state.started.push(Started {
            run: run.clone(),
            client: r.client_id.clone(),
            definition: r.definition.map(|d| d.id).unwrap_or_default(),
            task,
        });
        state.runs.insert(
            run.clone(),
            Run {
                owner: r.client_id,
                events,
            },
        );
        drop(state);
        self.0.notify();
        Ok(Response::new(pbe::StartRunResponse {
            status: Some(ok_status()),
            run_id: run,
            initial_sequence: 1,
            duplicate_operation: false,
            plan_id: "plan-1".to_owned(),
        }))
    }

    type StreamEventsStream = Frames<pbe::StreamEventsResponse>;

    async fn stream_events(
        &self,
        request: Request<pbe::StreamEventsRequest>,
    ) -> Result<Response<Self::StreamEventsStream>, Status> {
        self.0.authorize(&request)?;
        let r = request.into_inner();
        let mut state = self.0.lock();
        let run = match state
            .owner(&r.client_id, r.ownership_epoch)
            .and_then(|()| state.owned_run(&r.client_id, &r.run_id))
        {
            Ok(run) => run,
            Err(status) => return Ok(Response::new(frames(vec![event_control(*status, 0)]))),
        };
        let latest = run.latest();
        if let Err(v) = check_replay_cursor(r.after_sequence, 1, latest) {
            let status = v.into_status();
            let recovery = match &status.detail {
                Some(pbc::status::Detail::ReplayBounds(b)) => b.recovery_sequence,
                _ => 0,
            };
            return Ok(Response::new(frames(vec![event_control(status, recovery)])));
        }
        let limit = u64::from(r.replay_limit.clamp(1, PAGE_EVENTS));
        let page_last = latest.min(r.after_sequence + limit);
        let mut page: Vec<_> = (r.after_sequence + 1..=page_last)
            .map(|s| run.frame(&r.run_id, s))
            .collect();
        let has_more = page_last < latest;
        // An ended run is not tailed (as a real daemon does): nothing more will come.
        let tailing = r.tail && !has_more && run.terminal().is_none();
        page.push(pbe::StreamEventsResponse {
            payload: Some(pbe::stream_events_response::Payload::Control(
                pbe::StreamControl {
                    status: Some(ok_status()),
                    earliest_sequence: 1,
                    latest_sequence: latest,
                    last_delivered_sequence: page_last,
                    tailing,
                    page_last_sequence: Some(page_last),
                    has_more,
                },
            )),
        });
        if !tailing {
            return Ok(Response::new(frames(page)));
        }
        let tail = Tail {
            run: r.run_id.clone(),
            client: r.client_id.clone(),
            epoch: r.ownership_epoch,
        };
        state.tails.push(tail.clone());
        drop(state);
        self.0.notify();
        let (tx, rx) = mpsc::channel(64);
        let service = self.clone();
        tokio::spawn(async move {
            for frame in page {
                if tx.send(Ok(frame)).await.is_err() {
                    return service.untail(&tail);
                }
            }
            service.tail(tail, page_last, tx).await;
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    type StreamInteractionsStream = Frames<pbe::StreamInteractionsResponse>;

    async fn stream_interactions(
        &self,
        request: Request<pbe::StreamInteractionsRequest>,
    ) -> Result<Response<Self::StreamInteractionsStream>, Status> {
        self.0.authorize(&request)?;
        let r = request.into_inner();
        if let Err(status) = self.0.lock().owner(&r.client_id, r.ownership_epoch) {
            return Ok(Response::new(frames(vec![interaction_failure(*status)])));
        }
        // Nothing is ever pending: a complete empty snapshot, then the control.
        let page = vec![
            pbe::StreamInteractionsResponse {
                payload: Some(pbe::stream_interactions_response::Payload::Snapshot(
                    pbe::InteractionSnapshot {
                        revision: 0,
                        pending: vec![],
                    },
                )),
            },
            pbe::StreamInteractionsResponse {
                payload: Some(pbe::stream_interactions_response::Payload::Control(
                    pbe::InteractionStreamControl {
                        status: Some(ok_status()),
                        latest_revision: 0,
                        page_last_revision: 0,
                        has_more: false,
                        tailing: r.tail,
                    },
                )),
            },
        ];
        if !r.tail {
            return Ok(Response::new(frames(page)));
        }
        // The tail stays open (with nothing to say) until the client is fenced or leaves.
        let (tx, rx) = mpsc::channel(4);
        let shared = self.0.clone();
        tokio::spawn(async move {
            for frame in page {
                if tx.send(Ok(frame)).await.is_err() {
                    return;
                }
            }
            let mut version = shared.version.subscribe();
            loop {
                if shared.lock().clients.get(&r.client_id) != Some(&r.ownership_epoch) {
                    return;
                }
                tokio::select! {
                    changed = version.changed() => if changed.is_err() { return },
                    () = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn cancel_run(
        &self,
        request: Request<pbe::CancelRunRequest>,
    ) -> Result<Response<pbe::CancelRunResponse>, Status> {
        self.0.authorize(&request)?;
        let r = request.into_inner();
        let mut state = self.0.lock();
        let terminal = match state
            .owner(&r.client_id, r.ownership_epoch)
            .and_then(|()| state.owned_run(&r.client_id, &r.run_id))
        {
            Ok(run) => run.terminal(),
            Err(status) => {
                return Ok(Response::new(pbe::CancelRunResponse {
                    status: Some(*status),
                    ..Default::default()
                }));
            }
        };
        state.cancels.push(Cancel {
            run: r.run_id,
            client: r.client_id,
            reason: r.reason,
        });
        drop(state);
        self.0.notify();
        Ok(Response::new(pbe::CancelRunResponse {
            status: Some(ok_status()),
            cancellation_requested: terminal.is_none(),
            already_terminal: terminal.is_some(),
            terminal_sequence: terminal.unwrap_or(0),
        }))
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

/// A running scripted daemon, published in its scope directory; stopped on drop.
pub(crate) struct ScriptedDaemon {
    shared: Arc<Shared>,
    scope: PathBuf,
    publication: Option<Publication>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    listener: Option<localipc::Listener>,
}

impl ScriptedDaemon {
    /// Binds `agent.sock` in the scope `dir` (created 0700), serves on it and publishes the
    /// endpoint record there, as `agent serve` does.
    pub(crate) fn start(dir: &Path) -> ScriptedDaemon {
        let scope = UserScope::at(dir).expect("a private scope directory");
        let listener = localipc::listen(scope.address()).expect("the scope's socket");
        let incoming = listener.try_clone_nonblocking().expect("a listener clone");
        let token = EndpointToken::generate().expect("an endpoint token");
        // The original is a Go program: its build identity says so.
        let build = pbc::BuildIdentity {
            component: "agentd".to_owned(),
            version: "0.9.0".to_owned(),
            commit: "0f1e2d3c".to_owned(),
            go_version: "go1.24.2".to_owned(),
        };
        let maximum = implemented_range().maximum.expect("a maximum version");
        let metadata = Metadata {
            transport: scope.transport().to_owned(),
            address: scope.address().to_str().expect("a UTF-8 path").to_owned(),
            token: token.clone(),
            server_component: build.component.clone(),
            server_version: build.version.clone(),
            server_commit: build.commit.clone(),
            server_toolchain: build.go_version.clone(),
            protocol: (maximum.major, maximum.minor, maximum.patch),
            process_id: std::process::id(),
            started_unix_nano: 1_700_000_000_000_000_000,
            instance_id: Metadata::new_instance_id().expect("an instance id"),
        };
        let shared = Arc::new(Shared {
            token,
            build,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            version: watch::Sender::new(0),
        });
        let service = Service(shared.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let incoming = tokio_stream::wrappers::UnixListenerStream::new(
                    tokio::net::UnixListener::from_std(incoming).expect("a tokio listener"),
                );
                let serve = tonic::transport::Server::builder()
                    .add_service(EngineServiceServer::new(service))
                    .serve_with_incoming(incoming);
                tokio::select! {
                    served = serve => served.expect("the scripted daemon serves"),
                    _ = stopped => {}
                }
            });
            // Dropping the runtime drops every connection and stream task.
            rt.shutdown_background();
        });
        let store = Store::open(scope.dir()).expect("the endpoint store");
        let publication = store
            .publish(&metadata, Instant::now() + Duration::from_secs(5))
            .expect("the endpoint record is published");
        ScriptedDaemon {
            shared,
            scope: dir.to_path_buf(),
            publication: Some(publication),
            stop: Some(stop),
            thread: Some(thread),
            listener: Some(listener),
        }
    }

    /// The scope directory it serves in.
    pub(crate) fn scope(&self) -> &Path {
        &self.scope
    }

    /// Scripts the next StartRun: the run gets id `run` and starts with `events`.
    pub(crate) fn expect_run(&self, run: &str, events: &[(pbe::EventKind, &str)]) {
        let events = events
            .iter()
            .map(|(kind, payload)| (*kind, payload.as_bytes().to_vec()))
            .collect();
        self.shared
            .lock()
            .queued
            .push_back((run.to_owned(), events));
    }

    /// Appends events to a started run; open tails deliver them.
    pub(crate) fn push(&self, run: &str, events: &[(pbe::EventKind, &str)]) {
        let mut state = self.shared.lock();
        let run = state.runs.get_mut(run).expect("a started run");
        for (kind, payload) in events {
            run.events.push((*kind, payload.as_bytes().to_vec()));
        }
        drop(state);
        self.shared.notify();
    }

    /// Waits (at most `timeout`) until `done` holds for the daemon's state.
    fn wait_for<T>(&self, timeout: Duration, what: &str, done: impl Fn(&State) -> Option<T>) -> T {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if let Some(value) = done(&state) {
                return value;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "the scripted daemon never saw {what}");
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Waits for a CancelRun of `run`.
    pub(crate) fn wait_cancel(&self, run: &str, timeout: Duration) -> Cancel {
        self.wait_for(timeout, "a CancelRun", |s| {
            s.cancels.iter().find(|c| c.run == run).cloned()
        })
    }

    /// Waits until a tail of `run` is open for its owner's current epoch (the follower is
    /// live: what is pushed now reaches it as tail events).
    pub(crate) fn wait_tailing(&self, run: &str, timeout: Duration) {
        self.wait_for(timeout, "a live tail", |s| {
            s.tails
                .iter()
                .any(|t| t.run == run && s.clients.get(&t.client) == Some(&t.epoch))
                .then_some(())
        });
    }

    /// Every CancelRun so far.
    pub(crate) fn cancels(&self) -> Vec<Cancel> {
        self.shared.lock().cancels.clone()
    }

    /// Every StartRun so far.
    pub(crate) fn started(&self) -> Vec<Started> {
        self.shared.lock().started.clone()
    }

    /// How many reconnect claims it granted.
    pub(crate) fn reconnects(&self) -> usize {
        self.shared.lock().reconnects
    }
}

impl Drop for ScriptedDaemon {
    fn drop(&mut self) {
        if let Some(mut publication) = self.publication.take() {
            let _ = publication.close(Instant::now() + Duration::from_secs(5));
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if let Some(listener) = self.listener.take() {
            listener.close();
        }
    }
}
