//! Cost of the run host.
//!
//! - `text_run/bare_engine`: `Engine::start` of a one-turn text run (scripted provider,
//!   6 events) and `Run::wait`: the baseline;
//! - `text_run/host_tmpfs`: the same run through `RunHost::start` and a tailing
//!   `replay_events` until the run terminal, with the run authority on tmpfs (`/dev/shm`),
//!   where fsync is nearly free: the host's own overhead (session check, ledger, slot,
//!   binding, paused commit, commit gate, ACTIVE and COMPLETED records, monitor, stream);
//! - `text_run/authority_floor_tmpfs`: only the two records a text run writes (ACTIVE at
//!   start, the COMPLETED tombstone), on tmpfs: the part of `host_tmpfs` that is the
//!   authority's;
//! - `text_run/host_disk`: the same with the authority under the system temp dir (real
//!   fsyncs): what a daemon on a disk pays;
//! - `ledger/duplicate`: a duplicate of a committed operation in the ledger;
//!   `host/duplicate_start`: the same through `RunHost::start` (session check, ledger,
//!   decode of the recorded outcome).
//!
//! Run with `cargo bench -p agent-daemon --bench host`; results are in
//! `docs/performance.md`.

#[path = "support/text_run.rs"]
mod text_run;

use text_run::{Dir, agent, authority_floor_run, engine, host, host_text_run, request};

use std::hint::black_box;
use std::path::PathBuf;

use agent_authority::{Store, StoreOptions};
use agent_core::message::Message;
use agent_daemon::host::StartRequest;
use agent_daemon::ledger::{Execution, Ledger, Outcome, OutcomeKind};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio_util::sync::CancellationToken;

fn text_run(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bare = engine(None);
    let tmpfs = Dir::new(PathBuf::from("/dev/shm"), "tmpfs");
    let disk = Dir::new(std::env::temp_dir(), "disk");
    let (on_tmpfs, tmpfs_session) = runtime.block_on(async { host(&tmpfs) });
    let (on_disk, disk_session) = runtime.block_on(async { host(&disk) });
    let mut group = c.benchmark_group("text_run");
    group.bench_function("bare_engine", |b| {
        b.to_async(&runtime).iter(|| async {
            let run = bare
                .start(&agent(), Message::user("hello").unwrap())
                .await
                .unwrap();
            black_box(run.wait().await.unwrap());
        })
    });
    group.bench_function("host_tmpfs", |b| {
        b.to_async(&runtime)
            .iter(|| host_text_run(&on_tmpfs, &tmpfs_session))
    });
    // The durable floor inside `host_tmpfs`: the ACTIVE record at start and the COMPLETED
    // tombstone at the end, with nothing else.
    let floor = Dir::new(PathBuf::from("/dev/shm"), "floor");
    let store = Store::open(StoreOptions::new().directory(floor.0.join("store"))).unwrap();
    group.bench_function("authority_floor_tmpfs", |b| {
        b.iter(|| authority_floor_run(&store))
    });
    group.bench_function("host_disk", |b| {
        b.to_async(&runtime)
            .iter(|| host_text_run(&on_disk, &disk_session))
    });
    group.finish();
    runtime.block_on(async {
        on_tmpfs.shutdown().await.unwrap();
        on_disk.shutdown().await.unwrap();
    });
}

fn duplicates(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ledger = Ledger::new(1, 16).unwrap();
    let ctx = CancellationToken::new();
    let outcome = Outcome::new(OutcomeKind::Success, vec![b'x'; 128]).unwrap();
    runtime.block_on(async {
        ledger
            .run::<(), _>(&ctx, "client", "op", "run.start/v1", [1; 32], || async {
                Execution::Commit(outcome.clone())
            })
            .await
            .unwrap();
    });
    c.bench_function("ledger/duplicate", |b| {
        b.to_async(&runtime).iter(|| async {
            let result = ledger
                .run::<(), _>(&ctx, "client", "op", "run.start/v1", [1; 32], || async {
                    unreachable!("a duplicate never executes")
                })
                .await;
            black_box(result.unwrap())
        })
    });
    let tmpfs = Dir::new(PathBuf::from("/dev/shm"), "duplicate");
    let (host, session) = runtime.block_on(async { host(&tmpfs) });
    let first = StartRequest {
        operation_id: "dup".into(),
        ..request()
    };
    runtime
        .block_on(host.start(&ctx, &session, first.clone()))
        .unwrap();
    c.bench_function("host/duplicate_start", |b| {
        b.to_async(&runtime).iter(|| async {
            let (success, duplicate) = host.start(&ctx, &session, first.clone()).await.unwrap();
            assert!(duplicate);
            black_box(success)
        })
    });
    runtime.block_on(host.shutdown()).unwrap();
}

criterion_group!(benches, text_run, duplicates);
criterion_main!(benches);
