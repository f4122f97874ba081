//! The shared harness: a fixture daemon on a real Unix socket in a private temp dir, and
//! an authenticated tonic client of agent-protocol's generated stub.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agent_endpoint::{EndpointToken, UserScope};
use agent_protocol::negotiate::version;
use agent_protocol::pb::common::v1::{
    BuildIdentity, CapabilitySet, ErrorCode, Limits, ProtocolRange,
};
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::pb::engine::v1::engine_service_client::EngineServiceClient;
use agent_server::fixture::{self, FixtureOptions};
use agent_server::{Daemon, DaemonConfig, ServerConfig};
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// Whether `program` is a file in a directory of `PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Ends a test whose tool from outside the Rust toolchain is missing (the rule of the
/// README's test command): under `CI` (set and not empty, as `.ci/run` sets it) the test is
/// required and fails; elsewhere it prints one line saying what to install, and passes.
pub fn skip_or_fail(needs: &str) {
    if std::env::var_os("CI").is_some_and(|ci| !ci.is_empty()) {
        panic!("CI is set, so this test is required: it needs {needs}");
    }
    // Written to stderr itself: the test harness captures `eprintln!` of passing tests.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("skipped: needs {needs}\n").as_bytes(),
    );
}

/// Every wait in these tests is bounded by this.
pub const WAIT: Duration = Duration::from_secs(30);

/// Awaits `future`, failing the test after [`WAIT`].
pub async fn bounded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(WAIT, future)
        .await
        .expect("a bounded wait timed out")
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh 0700 directory under `/tmp` (short: socket paths are bounded), removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = PathBuf::from(format!("/tmp/as-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

pub fn build() -> BuildIdentity {
    BuildIdentity {
        component: "agent-server-test".into(),
        version: "0.1.0".into(),
        commit: "test".into(),
        go_version: "rustc".into(),
    }
}

/// A running fixture daemon.
pub struct Fixture {
    pub temp: TempDir,
    pub daemon: Option<Daemon>,
    pub root: CancellationToken,
    pub address: PathBuf,
    pub token: EndpointToken,
}

impl Fixture {
    pub async fn start(tag: &str) -> Fixture {
        Fixture::with(tag, FixtureOptions::default(), |_| {}).await
    }

    pub async fn with(
        tag: &str,
        options: FixtureOptions,
        adjust: impl FnOnce(&mut ServerConfig) + Send + 'static,
    ) -> Fixture {
        let temp = TempDir::new(tag);
        let root = CancellationToken::new();
        let authority = temp.path().join("authority");
        let host = fixture::host(&root, &authority, options).await.unwrap();
        let scope = UserScope::at(&temp.path().join("scope")).unwrap();
        let mut config = DaemonConfig::new(scope, host, build());
        config.server = Box::new(adjust);
        let daemon = Daemon::start(config).await.unwrap();
        let address = daemon.scope().address().to_path_buf();
        let token = daemon.metadata().token.clone();
        Fixture {
            temp,
            daemon: Some(daemon),
            root,
            address,
            token,
        }
    }

    /// A daemon over the run host `host` builds from the root token and the authority
    /// directory (for tests that need their own definitions or engine).
    pub async fn with_host(
        tag: &str,
        host: impl FnOnce(&CancellationToken, &Path) -> agent_daemon::RunHost,
        adjust: impl FnOnce(&mut ServerConfig) + Send + 'static,
    ) -> Fixture {
        let temp = TempDir::new(tag);
        let root = CancellationToken::new();
        let host = host(&root, &temp.path().join("authority"));
        let scope = UserScope::at(&temp.path().join("scope")).unwrap();
        let mut config = DaemonConfig::new(scope, host, build());
        config.server = Box::new(adjust);
        let daemon = Daemon::start(config).await.unwrap();
        let address = daemon.scope().address().to_path_buf();
        let token = daemon.metadata().token.clone();
        Fixture {
            temp,
            daemon: Some(daemon),
            root,
            address,
            token,
        }
    }

    pub fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().unwrap()
    }

    pub async fn client(&self) -> Client {
        connect(&self.address, Some(self.token.authorization_value())).await
    }

    pub async fn shutdown(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            bounded(daemon.shutdown(Duration::from_secs(5)))
                .await
                .unwrap();
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.root.cancel();
    }
}

pub type Auth =
    Box<dyn FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Send + Sync>;
pub type Client = EngineServiceClient<InterceptedService<Channel, Auth>>;

pub async fn channel(address: &Path) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("unix://{}", address.display()))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// A client that sends `authorization` (or nothing).
pub async fn connect(address: &Path, authorization: Option<String>) -> Client {
    let channel = channel(address).await;
    let auth: Auth = Box::new(move |mut request: tonic::Request<()>| {
        if let Some(value) = &authorization {
            request
                .metadata_mut()
                .insert("authorization", value.parse().unwrap());
        }
        Ok(request)
    });
    EngineServiceClient::with_interceptor(channel, auth)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

pub fn requested_limits() -> Limits {
    Limits {
        max_message_bytes: 64 << 20,
        max_collection_items: 4096,
        max_replay_events: 4096,
        max_replay_bytes: 64 << 20,
        max_concurrent_streams: 256,
        max_active_runs: 4096,
    }
}

/// A valid Initialize request: with an attempt id, exactly 1.3 (which requires one);
/// without, 1.0-1.2 (a range may not cross the 1.2/1.3 boundary).
pub fn initialize(attempt: Option<[u8; 16]>, claim: Option<(&str, u64)>) -> pb::InitializeRequest {
    let minimum = if attempt.is_some() { 3 } else { 0 };
    let maximum = if attempt.is_some() { 3 } else { 2 };
    pb::InitializeRequest {
        protocol: Some(ProtocolRange {
            minimum: Some(version(1, minimum, 0)),
            maximum: Some(version(1, maximum, 0)),
        }),
        client: Some(build()),
        supported_capabilities: Some(CapabilitySet::default()),
        required_capabilities: Some(CapabilitySet::default()),
        requested_limits: Some(requested_limits()),
        reconnect_claim: claim.map(|(id, epoch)| pb::ReconnectClaim {
            client_id: id.to_owned(),
            expected_ownership_epoch: epoch,
        }),
        initialization_attempt_id: attempt.map(|a| a.to_vec()).unwrap_or_default(),
    }
}

pub fn code(status: Option<&agent_protocol::pb::common::v1::Status>) -> ErrorCode {
    ErrorCode::try_from(status.expect("a status").code).unwrap()
}

/// Initializes a fresh session: (client id, epoch).
pub async fn session(client: &mut Client) -> (String, u64) {
    let response = bounded(client.initialize(initialize(None, None)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code(response.status.as_ref()),
        ErrorCode::Ok,
        "{:?}",
        response.status
    );
    (response.client_id, response.ownership_epoch)
}

pub fn text_message(parts: &[&str]) -> pb::Message {
    pb::Message {
        id: "m1".into(),
        role: pb::MessageRole::User as i32,
        parts: parts
            .iter()
            .map(|t| pb::ContentPart {
                value: Some(pb::content_part::Value::Text((*t).to_owned())),
            })
            .collect(),
    }
}

pub fn start_request(session: &(String, u64), op: &str, definition: &str) -> pb::StartRunRequest {
    pb::StartRunRequest {
        client_id: session.0.clone(),
        ownership_epoch: session.1,
        client_operation_id: op.to_owned(),
        definition: Some(pb::AgentDefinitionRef {
            id: definition.to_owned(),
            revision: fixture::REVISION.to_owned(),
        }),
        input: Some(text_message(&["hello"])),
    }
}

/// Starts a run of `definition`: its run id.
pub async fn start(
    client: &mut Client,
    session: &(String, u64),
    op: &str,
    definition: &str,
) -> String {
    let response = bounded(client.start_run(start_request(session, op, definition)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code(response.status.as_ref()),
        ErrorCode::Ok,
        "{:?}",
        response.status
    );
    assert_eq!(response.initial_sequence, 1);
    response.run_id
}

pub fn stream_request(
    session: &(String, u64),
    run_id: &str,
    after: u64,
    tail: bool,
) -> pb::StreamEventsRequest {
    pb::StreamEventsRequest {
        client_id: session.0.clone(),
        ownership_epoch: session.1,
        run_id: run_id.to_owned(),
        after_sequence: after,
        replay_limit: 256,
        tail,
    }
}

/// Streams a run's events from the start, following the tail until it ends: the events
/// (checked gap-free from 1) and how many were terminal.
pub async fn collect_run(
    client: &mut Client,
    session: &(String, u64),
    run_id: &str,
) -> (Vec<pb::RunEvent>, usize) {
    collect_run_with(client, session, run_id, false).await
}

/// [`collect_run`] on a session that enabled `agent-kit.rich-events/v1` when `rich`.
pub async fn collect_run_with(
    client: &mut Client,
    session: &(String, u64),
    run_id: &str,
    rich: bool,
) -> (Vec<pb::RunEvent>, usize) {
    let mut events: Vec<pb::RunEvent> = Vec::new();
    let mut after = 0;
    loop {
        let mut stream =
            bounded(client.stream_events(stream_request(session, run_id, after, true)))
                .await
                .unwrap()
                .into_inner();
        let mut more = false;
        while let Some(frame) = bounded(stream.message()).await.unwrap() {
            match frame.payload.unwrap() {
                pb::stream_events_response::Payload::Event(event) => {
                    assert_eq!(event.sequence, after + 1, "gap-free");
                    // Every payload has its wire shape (the original client's rules).
                    let kind = pb::EventKind::try_from(event.kind).unwrap();
                    let decoded = if rich {
                        agent_protocol::event_payload::decode_event_payload_rich(
                            kind,
                            &event.payload_json,
                        )
                        .map(|_| ())
                    } else {
                        agent_protocol::event_payload::decode_event_payload(
                            kind,
                            &event.payload_json,
                        )
                        .map(|_| ())
                    };
                    if let Err(error) = decoded {
                        panic!(
                            "{kind:?} {}: {error}",
                            String::from_utf8_lossy(&event.payload_json)
                        );
                    }
                    after = event.sequence;
                    events.push(event);
                }
                pb::stream_events_response::Payload::Control(control) => {
                    assert_eq!(code(control.status.as_ref()), ErrorCode::Ok, "{control:?}");
                    more = control.has_more;
                }
            }
        }
        if !more {
            break;
        }
    }
    let terminals = events.iter().filter(|e| is_run_terminal(e)).count();
    (events, terminals)
}

/// Whether `event` ends the run (the wire `terminal` flag marks every scope's end).
pub fn is_run_terminal(event: &pb::RunEvent) -> bool {
    [
        pb::EventKind::RunCompleted as i32,
        pb::EventKind::RunFailed as i32,
        pb::EventKind::RunCancelled as i32,
    ]
    .contains(&event.kind)
}

/// A fixture daemon and the pending router its runs ask through, so a test can open an
/// interaction in a run's scope as the run's kernel would.
pub async fn with_router(
    tag: &str,
) -> (
    Fixture,
    std::sync::Arc<agent_daemon::pending::PendingRouter>,
) {
    let slot = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen = slot.clone();
    let definitions = fixture::definitions().await.unwrap();
    let fixture = Fixture::with_host(
        tag,
        move |root, authority| {
            let engine = move |pending: std::sync::Arc<agent_daemon::pending::PendingRouter>| {
                *seen.lock().unwrap() = Some(pending.clone());
                fixture::engine(pending)
            };
            fixture::run_host(
                root,
                authority,
                FixtureOptions::default(),
                definitions,
                engine,
            )
            .unwrap()
        },
        |_| {},
    )
    .await;
    let router = slot
        .lock()
        .unwrap()
        .take()
        .expect("the engine saw the router");
    (fixture, router)
}

/// Opens interaction `id` in `run`'s scope and waits (bounded) until `client` sees it
/// pending; the handle resolves with the answer.
pub async fn ask(
    router: &std::sync::Arc<agent_daemon::pending::PendingRouter>,
    client: &str,
    run: &str,
    id: &str,
) -> tokio::task::JoinHandle<
    Result<agent_core::interaction::InteractionResponse, agent_core::interaction::InteractionError>,
> {
    use agent_core::interaction::{Broker as _, InteractionRequest, Scope};
    let scope = Scope::new(run).unwrap();
    let request = InteractionRequest::new(
        id,
        "confirm",
        "May I?",
        serde_json::json!({"type": "boolean"}),
    )
    .unwrap();
    let asking = router.clone();
    let handle = tokio::spawn(async move {
        asking
            .request(&scope, &request, &CancellationToken::new())
            .await
    });
    bounded(async {
        while router.snapshot(client).pending().is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    handle
}
