//! The store's lifecycle: start, issue, resume, terminal, close-as-crash, the import
//! transaction with a fake kernel, local resume ordering, the uncertain fence, leases and
//! the identity.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_authority::{
    ErrorKind, IDENTITY_BYTES, Lifecycle, Phase, Reason, RunStatus, SnapshotEnvelope, Step, Store,
    StoreOptions, TerminalPhase,
};
use support::fake::{self, Kernel, Reservation};
use support::{TempDir, open, payload, state_file, suspended, suspended_owner};

/// A store whose hook fails at `at` once `armed` is set (setup steps pass).
fn failing_at(dir: &std::path::Path, at: Step) -> (Store, Arc<AtomicBool>) {
    let armed = Arc::new(AtomicBool::new(false));
    let store = Store::open(StoreOptions::new().directory(dir).step_hook({
        let armed = armed.clone();
        Arc::new(move |step| {
            if step == at && armed.load(Ordering::SeqCst) {
                Err(())
            } else {
                Ok(())
            }
        })
    }))
    .unwrap();
    (store, armed)
}

fn arm(armed: &AtomicBool) {
    armed.store(true, Ordering::SeqCst);
}

fn status(store: &Store, run_id: &str) -> Option<RunStatus> {
    store.inspect(run_id).unwrap()
}

#[test]
fn a_run_id_that_ever_had_a_record_never_starts_again() {
    let temp = TempDir::new("start-once");
    let store = open(&temp.store_dir());
    let mut run = store.start("run-1").unwrap();
    assert_eq!(run.generation(), 1);
    assert_eq!(status(&store, "run-1").unwrap().phase, Phase::Active);
    // Held by `run`: a second owner is busy (same process, another open file description).
    assert_eq!(store.start("run-1").unwrap_err().kind(), ErrorKind::Busy);
    run.close().unwrap();
    assert_eq!(
        store.start("run-1").unwrap_err().reason(),
        Reason::RunExists
    );
    let mut done = store.start("run-2").unwrap();
    done.terminal(TerminalPhase::Completed).unwrap();
    assert_eq!(
        store.start("run-2").unwrap_err().reason(),
        Reason::RunExists
    );
    assert_eq!(
        store.start("bad\nid").unwrap_err().reason(),
        Reason::InvalidInput
    );
}

#[test]
fn import_follows_the_transaction_order_and_never_twice() {
    let temp = TempDir::new("import");
    let store = open(&temp.store_dir());
    let envelope = suspended(&store, "run-1");
    assert_eq!(
        status(&store, "run-1"),
        Some(RunStatus {
            phase: Phase::Suspended,
            run_generation: 1
        })
    );
    let log = fake::log();
    let import = store.prepare_import(&envelope).unwrap();
    // Preparing changed nothing durable, and it holds the lock.
    assert_eq!(status(&store, "run-1").unwrap().phase, Phase::Suspended);
    assert_eq!(
        store.prepare_import(&envelope).unwrap_err().kind(),
        ErrorKind::Busy
    );
    let (mut run, running) = import.complete(Kernel::new(&log)).unwrap();
    assert_eq!(running, "running");
    assert_eq!(*log.lock().unwrap(), ["commit_paused", "activate"]);
    assert_eq!(run.generation(), 2);
    assert_eq!(
        status(&store, "run-1"),
        Some(RunStatus {
            phase: Phase::Active,
            run_generation: 2
        })
    );
    assert_eq!(
        store.prepare_import(&envelope).unwrap_err().kind(),
        ErrorKind::Busy
    );
    run.close().unwrap();
    assert_eq!(
        store.prepare_import(&envelope).unwrap_err().reason(),
        Reason::NotSuspended
    );
}

#[test]
fn every_step_visits_in_order() {
    let temp = TempDir::new("steps");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let store = Store::open(StoreOptions::new().directory(temp.store_dir()).step_hook({
        let seen = seen.clone();
        Arc::new(move |step| {
            seen.lock().unwrap().push(step);
            Ok(())
        })
    }))
    .unwrap();
    let envelope = suspended(&store, "run-1");
    seen.lock().unwrap().clear();
    let log = fake::log();
    let (mut run, _) = store
        .prepare_import(&envelope)
        .unwrap()
        .complete(Kernel::new(&log))
        .unwrap();
    let envelope = run
        .issue_snapshot(Lifecycle::Suspended, 9, payload("run-1", 2))
        .unwrap();
    assert_eq!(envelope.last_sequence(), 9);
    let state = Arc::new(Mutex::new(b"suspended".to_vec()));
    run.resume_local(Reservation::new(&log, &state)).unwrap();
    run.terminal(TerminalPhase::Completed).unwrap();
    let mut expected: Vec<Step> = Step::ALL[..12].to_vec();
    expected.extend([
        Step::TempSynced(Phase::Active),
        Step::Renamed(Phase::Active),
        Step::LocalInvalidated,
        Step::TempSynced(Phase::Completed),
        Step::Renamed(Phase::Completed),
    ]);
    assert_eq!(*seen.lock().unwrap(), expected);
}

#[test]
fn suspended_keeps_the_lock_and_reissue_is_idempotent() {
    let temp = TempDir::new("reissue");
    let writes = Arc::new(Mutex::new(0));
    let store = Store::open(StoreOptions::new().directory(temp.store_dir()).step_hook({
        let writes = writes.clone();
        Arc::new(move |step| {
            if matches!(step, Step::TempSynced(_)) {
                *writes.lock().unwrap() += 1;
            }
            Ok(())
        })
    }))
    .unwrap();
    let (mut run, envelope) = suspended_owner(&store, "run-1");
    let before = *writes.lock().unwrap();
    let again = run
        .issue_snapshot(Lifecycle::Suspended, 7, payload("run-1", 1))
        .unwrap();
    assert_eq!(again.to_json(), envelope.to_json());
    assert_eq!(
        *writes.lock().unwrap(),
        before,
        "no write for an identical re-issue"
    );
    assert_eq!(
        run.issue_snapshot(Lifecycle::Suspended, 8, payload("run-1", 1))
            .unwrap_err()
            .reason(),
        Reason::SnapshotConflict
    );
    // The owner keeps the lock while suspended.
    let mut other = store.start("run-2").unwrap();
    let error = other
        .issue_snapshot(Lifecycle::Suspended, 1, payload("run-1", 1))
        .unwrap_err();
    assert_eq!(
        error.reason(),
        Reason::InvalidInput,
        "another run's payload"
    );
    assert_eq!(other.phase(), Some(Phase::Active));
    assert_eq!(
        store.prepare_import(&envelope).unwrap_err().kind(),
        ErrorKind::Busy
    );
}

#[test]
fn a_terminal_snapshot_writes_a_tombstone_and_releases_the_lock() {
    let temp = TempDir::new("tombstone");
    let store = open(&temp.store_dir());
    let mut run = store.start("run-1").unwrap();
    let envelope = run
        .issue_snapshot(Lifecycle::Completed, 5, payload("run-1", 3))
        .unwrap();
    assert_eq!(envelope.lifecycle(), Lifecycle::Completed);
    assert_eq!(run.phase(), None);
    assert_eq!(status(&store, "run-1").unwrap().phase, Phase::Completed);
    // Lock released: a new owner can take it, but the run id never restarts.
    assert_eq!(
        store.start("run-1").unwrap_err().reason(),
        Reason::RunExists
    );
    // A terminal envelope is never importable.
    assert_eq!(
        store.prepare_import(&envelope).unwrap_err().reason(),
        Reason::Malformed
    );
    assert_eq!(
        run.issue_snapshot(Lifecycle::Suspended, 6, payload("run-1", 3))
            .unwrap_err()
            .reason(),
        Reason::Closed
    );
}

#[test]
fn a_crashed_active_owner_leaves_the_run_unimportable_forever() {
    let temp = TempDir::new("crash-active");
    let store = open(&temp.store_dir());
    let (mut run, envelope) = suspended_owner(&store, "run-1");
    run.resume().unwrap();
    assert_eq!(run.generation(), 2);
    run.close().unwrap();
    let other = open(&temp.store_dir());
    assert_eq!(
        other.prepare_import(&envelope).unwrap_err().reason(),
        Reason::NotSuspended
    );
    assert_eq!(
        other.start("run-1").unwrap_err().reason(),
        Reason::RunExists
    );
}

#[test]
fn a_crashed_suspended_owner_makes_the_snapshot_importable_once() {
    let temp = TempDir::new("crash-suspended");
    let store = open(&temp.store_dir());
    let (run, envelope) = suspended_owner(&store, "run-1");
    drop(run);
    let other = open(&temp.store_dir());
    let log = fake::log();
    let (_run, _) = other
        .prepare_import(&envelope)
        .unwrap()
        .complete(Kernel::new(&log))
        .unwrap();
    drop(_run);
    assert_eq!(
        other.prepare_import(&envelope).unwrap_err().reason(),
        Reason::NotSuspended
    );
}

#[test]
fn advancing_the_generation_invalidates_older_signatures() {
    let temp = TempDir::new("generations");
    let store = open(&temp.store_dir());
    let (mut run, first) = suspended_owner(&store, "run-1");
    let log = fake::log();
    let state = Arc::new(Mutex::new(b"suspended".to_vec()));
    run.resume_local(Reservation::new(&log, &state)).unwrap();
    assert_eq!(*log.lock().unwrap(), ["local_commit"]);
    // The same sequence and payload again, now at generation 2: a different signature.
    let second = run
        .issue_snapshot(Lifecycle::Suspended, 7, payload("run-1", 1))
        .unwrap();
    assert_ne!(first.authority().mac(), second.authority().mac());
    run.close().unwrap();
    assert_eq!(
        store.prepare_import(&first).unwrap_err().reason(),
        Reason::Rejected
    );
    store.prepare_import(&second).unwrap().abort();
}

#[test]
fn terminal_from_suspended_is_a_tombstone() {
    let temp = TempDir::new("terminal-suspended");
    let store = open(&temp.store_dir());
    let (mut run, envelope) = suspended_owner(&store, "run-1");
    run.terminal(TerminalPhase::Cancelled).unwrap();
    assert_eq!(status(&store, "run-1").unwrap().phase, Phase::Cancelled);
    assert_eq!(
        store.prepare_import(&envelope).unwrap_err().reason(),
        Reason::NotSuspended
    );
    assert_eq!(run.resume().unwrap_err().reason(), Reason::Closed);
}

#[test]
fn local_resume_aborted_before_invalidation_leaves_everything_byte_identical() {
    let temp = TempDir::new("local-abort");
    let (store, armed) = failing_at(&temp.store_dir(), Step::LocalReserved);
    let (mut run, envelope) = suspended_owner(&store, "run-1");
    arm(&armed);
    let file = state_file(&temp.store_dir(), "run-1");
    let record = std::fs::read(&file).unwrap();
    let log = fake::log();
    let state = Arc::new(Mutex::new(b"suspended boundary".to_vec()));
    let error = run
        .resume_local(Reservation::new(&log, &state))
        .unwrap_err();
    assert_ne!(error.kind(), ErrorKind::Uncertain);
    assert_eq!(*log.lock().unwrap(), ["local_abort"]);
    assert_eq!(*state.lock().unwrap(), b"suspended boundary");
    assert_eq!(std::fs::read(&file).unwrap(), record);
    assert_eq!(run.phase(), Some(Phase::Suspended));
    run.close().unwrap();
    open(&temp.store_dir())
        .prepare_import(&envelope)
        .unwrap()
        .abort();
}

#[test]
fn a_failed_invalidation_write_is_uncertain_and_never_commits() {
    let temp = TempDir::new("local-uncertain");
    let (store, armed) = failing_at(&temp.store_dir(), Step::TempSynced(Phase::Active));
    let (mut run, envelope) = suspended_owner(&store, "run-1");
    arm(&armed);
    let log = fake::log();
    let state = Arc::new(Mutex::new(b"suspended".to_vec()));
    let error = run
        .resume_local(Reservation::new(&log, &state))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Uncertain);
    assert_eq!(*log.lock().unwrap(), ["local_abort"]);
    assert_eq!(run.resume().unwrap_err().kind(), ErrorKind::Uncertain);
    assert_eq!(run.close().unwrap_err().kind(), ErrorKind::Uncertain);
    assert!(
        run.close().is_ok(),
        "only the first close reports uncertain"
    );
    assert_eq!(
        store.prepare_import(&envelope).unwrap_err().kind(),
        ErrorKind::Uncertain
    );
    assert_eq!(
        store.start("run-1").unwrap_err().kind(),
        ErrorKind::Uncertain
    );
}

#[test]
fn a_cancelled_import_before_the_write_stays_clean_and_retryable() {
    let temp = TempDir::new("consume-cancel");
    let (store, armed) = failing_at(&temp.store_dir(), Step::ImportVerified);
    let envelope = suspended(&store, "run-1");
    arm(&armed);
    let log = fake::log();
    let error = store
        .prepare_import(&envelope)
        .unwrap()
        .complete(Kernel::new(&log))
        .unwrap_err();
    assert_ne!(error.kind(), ErrorKind::Uncertain);
    assert_eq!(*log.lock().unwrap(), ["kernel_abort"]);
    assert!(!store.is_uncertain("run-1"));
    assert_eq!(status(&store, "run-1").unwrap().phase, Phase::Suspended);
    open(&temp.store_dir())
        .prepare_import(&envelope)
        .unwrap()
        .abort();
}

#[test]
fn a_failed_consume_write_is_uncertain_and_fences_retry() {
    for (at, durable) in [
        (Step::TempSynced(Phase::Importing), Phase::Suspended),
        (Step::Renamed(Phase::Importing), Phase::Importing),
    ] {
        let temp = TempDir::new("consume-fail");
        let (store, armed) = failing_at(&temp.store_dir(), at);
        let envelope = suspended(&store, "run-1");
        arm(&armed);
        let log = fake::log();
        let error = store
            .prepare_import(&envelope)
            .unwrap()
            .complete(Kernel::new(&log))
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Uncertain, "{at:?}");
        assert_eq!(*log.lock().unwrap(), ["kernel_abort"]);
        assert!(store.is_uncertain("run-1"));
        assert_eq!(status(&store, "run-1").unwrap().phase, durable, "{at:?}");
        // Fenced for the rest of this process: no automatic retry.
        assert_eq!(
            store.prepare_import(&envelope).unwrap_err().kind(),
            ErrorKind::Uncertain
        );
        assert_eq!(
            store.start("run-1").unwrap_err().kind(),
            ErrorKind::Uncertain
        );
    }
}

#[test]
fn failures_after_consume_stay_uncertain() {
    /// Where it fails (a hook step, or the kernel's commit or activation), what the kernel
    /// saw, and the phase left on disk.
    type Case = (Option<Step>, bool, bool, &'static [&'static str], Phase);
    let cases: [Case; 4] = [
        (None, true, false, &["commit_paused"], Phase::Importing),
        (
            Some(Step::TempSynced(Phase::Active)),
            false,
            false,
            &["commit_paused", "paused_abort"],
            Phase::Importing,
        ),
        (
            Some(Step::ImportRecorded),
            false,
            false,
            &["commit_paused", "paused_abort"],
            Phase::Active,
        ),
        (
            None,
            false,
            true,
            &["commit_paused", "activate"],
            Phase::Active,
        ),
    ];
    for (at, fail_commit, fail_activate, expected, durable) in cases {
        let temp = TempDir::new("after-consume");
        let (store, armed) = match at {
            Some(at) => failing_at(&temp.store_dir(), at),
            None => (open(&temp.store_dir()), Arc::new(AtomicBool::new(false))),
        };
        let envelope = suspended(&store, "run-1");
        arm(&armed);
        let log = fake::log();
        let mut kernel = Kernel::new(&log);
        kernel.fail_commit = fail_commit;
        kernel.fail_activate = fail_activate;
        let error = store
            .prepare_import(&envelope)
            .unwrap()
            .complete(kernel)
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Uncertain, "{expected:?}");
        assert_eq!(*log.lock().unwrap(), expected);
        assert_eq!(
            status(&store, "run-1").unwrap().phase,
            durable,
            "{expected:?}"
        );
        // Another store of this process shares the fence; another process, without it,
        // finds the record (`durable`, not SUSPENDED) unimportable (`tests/crash.rs`).
        let other = open(&temp.store_dir());
        assert_eq!(
            other.prepare_import(&envelope).unwrap_err().kind(),
            ErrorKind::Uncertain
        );
    }
}

#[test]
fn a_panicking_kernel_is_contained_as_uncertain() {
    struct Panics;
    impl agent_authority::kernel::ImportKernel for Panics {
        type Paused = fake::Paused;
        fn commit_paused(self) -> Result<fake::Paused, agent_authority::kernel::KernelError> {
            panic!("kernel bug")
        }
        fn abort(self) {}
    }
    let temp = TempDir::new("kernel-panic");
    let store = open(&temp.store_dir());
    let envelope = suspended(&store, "run-1");
    let error = store
        .prepare_import(&envelope)
        .unwrap()
        .complete(Panics)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Uncertain);
}

#[test]
fn close_with_an_outstanding_lease_is_busy_until_released() {
    let temp = TempDir::new("close");
    let store = open(&temp.store_dir());
    let run = store.start("run-1").unwrap();
    assert_eq!(
        store.close().unwrap_err().reason(),
        Reason::LeasesOutstanding
    );
    assert!(!store.is_closed());
    // New work is refused while closing.
    assert_eq!(store.start("run-2").unwrap_err().reason(), Reason::Closed);
    drop(run);
    assert!(store.is_closed(), "the last release completes the close");
    store.close().unwrap();
    assert_eq!(store.inspect("run-1").unwrap_err().kind(), ErrorKind::State);
}

fn root_key_hex(dir: &std::path::Path) -> String {
    let bytes = std::fs::read(dir.join("identity.key")).unwrap();
    assert_eq!(bytes.len(), IDENTITY_BYTES);
    bytes[40..].iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_identity_is_random_distinct_stable_and_never_shown() {
    let temp = TempDir::new("identity");
    let dir = temp.store_dir();
    let store = open(&dir);
    let bytes = std::fs::read(dir.join("identity.key")).unwrap();
    assert_eq!(u64::from_be_bytes(bytes[..8].try_into().unwrap()), 1);
    assert_ne!(bytes[8..40], bytes[40..]);
    assert_ne!(bytes[8..40], [0; 32]);
    assert_ne!(bytes[40..], [0; 32]);
    let scope = store.scope_id().unwrap();
    assert_eq!(&scope.as_bytes()[..], &bytes[8..40]);
    assert_eq!(open(&dir).scope_id().unwrap(), scope);
    let other = TempDir::new("identity-other");
    assert_ne!(open(&other.store_dir()).scope_id().unwrap(), scope);

    let key = root_key_hex(&dir);
    let (mut run, envelope) = suspended_owner(&store, "run-1");
    let error = store.start("run-1").unwrap_err();
    let record = std::fs::read_to_string(state_file(&dir, "run-1")).unwrap();
    let shown = format!(
        "{store:?} {run:?} {envelope:?} {error:?} {error} {}",
        String::from_utf8(envelope.to_json()).unwrap()
    );
    assert!(!shown.contains(&key), "{shown}");
    assert!(!record.contains(&key));
    run.close().unwrap();
    let import = store.prepare_import(&envelope).unwrap();
    assert!(!format!("{import:?}").contains(&key));
}

#[test]
fn a_malformed_identity_is_unavailable() {
    let temp = TempDir::new("identity-bad");
    let dir = temp.store_dir();
    drop(open(&dir));
    let bytes = std::fs::read(dir.join("identity.key")).unwrap();
    for bad in [
        &bytes[..IDENTITY_BYTES - 1],
        &[bytes.as_slice(), b"x"].concat()[..],
    ] {
        std::fs::write(dir.join("identity.key"), bad).unwrap();
        let error = Store::open(StoreOptions::new().directory(&dir)).unwrap_err();
        assert_eq!(error.reason(), Reason::IdentityInvalid);
    }
    let mut zero = bytes.clone();
    zero[40..].fill(0);
    std::fs::write(dir.join("identity.key"), &zero).unwrap();
    assert_eq!(
        Store::open(StoreOptions::new().directory(&dir))
            .unwrap_err()
            .reason(),
        Reason::IdentityInvalid
    );
}

#[test]
fn concurrent_opens_initialise_one_identity() {
    let temp = TempDir::new("identity-race");
    let dir = temp.store_dir();
    let scopes: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| open(&dir).scope_id().unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(scopes.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn a_tampered_record_is_a_verification_failure() {
    let temp = TempDir::new("record-tamper");
    let dir = temp.store_dir();
    let store = open(&dir);
    let envelope = suspended(&store, "run-1");
    let file = state_file(&dir, "run-1");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("\"run_generation\":1", "\"run_generation\":2"),
    )
    .unwrap();
    assert_eq!(
        store.prepare_import(&envelope).unwrap_err().reason(),
        Reason::RecordInvalid
    );
    assert_eq!(
        store.start("run-1").unwrap_err().kind(),
        ErrorKind::Verification
    );
    // Past the record bound: refused before parsing.
    std::fs::write(&file, vec![b' '; agent_authority::MAX_RECORD_BYTES + 1]).unwrap();
    assert_eq!(
        store.inspect("run-1").unwrap_err().reason(),
        Reason::RecordInvalid
    );
}

#[test]
fn run_file_names_are_deterministic_and_traversal_safe() {
    let temp = TempDir::new("names");
    let dir = temp.store_dir();
    let store = open(&dir);
    let mut run = store.start("../../escape").unwrap();
    run.close().unwrap();
    assert!(state_file(&dir, "../../escape").exists());
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.contains("escape")), "{names:?}");
    assert!(!temp.path().join("escape.state").exists());
}

#[test]
fn envelopes_from_another_authority_are_refused() {
    let a = TempDir::new("scope-a");
    let b = TempDir::new("scope-b");
    let envelope = suspended(&open(&a.store_dir()), "run-1");
    let other = open(&b.store_dir());
    // Even with a SUSPENDED record for the same run id in the other store.
    suspended(&other, "run-1");
    assert_eq!(
        other.prepare_import(&envelope).unwrap_err().reason(),
        Reason::ForeignScope
    );
    let decoded = SnapshotEnvelope::decode(&envelope.to_json()).unwrap();
    assert_eq!(
        other.prepare_import(&decoded).unwrap_err().kind(),
        ErrorKind::Verification
    );
}

#[test]
fn the_uncertain_fence_holds_for_every_store_on_the_directory() {
    let temp = TempDir::new("fence-shared");
    let (first, armed) = failing_at(&temp.store_dir(), Step::TempSynced(Phase::Importing));
    let envelope = suspended(&first, "run-1");
    // The same record in another directory: its fence is its own.
    let other_temp = TempDir::new("fence-other");
    let other = open(&other_temp.store_dir());
    let other_envelope = suspended(&other, "run-1");
    arm(&armed);
    let log = fake::log();
    let error = first
        .prepare_import(&envelope)
        .unwrap()
        .complete(Kernel::new(&log))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Uncertain);
    // The write never landed: the record still says SUSPENDED, so only the fence refuses.
    assert_eq!(status(&first, "run-1").unwrap().phase, Phase::Suspended);
    let second = open(&temp.store_dir());
    assert!(second.is_uncertain("run-1"));
    assert_eq!(
        second.prepare_import(&envelope).unwrap_err().kind(),
        ErrorKind::Uncertain
    );
    // Closing the first handle and opening a third changes nothing.
    first.close().unwrap();
    let third = open(&temp.store_dir());
    assert_eq!(
        third.prepare_import(&envelope).unwrap_err().kind(),
        ErrorKind::Uncertain
    );
    assert!(!other.is_uncertain("run-1"));
    let (_run, _) = other
        .prepare_import(&other_envelope)
        .unwrap()
        .complete(Kernel::new(&fake::log()))
        .unwrap();
}
