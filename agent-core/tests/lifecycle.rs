//! Construction, rollback and stop semantics of generated graphs, driven through the same
//! runtime calls the generated code makes.

use agent_core::__private_v0_1::{Builder, Lifecycle, from_plain, from_result};
use agent_core::compose::{BoxError, Managed, Override};
use std::error::Error as _;
use std::sync::{Arc, Mutex};

type Log = Arc<Mutex<Vec<String>>>;

fn managed(log: &Log, name: &'static str, fails: bool) -> Result<Managed<u32>, BoxError> {
    let log = log.clone();
    Ok(Managed::new(1).with_cleanup(move || async move {
        log.lock().unwrap().push(name.to_owned());
        if fails {
            Err(format!("{name} cleanup failed").into())
        } else {
            Ok(())
        }
    }))
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

#[derive(Debug, thiserror::Error)]
#[error("refused")]
struct Refused;

#[tokio::test]
async fn rollback_runs_registered_cleanups_in_reverse_and_keeps_every_error() {
    let log = Log::default();
    let mut builder = Builder::new();
    builder
        .bean("a", Override::default(), async {
            managed(&log, "a", false)
        })
        .await
        .unwrap();
    builder
        .bean("b", Override::default(), async { managed(&log, "b", true) })
        .await
        .unwrap();
    builder
        .bean("plain", Override::default(), async { from_plain(3u8) })
        .await
        .unwrap();
    builder
        .bean("c", Override::default(), async { managed(&log, "c", true) })
        .await
        .unwrap();
    let err = builder
        .bean("d", Override::<u32>::default(), async {
            from_result::<u32, Refused>(Err(Refused))
        })
        .await
        .unwrap_err();
    assert_eq!(entries(&log), ["c", "b", "a"]);
    assert_eq!(err.bean(), "d");
    assert!(err.source().unwrap().downcast_ref::<Refused>().is_some());
    let failed: Vec<&str> = err.rollback_failures().iter().map(|f| f.bean()).collect();
    assert_eq!(failed, ["c", "b"]);
    assert_eq!(
        err.to_string(),
        "building bean `d` failed: refused (2 cleanup(s) also failed during rollback)"
    );
}

#[tokio::test]
async fn an_override_replaces_the_factory_without_calling_it() {
    let mut builder = Builder::new();
    let called = Arc::new(Mutex::new(false));
    let flag = called.clone();
    let value = builder
        .bean("x", Override::value(9u32), async move {
            *flag.lock().unwrap() = true;
            from_plain(1u32)
        })
        .await
        .unwrap();
    assert_eq!(value, 9);
    assert!(!*called.lock().unwrap());
}

#[tokio::test]
async fn stop_runs_once_and_reports_failures_in_order() {
    let log = Log::default();
    let mut builder = Builder::new();
    for (name, fails) in [("a", true), ("b", false), ("c", true)] {
        builder
            .bean(name, Override::default(), async {
                managed(&log, name, fails)
            })
            .await
            .unwrap();
    }
    let lifecycle = builder.finish();
    let first = lifecycle.stop().await.unwrap_err();
    assert_eq!(entries(&log), ["c", "b", "a"]);
    let failed: Vec<&str> = first.failures().iter().map(|f| f.bean()).collect();
    assert_eq!(failed, ["c", "a"]);
    assert_eq!(first.failures()[0].error().to_string(), "c cleanup failed");
    let second = lifecycle.stop().await.unwrap_err();
    assert_eq!(second.failures().len(), 2);
    assert_eq!(entries(&log), ["c", "b", "a"], "nothing runs twice");
}

#[tokio::test]
async fn a_cancelled_stop_is_resumed_by_the_next_caller() {
    let log = Log::default();
    let mut builder = Builder::new();
    builder
        .bean("a", Override::default(), async {
            managed(&log, "a", false)
        })
        .await
        .unwrap();
    let (slow, release) = gated(&log, "slow", false);
    builder
        .bean("slow", Override::default(), async {
            Ok::<_, BoxError>(slow)
        })
        .await
        .unwrap();
    let lifecycle = builder.finish();
    // The first stop is dropped while the slow cleanup waits.
    let cancelled =
        tokio::time::timeout(std::time::Duration::from_millis(20), lifecycle.stop()).await;
    assert!(cancelled.is_err());
    drop(release);
    lifecycle.stop().await.unwrap();
    // The second caller finished the interrupted cleanup, then ran the rest, each once.
    assert_eq!(entries(&log), ["slow", "a"]);
    lifecycle.stop().await.unwrap();
    assert_eq!(entries(&log), ["slow", "a"]);
}

/// A bean whose cleanup waits until the returned sender fires or is dropped, then logs
/// `name` and fails if `fails`.
fn gated(
    log: &Log,
    name: &'static str,
    fails: bool,
) -> (Managed<u32>, tokio::sync::oneshot::Sender<()>) {
    let (release, gate) = tokio::sync::oneshot::channel::<()>();
    let gate = Arc::new(tokio::sync::Mutex::new(Some(gate)));
    let log = log.clone();
    let managed = Managed::new(1u32).with_cleanup(move || async move {
        let gate = gate.lock().await.take();
        if let Some(gate) = gate {
            let _ = gate.await;
        }
        log.lock().unwrap().push(name.into());
        if fails {
            Err(format!("{name} cleanup failed").into())
        } else {
            Ok(())
        }
    });
    (managed, release)
}

/// A lifecycle with one failing cleanup, `gated`, that waits for the returned sender.
fn gated_lifecycle(log: &Log) -> (Lifecycle, tokio::sync::oneshot::Sender<()>) {
    let (managed, release) = gated(log, "gated", true);
    let mut builder = Builder::new();
    let value = builder
        .built("gated", Ok(managed))
        .unwrap_or_else(|_| panic!("a success needs no rollback"));
    assert_eq!(value, 1);
    (builder.finish(), release)
}

#[tokio::test]
async fn concurrent_callers_share_one_run_and_its_outcome() {
    let log = Log::default();
    let (lifecycle, release) = gated_lifecycle(&log);
    let both = async {
        tokio::join!(lifecycle.stop(), lifecycle.stop(), async {
            // Both callers are parked by now: the first on the gate, the second on the first.
            tokio::task::yield_now().await;
            release.send(()).unwrap();
        })
    };
    let (first, second, ()) = tokio::time::timeout(std::time::Duration::from_secs(10), both)
        .await
        .expect("the waiting caller is woken when the run finishes");
    for outcome in [first, second] {
        let failures: Vec<&str> = outcome
            .as_ref()
            .unwrap_err()
            .failures()
            .iter()
            .map(|f| f.bean())
            .collect();
        assert_eq!(failures, ["gated"]);
    }
    assert_eq!(entries(&log), ["gated"], "the cleanup ran once");
    assert!(format!("{lifecycle:?}").contains("stopped: true"));
}

#[tokio::test]
async fn a_waiting_caller_takes_over_when_the_running_one_is_cancelled() {
    let log = Log::default();
    let (lifecycle, release) = gated_lifecycle(&log);
    // Boxed, so that dropping it really drops (cancels) the call.
    let mut running = Box::pin(lifecycle.stop());
    let waiting = lifecycle.stop();
    tokio::pin!(waiting);
    // The first caller starts the cleanup; the second finds it running and waits.
    assert!(futures_poll_once(running.as_mut()).await.is_none());
    assert!(futures_poll_once(waiting.as_mut()).await.is_none());
    // Cancel the first caller; the waiter must be woken and finish the cleanup.
    drop(running);
    release.send(()).unwrap();
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
        .await
        .expect("the waiting caller is woken and finishes");
    assert_eq!(outcome.unwrap_err().failures().len(), 1);
    assert_eq!(entries(&log), ["gated"]);
}

/// Polls `future` once: `Some` with its output if it finished.
async fn futures_poll_once<F: std::future::Future + Unpin>(future: F) -> Option<F::Output> {
    let mut future = future;
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut future).poll(cx) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        })
    })
    .await
}
