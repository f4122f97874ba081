//! The price of the primitives the kernel's contracts make every run pay, timed in the same
//! process and under the same load as the workloads (`<group>/floor_<id>`), so the question
//! "how fast could a run be while the contracts hold" has measured answers beside the real
//! figures. Each floor is the plain tokio, tokio-util or std operation, with none of the
//! kernel's own code around it; `docs/performance.md` multiplies them by how often each
//! workload needs them.

use std::collections::{HashMap, VecDeque};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_core::BoxFuture;
use criterion::Criterion;
use tokio::runtime::Runtime;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::contained::Contained;

/// What a run's waiter waits on: a flag set once and the wake-up that follows it.
struct Done {
    finished: AtomicBool,
    notify: Notify,
}

/// A log entry of the size of one of the kernel's event envelopes with its accounted bytes.
struct Entry {
    _envelope: [u64; 20],
    bytes: usize,
}

/// Times every floor as `<group>/floor_<id>` on `runtime` (the workloads' current-thread one).
pub(crate) fn bench(c: &mut Criterion, runtime: &Runtime, group: &str) {
    let mut group = c.benchmark_group(group);

    // "A run is its own task, and `wait` wakes when the terminal is committed": one spawn,
    // the task's flag and wake-up, and the waiter's registration and wake.
    group.bench_function("floor_spawn_and_wake", |b| {
        b.to_async(runtime).iter(|| async {
            let done = Arc::new(Done {
                finished: AtomicBool::new(false),
                notify: Notify::new(),
            });
            let task = done.clone();
            drop(tokio::spawn(async move {
                task.finished.store(true, Ordering::Release);
                task.notify.notify_waiters();
            }));
            loop {
                let notified = done.notify.notified();
                if done.finished.load(Ordering::Acquire) {
                    break;
                }
                notified.await;
            }
        });
    });

    // "Runs are cancelled through the public `CancellationToken`, a child of the engine's
    // root that shutdown reaches": the child, the clone the engine keeps, one check per
    // event of a text run, both drops.
    let root = CancellationToken::new();
    group.bench_function("floor_cancellation_token", |b| {
        b.iter(|| {
            let child = root.child_token();
            let kept = child.clone();
            for _ in 0..6 {
                black_box(child.is_cancelled());
            }
            drop(kept);
            drop(child);
        });
    });
    group.bench_function("floor_cancellation_token_cancelled", |b| {
        b.iter(|| {
            let child = root.child_token();
            let kept = child.clone();
            black_box(child.is_cancelled());
            kept.cancel();
            black_box(child.is_cancelled());
            drop(kept);
            drop(child);
        });
    });

    // "Providers, streams and tools are trait objects returning boxed futures, and every
    // call into them is contained": one boxed future, polled to completion in `catch_unwind`.
    let calls = AtomicU64::new(0);
    group.bench_function("floor_boxed_contained_call", |b| {
        b.to_async(runtime).iter(|| async {
            let future: BoxFuture<'_, u64> =
                Box::pin(async { calls.fetch_add(1, Ordering::Relaxed) });
            black_box(Contained(future).await)
        });
    });

    // "The log is authoritative and bounded": six appends of an envelope-sized entry under
    // the log's lock, each accounted against a byte bound, into a buffer sized for a text
    // run, then the log's drop.
    group.bench_function("floor_log_six_appends", |b| {
        b.iter(|| {
            let log = Mutex::new((VecDeque::with_capacity(6), 0_usize));
            for sequence in 0..6_u64 {
                let mut inner = log.lock().unwrap_or_else(|e| e.into_inner());
                let entry = Entry {
                    _envelope: [sequence; 20],
                    bytes: 168,
                };
                if inner.1 + entry.bytes <= 1 << 20 {
                    inner.1 += entry.bytes;
                    inner.0.push_back(black_box(entry));
                }
            }
            drop(black_box(log));
        });
    });

    // "Run ids are never reused while an engine lives": the id formatted into a shared
    // string, reserved in the live set under its lock (std's keyed hash: ids also arrive in
    // imported snapshots), and released.
    let live: Mutex<HashMap<Arc<str>, ()>> = Mutex::new(HashMap::with_capacity(16));
    let next = AtomicU64::new(1);
    group.bench_function("floor_run_id_reserve_release", |b| {
        b.iter(|| {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let id: Arc<str> = Arc::from(format!("run-{n}"));
            let mut set = live.lock().unwrap_or_else(|e| e.into_inner());
            black_box(set.insert(id.clone(), ()));
            black_box(set.remove(&id));
        });
    });

    // One allocation and its free, of an envelope's size: the unit of everything else a run
    // allocates (its shared state, history, messages, the log's buffer).
    group.bench_function("floor_allocation", |b| {
        b.iter(|| drop(black_box(Box::new([0_u64; 20]))));
    });

    group.finish();
}
