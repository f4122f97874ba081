//! Cost of the run authority.
//!
//! - `envelope/sign/{4KiB,1MiB}` and `envelope/verify/{4KiB,1MiB}`: HMAC-SHA256 signing
//!   (which hashes the payload and validates the result) and keyed verification of an
//!   envelope; `envelope/decode/{4KiB,1MiB}`: structural validation of the encoded bytes
//!   (parse, digest, payload run id);
//! - `import/transaction`: `prepare_import` + `complete` with an inert fake kernel, end to
//!   end on a real directory (lock, record read, verification, IMPORTING and ACTIVE writes);
//! - `fsync/file` and `fsync/directory`: one small write + fsync of a file, and one fsync of
//!   the store directory, in the same directory: the physical floor of every durable write;
//! - `record/{start,terminal}_{tmpfs,disk}`: the two records of a text run, apart:
//!   `Store::start` (new lock file, lock, the check that no record exists, the ACTIVE write)
//!   and `ActiveRun::terminal` (the COMPLETED write, unlock), on tmpfs (`/dev/shm`, where
//!   fsync is nearly free) and under the system temp dir (real fsyncs);
//!   `record/terminal_snapshot_*`: what a host's terminal monitor asks instead, signing a
//!   650-byte terminal snapshot (a text run's size) and writing the COMPLETED tombstone;
//! - `syscalls/{lock_file,atomic_write}_tmpfs`: the same file operations in plain `std`
//!   calls on tmpfs, no MAC, no JSON: a new 0600 lock file created, locked, unlocked and
//!   closed; a 270-byte atomic write (exclusive 0600 temp file, write, fsync, close, rename,
//!   directory fsync): the floor under the two rows above.
//!
//! The import's and each record's fsync counts are printed before the measurements. Run with
//! `cargo bench -p agent-authority --bench authority`; results are in `docs/performance.md`.

use std::hint::black_box;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

use agent_authority::kernel::{ImportKernel, KernelError, PausedRun};
use agent_authority::{
    HmacSnapshotAuthority, Lifecycle, ScopeId, SecretKey, SnapshotEnvelope, Store, StoreOptions,
    TerminalPhase, fsync_count,
};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

struct Inert;

impl ImportKernel for Inert {
    type Paused = Inert;
    fn commit_paused(self) -> Result<Inert, KernelError> {
        Ok(Inert)
    }
    fn abort(self) {}
}

impl PausedRun for Inert {
    type Running = ();
    fn activate(self) -> Result<(), KernelError> {
        Ok(())
    }
    fn abort(self) {}
}

fn payload(run_id: &str, len: usize) -> Vec<u8> {
    let head = format!(r#"{{"run_id":"{run_id}","pad":""#);
    let mut text = head.into_bytes();
    text.resize(len - 2, b'x');
    text.extend_from_slice(b"\"}");
    text
}

fn authority() -> HmacSnapshotAuthority {
    HmacSnapshotAuthority::new(
        ScopeId::from_bytes([0x11; 32]),
        1,
        SecretKey::from_bytes([0x22; 32]),
    )
    .unwrap()
}

fn envelopes(c: &mut Criterion) {
    let authority = authority();
    let mut group = c.benchmark_group("envelope");
    for (name, len) in [("4KiB", 4 << 10), ("1MiB", 1 << 20)] {
        let bytes = payload("run-1", len);
        group.bench_function(format!("sign/{name}"), |b| {
            b.iter_batched(
                || bytes.clone(),
                |p| SnapshotEnvelope::sign(&authority, "run-1", 7, Lifecycle::Suspended, p),
                BatchSize::LargeInput,
            )
        });
        let envelope =
            SnapshotEnvelope::sign(&authority, "run-1", 7, Lifecycle::Suspended, bytes).unwrap();
        group.bench_function(format!("verify/{name}"), |b| {
            b.iter(|| black_box(&envelope).verify(&authority))
        });
        let encoded = envelope.to_json();
        group.bench_function(format!("decode/{name}"), |b| {
            b.iter(|| SnapshotEnvelope::decode(black_box(&encoded)))
        });
    }
    group.finish();
}

fn temp_dir(name: &str) -> PathBuf {
    temp_dir_in(std::env::temp_dir(), name)
}

fn temp_dir_in(parent: PathBuf, name: &str) -> PathBuf {
    let path = parent.join(format!(
        "agent-authority-bench-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&path);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .unwrap();
    path
}

fn import(c: &mut Criterion) {
    let base = temp_dir("import");
    let store = Store::open(StoreOptions::new().directory(base.join("store"))).unwrap();
    let mut n = 0u64;
    let mut suspended = || {
        n += 1;
        let run_id = format!("run-{n}");
        let mut run = store.start(&run_id).unwrap();
        let envelope = run
            .issue_snapshot(Lifecycle::Suspended, 7, payload(&run_id, 4 << 10))
            .unwrap();
        run.close().unwrap();
        envelope
    };
    let envelope = suspended();
    let before = fsync_count();
    let (run, ()) = store
        .prepare_import(&envelope)
        .unwrap()
        .complete(Inert)
        .unwrap();
    drop(run);
    println!(
        "import/transaction: {} fsyncs per import",
        fsync_count() - before
    );

    c.bench_function("import/transaction", |b| {
        b.iter_batched(
            &mut suspended,
            |envelope| {
                let (run, ()) = store
                    .prepare_import(&envelope)
                    .unwrap()
                    .complete(Inert)
                    .unwrap();
                drop(run);
            },
            BatchSize::PerIteration,
        )
    });

    let mut file = std::fs::File::create(base.join("fsync-probe")).unwrap();
    c.bench_function("fsync/file", |b| {
        b.iter(|| {
            file.write_all(b"0123456789abcdef").unwrap();
            file.sync_all().unwrap();
        })
    });
    let dir = std::fs::File::open(base.join("store")).unwrap();
    c.bench_function("fsync/directory", |b| b.iter(|| dir.sync_all().unwrap()));
    drop(store);
    let _ = std::fs::remove_dir_all(&base);
}

fn records(c: &mut Criterion) {
    let mut group = c.benchmark_group("record");
    for (name, parent) in [
        ("tmpfs", PathBuf::from("/dev/shm")),
        ("disk", std::env::temp_dir()),
    ] {
        let base = temp_dir_in(parent, &format!("records-{name}"));
        let store = Store::open(StoreOptions::new().directory(base.join("store"))).unwrap();
        let mut n = 0u64;
        let mut id = move || {
            n += 1;
            format!("run-{n}")
        };
        let before = fsync_count();
        let mut run = store.start(&id()).unwrap();
        let started = fsync_count();
        run.terminal(TerminalPhase::Completed).unwrap();
        println!(
            "record/{name}: {} fsyncs per start, {} per terminal",
            started - before,
            fsync_count() - started
        );
        group.bench_function(format!("start_{name}"), |b| {
            b.iter_batched(
                &mut id,
                |run_id| store.start(&run_id).unwrap(),
                BatchSize::PerIteration,
            )
        });
        group.bench_function(format!("terminal_{name}"), |b| {
            b.iter_batched(
                || store.start(&id()).unwrap(),
                |mut run| run.terminal(TerminalPhase::Completed).unwrap(),
                BatchSize::PerIteration,
            )
        });
        // What a host's terminal monitor asks of the authority: sign the terminal snapshot
        // (a text run's is about 650 bytes) and write the COMPLETED tombstone.
        group.bench_function(format!("terminal_snapshot_{name}"), |b| {
            b.iter_batched(
                || {
                    let run_id = id();
                    let payload = payload(&run_id, 650);
                    (store.start(&run_id).unwrap(), payload)
                },
                |(mut run, payload)| {
                    run.issue_snapshot(Lifecycle::Completed, 6, payload)
                        .unwrap()
                },
                BatchSize::PerIteration,
            )
        });
        drop(store);
        let _ = std::fs::remove_dir_all(&base);
    }
    group.finish();

    let base = temp_dir_in(PathBuf::from("/dev/shm"), "syscalls");
    let dir = std::fs::File::open(&base).unwrap();
    let mut group = c.benchmark_group("syscalls");
    let mut n = 0u64;
    let create = |path: PathBuf| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .unwrap()
    };
    group.bench_function("lock_file_tmpfs", |b| {
        b.iter(|| {
            n += 1;
            let file = create(base.join(format!("run-{n}.lock")));
            file.try_lock().unwrap();
            file.unlock().unwrap();
        })
    });
    let record = [b'x'; 270];
    group.bench_function("atomic_write_tmpfs", |b| {
        b.iter(|| {
            n += 1;
            let temp = base.join(format!(".run-{n}.state.tmp"));
            let mut file = create(temp.clone());
            file.write_all(&record).unwrap();
            file.sync_all().unwrap();
            drop(file);
            std::fs::rename(&temp, base.join(format!("run-{n}.state"))).unwrap();
            dir.sync_all().unwrap();
        })
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&base);
}

criterion_group!(benches, envelopes, import, records);
criterion_main!(benches);
