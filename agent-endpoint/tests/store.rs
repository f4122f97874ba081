//! The endpoint store's lock protocol (docs/transport.md, "The scope and the endpoint files").

mod support;

use std::time::{Duration, Instant};

use agent_endpoint::store::{DAEMON_LOCK, METADATA_FILE, METADATA_LOCK};
use agent_endpoint::{EndpointToken, Metadata, MetadataError, Store, StoreError};
use support::TempDir;

fn metadata(dir: &std::path::Path, pid: u32) -> Metadata {
    Metadata {
        transport: "unix-socket".into(),
        address: dir.join("agent.sock").to_str().unwrap().into(),
        token: EndpointToken::generate().unwrap(),
        server_component: "agent-server".into(),
        server_version: "0.1.0".into(),
        server_commit: "unknown".into(),
        server_toolchain: "rustc".into(),
        protocol: (1, 3, 0),
        process_id: pid,
        started_unix_nano: 1,
        instance_id: Metadata::new_instance_id().unwrap(),
    }
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

fn lock(dir: &std::path::Path, name: &str) -> std::fs::File {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(name))
        .unwrap();
    file.try_lock().unwrap();
    file
}

#[test]
fn discovery_distinguishes_stale_and_hard_failures() {
    let temp = TempDir::new("sdisc");
    let store = Store::open(temp.path()).unwrap();
    assert_eq!(store.discover(soon()).unwrap_err(), StoreError::NotFound);
    // A stale canonical record (no liveness holder) is removed.
    let m = metadata(temp.path(), 7);
    std::fs::write(temp.path().join(METADATA_FILE), m.encode().unwrap()).unwrap();
    assert_eq!(store.discover(soon()).unwrap_err(), StoreError::NotFound);
    assert!(!temp.path().join(METADATA_FILE).exists());
    // A live record (liveness held) is returned.
    std::fs::write(temp.path().join(METADATA_FILE), m.encode().unwrap()).unwrap();
    let held = lock(temp.path(), DAEMON_LOCK);
    assert_eq!(store.discover(soon()).unwrap(), m);
    drop(held);
    // A malformed record is a hard error and is left alone.
    std::fs::write(temp.path().join(METADATA_FILE), b"{}\n").unwrap();
    assert_eq!(
        store.discover(soon()).unwrap_err(),
        StoreError::Metadata(MetadataError::Malformed)
    );
    assert!(temp.path().join(METADATA_FILE).exists());
}

#[test]
fn active_instance_and_exact_withdrawal() {
    let temp = TempDir::new("sact");
    let store = Store::open(temp.path()).unwrap();
    let first = metadata(temp.path(), 1);
    let mut publication = store.publish(&first, soon()).unwrap();
    assert_eq!(store.discover(soon()).unwrap(), first);
    // A second publisher while the first is active is refused and changes nothing.
    let second = metadata(temp.path(), 2);
    assert_eq!(
        store.publish(&second, soon()).unwrap_err(),
        StoreError::Active
    );
    assert_eq!(store.discover(soon()).unwrap(), first);
    publication.close(soon()).unwrap();
    assert!(!publication.is_active());
    assert_eq!(store.discover(soon()).unwrap_err(), StoreError::NotFound);
    // Withdrawal removes only our own bytes.
    let mut publication = store.publish(&second, soon()).unwrap();
    let other = metadata(temp.path(), 3);
    std::fs::write(temp.path().join(METADATA_FILE), other.encode().unwrap()).unwrap();
    publication.close(soon()).unwrap();
    assert_eq!(
        std::fs::read(temp.path().join(METADATA_FILE)).unwrap(),
        other.encode().unwrap()
    );
    // A malformed existing record blocks publishing.
    std::fs::write(temp.path().join(METADATA_FILE), b"garbage\n").unwrap();
    assert!(matches!(
        store.publish(&first, soon()),
        Err(StoreError::Metadata(_))
    ));
}

#[test]
fn single_liveness_lock_cannot_make_old_metadata_appear_active() {
    // An old record survives a crash; a new daemon publishes over it, so discovery returns
    // only the new record even though liveness is held.
    let temp = TempDir::new("sold");
    let store = Store::open(temp.path()).unwrap();
    let old = metadata(temp.path(), 1);
    std::fs::write(temp.path().join(METADATA_FILE), old.encode().unwrap()).unwrap();
    let new = metadata(temp.path(), 2);
    let mut publication = store.publish(&new, soon()).unwrap();
    assert_eq!(store.discover(soon()).unwrap(), new);
    publication.close(soon()).unwrap();
}

#[test]
fn publication_close_while_metadata_busy_leaves_it_active_and_retryable() {
    let temp = TempDir::new("sbusy");
    let store = Store::open(temp.path())
        .unwrap()
        .with_poll_interval(Duration::from_millis(1));
    let m = metadata(temp.path(), 1);
    let mut publication = store.publish(&m, soon()).unwrap();
    let busy = lock(temp.path(), METADATA_LOCK);
    assert_eq!(
        publication
            .close(Instant::now() + Duration::from_millis(20))
            .unwrap_err(),
        StoreError::Timeout
    );
    assert!(publication.is_active());
    drop(busy);
    assert_eq!(store.discover(soon()).unwrap(), m);
    publication.close(soon()).unwrap();
    assert_eq!(store.discover(soon()).unwrap_err(), StoreError::NotFound);
}

#[test]
fn startup_lease_serializes_and_release_is_idempotent() {
    let temp = TempDir::new("sstart");
    let store = Store::open(temp.path())
        .unwrap()
        .with_poll_interval(Duration::from_millis(1));
    let mut lease = store.acquire_startup(soon()).unwrap();
    assert_eq!(
        store
            .acquire_startup(Instant::now() + Duration::from_millis(10))
            .unwrap_err(),
        StoreError::Timeout
    );
    lease.release();
    lease.release();
    let mut again = store.acquire_startup(soon()).unwrap();
    again.release();
    store.close();
    assert_eq!(store.discover(soon()).unwrap_err(), StoreError::Closed);
}

#[test]
fn an_unsafe_directory_is_refused() {
    let temp = TempDir::new("sunsafe");
    let dir = temp.child("wide", 0o755);
    assert_eq!(Store::open(&dir).unwrap_err(), StoreError::Unsafe);
}
