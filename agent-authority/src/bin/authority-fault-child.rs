//! Test-only child process for the crash and concurrency tests of `agent-authority`: it
//! runs one import or local resume against a store and, at the chosen step, prints
//! `REACHED <step>` and waits to be killed (SIGKILL) by the parent test.
//!
//! ```text
//! authority-fault-child import STORE ENVELOPE_FILE STEP|none [PAUSE_MS]
//! authority-fault-child local  STORE ENVELOPE_OUT  STEP|none
//! ```
//! It prints `OUTCOME ok` or `OUTCOME <error kind>` when it finishes, and `KERNEL ACTIVATED`
//! / `KERNEL COMMITTED` when its fake kernel runs past the boundary.
#![forbid(unsafe_code)]

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_authority::kernel::{ImportKernel, KernelError, LocalReservation, PausedRun};
use agent_authority::{Lifecycle, SnapshotEnvelope, Step, Store, StoreOptions};

/// The longest this child waits to be killed before giving up on its own.
const WAIT_FOR_KILL: Duration = Duration::from_secs(60);

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

struct Kernel;
struct Paused;
struct Reservation;

impl ImportKernel for Kernel {
    type Paused = Paused;
    fn commit_paused(self) -> Result<Paused, KernelError> {
        Ok(Paused)
    }
    fn abort(self) {}
}

impl PausedRun for Paused {
    type Running = ();
    fn activate(self) -> Result<(), KernelError> {
        say("KERNEL ACTIVATED");
        Ok(())
    }
    fn abort(self) {}
}

impl LocalReservation for Reservation {
    type Committed = ();
    fn commit(self) -> Result<(), KernelError> {
        say("KERNEL COMMITTED");
        Ok(())
    }
    fn abort(self) {}
}

fn outcome(result: Result<(), agent_authority::AuthorityError>) {
    match result {
        Ok(()) => say("OUTCOME ok"),
        Err(error) => say(&format!("OUTCOME {}", error.kind().as_str())),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, store, file, stop, rest @ ..] = args.as_slice() else {
        eprintln!("usage: authority-fault-child import|local STORE FILE STEP|none [PAUSE_MS]");
        std::process::exit(2);
    };
    let pause = rest
        .first()
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis);
    let armed = Arc::new(AtomicBool::new(mode == "import"));
    let hook = {
        let (armed, stop) = (armed.clone(), stop.clone());
        Arc::new(move |step: Step| {
            if step == Step::ImportLocked
                && let Some(pause) = pause
            {
                std::thread::sleep(pause);
            }
            if armed.load(Ordering::SeqCst) && format!("{step:?}") == stop {
                say(&format!("REACHED {step:?}"));
                std::thread::sleep(WAIT_FOR_KILL);
            }
            Ok(())
        })
    };
    let store = match Store::open(
        StoreOptions::new()
            .directory(PathBuf::from(store))
            .step_hook(hook),
    ) {
        Ok(store) => store,
        Err(error) => return outcome(Err(error)),
    };
    match mode.as_str() {
        "import" => {
            let bytes = std::fs::read(file).unwrap_or_default();
            let result = SnapshotEnvelope::decode(&bytes)
                .map_err(agent_authority::AuthorityError::from)
                .and_then(|envelope| store.prepare_import(&envelope))
                .and_then(|import| import.complete(Kernel))
                .map(|(_run, ())| ());
            outcome(result);
        }
        "local" => {
            let result = (|| {
                let run_id = format!("local-{}", std::process::id());
                let mut run = store.start(&run_id)?;
                let payload = format!(r#"{{"run_id":"{run_id}"}}"#).into_bytes();
                let envelope = run.issue_snapshot(Lifecycle::Suspended, 3, payload)?;
                std::fs::write(file, envelope.to_json()).map_err(|_| {
                    agent_authority::AuthorityError::from(agent_authority::Reason::Io)
                })?;
                say(&format!("RUN {run_id}"));
                armed.store(true, Ordering::SeqCst);
                run.resume_local(Reservation)
            })();
            outcome(result);
        }
        _ => {
            eprintln!("unknown mode {mode}");
            std::process::exit(2);
        }
    }
}
