//! Pending router behaviour (docs/daemon.md, "Pending interactions").

mod support;

use std::sync::Arc;
use std::time::Duration;

use agent_core::interaction::{
    Broker, InteractionError, InteractionRequest, InteractionResponse, Scope,
};
use agent_daemon::pending::{
    DELTA_OVERHEAD_BYTES, PendingError, PendingLimits, PendingRouter, hard, value_bytes,
};
use serde_json::json;
use support::{bounded, spawn_waiting};
use tokio_util::sync::CancellationToken;

fn request(id: &str) -> InteractionRequest {
    InteractionRequest::new(id, "confirm", "May I?", json!({"type": "boolean"})).unwrap()
}

fn ask(
    router: &Arc<PendingRouter>,
    run: &str,
    id: &str,
) -> tokio::task::JoinHandle<Result<InteractionResponse, InteractionError>> {
    let (router, scope, request) = (router.clone(), Scope::new(run).unwrap(), request(id));
    tokio::spawn(async move {
        router
            .request(&scope, &request, &CancellationToken::new())
            .await
    })
}

#[test]
fn limits_reject_incomplete_and_contradictory_budgets() {
    PendingLimits::default().validate().unwrap();
    let base = PendingLimits::default();
    for broken in [
        PendingLimits { clients: 0, ..base },
        PendingLimits {
            clients: hard::CLIENTS + 1,
            ..base
        },
        PendingLimits {
            runs_per_client: base.runs + 1,
            ..base
        },
        PendingLimits {
            pending_per_client: base.pending + 1,
            ..base
        },
        PendingLimits {
            pending_bytes: hard::PENDING_BYTES + 1,
            ..base
        },
        PendingLimits {
            pending_bytes_per_client: base.pending_bytes + 1,
            ..base
        },
        PendingLimits {
            observers_per_client: base.observers + 1,
            ..base
        },
        PendingLimits {
            observers: 0,
            ..base
        },
    ] {
        assert_eq!(broken.validate(), Err(PendingError::Limits), "{broken:?}");
    }
    assert_eq!(DELTA_OVERHEAD_BYTES, 32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_is_complete_first_and_gap_free() {
    let router = PendingRouter::new(PendingLimits::default()).unwrap();
    let _a = router
        .bind_run("client", &Scope::new("run-a").unwrap())
        .unwrap();
    let _b = router
        .bind_run("client", &Scope::new("run-b").unwrap())
        .unwrap();
    let first = ask(&router, "run-b", "i1");
    let second = ask(&router, "run-a", "i2");
    bounded(async {
        while router.snapshot("client").pending().len() < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    let mut observer = router.subscribe("client").unwrap();
    let snapshot = observer.take_snapshot().unwrap();
    let keys: Vec<(&str, &str)> = snapshot
        .pending()
        .iter()
        .map(|p| (p.scope().run_id().as_str(), p.request().id()))
        .collect();
    assert_eq!(keys, [("run-a", "i2"), ("run-b", "i1")], "sorted");
    assert_eq!(snapshot.revision(), 2);
    router
        .respond(
            "client",
            &Scope::new("run-b").unwrap(),
            InteractionResponse::new("i1", json!(true)).unwrap(),
        )
        .unwrap();
    let third = ask(&router, "run-a", "i3");
    let never = CancellationToken::new();
    let mut revision = snapshot.revision();
    for _ in 0..2 {
        let delta = bounded(observer.next(&never)).await.unwrap();
        assert_eq!(delta.revision(), revision + 1);
        revision = delta.revision();
    }
    bounded(first).await.unwrap().unwrap();
    router.close();
    assert_eq!(
        bounded(second).await.unwrap().unwrap_err(),
        InteractionError::Closed
    );
    assert_eq!(
        bounded(third).await.unwrap().unwrap_err(),
        InteractionError::Closed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_are_isolated_and_a_wrong_owner_is_refused_uniformly() {
    let router = PendingRouter::new(PendingLimits::default()).unwrap();
    let scope = Scope::new("run-1").unwrap();
    let _binding = router.bind_run("alice", &scope).unwrap();
    assert_eq!(
        router.bind_run("bob", &scope).unwrap_err(),
        PendingError::AlreadyBound
    );
    let asked = ask(&router, "run-1", "i1");
    bounded(async {
        while router.snapshot("alice").pending().is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    assert!(router.snapshot("bob").pending().is_empty());
    assert_eq!(router.snapshot("bob").revision(), 0);
    let answer = || InteractionResponse::new("i1", json!(true)).unwrap();
    // Bob cannot tell run-1 from a run that does not exist.
    assert_eq!(
        router.respond("bob", &scope, answer()),
        Err(PendingError::NotBound)
    );
    let unknown = Scope::new("run-9").unwrap();
    assert_eq!(
        router.respond("bob", &unknown, answer()),
        Err(PendingError::NotBound)
    );
    let wrong_id = InteractionResponse::new("i9", json!(true)).unwrap();
    assert_eq!(
        router.respond("alice", &scope, wrong_id),
        Err(PendingError::NotPending)
    );
    router.respond("alice", &scope, answer()).unwrap();
    assert_eq!(bounded(asked).await.unwrap().unwrap().value(), &json!(true));
    // An unbound run's prompt goes nowhere.
    let unbound = ask(&router, "run-2", "i1");
    assert_eq!(
        bounded(unbound).await.unwrap().unwrap_err(),
        InteractionError::Unavailable
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_drains_accepted_work_before_reclaiming() {
    let limits = PendingLimits {
        runs: 1,
        runs_per_client: 1,
        ..PendingLimits::default()
    };
    let router = PendingRouter::new(limits).unwrap();
    let scope = Scope::new("run-1").unwrap();
    let mut binding = router.bind_run("c", &scope).unwrap();
    // At the bound: a second binding is refused.
    assert_eq!(
        router
            .bind_run("c", &Scope::new("run-2").unwrap())
            .unwrap_err(),
        PendingError::BindingCapacity
    );
    let asked = ask(&router, "run-1", "i1");
    bounded(async {
        while router.snapshot("c").pending().is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    binding.release();
    // No new requests, but the accepted one can still be answered.
    let late = ask(&router, "run-1", "i2");
    assert_eq!(
        bounded(late).await.unwrap().unwrap_err(),
        InteractionError::Unavailable
    );
    let waiting = spawn_waiting(async move {
        binding.wait_released().await;
    })
    .await;
    assert!(!waiting.is_finished());
    assert!(router.bind_run("c", &Scope::new("run-2").unwrap()).is_err());
    router
        .respond(
            "c",
            &scope,
            InteractionResponse::new("i1", json!(1)).unwrap(),
        )
        .unwrap();
    bounded(asked).await.unwrap().unwrap();
    bounded(waiting).await.unwrap();
    router.bind_run("c", &Scope::new("run-2").unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_count_and_byte_budgets_hold_at_and_past_the_bound() {
    let scope = Scope::new("run-1").unwrap();
    let bytes = value_bytes(&scope, &request("i1"));
    let limits = PendingLimits {
        pending_per_client: 1,
        pending_bytes_per_client: bytes,
        ..PendingLimits::default()
    };
    let router = PendingRouter::new(limits).unwrap();
    let _binding = router.bind_run("c", &scope).unwrap();
    let first = ask(&router, "run-1", "i1");
    bounded(async {
        while router.snapshot("c").pending().is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    let second = ask(&router, "run-1", "i2");
    assert_eq!(
        bounded(second).await.unwrap().unwrap_err(),
        InteractionError::Unavailable
    );
    assert_eq!(router.refused(), 1);
    router
        .respond(
            "c",
            &scope,
            InteractionResponse::new("i1", json!(1)).unwrap(),
        )
        .unwrap();
    bounded(first).await.unwrap().unwrap();
    assert_eq!(router.counts().1, 0, "accounting cleared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_are_bounded_and_fenced() {
    let limits = PendingLimits {
        observers_per_client: 1,
        ..PendingLimits::default()
    };
    let router = PendingRouter::new(limits).unwrap();
    let mut observer = router.subscribe("c").unwrap();
    assert_eq!(
        router.subscribe("c").unwrap_err(),
        PendingError::ObserverCapacity
    );
    router.subscribe("d").unwrap();
    router.fence_observers("c");
    assert_eq!(
        bounded(observer.next(&CancellationToken::new())).await,
        None
    );
    drop(observer);
    router.subscribe("c").unwrap();
}

#[test]
fn queue_limits_are_in_range_and_fully_funded() {
    let base = PendingLimits::default();
    // The defaults of the contract fund a full queue for every observer exactly.
    assert_eq!(base.observer_queue_bytes, 1_049_088);
    assert_eq!(
        base.queued_entries,
        base.observers * base.observer_queue_entries
    );
    assert_eq!(
        base.queued_bytes,
        base.observers * base.observer_queue_bytes
    );
    assert_eq!(
        base.queued_bytes_per_client,
        base.observers_per_client * base.observer_queue_bytes
    );
    // One observer at the hard queue maxima is valid; one past either is not.
    let single = PendingLimits {
        observers: 1,
        observers_per_client: 1,
        observer_queue_entries: hard::OBSERVER_QUEUE_ENTRIES,
        observer_queue_bytes: hard::OBSERVER_QUEUE_BYTES,
        queued_entries: hard::QUEUED_ENTRIES,
        queued_entries_per_client: hard::QUEUED_ENTRIES,
        queued_bytes: hard::QUEUED_BYTES,
        queued_bytes_per_client: hard::QUEUED_BYTES,
        ..base
    };
    single.validate().unwrap();
    for broken in [
        PendingLimits {
            observer_queue_entries: hard::OBSERVER_QUEUE_ENTRIES + 1,
            ..single
        },
        PendingLimits {
            observer_queue_bytes: hard::OBSERVER_QUEUE_BYTES + 1,
            ..single
        },
        PendingLimits {
            queued_entries: hard::QUEUED_ENTRIES + 1,
            ..single
        },
        PendingLimits {
            queued_bytes: hard::QUEUED_BYTES + 1,
            ..single
        },
        PendingLimits {
            observer_queue_entries: 0,
            ..single
        },
        PendingLimits {
            queued_entries_per_client: hard::QUEUED_ENTRIES,
            queued_entries: hard::QUEUED_ENTRIES - 1,
            ..single
        },
    ] {
        assert_eq!(broken.validate(), Err(PendingError::Limits), "{broken:?}");
    }
    // Funding at the bound (4 observers × 64 entries = 256 per client) and one short.
    PendingLimits {
        queued_entries_per_client: 256,
        ..base
    }
    .validate()
    .unwrap();
    for broken in [
        PendingLimits {
            queued_entries_per_client: 255,
            ..base
        },
        PendingLimits {
            queued_entries: 2047,
            ..base
        },
        PendingLimits {
            queued_bytes: 33_570_815,
            ..base
        },
        PendingLimits {
            queued_bytes_per_client: 4_196_351,
            ..base
        },
    ] {
        assert_eq!(broken.validate(), Err(PendingError::Limits), "{broken:?}");
    }
}

#[test]
fn an_open_reserves_a_revision_for_every_close() {
    use agent_daemon::pending::revision_room;
    // Opening needs its own revision and one close for every call then pending.
    assert!(revision_room(u64::MAX - 2, 0));
    assert!(!revision_room(u64::MAX - 1, 0));
    assert!(revision_room(u64::MAX - 12, 10));
    assert!(!revision_room(u64::MAX - 11, 10));
    assert!(!revision_room(1, usize::MAX));
}

async fn wait_pending(router: &PendingRouter, count: usize) {
    bounded(async {
        while router.snapshot("c").pending().len() < count {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_is_cut_off_with_its_exact_last_delivered_revision() {
    let limits = PendingLimits {
        observer_queue_entries: 4,
        ..PendingLimits::default()
    };
    let router = PendingRouter::new(limits).unwrap();
    let _binding = router.bind_run("c", &Scope::new("run-1").unwrap()).unwrap();
    let mut observer = router.subscribe("c").unwrap();
    assert_eq!(observer.take_snapshot().unwrap().revision(), 0);
    assert_eq!(observer.last_delivered(), 0);
    let never = CancellationToken::new();
    let mut asked = vec![ask(&router, "run-1", "i1")];
    let first = bounded(observer.next(&never)).await.unwrap();
    assert_eq!(first.revision(), 1);
    // Four more deltas fill the queue to its bound: still subscribed.
    for n in 2..=5 {
        asked.push(ask(&router, "run-1", &format!("i{n}")));
        wait_pending(&router, n).await;
    }
    assert_eq!(observer.exhausted(), None);
    assert_eq!(router.queued().0, 4);
    // The fifth undelivered delta is one past it: cut off, queued deltas discarded.
    asked.push(ask(&router, "run-1", "i6"));
    wait_pending(&router, 6).await;
    let exhausted = observer.exhausted().expect("cut off");
    assert_eq!(exhausted.resource, "pending_observer_queue_entries");
    assert_eq!((exhausted.limit, exhausted.observed), (4, 5));
    assert_eq!(exhausted.last_delivered, 1, "exactly what the consumer got");
    assert_eq!(observer.last_delivered(), 1);
    assert_eq!(bounded(observer.next(&never)).await, None);
    assert_eq!(router.queued(), (0, 0), "accounting released at once");
    // Recovery: a new subscription starts from a full snapshot.
    drop(observer);
    let mut again = router.subscribe("c").unwrap();
    let snapshot = again.take_snapshot().unwrap();
    assert_eq!((snapshot.revision(), snapshot.pending().len()), (6, 6));
    router.close();
    for asked in asked {
        assert_eq!(
            bounded(asked).await.unwrap().unwrap_err(),
            InteractionError::Closed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_queue_byte_bound_holds_at_and_past_it() {
    use agent_daemon::pending::delta_bytes;
    let router = PendingRouter::new(PendingLimits::default()).unwrap();
    let _binding = router.bind_run("c", &Scope::new("run-1").unwrap()).unwrap();
    let mut probe = router.subscribe("c").unwrap();
    let asked = ask(&router, "run-1", "i1");
    let delta = bounded(probe.next(&CancellationToken::new()))
        .await
        .unwrap();
    let bytes = delta_bytes(&delta);
    assert_eq!(
        bytes,
        value_bytes(&Scope::new("run-1").unwrap(), &request("i1")) + DELTA_OVERHEAD_BYTES
    );
    drop(probe);
    router.close();
    bounded(asked).await.unwrap().unwrap_err();

    // A queue of exactly one opened delta's bytes: the first fits, the second is past it.
    let limits = PendingLimits {
        observer_queue_bytes: bytes,
        ..PendingLimits::default()
    };
    let router = PendingRouter::new(limits).unwrap();
    let _binding = router.bind_run("c", &Scope::new("run-1").unwrap()).unwrap();
    let observer = router.subscribe("c").unwrap();
    let first = ask(&router, "run-1", "i1");
    wait_pending(&router, 1).await;
    assert_eq!(observer.exhausted(), None);
    assert_eq!(router.queued(), (1, bytes));
    let second = ask(&router, "run-1", "i2");
    wait_pending(&router, 2).await;
    let exhausted = observer.exhausted().expect("cut off");
    assert_eq!(exhausted.resource, "pending_observer_queue_bytes");
    assert_eq!((exhausted.limit, exhausted.observed), (bytes, 2 * bytes));
    assert_eq!(
        exhausted.last_delivered, 0,
        "nothing delivered: the snapshot's"
    );
    assert_eq!(router.queued(), (0, 0));
    router.close();
    bounded(first).await.unwrap().unwrap_err();
    bounded(second).await.unwrap().unwrap_err();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_observer_releases_its_queue_at_once() {
    let router = PendingRouter::new(PendingLimits::default()).unwrap();
    let _binding = router.bind_run("c", &Scope::new("run-1").unwrap()).unwrap();
    let observer = router.subscribe("c").unwrap();
    let asked = ask(&router, "run-1", "i1");
    wait_pending(&router, 1).await;
    assert_eq!(router.queued().0, 1);
    drop(observer);
    assert_eq!(router.queued(), (0, 0));
    router.close();
    bounded(asked).await.unwrap().unwrap_err();
}
