//! Session store behaviour (docs/daemon.md, "Sessions").

mod support;

use std::time::Duration;

use agent_daemon::session::{
    GATE_WAITERS, MAX_GATE_WAITERS, MAX_SESSIONS, STREAM_LEASES, SessionError, SessionStore,
};
use support::{bounded, spawn_waiting};
use tokio_util::sync::CancellationToken;

fn store(maximum: usize) -> (CancellationToken, SessionStore) {
    let root = CancellationToken::new();
    let store = SessionStore::new(&root, maximum).unwrap();
    (root, store)
}

#[test]
fn the_session_bound_holds_at_and_past_it() {
    let root = CancellationToken::new();
    assert!(SessionStore::new(&root, 0).is_err());
    assert!(SessionStore::new(&root, MAX_SESSIONS + 1).is_err());
    let store = SessionStore::new(&root, 2).unwrap();
    let a = store.fresh().unwrap();
    let b = store.fresh().unwrap();
    assert_ne!(a.client_id(), b.client_id());
    assert_eq!(a.client_id().len(), 32);
    assert_eq!(store.fresh().unwrap_err(), SessionError::CapacityExhausted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_has_one_winner_and_root_ownership() {
    let (root, store) = store(4);
    let s = store.fresh().unwrap();
    let mut claims = Vec::new();
    for _ in 0..8 {
        let (store, id) = (store.clone(), s.client_id().to_owned());
        claims.push(tokio::spawn(async move {
            store.reconnect(&CancellationToken::new(), &id, 1).await
        }));
    }
    let mut winners = 0;
    for claim in claims {
        match bounded(claim).await.unwrap() {
            Ok(session) => {
                winners += 1;
                assert_eq!(session.epoch(), 2);
            }
            Err(SessionError::Stale(Some(facts))) => {
                assert_eq!((facts.expected, facts.observed), (2, 1));
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(winners, 1);
    assert!(s.token().is_cancelled(), "the old epoch ended");
    // An unknown id invents no facts.
    assert_eq!(
        store.check_epoch("nobody", 1),
        Err(SessionError::Stale(None))
    );
    // The root owns every epoch.
    root.cancel();
    assert_eq!(store.fresh().unwrap_err(), SessionError::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_jumps_queued_mutations_waits_out_the_commit_and_stales_the_queue() {
    let (_root, store) = store(4);
    let s = store.fresh().unwrap();
    let ctx = CancellationToken::new();
    let mut active = store.acquire_mutation(&ctx, &s).await.unwrap();
    let queued = {
        let (store, s) = (store.clone(), s.clone());
        spawn_waiting(async move { store.acquire_mutation(&CancellationToken::new(), &s).await })
            .await
    };
    let reconnect = {
        let (store, id) = (store.clone(), s.client_id().to_owned());
        spawn_waiting(async move { store.reconnect(&CancellationToken::new(), &id, 1).await }).await
    };
    assert!(!reconnect.is_finished(), "waits out the active commit");
    active.close();
    let new = bounded(reconnect).await.unwrap().unwrap();
    assert_eq!(new.epoch(), 2);
    // The queued mutation of the old epoch never ran: it is stale.
    assert!(matches!(
        bounded(queued).await.unwrap().unwrap_err(),
        SessionError::Stale(Some(_))
    ));
    store.acquire_mutation(&ctx, &new).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_reconnect_restores_the_old_epoch_and_its_fifo() {
    let (_root, store) = store(4);
    let s = store.fresh().unwrap();
    let ctx = CancellationToken::new();
    let mut active = store.acquire_mutation(&ctx, &s).await.unwrap();
    let reconnect_ctx = CancellationToken::new();
    let reconnect = {
        let (store, id, c) = (
            store.clone(),
            s.client_id().to_owned(),
            reconnect_ctx.clone(),
        );
        spawn_waiting(async move { store.reconnect(&c, &id, 1).await }).await
    };
    let queued = {
        let (store, s) = (store.clone(), s.clone());
        spawn_waiting(async move { store.acquire_mutation(&CancellationToken::new(), &s).await })
            .await
    };
    reconnect_ctx.cancel();
    assert_eq!(
        bounded(reconnect).await.unwrap().unwrap_err(),
        SessionError::Cancelled
    );
    active.close();
    bounded(queued).await.unwrap().unwrap();
    store.check(&s).unwrap();
    assert!(!s.token().is_cancelled());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_cancels_and_joins_every_old_stream() {
    let (_root, store) = store(4);
    let s = store.fresh().unwrap();
    let ctx = CancellationToken::new();
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(store.acquire_stream(&ctx, &s, 4).await.unwrap());
    }
    let reconnect = {
        let (store, id) = (store.clone(), s.client_id().to_owned());
        tokio::spawn(async move { store.reconnect(&CancellationToken::new(), &id, 1).await })
    };
    for stream in &streams {
        bounded(stream.token().cancelled()).await;
    }
    // Cancelled, but not joined: the epoch has not moved.
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!reconnect.is_finished());
    store.check(&s).unwrap();
    // A new stream waits behind the reconnect intent.
    let late = {
        let (store, s) = (store.clone(), s.clone());
        spawn_waiting(async move { store.acquire_stream(&CancellationToken::new(), &s, 4).await })
            .await
    };
    for mut stream in streams.drain(..) {
        stream.close();
    }
    let new = bounded(reconnect).await.unwrap().unwrap();
    assert_eq!(new.epoch(), 2);
    assert!(matches!(
        bounded(late).await.unwrap().unwrap_err(),
        SessionError::Stale(Some(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_waiters_are_bounded_at_64_and_cancellation_safe() {
    let (_root, store) = store(4);
    let s = store.fresh().unwrap();
    let ctx = CancellationToken::new();
    let _active = store.acquire_mutation(&ctx, &s).await.unwrap();
    let waiters_ctx = CancellationToken::new();
    let mut waiters = Vec::new();
    for _ in 0..MAX_GATE_WAITERS {
        let (store, s, c) = (store.clone(), s.clone(), waiters_ctx.clone());
        // Each is queued when `spawn_waiting` returns, so the next call is past the bound.
        waiters.push(spawn_waiting(async move { store.acquire_mutation(&c, &s).await }).await);
    }
    // Past the bound, for every kind of waiter.
    let past = SessionError::GateCapacity {
        resource: GATE_WAITERS,
        limit: MAX_GATE_WAITERS,
    };
    assert_eq!(store.acquire_mutation(&ctx, &s).await.unwrap_err(), past);
    assert_eq!(
        store.reconnect(&ctx, s.client_id(), 1).await.unwrap_err(),
        past
    );
    // Cancellation removes every waiter; the bound frees up.
    waiters_ctx.cancel();
    for waiter in waiters {
        assert_eq!(
            bounded(waiter).await.unwrap().unwrap_err(),
            SessionError::Cancelled
        );
    }
    let again = {
        let (store, s) = (store.clone(), s.clone());
        spawn_waiting(async move { store.acquire_mutation(&CancellationToken::new(), &s).await })
            .await
    };
    assert!(!again.is_finished());
    again.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_leases_are_bounded_at_and_past_the_maximum() {
    let (_root, store) = store(4);
    let s = store.fresh().unwrap();
    let ctx = CancellationToken::new();
    let mut leases = Vec::new();
    for _ in 0..2 {
        leases.push(store.acquire_stream(&ctx, &s, 2).await.unwrap());
    }
    assert_eq!(
        store.acquire_stream(&ctx, &s, 2).await.unwrap_err(),
        SessionError::GateCapacity {
            resource: STREAM_LEASES,
            limit: 2
        }
    );
    leases.pop();
    store.acquire_stream(&ctx, &s, 2).await.unwrap();
    assert_eq!(
        store.acquire_stream(&ctx, &s, 257).await.unwrap_err(),
        SessionError::Configuration
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_never_blocks_and_shutdown_joins_leases() {
    let (_root, store) = store(4);
    let s = store.fresh().unwrap();
    let ctx = CancellationToken::new();
    let mut lease = store.acquire_stream(&ctx, &s, 4).await.unwrap();
    let mut mutation = store.acquire_mutation(&ctx, &s).await.unwrap();
    store.close();
    store.close();
    assert!(lease.token().is_cancelled());
    assert!(s.token().is_cancelled());
    assert_eq!(store.check(&s), Err(SessionError::Closed));
    let shutdown = {
        let store = store.clone();
        spawn_waiting(async move { store.shutdown(&CancellationToken::new()).await }).await
    };
    assert!(!shutdown.is_finished(), "waits for the leases");
    lease.close();
    mutation.close();
    bounded(shutdown).await.unwrap().unwrap();
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn idle_sessions_are_reclaimed_after_the_idle_period_only() {
    let root = CancellationToken::new();
    let store = SessionStore::with_idle_after(&root, 2, Duration::from_secs(60)).unwrap();
    let reclaimed = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    store.set_reclaim_listener({
        let reclaimed = reclaimed.clone();
        move |id| reclaimed.lock().unwrap().push(id.to_owned())
    });
    let idle = store.fresh().unwrap();
    let held = store.fresh().unwrap();
    let hold = store.hold(held.client_id()).unwrap();
    // Just before the period: nothing is reclaimed, and the table is full.
    tokio::time::advance(Duration::from_secs(59)).await;
    assert_eq!(store.reclaim_idle(), 0);
    assert_eq!(store.fresh().unwrap_err(), SessionError::CapacityExhausted);
    // At the period: the idle client goes (fresh reclaims first), the held one stays.
    tokio::time::advance(Duration::from_secs(1)).await;
    let third = store.fresh().unwrap();
    assert_eq!(*reclaimed.lock().unwrap(), [idle.client_id().to_owned()]);
    assert_eq!(store.check(&idle), Err(SessionError::Stale(None)));
    assert!(idle.token().is_cancelled());
    store.check(&held).unwrap();
    // A hold released restarts the idle clock.
    drop(hold);
    tokio::time::advance(Duration::from_secs(59)).await;
    assert_eq!(store.reclaim_idle(), 0);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(store.reclaim_idle(), 2);
    assert_eq!(store.check(&third), Err(SessionError::Stale(None)));
}
