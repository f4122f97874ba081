//! Crash boundaries and concurrency across processes: a child (`authority-fault-child`) is
//! SIGKILLed at each step of an import and of a local resume; the store reopened afterwards
//! is consistent: never two owners, never a snapshot importable twice, never a run that
//! resumed and is still importable. Two children importing one envelope at once: exactly
//! one ends ACTIVE.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use agent_authority::{ErrorKind, Phase, Reason, SnapshotEnvelope, Step, Store};
use support::fake::{self, Kernel};
use support::{TempDir, open, suspended};

const CHILD: &str = env!("CARGO_BIN_EXE_authority-fault-child");
/// A child that says nothing for this long fails the test.
const LINE_TIMEOUT: Duration = Duration::from_secs(30);

struct Watched {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Watched {
    fn spawn(args: &[&str]) -> Watched {
        let mut child = Command::new(CHILD)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the child");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Watched { child, lines }
    }

    /// Lines until one starts with `prefix` (which is returned), or the child ends.
    fn until(&mut self, prefix: &str, seen: &mut Vec<String>) -> Option<String> {
        loop {
            match self.lines.recv_timeout(LINE_TIMEOUT) {
                Ok(line) if line.starts_with(prefix) => return Some(line),
                Ok(line) => seen.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    panic!("the child said nothing for {LINE_TIMEOUT:?}: {seen:?}");
                }
            }
        }
    }

    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }

    /// The outcome line, and every line before it.
    fn finish(mut self) -> (String, Vec<String>) {
        let mut seen = Vec::new();
        let outcome = self.until("OUTCOME ", &mut seen).expect("an outcome");
        self.child.wait().expect("reap");
        (outcome, seen)
    }
}

/// The invariants after any crash: the lock is free (no owner survives the process), the
/// run never restarts, and the envelope imports at most once from here on.
fn check_after_crash(dir: &Path, run_id: &str, envelope: &SnapshotEnvelope, importable: bool) {
    let store = open(dir);
    assert_eq!(store.start(run_id).unwrap_err().reason(), Reason::RunExists);
    let log = fake::log();
    match store.prepare_import(envelope) {
        Ok(import) => {
            assert!(importable, "the snapshot must not be importable any more");
            let (run, _) = import.complete(Kernel::new(&log)).unwrap();
            drop(run);
        }
        Err(error) => {
            assert!(
                !importable,
                "the snapshot should still import once: {error:?}"
            );
            assert_eq!(error.reason(), Reason::NotSuspended);
        }
    }
    let again = open(dir).prepare_import(envelope).unwrap_err();
    assert_eq!(
        again.reason(),
        Reason::NotSuspended,
        "never importable twice"
    );
}

#[test]
fn an_import_killed_at_any_step_leaves_a_consistent_store() {
    let cases = [
        (Step::ImportLocked, Phase::Suspended),
        (Step::ImportVerified, Phase::Suspended),
        (Step::TempSynced(Phase::Importing), Phase::Suspended),
        (Step::Renamed(Phase::Importing), Phase::Importing),
        (Step::ImportConsumed, Phase::Importing),
        (Step::ImportCommitted, Phase::Importing),
        (Step::TempSynced(Phase::Active), Phase::Importing),
        (Step::Renamed(Phase::Active), Phase::Active),
        (Step::ImportRecorded, Phase::Active),
    ];
    for (step, durable) in cases {
        let temp = TempDir::new("crash-import");
        let dir = temp.store_dir();
        let envelope = suspended(&open(&dir), "run-c");
        let file = temp.path().join("envelope.json");
        std::fs::write(&file, envelope.to_json()).unwrap();
        let name = format!("{step:?}");
        let mut child = Watched::spawn(&[
            "import",
            dir.to_str().unwrap(),
            file.to_str().unwrap(),
            &name,
        ]);
        let mut seen = Vec::new();
        let reached = child.until("REACHED ", &mut seen);
        assert_eq!(reached.as_deref(), Some(format!("REACHED {name}").as_str()));
        child.kill();
        assert!(!seen.iter().any(|l| l == "KERNEL ACTIVATED"), "{name}");
        let status = Store::inspect(&open(&dir), "run-c").unwrap().unwrap();
        assert_eq!(status.phase, durable, "{name}");
        check_after_crash(&dir, "run-c", &envelope, durable == Phase::Suspended);
    }
}

#[test]
fn a_local_resume_killed_at_any_step_leaves_a_consistent_store() {
    let cases = [
        (Step::LocalReserved, Phase::Suspended),
        (Step::TempSynced(Phase::Active), Phase::Suspended),
        (Step::Renamed(Phase::Active), Phase::Active),
        (Step::LocalInvalidated, Phase::Active),
    ];
    for (step, durable) in cases {
        let temp = TempDir::new("crash-local");
        let dir = temp.store_dir();
        drop(open(&dir));
        let file = temp.path().join("envelope.json");
        let name = format!("{step:?}");
        let mut child = Watched::spawn(&[
            "local",
            dir.to_str().unwrap(),
            file.to_str().unwrap(),
            &name,
        ]);
        let mut seen = Vec::new();
        let run = child.until("RUN ", &mut seen).expect("the run id");
        let run_id = run.trim_start_matches("RUN ").to_owned();
        let reached = child.until("REACHED ", &mut seen);
        assert_eq!(reached.as_deref(), Some(format!("REACHED {name}").as_str()));
        child.kill();
        // The kernel commit comes only after the durable invalidation: never reached here.
        assert!(!seen.iter().any(|l| l == "KERNEL COMMITTED"), "{name}");
        let envelope = SnapshotEnvelope::decode(&std::fs::read(&file).unwrap()).unwrap();
        let status = open(&dir).inspect(&run_id).unwrap().unwrap();
        assert_eq!(status.phase, durable, "{name}");
        check_after_crash(&dir, &run_id, &envelope, durable == Phase::Suspended);
    }
}

#[test]
fn a_completed_local_resume_is_no_longer_importable() {
    let temp = TempDir::new("local-done");
    let dir = temp.store_dir();
    drop(open(&dir));
    let file = temp.path().join("envelope.json");
    let mut child = Watched::spawn(&[
        "local",
        dir.to_str().unwrap(),
        file.to_str().unwrap(),
        "none",
    ]);
    let mut seen = Vec::new();
    let run = child.until("RUN ", &mut seen).expect("the run id");
    let run_id = run.trim_start_matches("RUN ").to_owned();
    let (outcome, seen) = child.finish();
    assert_eq!(outcome, "OUTCOME ok");
    assert_eq!(seen, ["KERNEL COMMITTED"]);
    let envelope = SnapshotEnvelope::decode(&std::fs::read(&file).unwrap()).unwrap();
    check_after_crash(&dir, &run_id, &envelope, false);
}

#[test]
fn two_processes_importing_one_envelope_end_with_exactly_one_owner() {
    for _ in 0..3 {
        let temp = TempDir::new("race");
        let dir = temp.store_dir();
        let envelope = suspended(&open(&dir), "run-r");
        let file = temp.path().join("envelope.json");
        std::fs::write(&file, envelope.to_json()).unwrap();
        let args = [
            "import",
            dir.to_str().unwrap(),
            file.to_str().unwrap(),
            "none",
            "150",
        ];
        let first = Watched::spawn(&args);
        let second = Watched::spawn(&args);
        let (first, first_lines) = first.finish();
        let (second, second_lines) = second.finish();
        let outcomes = [first, second];
        let winners = outcomes.iter().filter(|o| *o == "OUTCOME ok").count();
        assert_eq!(winners, 1, "{outcomes:?}");
        // Never both running: the kernel was activated exactly once, by the winner.
        let activations = first_lines
            .iter()
            .chain(&second_lines)
            .filter(|l| *l == "KERNEL ACTIVATED")
            .count();
        assert_eq!(activations, 1, "{first_lines:?} {second_lines:?}");
        assert!(
            outcomes
                .iter()
                .all(|o| ["OUTCOME ok", "OUTCOME busy", "OUTCOME verification"]
                    .contains(&o.as_str())),
            "{outcomes:?}"
        );
        let status = open(&dir).inspect("run-r").unwrap().unwrap();
        assert_eq!(status.phase, Phase::Active);
        assert_eq!(status.run_generation, 2);
        assert_eq!(
            open(&dir).prepare_import(&envelope).unwrap_err().kind(),
            ErrorKind::Verification
        );
    }
}
