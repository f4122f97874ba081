//! Cost of the socket transport, side by side with the in-process run host in one run.
//!
//! - `start_to_first_event/socket`: `StartRun` of the fixture's one-turn text run over the
//!   Unix socket, then `StreamEvents` (replay limit 1, tailing) until event 1 arrives;
//! - `start_to_first_event/in_process`: the same through `RunHost::start` and
//!   `RunHost::replay_events` directly;
//! - `stream/socket_1` and `stream/in_process_1`: replaying one completed run of
//!   [`DELTAS`] model deltas (about [`DELTAS`] + 7 events) to one subscriber, page by page;
//! - `stream/socket_64` and `stream/in_process_64`: the same run to 64 concurrent
//!   subscribers (throughput counts every subscriber's events).
//!
//! The run authority lives on tmpfs (`/dev/shm`) when it exists, so fsync cost does not
//! dominate the start. Run with `cargo bench -p agent-server --bench transport`; results
//! are in `docs/performance.md`.

use std::hint::black_box;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_core::agent::{AgentDefinition, Engine};
use agent_core::event::ReplayRequest;
use agent_core::model::{ModelRequest, ScriptedProvider, StreamEvent, Usage};
use agent_core::stage::{Dispatcher, StaticToolPlanSource};
use agent_daemon::RunHost;
use agent_daemon::definition::{Definition, DefinitionSet};
use agent_daemon::host::{HostLimits, StartRequest};
use agent_daemon::session::Session;
use agent_endpoint::UserScope;
use agent_protocol::negotiate::version;
use agent_protocol::pb::common::v1::{BuildIdentity, CapabilitySet, Limits, ProtocolRange};
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::pb::engine::v1::engine_service_client::EngineServiceClient;
use agent_server::fixture::{self, FixtureError, FixtureOptions};
use agent_server::{Daemon, DaemonConfig};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// Model deltas in the streamed run.
const DELTAS: usize = 4000;
/// Events per replay page.
const PAGE: u32 = 1024;
const TEXT_ID: &str = "00-bench-text";
const STREAM_ID: &str = "01-bench-stream";
const REVISION: &str = "bench-1";

static NEXT: AtomicU64 = AtomicU64::new(0);

fn temp(root: &Path, tag: &str) -> PathBuf {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = root.join(format!(
        "agent-server-bench-{}-{n}-{tag}",
        std::process::id()
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .unwrap();
    path
}

fn engine(pending: Arc<agent_daemon::pending::PendingRouter>) -> Result<Engine, FixtureError> {
    let provider = Arc::new(ScriptedProvider::new(|request: &ModelRequest| {
        let mut events = Vec::new();
        if request.model() == "bench-stream" {
            events.extend((0..DELTAS).map(|_| StreamEvent::TextDelta("x".into())));
        } else {
            events.push(StreamEvent::TextDelta("hello".into()));
        }
        events.push(StreamEvent::Completed {
            usage: Usage::new(1, 1),
        });
        events
    }));
    let plans = StaticToolPlanSource::from_dispatcher(Dispatcher::new(Default::default()).unwrap());
    Engine::builder(provider, plans)
        .broker(pending)
        .build()
        .map_err(|_| FixtureError::Engine)
}

fn definitions() -> DefinitionSet {
    DefinitionSet::new([
        Definition::new(
            TEXT_ID,
            REVISION,
            AgentDefinition::new("text", "bench-text", 1).unwrap(),
        )
        .unwrap(),
        Definition::new(
            STREAM_ID,
            REVISION,
            AgentDefinition::new("stream", "bench-stream", 1).unwrap(),
        )
        .unwrap(),
    ])
    .unwrap()
}

fn options() -> FixtureOptions {
    FixtureOptions {
        limits: HostLimits {
            replay_events: PAGE as usize,
            replay_bytes: 64 << 20,
            concurrent_streams: 128,
            terminal_runs: 1024,
            ..HostLimits::default()
        },
        sessions: 256,
        ledger: (16, 65_536),
        ..FixtureOptions::default()
    }
}

fn host(root: &CancellationToken, dir: &Path) -> RunHost {
    fixture::run_host(
        root,
        &dir.join("authority"),
        options(),
        definitions(),
        engine,
    )
    .unwrap()
}

/// Adds the bearer value to every request (a named type, so the client is `Clone`).
#[derive(Clone)]
struct Auth(tonic::metadata::AsciiMetadataValue);

impl tonic::service::Interceptor for Auth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

type Client = EngineServiceClient<InterceptedService<Channel, Auth>>;

async fn client(daemon: &Daemon) -> Client {
    let channel = tonic::transport::Endpoint::from_shared(format!(
        "unix://{}",
        daemon.scope().address().display()
    ))
    .unwrap()
    .connect()
    .await
    .unwrap();
    let auth = Auth(
        daemon
            .metadata()
            .token
            .authorization_value()
            .parse()
            .unwrap(),
    );
    EngineServiceClient::with_interceptor(channel, auth)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

async fn initialize(client: &mut Client) -> (String, u64) {
    let response = client
        .initialize(pb::InitializeRequest {
            protocol: Some(ProtocolRange {
                minimum: Some(version(1, 0, 0)),
                maximum: Some(version(1, 2, 0)),
            }),
            client: Some(BuildIdentity {
                component: "bench".into(),
                version: "1".into(),
                commit: "none".into(),
                go_version: "rustc".into(),
            }),
            supported_capabilities: Some(CapabilitySet::default()),
            required_capabilities: Some(CapabilitySet::default()),
            requested_limits: Some(Limits {
                max_message_bytes: 64 << 20,
                max_collection_items: 4096,
                max_replay_events: PAGE,
                max_replay_bytes: 64 << 20,
                max_concurrent_streams: 256,
                max_active_runs: 4096,
            }),
            reconnect_claim: None,
            initialization_attempt_id: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.status.unwrap().code, 1, "initialized");
    (response.client_id, response.ownership_epoch)
}

fn start_request(s: &(String, u64), op: String, id: &str) -> pb::StartRunRequest {
    pb::StartRunRequest {
        client_id: s.0.clone(),
        ownership_epoch: s.1,
        client_operation_id: op,
        definition: Some(pb::AgentDefinitionRef {
            id: id.into(),
            revision: REVISION.into(),
        }),
        input: Some(pb::Message {
            id: "m".into(),
            role: pb::MessageRole::User as i32,
            parts: vec![pb::ContentPart {
                value: Some(pb::content_part::Value::Text("go".into())),
            }],
        }),
    }
}

fn stream_request(
    s: &(String, u64),
    run: &str,
    after: u64,
    limit: u32,
    tail: bool,
) -> pb::StreamEventsRequest {
    pb::StreamEventsRequest {
        client_id: s.0.clone(),
        ownership_epoch: s.1,
        run_id: run.into(),
        after_sequence: after,
        replay_limit: limit,
        tail,
    }
}

/// Replays a whole completed run over the socket; returns the events seen.
async fn replay_socket(client: &mut Client, s: &(String, u64), run: &str) -> u64 {
    let mut after = 0;
    loop {
        let mut stream = client
            .stream_events(stream_request(s, run, after, PAGE, false))
            .await
            .unwrap()
            .into_inner();
        let mut more = false;
        while let Some(frame) = stream.message().await.unwrap() {
            match frame.payload.unwrap() {
                pb::stream_events_response::Payload::Event(e) => after = e.sequence,
                pb::stream_events_response::Payload::Control(c) => more = c.has_more,
            }
        }
        if !more {
            return after;
        }
    }
}

/// Replays a whole completed run in process; returns the events seen.
async fn replay_host(host: &RunHost, session: &Session, run: &str) -> u64 {
    let ctx = CancellationToken::new();
    let mut after = 0;
    loop {
        let page = host
            .replay_events(
                &ctx,
                session,
                run,
                ReplayRequest {
                    after,
                    max_events: PAGE as usize,
                    max_bytes: 64 << 20,
                    tail: false,
                },
            )
            .await
            .unwrap();
        // The socket path builds wire events; so does this, for a like-for-like cost.
        for envelope in &page.events {
            black_box(agent_server::event_to_wire(envelope));
            after = envelope.sequence();
        }
        let more = page.has_more;
        page.close();
        if !more {
            return after;
        }
    }
}

fn benches(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fast = Path::new("/dev/shm");
    let authority_root = if fast.is_dir() {
        fast.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let root = CancellationToken::new();
    let socket_dir = temp(Path::new("/tmp"), "sock");
    let daemon_dir = temp(&authority_root, "daemon");
    let local_dir = temp(&authority_root, "local");

    let (daemon, local) = runtime.block_on(async {
        let scope = UserScope::at(&socket_dir.join("scope")).unwrap();
        let build = BuildIdentity {
            component: "agent-server-bench".into(),
            version: "0.1.0".into(),
            commit: "bench".into(),
            go_version: "rustc".into(),
        };
        let mut config = DaemonConfig::new(scope, host(&root, &daemon_dir), build);
        config.server = Box::new(|c| c.maximum_sessions = 256);
        (
            Daemon::start(config).await.unwrap(),
            host(&root, &local_dir),
        )
    });
    let ops = AtomicU64::new(0);
    let op = || format!("op-{}", ops.fetch_add(1, Ordering::Relaxed));

    // Start to first event.
    let mut group = c.benchmark_group("start_to_first_event");
    let (socket_client, socket_session) = runtime.block_on(async {
        let mut client = client(&daemon).await;
        let session = initialize(&mut client).await;
        (client, session)
    });
    group.bench_function("socket", |b| {
        b.to_async(&runtime).iter(|| {
            let mut c = socket_client.clone();
            let s = &socket_session;
            let op = op();
            async move {
                let started = c
                    .start_run(start_request(s, op, TEXT_ID))
                    .await
                    .unwrap()
                    .into_inner();
                let mut stream = c
                    .stream_events(stream_request(s, &started.run_id, 0, 1, true))
                    .await
                    .unwrap()
                    .into_inner();
                let first = stream.message().await.unwrap().unwrap();
                black_box(first);
            }
        })
    });
    let local_session = local.sessions().fresh().unwrap();
    group.bench_function("in_process", |b| {
        b.to_async(&runtime).iter(|| {
            let host = &local;
            let s = &local_session;
            let op = op();
            async move {
                let ctx = CancellationToken::new();
                let (success, _) = host
                    .start(
                        &ctx,
                        s,
                        StartRequest {
                            operation_id: op,
                            definition_id: TEXT_ID.into(),
                            revision: REVISION.into(),
                            text: "go".into(),
                        },
                    )
                    .await
                    .unwrap();
                let agent_daemon::host::Success::Started { run_id, .. } = success else {
                    panic!("started");
                };
                let mut page = host
                    .replay_events(
                        &ctx,
                        s,
                        &run_id,
                        ReplayRequest {
                            after: 0,
                            max_events: 1,
                            max_bytes: 64 << 20,
                            tail: true,
                        },
                    )
                    .await
                    .unwrap();
                let first = match page.events.first() {
                    Some(e) => agent_server::event_to_wire(e),
                    None => page
                        .next()
                        .await
                        .as_ref()
                        .and_then(agent_server::event_to_wire),
                };
                black_box(first);
                page.close();
            }
        })
    });
    group.finish();

    // Streaming throughput: one long completed run, replayed to 1 and to 64 subscribers.
    let (socket_run, local_run, events) = runtime.block_on(async {
        let mut c = socket_client.clone();
        let started = c
            .start_run(start_request(&socket_session, op(), STREAM_ID))
            .await
            .unwrap()
            .into_inner();
        // Follow it to its end so it is complete before measuring.
        let mut stream = c
            .stream_events(stream_request(
                &socket_session,
                &started.run_id,
                0,
                PAGE,
                true,
            ))
            .await
            .unwrap()
            .into_inner();
        while stream.message().await.unwrap().is_some() {}
        let events = replay_socket(&mut c, &socket_session, &started.run_id).await;
        let ctx = CancellationToken::new();
        let (success, _) = local
            .start(
                &ctx,
                &local_session,
                StartRequest {
                    operation_id: op(),
                    definition_id: STREAM_ID.into(),
                    revision: REVISION.into(),
                    text: "go".into(),
                },
            )
            .await
            .unwrap();
        let agent_daemon::host::Success::Started { run_id, .. } = success else {
            panic!("started");
        };
        let mut tail = local
            .replay_events(
                &ctx,
                &local_session,
                &run_id,
                ReplayRequest {
                    after: 0,
                    max_events: PAGE as usize,
                    max_bytes: 64 << 20,
                    tail: true,
                },
            )
            .await
            .unwrap();
        while tail.next().await.is_some() {}
        tail.close();
        (started.run_id, run_id, events)
    });
    let mut group = c.benchmark_group("stream");
    group.sample_size(20);
    group.throughput(Throughput::Elements(events));
    group.bench_function("socket_1", |b| {
        b.to_async(&runtime).iter(|| {
            let mut c = socket_client.clone();
            let (s, run) = (&socket_session, &socket_run);
            async move { assert_eq!(replay_socket(&mut c, s, run).await, events) }
        })
    });
    group.bench_function("in_process_1", |b| {
        b.to_async(&runtime).iter(|| async {
            assert_eq!(
                replay_host(&local, &local_session, &local_run).await,
                events
            )
        })
    });
    group.throughput(Throughput::Elements(events * 64));
    let clients: Vec<Client> = runtime.block_on(async {
        let mut clients = Vec::new();
        for _ in 0..64 {
            clients.push(client(&daemon).await);
        }
        clients
    });
    group.bench_function("socket_64", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let began = Instant::now();
                for _ in 0..iters {
                    let mut tasks = Vec::new();
                    for c in &clients {
                        let mut c = c.clone();
                        let s = socket_session.clone();
                        let run = socket_run.clone();
                        tasks.push(tokio::spawn(async move {
                            replay_socket(&mut c, &s, &run).await
                        }));
                    }
                    for t in tasks {
                        assert_eq!(t.await.unwrap(), events);
                    }
                }
                began.elapsed()
            })
        })
    });
    let local = Arc::new(local);
    group.bench_function("in_process_64", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let began = Instant::now();
                for _ in 0..iters {
                    let mut tasks = Vec::new();
                    for _ in 0..64 {
                        let host = local.clone();
                        let s = local_session.clone();
                        let run = local_run.clone();
                        tasks.push(tokio::spawn(
                            async move { replay_host(&host, &s, &run).await },
                        ));
                    }
                    for t in tasks {
                        assert_eq!(t.await.unwrap(), events);
                    }
                }
                began.elapsed()
            })
        })
    });
    group.finish();

    runtime.block_on(async {
        daemon.shutdown(Duration::from_secs(5)).await.unwrap();
        local.shutdown().await.unwrap();
    });
    root.cancel();
    for dir in [socket_dir, daemon_dir, local_dir] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

criterion_group!(transport, benches);
criterion_main!(transport);
