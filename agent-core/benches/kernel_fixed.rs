//! Runs one kernel reference workload a given number of times and exits, on the plain system
//! allocator: the program `benches/compare-original.sh --instructions` counts under
//! callgrind at two iteration counts, so that the difference divided by the extra
//! iterations is the instructions one iteration costs, with the setup, the warm-up and the
//! host's load all cancelled out. The original's benchmark is counted the same way.
//!
//! ```sh
//! cargo bench -p agent-core --bench kernel_fixed -- text_run 2500
//! ```
//!
//! Workloads: `engine_construction`, `text_run`, `tool_round`, `cancellation` (the same
//! closures `kernel` and `kernel_uncounted` time). Anything else prints how to use it and
//! fails, except under `cargo bench` (which passes `--bench` and its own arguments to every
//! benchmark binary), where it is skipped so that running every benchmark still succeeds.

use std::future::Future;
use std::process::ExitCode;

use tokio::runtime::Runtime;

// The criterion entry points of the module are `kernel`'s and `kernel_uncounted`'s.
#[allow(dead_code)]
#[path = "support/kernel_workloads.rs"]
mod workloads;

/// Runs the workload called `name`, `iterations` times in one `block_on` (as criterion's
/// asynchronous loop does), and skips the others.
struct Repeat<'a> {
    name: &'a str,
    iterations: u64,
    events: Option<u64>,
}

impl workloads::Workloads for Repeat<'_> {
    fn workload<F, Fut>(&mut self, runtime: &Runtime, name: &str, run: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = u64>,
    {
        if name != self.name {
            return;
        }
        let events = runtime.block_on(async {
            let mut events = 0;
            for _ in 0..self.iterations {
                events += run().await;
            }
            events
        });
        self.events = Some(events);
    }
}

const USAGE: &str =
    "usage: kernel_fixed <engine_construction|text_run|tool_round|cancellation> <iterations>";

fn main() -> ExitCode {
    let mut from_cargo_bench = false;
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| {
            let flag = arg == "--bench";
            from_cargo_bench |= flag;
            !flag
        })
        .collect();
    // `cargo bench` runs every benchmark binary with the same arguments (criterion's
    // filters and options, or none), so there anything but a workload is not this one's.
    let not_ours = || {
        eprintln!("{USAGE}");
        if from_cargo_bench {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(2)
        }
    };
    let [name, iterations] = args.as_slice() else {
        return not_ours();
    };
    let Ok(iterations) = iterations.parse::<u64>() else {
        return not_ours();
    };
    let mut repeat = Repeat {
        name,
        iterations,
        events: None,
    };
    // The workloads module is the one list of workloads: a name it has none of runs nothing.
    workloads::each(&mut repeat);
    let Some(events) = repeat.events else {
        return not_ours();
    };
    println!("kernel_fixed/{name}: {iterations} iterations, {events} events");
    ExitCode::SUCCESS
}
