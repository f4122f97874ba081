//! CPU time of a text run, beside its wall time: the `text_run` workloads of the `host`
//! bench (`bare_engine`, `host_tmpfs`, `authority_floor_tmpfs`), each run a fixed number of
//! times in turn, three rounds, printing per run the wall time and the CPU time of the whole
//! process (every thread: the caller, the runtime's two workers), from `/proc/self/stat`.
//!
//! On a shared machine the wall time of a microsecond workload swings with whatever else
//! runs; the CPU time it burns moves much less, so this is the figure to compare builds by
//! when the machine is not idle (what a run costs, not how long it waited for a core).
//!
//! Run with `cargo bench -p agent-daemon --bench host_cpu`; results are in
//! `docs/performance.md`.

#[path = "support/text_run.rs"]
mod text_run;

use text_run::{Dir, agent, authority_floor_run, engine, host, host_text_run};

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use agent_authority::{Store, StoreOptions};
use agent_core::message::Message;

/// Runs of each workload per round.
const RUNS: u32 = 20_000;
/// Rounds; every round runs every workload once.
const ROUNDS: usize = 3;

/// User plus system CPU time of this process so far (all threads).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("procfs");
    // The command name (field 2) may hold spaces: count fields after its closing paren.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    // Linux reports them in USER_HZ, 100 per second on every architecture it runs on.
    Duration::from_millis(ticks * 10)
}

/// Runs `body` (which runs the workload `runs` times) and prints the cost per run.
fn measure(name: &str, runs: u32, body: impl FnOnce()) {
    let (wall, cpu) = (Instant::now(), cpu_time());
    body();
    let (wall, cpu) = (wall.elapsed(), cpu_time() - cpu);
    println!(
        "{name:<32} wall {:>7.1} µs/run   cpu {:>7.1} µs/run",
        wall.as_secs_f64() * 1e6 / f64::from(runs),
        cpu.as_secs_f64() * 1e6 / f64::from(runs),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing to a harnessless
    // bench but must not take minutes: run only when benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bare = engine(None);
    let tmpfs = Dir::new(PathBuf::from("/dev/shm"), "cpu-tmpfs");
    let floor = Dir::new(PathBuf::from("/dev/shm"), "cpu-floor");
    let (on_tmpfs, session) = runtime.block_on(async { host(&tmpfs) });
    let store = Store::open(StoreOptions::new().directory(floor.0.join("store"))).unwrap();
    for round in 1..=ROUNDS {
        println!("round {round}");
        measure("text_run/bare_engine", RUNS, || {
            runtime.block_on(async {
                for _ in 0..RUNS {
                    let run = bare
                        .start(&agent(), Message::user("hello").unwrap())
                        .await
                        .unwrap();
                    black_box(run.wait().await.unwrap());
                }
            })
        });
        measure("text_run/host_tmpfs", RUNS, || {
            runtime.block_on(async {
                for _ in 0..RUNS {
                    host_text_run(&on_tmpfs, &session).await;
                }
            })
        });
        measure("text_run/authority_floor_tmpfs", RUNS, || {
            for _ in 0..RUNS {
                authority_floor_run(&store);
            }
        });
    }
    runtime.block_on(async { on_tmpfs.shutdown().await.unwrap() });
}
