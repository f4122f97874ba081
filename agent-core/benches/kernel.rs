//! The kernel reference workloads, reproduced exactly (see `docs/performance.md`):
//!
//! - `kernel/engine_construction`: build an empty dispatcher, the static plan source and the
//!   engine, then close it with no runs;
//! - `kernel/text_run`: `start` + `wait` of a one-turn run whose provider answers
//!   `[completed]` (6 events);
//! - `kernel/tool_round`: `start` + `wait` of a two-turn run with one `read` tool call
//!   (12 events, 2 provider requests, 1 dispatch);
//! - `kernel/cancellation`: `start`, wait until the provider is streaming, `cancel`, `wait`
//!   (6 events ending in `run.cancelled`).
//!
//! Every run uses a scripted provider, atomic ids, a fixed clock, a static plan, no
//! observers, and one long-lived engine on a single-threaded runtime. Besides criterion's
//! timings, this benchmark counts heap allocations (reallocations included) and bytes per
//! iteration with a counting global allocator and prints them (`allocations/iter`). Counting
//! costs two atomic additions per allocation and per free, which these timings include;
//! `kernel_uncounted` times the same workloads on the plain system allocator. Run with
//! `cargo bench -p agent-core --bench kernel`.

use std::alloc::System;

use criterion::{Criterion, criterion_group, criterion_main};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[path = "support/kernel_workloads.rs"]
mod workloads;

// `RUSTFLAGS="--cfg kernel_uncounted"` leaves the system allocator in place (the printed
// counts are then zero); `kernel_uncounted` does the same without rebuilding anything.
#[cfg_attr(not(kernel_uncounted), global_allocator)]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations (a reallocation counts too: Go, the reference, has no realloc, growth
/// allocates anew), bytes allocated and bytes reallocated so far.
fn count() -> (u64, u64, i64) {
    let stats = GLOBAL.stats();
    (
        (stats.allocations + stats.reallocations) as u64,
        stats.bytes_allocated as u64,
        stats.bytes_reallocated as i64,
    )
}

fn bench(c: &mut Criterion) {
    workloads::bench(c, "kernel", Some(count));
}

criterion_group!(benches, bench);
criterion_main!(benches);
