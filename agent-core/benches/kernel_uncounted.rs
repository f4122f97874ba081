//! The workloads of the `kernel` benchmark timed on the plain system allocator, as a
//! program that does not count its allocations runs: `kernel_uncounted/<id>`. The original's
//! Go benchmark pays nothing extra for its allocation figures (its runtime keeps those
//! statistics anyway), so this is the timing to compare with it; `kernel` gives the counts.
//! The same process then times the floors (`kernel_uncounted/floor_<id>`): the primitives
//! the kernel's contracts make every run pay, under the same load as the workloads.
//! Run with `cargo bench -p agent-core --bench kernel_uncounted`.

use criterion::{Criterion, criterion_group, criterion_main};

#[path = "support/contained.rs"]
mod contained;
#[path = "support/floors.rs"]
mod floors;
#[path = "support/kernel_workloads.rs"]
mod workloads;

fn bench(c: &mut Criterion) {
    workloads::bench(c, "kernel_uncounted", None);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    floors::bench(c, &runtime, "kernel_uncounted");
}

criterion_group!(benches, bench);
criterion_main!(benches);
