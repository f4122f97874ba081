//! The run host at the engine's run-identity capacity (docs/daemon.md, "Start"), and how
//! it retries after a durable retirement, adapted: the
//! kernel records custom run ids one by one up to `MAX_RECORDED_RUN_IDS` and never forgets
//! one (see `docs/decisions.md`), so the "retries after durable retirement" half has no
//! counterpart; what is ported is the mapping to a capacity error that abandons the
//! operation, so the same operation id can run again.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use agent_authority::{Store, StoreOptions};
use agent_core::RunId;
use agent_core::agent::{IdSource, MAX_RECORDED_RUN_IDS};
use agent_daemon::host::HostLimits;
use agent_daemon::ledger::Ledger;
use agent_daemon::pending::{PendingLimits, PendingRouter};
use agent_daemon::session::SessionStore;
use agent_daemon::{HostError, RunHost, RunHostConfig};
use support::*;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Ids `custom-1`, `custom-2`, ...: not the engine's own counter, so each is recorded.
struct Custom(AtomicU64);

impl IdSource for Custom {
    fn next_id(&self, _prefix: &str) -> Arc<str> {
        format!("custom-{}", self.0.fetch_add(1, Ordering::Relaxed) + 1).into()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_capacity_abandons_so_the_same_operation_can_retry() {
    let dir = TempDir::new("identity");
    let store = Arc::new(Store::open(StoreOptions::new().directory(dir.store_dir())).unwrap());
    let root = CancellationToken::new();
    let router = PendingRouter::new(PendingLimits::default()).unwrap();
    let sessions = SessionStore::new(&root, 4).unwrap();
    let engine = engine_with_ids(
        router.clone(),
        Arc::new(Semaphore::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Some(Arc::new(Custom(AtomicU64::new(0)))),
    );
    // One below the bound: a start still gets an id, and its run records one more.
    for n in 0..MAX_RECORDED_RUN_IDS - 1 {
        engine
            .retire(&RunId::new(format!("old-{n}")).unwrap())
            .unwrap();
    }
    let host = RunHost::new(RunHostConfig {
        root,
        engine: engine.clone(),
        authority: store,
        sessions: sessions.clone(),
        ledger: Arc::new(Ledger::new(4, 64).unwrap()),
        pending: router,
        definitions: definitions(),
        limits: HostLimits::default(),
        health_sources: Vec::new(),
    })
    .unwrap();
    let session = sessions.fresh().unwrap();
    let ctx = CancellationToken::new();
    bounded(host.start(&ctx, &session, start("op-at", TEXT)))
        .await
        .expect("at the bound: started");
    // The ledger is now full (the live or retired `custom-1` is the last entry): past it.
    let full = CancellationToken::new();
    engine
        .retire(&RunId::new("old-past").unwrap())
        .expect_err("the ledger is full");
    let refused = bounded(host.start(&full, &session, start("op-past", TEXT)))
        .await
        .unwrap_err();
    let expected = HostError::Capacity {
        resource: "run identities".into(),
        limit: MAX_RECORDED_RUN_IDS as u64,
        observed: MAX_RECORDED_RUN_IDS as u64 + 1,
    };
    assert_eq!(refused, expected);
    // Abandoned, not committed: the same operation id runs again (and is refused again
    // for the same reason, not replayed as a recorded failure).
    let again = bounded(host.start(&full, &session, start("op-past", TEXT)))
        .await
        .unwrap_err();
    assert_eq!(again, expected);
    host.shutdown().await.unwrap();
}
