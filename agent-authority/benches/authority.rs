//! Cost of the run authority.
//!
//! - `envelope/sign/{4KiB,1MiB}` and `envelope/verify/{4KiB,1MiB}`: HMAC-SHA256 signing
//!   (which hashes the payload and validates the result) and keyed verification of an
//!   envelope; `envelope/decode/{4KiB,1MiB}`: structural validation of the encoded bytes
//!   (parse, digest, payload run id);
//! - `import/transaction`: `prepare_import` + `complete` with an inert fake kernel, end to
//!   end on a real directory (lock, record read, verification, IMPORTING and ACTIVE writes);
//! - `fsync/file` and `fsync/directory`: one small write + fsync of a file, and one fsync of
//!   the store directory, in the same directory: the physical floor of every durable write.
//!
//! The import's fsync count is printed before the measurements. Run with
//! `cargo bench -p agent-authority --bench authority`; results are in `docs/performance.md`.

use std::hint::black_box;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

use agent_authority::kernel::{ImportKernel, KernelError, PausedRun};
use agent_authority::{
    HmacSnapshotAuthority, Lifecycle, ScopeId, SecretKey, SnapshotEnvelope, Store, StoreOptions,
    fsync_count,
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
    let path = std::env::temp_dir().join(format!(
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

criterion_group!(benches, envelopes, import);
criterion_main!(benches);
