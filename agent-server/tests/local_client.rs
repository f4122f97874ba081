//! The local client and the managed connector (docs/client.md, "The local client" and
//! "Attach or start") against a real fixture daemon on a Unix socket in a temp dir: the
//! client tests that need the endpoint store or
//! the real server.

mod support;

use std::sync::Arc;
use std::time::Duration;

use agent_client as c;
use agent_client::{Connector as _, EventStream as _, Session as _};
use agent_client_grpc::local::{
    ExplicitDiscovery, ExplicitError, IDENTITY_MISMATCH_MESSAGE, LocalConnector, LocalDiscovery,
    LocalError, LocalStartupLock,
};
use agent_client_grpc::managed::{
    Candidate, Discovery as _, DiscoveryError, JoinError, ManagedConfig, ManagedConnector,
    ManagedError, Starter,
};
use agent_client_grpc::new_attempt_id;
use agent_endpoint::store::METADATA_FILE;
use agent_endpoint::{Metadata, Store, StoreError};
use agent_server::fixture::{PENDING_DEFINITION_ID, TEXT_DEFINITION_ID, TEXT_REPLY};
use support::{Fixture, TempDir, bounded};

fn request(claim: Option<c::ReconnectClaim>) -> c::InitializeRequest {
    let v = |minor| c::ProtocolVersion::new(1, minor, 0).unwrap();
    c::InitializeRequest::with_attempt(
        c::ProtocolRange::new(v(0), v(3)).unwrap(),
        c::Build::new("local-client-test", "0.1.0", "test", "rustc").unwrap(),
        vec![
            agent_protocol::limits::CAPABILITY_SNAPSHOT_AUTHORITY.to_owned(),
            agent_protocol::limits::CAPABILITY_SNAPSHOTS.to_owned(),
        ],
        vec![],
        c::Limits::new(
            agent_server::server::DEFAULT_MESSAGE_BYTES,
            agent_server::server::DEFAULT_COLLECTION_ITEMS,
            256,
            8 << 20,
            8,
            8,
        )
        .unwrap(),
        claim,
        new_attempt_id().unwrap(),
    )
    .unwrap()
}

fn op(n: &str) -> c::OperationId {
    c::OperationId::new(n).unwrap()
}

fn definition(session: &impl c::Session, id: &str) -> c::DefinitionRef {
    session
        .connection()
        .catalog()
        .definitions()
        .iter()
        .find(|d| d.reference().id() == id)
        .unwrap()
        .reference()
        .clone()
}

async fn start(session: &impl c::Session, id: &str, operation: &str) -> c::RunRef {
    let started = session
        .start(c::StartRequest {
            operation: op(operation),
            definition: definition(session, id),
            input: c::Input::new(&format!("m-{operation}"), "hello").unwrap(),
        })
        .await
        .unwrap();
    started.run().clone()
}

fn tail(session: &impl c::Session) -> c::EventStreamOptions {
    let limits = *session.connection().limits();
    c::EventStreamOptions::new(limits.replay_events(), true, &limits).unwrap()
}

/// Reads events until the run's terminal one (reopening after a page that did not tail).
async fn until_terminal(session: &impl c::Session, run: &c::RunRef) -> Vec<c::Event> {
    let mut events: Vec<c::Event> = Vec::new();
    loop {
        let after = events.last().map_or(0, c::Event::sequence);
        let mut stream = session
            .events(c::Cursor::new(run.clone(), after), tail(session))
            .await
            .unwrap();
        while let Some(frame) = bounded(stream.next()).await.unwrap() {
            if let c::EventFrame::Event(event) = frame {
                let terminal = run_terminal(&event);
                events.push(event);
                if terminal {
                    return events;
                }
            }
        }
    }
}

fn run_terminal(event: &c::Event) -> bool {
    matches!(
        event.kind(),
        c::EventKind::RunCompleted | c::EventKind::RunFailed | c::EventKind::RunCancelled
    )
}

fn store_of(fixture: &Fixture) -> Store {
    Store::open(fixture.daemon().scope().dir()).unwrap()
}

/// TestConnectorAcceptanceAgainstDaemonGRPCServer: the adapter negotiates with the real
/// server, starts both fixture definitions, streams a complete run gap-free with one
/// terminal, and cancels the pending one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_acceptance_against_the_daemon_grpc_server() {
    let mut fixture = Fixture::start("accept").await;
    let connector = LocalConnector::new(fixture.daemon().metadata().clone()).unwrap();
    let session = bounded(connector.initialize(request(None))).await.unwrap();
    assert_eq!(session.connection().epoch(), 1);
    let health = bounded(session.health()).await.unwrap();
    assert_eq!(health.state(), c::HealthState::Ready);

    let run = start(&session, TEXT_DEFINITION_ID, "text-1").await;
    let events = until_terminal(&session, &run).await;
    let sequences: Vec<u64> = events.iter().map(c::Event::sequence).collect();
    assert_eq!(sequences, (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(events.iter().filter(|e| run_terminal(e)).count(), 1);
    assert_eq!(events.last().unwrap().kind(), c::EventKind::RunCompleted);
    let text: String = events
        .iter()
        .filter_map(|e| match e.detail() {
            c::EventDetail::ModelDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, TEXT_REPLY);

    let pending = start(&session, PENDING_DEFINITION_ID, "pending-1").await;
    let cancelled = bounded(session.cancel(op("cancel-1"), pending.clone(), None))
        .await
        .unwrap();
    assert!(
        matches!(cancelled, c::CancelResult::Requested),
        "{cancelled:?}"
    );
    let events = until_terminal(&session, &pending).await;
    assert_eq!(events.last().unwrap().kind(), c::EventKind::RunCancelled);
    session.close();
    fixture.shutdown().await;
}

/// TestInitializeRejectsNilSessionIdentityMismatchAndLateCancellation: a daemon whose
/// advertised build or protocol differs from the metadata closes the session and the
/// connector; a matching patch-level protocol is accepted; a dropped Initialize leaves the
/// connector usable (the next fresh one is accepted). Rust has no nil session to reject.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_rejects_identity_mismatch_and_closes_the_connector() {
    let mut fixture = Fixture::start("identity").await;
    let published = fixture.daemon().metadata().clone();

    let mut other_build = published.clone();
    other_build.server_version = "9.9.9".into();
    let connector = LocalConnector::new(other_build).unwrap();
    let refused = bounded(connector.initialize(request(None)))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, c::Error::Protocol(m) if m == IDENTITY_MISMATCH_MESSAGE),
        "{refused:?}"
    );
    assert!(connector.is_closed());
    assert!(matches!(
        bounded(connector.initialize(request(None))).await,
        Err(c::Error::Closed)
    ));

    // The server selects 1.3.0: a published 1.2 is older than what it speaks.
    let mut older = published.clone();
    older.protocol = (1, 2, 0);
    let connector = LocalConnector::new(older).unwrap();
    assert!(bounded(connector.initialize(request(None))).await.is_err());
    assert!(connector.is_closed());

    // Same minor, a higher published patch: accepted; a higher published minor: accepted.
    for protocol in [(1, 3, 7), (1, 4, 0)] {
        let mut newer = published.clone();
        newer.protocol = protocol;
        let connector = LocalConnector::new(newer).unwrap();
        let session = bounded(connector.initialize(request(None))).await.unwrap();
        session.close();
    }
    // Another major: refused.
    let mut major = published.clone();
    major.protocol = (2, 0, 0);
    let connector = LocalConnector::new(major).unwrap();
    assert!(bounded(connector.initialize(request(None))).await.is_err());

    // A dropped Initialize: the connector stays usable.
    let connector = LocalConnector::new(published).unwrap();
    // Cancelled at its first await point, or (when the daemon answered within one poll)
    // finished and its session dropped, which closes it: either way nothing stays open.
    let _ = tokio::time::timeout(Duration::ZERO, connector.initialize(request(None))).await;
    let session = bounded(connector.initialize(request(None))).await.unwrap();
    assert!(!connector.is_closed());
    session.close();
    fixture.shutdown().await;
}

/// TestExplicitDiscoveryTreatsStaleAndMalformedMetadataAsHardAttachFailures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_discovery_treats_stale_and_malformed_metadata_as_hard_failures() {
    let mut fixture = Fixture::start("explicit").await;
    let store = store_of(&fixture);
    let address = fixture.daemon().metadata().address.clone();
    let published = fixture.daemon().metadata().encode().unwrap();

    let explicit = ExplicitDiscovery::new(store.clone(), address.clone());
    let found = bounded(explicit.find()).await.unwrap();
    let session = bounded(found.initialize(request(None))).await.unwrap();
    session.close();
    let again = bounded(explicit.find()).await.unwrap();
    assert!(
        again.shares_state_with(&found),
        "one connector per exact record"
    );

    let elsewhere = ExplicitDiscovery::new(store.clone(), format!("{address}.other"));
    assert_eq!(
        bounded(elsewhere.find()).await.unwrap_err(),
        ExplicitError::Local(LocalError::ExplicitEndpointMismatch)
    );
    assert!(matches!(
        bounded(elsewhere.discover()).await,
        Err(DiscoveryError::Failed)
    ));

    // Stale: the daemon is gone but its record is back on disk.
    let dir = fixture.daemon().scope().dir().to_path_buf();
    fixture.shutdown().await;
    std::fs::write(dir.join(METADATA_FILE), &published).unwrap();
    assert_eq!(
        bounded(explicit.find()).await.unwrap_err(),
        ExplicitError::Store(StoreError::NotFound)
    );
    assert!(
        matches!(
            bounded(explicit.discover()).await,
            Err(DiscoveryError::Failed)
        ),
        "absence is never the startup sentinel for an explicit endpoint"
    );

    // Malformed.
    std::fs::write(dir.join(METADATA_FILE), b"{\"schema\":1}\n").unwrap();
    assert!(matches!(
        bounded(explicit.find()).await.unwrap_err(),
        ExplicitError::Store(StoreError::Metadata(_))
    ));
    assert!(matches!(
        bounded(explicit.discover()).await,
        Err(DiscoveryError::Failed)
    ));
}

/// TestDiscoveryMapsOnlyExactEndpointAbsence: absence is the sentinel (and drops the
/// cache), malformed metadata is a hard failure, a live record is one cached connector,
/// replaced when the record changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_maps_only_exact_endpoint_absence() {
    let temp = TempDir::new("disc-empty");
    let scope = agent_endpoint::UserScope::at(&temp.path().join("scope")).unwrap();
    let empty = LocalDiscovery::new(Store::open(scope.dir()).unwrap());
    assert!(matches!(
        bounded(empty.discover()).await,
        Err(DiscoveryError::EndpointNotFound)
    ));
    std::fs::write(scope.dir().join(METADATA_FILE), b"not json\n").unwrap();
    assert!(matches!(
        bounded(empty.discover()).await,
        Err(DiscoveryError::Failed)
    ));

    let mut fixture = Fixture::start("disc-live").await;
    let discovery = LocalDiscovery::new(store_of(&fixture));
    let first = bounded(discovery.discover()).await.unwrap();
    let second = bounded(discovery.discover()).await.unwrap();
    assert!(first.shares_state_with(&second));
    fixture.shutdown().await;
    assert!(matches!(
        bounded(discovery.discover()).await,
        Err(DiscoveryError::EndpointNotFound)
    ));
    // A new daemon in the same scope publishes a new record: a new connector.
    let root = tokio_util::sync::CancellationToken::new();
    let host = agent_server::fixture::host(
        &root,
        &fixture.temp.path().join("authority"),
        Default::default(),
    )
    .await
    .unwrap();
    let config = agent_server::DaemonConfig::new(fixture_scope(&fixture), host, support::build());
    let daemon = agent_server::Daemon::start(config).await.unwrap();
    let third = bounded(discovery.discover()).await.unwrap();
    assert!(!third.shares_state_with(&first));
    assert_eq!(third.metadata(), daemon.metadata());
    daemon.shutdown(Duration::from_secs(5)).await.unwrap();
    root.cancel();
}

fn fixture_scope(fixture: &Fixture) -> agent_endpoint::UserScope {
    agent_endpoint::UserScope::at(&fixture.temp.path().join("scope")).unwrap()
}

/// A starter that must never run: a daemon is already published.
struct NeverStart;
struct NoCandidate;

impl Candidate for NoCandidate {
    fn has_exited(&self) -> bool {
        true
    }
    fn begin_shutdown(&self) {}
    async fn wait(&self) -> Result<(), JoinError> {
        Ok(())
    }
}

impl Starter for NeverStart {
    type Candidate = NoCandidate;
    async fn start(&self) -> Result<NoCandidate, ManagedError> {
        panic!("a daemon answers; nothing may be started")
    }
}

/// TestManagedReconnectReusesLocalAdapterAndClosesOldStreamOverIPC: the managed
/// connector attaches through discovery (never starting), and a reconnect through it
/// reuses the cached local adapter, so the prior session's open stream is fenced
/// (it ends with `Closed`) before the new epoch is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_reconnect_reuses_the_local_adapter_and_closes_the_old_stream() {
    let mut fixture = Fixture::start("managed").await;
    let store = store_of(&fixture);
    let managed = ManagedConnector::new(
        LocalDiscovery::new(store.clone()),
        NeverStart,
        LocalStartupLock::new(store),
        ManagedConfig::new(Duration::from_secs(30), Duration::from_millis(20), None).unwrap(),
    );
    let first = bounded(managed.initialize_managed(request(None)))
        .await
        .unwrap();
    let run = start(&first, PENDING_DEFINITION_ID, "managed-1").await;
    let mut old = bounded(first.events(c::Cursor::new(run.clone(), 0), tail(&first)))
        .await
        .unwrap();
    // The stream is live: its first event arrives.
    assert!(matches!(
        bounded(old.next()).await,
        Ok(Some(c::EventFrame::Event(_)))
    ));
    let claim = first.connection().reconnect_claim().unwrap();
    let second = bounded(managed.initialize_managed(request(Some(claim))))
        .await
        .unwrap();
    assert_eq!(second.connection().epoch(), first.connection().epoch() + 1);
    let ended = loop {
        match bounded(old.next()).await {
            Ok(Some(_)) => continue,
            other => break other,
        }
    };
    assert!(matches!(ended, Err(c::Error::Closed)), "{ended:?}");
    // The new owner can cancel and observe the run's end.
    bounded(second.cancel(op("managed-cancel"), run.clone(), None))
        .await
        .unwrap();
    let events = until_terminal(&second, &run).await;
    assert_eq!(events.last().unwrap().kind(), c::EventKind::RunCancelled);
    second.close();
    bounded(managed.shutdown()).await.unwrap();
    fixture.shutdown().await;
}

/// TestReconnectClosesAndJoinsPriorStream: over one local connector, a reconnect closes
/// the prior session's event stream and joins it; the old session then answers `Closed`,
/// and the daemon refuses its stale epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_closes_and_joins_the_prior_stream() {
    let mut fixture = Fixture::start("rejoin").await;
    let connector = LocalConnector::new(fixture.daemon().metadata().clone()).unwrap();
    let first = Arc::new(bounded(connector.initialize(request(None))).await.unwrap());
    let run = start(&*first, PENDING_DEFINITION_ID, "rejoin-1").await;
    let mut stream = bounded(first.events(c::Cursor::new(run.clone(), 0), tail(&*first)))
        .await
        .unwrap();
    // The stream is live (its first event arrived), so the reconnect fences a live stream.
    assert!(matches!(
        bounded(stream.next()).await,
        Ok(Some(c::EventFrame::Event(_)))
    ));
    let reader = tokio::spawn(async move {
        loop {
            match stream.next().await {
                Ok(Some(_)) => continue,
                other => return other.map(|_| ()),
            }
        }
    });
    let second_claim = first.connection().reconnect_claim().unwrap();
    let second = bounded(connector.initialize(request(Some(second_claim))))
        .await
        .unwrap();
    let ended = bounded(reader).await.unwrap();
    assert!(matches!(ended, Err(c::Error::Closed)), "{ended:?}");
    assert!(matches!(
        bounded(first.health()).await,
        Err(c::Error::Closed)
    ));
    let events = {
        bounded(second.cancel(op("rejoin-cancel"), run.clone(), None))
            .await
            .unwrap();
        until_terminal(&second, &run).await
    };
    assert_eq!(events.iter().filter(|e| run_terminal(e)).count(), 1);
    second.close();
    fixture.shutdown().await;
}

#[allow(dead_code)]
fn metadata_is_redacted(m: &Metadata) -> String {
    format!("{m:?}")
}

/// Two clients of one daemon are isolated: neither sees (streams), cancels, suspends,
/// exports nor answers the other's run, and an unknown run looks the same as a foreign one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_of_one_daemon_are_isolated() {
    let mut fixture = Fixture::start("isolate").await;
    let connector = LocalConnector::new(fixture.daemon().metadata().clone()).unwrap();
    let alice = bounded(connector.initialize(request(None))).await.unwrap();
    let bob = bounded(connector.initialize(request(None))).await.unwrap();
    assert_ne!(alice.connection().client_id(), bob.connection().client_id());
    let run = start(&alice, PENDING_DEFINITION_ID, "alice-1").await;

    let foreign = bounded(bob.events(c::Cursor::new(run.clone(), 0), tail(&bob))).await;
    let unknown = c::RunRef::new("run-that-does-not-exist").unwrap();
    let missing = bounded(bob.events(c::Cursor::new(unknown.clone(), 0), tail(&bob))).await;
    let (Err(foreign), Err(missing)) = (foreign, missing) else {
        panic!("bob streamed a run that is not his");
    };
    assert_eq!(
        foreign.status_code(),
        missing.status_code(),
        "{foreign:?} / {missing:?}"
    );
    assert!(
        bounded(bob.cancel(op("bob-cancel"), run.clone(), None))
            .await
            .is_err()
    );
    assert!(
        bounded(bob.suspend(op("bob-suspend"), run.clone()))
            .await
            .is_err()
    );
    assert!(bounded(bob.export(run.clone())).await.is_err());
    let yes = c::StructuredValue::parse(b"true".to_vec()).unwrap();
    let interaction = c::InteractionId::new("approve-x").unwrap();
    assert!(
        bounded(bob.respond(op("bob-respond"), run.clone(), interaction, yes))
            .await
            .is_err()
    );
    // Alice still owns a live run and ends it.
    bounded(alice.cancel(op("alice-cancel"), run.clone(), None))
        .await
        .unwrap();
    let events = until_terminal(&alice, &run).await;
    assert_eq!(events.last().unwrap().kind(), c::EventKind::RunCancelled);
    alice.close();
    bob.close();
    fixture.shutdown().await;
}

/// Through the client: a respond repeated with its operation id is `Duplicate`, the first
/// is `Accepted` (docs/client.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_respond_is_a_duplicate_through_the_client() {
    let (mut fixture, router) = support::with_router("respond-client").await;
    let connector = LocalConnector::new(fixture.daemon().metadata().clone()).unwrap();
    let session = bounded(connector.initialize(request(None))).await.unwrap();
    let run = start(&session, PENDING_DEFINITION_ID, "run-1").await;
    let client = session.connection().client_id().to_owned();
    let asked = support::ask(&router, &client, run.as_str(), "approve-1").await;
    let respond = || {
        bounded(session.respond(
            op("answer-1"),
            run.clone(),
            c::InteractionId::new("approve-1").unwrap(),
            c::StructuredValue::parse(b"true".to_vec()).unwrap(),
        ))
    };
    assert_eq!(respond().await.unwrap(), c::RespondResult::Accepted);
    assert_eq!(
        bounded(asked).await.unwrap().unwrap().value(),
        &serde_json::json!(true)
    );
    assert_eq!(respond().await.unwrap(), c::RespondResult::Duplicate);
    bounded(session.cancel(op("cancel-1"), run.clone(), None))
        .await
        .unwrap();
    session.close();
    fixture.shutdown().await;
}

/// The startup lock over the store: exclusive while held (a second acquire gives up at its
/// timeout with `StartupLock`), free again after release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_startup_lock_is_exclusive_until_released() {
    use agent_client_grpc::managed::{StartupLease as _, StartupLock as _};
    let temp = TempDir::new("startup-lock");
    let scope = agent_endpoint::UserScope::at(&temp.path().join("scope")).unwrap();
    let store = Store::open(scope.dir()).unwrap();
    let lock = LocalStartupLock::new(store.clone());
    let held = bounded(lock.acquire()).await.unwrap();
    let other = LocalStartupLock::new(store).with_timeout(Duration::from_millis(50));
    assert_eq!(
        bounded(other.acquire()).await.unwrap_err(),
        ManagedError::StartupLock
    );
    bounded(held.release()).await.unwrap();
    let again = bounded(other.acquire()).await.unwrap();
    bounded(again.release()).await.unwrap();
}
