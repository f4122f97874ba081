//! Idempotency ledger behaviour (docs/daemon.md, "The idempotency ledger").

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_daemon::ledger::{
    Execution, Ledger, LedgerError, MAX_LEDGER_ENTRIES, MAX_OUTCOME_BYTES, Outcome, OutcomeKind,
    UNCERTAIN_PAYLOAD, canonical_digest,
};
use support::{bounded, spawn_waiting};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

fn ok(payload: &[u8]) -> Execution<&'static str> {
    Execution::Commit(Outcome::new(OutcomeKind::Success, payload.to_vec()).unwrap())
}

const D: [u8; 32] = [7; 32];

#[test]
fn construction_and_outcome_bounds_hold_at_and_past_them() {
    assert!(Ledger::new(0, 1).is_none());
    assert!(Ledger::new(1, 0).is_none());
    assert!(Ledger::new(MAX_LEDGER_ENTRIES, 1).is_some());
    assert!(Ledger::new(MAX_LEDGER_ENTRIES + 1, 1).is_none());
    assert!(Ledger::new(1024, 1024).is_some());
    assert!(Ledger::new(1024, 1025).is_none());
    assert!(Outcome::new(OutcomeKind::Success, vec![0; MAX_OUTCOME_BYTES]).is_some());
    assert!(Outcome::new(OutcomeKind::Success, vec![0; MAX_OUTCOME_BYTES + 1]).is_none());
    assert_eq!(canonical_digest(b"").len(), 32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_wait_for_the_owner_without_owning_the_work() {
    let ledger = Arc::new(Ledger::new(4, 4).unwrap());
    let release = Arc::new(Notify::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let owner = {
        let (ledger, release, runs) = (ledger.clone(), release.clone(), runs.clone());
        spawn_waiting(async move {
            ledger
                .run(
                    &CancellationToken::new(),
                    "c",
                    "op",
                    "k",
                    D,
                    || async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        release.notified().await;
                        ok(b"done")
                    },
                )
                .await
        })
        .await
    };
    // A cancelled duplicate leaves the owner alone.
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let error = ledger
        .run(&cancelled, "c", "op", "k", D, || async { ok(b"never") })
        .await
        .unwrap_err();
    assert_eq!(error, LedgerError::Cancelled);
    let duplicate = {
        let ledger = ledger.clone();
        spawn_waiting(async move {
            ledger
                .run(&CancellationToken::new(), "c", "op", "k", D, || async {
                    ok(b"never")
                })
                .await
        })
        .await
    };
    release.notify_one();
    let (outcome, dup) = bounded(owner).await.unwrap().unwrap();
    assert_eq!((outcome.payload(), dup), (&b"done"[..], false));
    let (outcome, dup) = bounded(duplicate).await.unwrap().unwrap();
    assert_eq!((outcome.payload(), dup), (&b"done"[..], true));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // A different digest or kind under the same key conflicts.
    let conflict = ledger
        .run(
            &CancellationToken::new(),
            "c",
            "op",
            "k",
            [8; 32],
            || async { ok(b"x") },
        )
        .await;
    assert_eq!(conflict.unwrap_err(), LedgerError::Conflict);
    let conflict = ledger
        .run(&CancellationToken::new(), "c", "op", "other", D, || async {
            ok(b"x")
        })
        .await;
    assert_eq!(conflict.unwrap_err(), LedgerError::Conflict);
}

#[tokio::test(flavor = "current_thread")]
async fn executor_failures_and_panics_commit_a_fixed_uncertain_outcome() {
    let ledger = Ledger::new(4, 4).unwrap();
    let ctx = CancellationToken::new();
    let failed = ledger
        .run(&ctx, "c", "fail", "k", D, || async {
            Execution::<&str>::Fail
        })
        .await;
    assert_eq!(failed.unwrap_err(), LedgerError::Executor);
    let panicked = ledger
        .run(&ctx, "c", "panic", "k", D, || async {
            if D[0] == 7 {
                panic!("secret token abc");
            }
            ok(b"")
        })
        .await;
    assert_eq!(panicked.unwrap_err(), LedgerError::Executor);
    // Never retried: a duplicate gets the same failure, and its executor does not run.
    for op in ["fail", "panic"] {
        let again = ledger
            .run(&ctx, "c", op, "k", D, || async {
                unreachable!("never retried")
            })
            .await;
        assert_eq!(again.unwrap_err(), LedgerError::<&str>::Executor);
    }
    // The fixed payload carries nothing of the failure.
    assert_eq!(UNCERTAIN_PAYLOAD, b"operation outcome uncertain");
    assert_eq!(format!("{:?}", LedgerError::<&str>::Executor), "Executor");
}

#[tokio::test(flavor = "current_thread")]
async fn cancellation_and_capacity_are_ownership_safe() {
    let ledger = Ledger::new(1, 2).unwrap();
    let ctx = CancellationToken::new();
    ledger
        .run(&ctx, "a", "1", "k", D, || async { ok(b"1") })
        .await
        .unwrap();
    ledger
        .run(&ctx, "a", "2", "k", D, || async { ok(b"2") })
        .await
        .unwrap();
    // Past the per-client bound, and past the client bound.
    let full = ledger
        .run(&ctx, "a", "3", "k", D, || async { ok(b"3") })
        .await;
    assert_eq!(full.unwrap_err(), LedgerError::CapacityExhausted);
    let new_client = ledger
        .run(&ctx, "b", "1", "k", D, || async { ok(b"1") })
        .await;
    assert_eq!(new_client.unwrap_err(), LedgerError::CapacityExhausted);
    // Duplicates still replay at the bound.
    let (_, dup) = ledger
        .run(&ctx, "a", "2", "k", D, || async { ok(b"x") })
        .await
        .unwrap();
    assert!(dup);
    // A cancelled caller never becomes an owner.
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    ledger.forget_client("a");
    let error = ledger
        .run(&cancelled, "b", "1", "k", D, || async { ok(b"1") })
        .await;
    assert_eq!(error.unwrap_err(), LedgerError::Cancelled);
    assert_eq!(ledger.clients(), 0);
    // Invalid tokens are refused.
    let invalid = ledger
        .run(&ctx, " a", "1", "k", D, || async { ok(b"1") })
        .await;
    assert_eq!(invalid.unwrap_err(), LedgerError::InvalidInput);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_duplicates_retry_exactly_once_after_an_abandonment() {
    let ledger = Arc::new(Ledger::new(4, 4).unwrap());
    let release = Arc::new(Notify::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let owner = {
        let (ledger, release) = (ledger.clone(), release.clone());
        spawn_waiting(async move {
            ledger
                .run(
                    &CancellationToken::new(),
                    "c",
                    "op",
                    "k",
                    D,
                    || async move {
                        release.notified().await;
                        Execution::Abandon("capacity")
                    },
                )
                .await
        })
        .await
    };
    let mut duplicates = Vec::new();
    for _ in 0..4 {
        let (ledger, runs) = (ledger.clone(), runs.clone());
        duplicates.push(
            spawn_waiting(async move {
                ledger
                    .run(
                        &CancellationToken::new(),
                        "c",
                        "op",
                        "k",
                        D,
                        || async move {
                            runs.fetch_add(1, Ordering::SeqCst);
                            ok(b"retried")
                        },
                    )
                    .await
            })
            .await,
        );
    }
    release.notify_one();
    assert_eq!(
        bounded(owner).await.unwrap().unwrap_err(),
        LedgerError::Abandoned("capacity")
    );
    let mut owners = 0;
    for duplicate in duplicates {
        let (outcome, dup) = bounded(duplicate).await.unwrap().unwrap();
        assert_eq!(outcome.payload(), b"retried");
        owners += usize::from(!dup);
    }
    assert_eq!((owners, runs.load(Ordering::SeqCst)), (1, 1));
}

#[tokio::test(flavor = "current_thread")]
async fn an_abandonment_reclaims_capacity() {
    let ledger = Ledger::new(1, 1).unwrap();
    let ctx = CancellationToken::new();
    let abandoned = ledger
        .run(&ctx, "a", "1", "k", D, || async {
            Execution::Abandon("busy")
        })
        .await;
    assert_eq!(abandoned.unwrap_err(), LedgerError::Abandoned("busy"));
    assert_eq!(ledger.clients(), 0, "the client slot is reclaimed");
    // Another client now fits, and the same key may run again.
    ledger
        .run(&ctx, "b", "1", "k", D, || async { ok(b"b") })
        .await
        .unwrap();
    ledger.forget_client("b");
    let (outcome, dup) = ledger
        .run(&ctx, "a", "1", "k", D, || async { ok(b"a") })
        .await
        .unwrap();
    assert_eq!((outcome.payload(), dup), (&b"a"[..], false));
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_owner_commits_uncertain_rather_than_leaving_duplicates_waiting() {
    let ledger = Ledger::new(4, 4).unwrap();
    let ctx = CancellationToken::new();
    {
        let run = ledger.run(&ctx, "c", "op", "k", D, || async {
            std::future::pending::<()>().await;
            ok(b"never")
        });
        let _ = tokio::time::timeout(Duration::from_millis(5), run).await;
    }
    let again = ledger
        .run(&ctx, "c", "op", "k", D, || async { ok(b"x") })
        .await;
    assert_eq!(again.unwrap_err(), LedgerError::Executor);
}
