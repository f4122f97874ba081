//! `agent --suspend` / `--resume` through the run authority, at process level: each refusal
//! (a second resume of one file, a file edited by one byte, a file from another user's
//! authority, a run another process holds) fails with a clear message and its own exit
//! code, and nothing runs: no output, and the authority's record is unchanged. Every test
//! uses temporary directories only, never the real home.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agent_authority::{Phase, SnapshotEnvelope, Store, StoreOptions};

const AGENT: &str = env!("CARGO_BIN_EXE_agent");
/// A child that runs longer than this is killed and the test fails.
const DEADLINE: Duration = Duration::from_secs(30);

/// Exit codes of the authority refusals (docs/coding-agent.md).
const ALTERED: i32 = 3;
const FOREIGN: i32 = 4;
const ALREADY_RESUMED: i32 = 5;
const BUSY: i32 = 6;

struct Sandbox {
    base: PathBuf,
}

impl Sandbox {
    fn new(test: &str) -> Self {
        let base =
            std::env::temp_dir().join(format!("agent-cli-authority-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("workspace/src")).unwrap();
        std::fs::write(base.join("workspace/README.md"), "# Widgets\n").unwrap();
        std::fs::write(base.join("workspace/src/main.rs"), "fn main() {}\n").unwrap();
        Sandbox { base }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn agent(args: &[&Path]) -> Output {
    let mut child = Command::new(AGENT)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("AGENT_OFFLINE_PACE_MS")
        // The offline model, chosen explicitly; no config file of the user's applies.
        .env("AGENT_PROVIDER", "offline")
        .env(
            "AGENT_CONFIG_DIR",
            std::env::temp_dir().join("agent-test-no-config-dir"),
        )
        .spawn()
        .expect("spawn the agent");
    let started = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("the agent ran longer than {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Suspends a run with `authority`, returning the envelope file.
fn suspend(sandbox: &Sandbox, authority: &Path) -> PathBuf {
    let file = sandbox.path("run.envelope.json");
    let out = agent(&[
        Path::new("--workspace"),
        &sandbox.path("workspace"),
        Path::new("--authority"),
        authority,
        Path::new("--suspend"),
        &file,
        Path::new("task"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    file
}

fn resume(sandbox: &Sandbox, authority: &Path, file: &Path) -> Output {
    agent(&[
        Path::new("--workspace"),
        &sandbox.path("workspace"),
        Path::new("--authority"),
        authority,
        Path::new("--resume"),
        file,
    ])
}

/// A refusal: the exit code, the message, and nothing ran.
fn assert_refused(out: &Output, code: i32, message: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing runs: {}", text(&out.stdout));
    assert!(
        stderr.starts_with("agent: ") && stderr.contains(message),
        "{stderr}"
    );
}

fn assert_resumes(out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("-> read_file"),
        "{}",
        text(&out.stdout)
    );
}

fn run_id(file: &Path) -> String {
    let envelope = SnapshotEnvelope::decode(&std::fs::read(file).unwrap()).unwrap();
    envelope.run_id().to_owned()
}

fn phase_of(authority: &Path, run_id: &str) -> Phase {
    let store = Store::open(StoreOptions::new().directory(authority)).unwrap();
    store.inspect(run_id).unwrap().unwrap().phase
}

fn phase(authority: &Path, file: &Path) -> Phase {
    phase_of(authority, &run_id(file))
}

#[test]
fn a_second_resume_of_the_same_file_is_refused() {
    let sandbox = Sandbox::new("second");
    let authority = sandbox.path("authority");
    let file = suspend(&sandbox, &authority);
    assert_eq!(phase(&authority, &file), Phase::Suspended);
    assert_resumes(&resume(&sandbox, &authority, &file));
    assert_eq!(phase(&authority, &file), Phase::Completed);
    assert_refused(
        &resume(&sandbox, &authority, &file),
        ALREADY_RESUMED,
        "already resumed",
    );
    assert_eq!(phase(&authority, &file), Phase::Completed);
}

#[test]
fn a_file_edited_by_one_byte_is_refused() {
    let sandbox = Sandbox::new("edited");
    let authority = sandbox.path("authority");
    let file = suspend(&sandbox, &authority);
    let original = std::fs::read(&file).unwrap();
    let id = run_id(&file);
    // One byte of the history's text, deep inside the payload: the JSON stays valid.
    let at = original
        .windows(5)
        .position(|w| w == b"task\"")
        .expect("the task text");
    // And one hex digit of the MAC (the last member): structure holds, the key refuses.
    for (index, replacement) in [(at, b'T'), (original.len() - 4, b'0')] {
        let mut edited = original.clone();
        edited[index] = if edited[index] == replacement {
            b'1'
        } else {
            replacement
        };
        std::fs::write(&file, &edited).unwrap();
        let out = resume(&sandbox, &authority, &file);
        assert_refused(&out, ALTERED, "snapshot");
        assert_eq!(phase_of(&authority, &id), Phase::Suspended);
    }
    // Nothing was consumed: the untouched file still resumes.
    std::fs::write(&file, &original).unwrap();
    assert_resumes(&resume(&sandbox, &authority, &file));
}

#[test]
fn a_file_from_another_users_authority_is_refused() {
    let sandbox = Sandbox::new("foreign");
    let mine = sandbox.path("mine");
    let theirs = sandbox.path("theirs");
    let file = suspend(&sandbox, &theirs);
    assert_refused(
        &resume(&sandbox, &mine, &file),
        FOREIGN,
        "another run authority",
    );
    assert_eq!(phase(&theirs, &file), Phase::Suspended);
    assert_resumes(&resume(&sandbox, &theirs, &file));
}

#[test]
fn a_run_another_process_holds_is_busy() {
    let sandbox = Sandbox::new("busy");
    let authority = sandbox.path("authority");
    let file = suspend(&sandbox, &authority);
    let envelope = SnapshotEnvelope::decode(&std::fs::read(&file).unwrap()).unwrap();
    let store = Store::open(StoreOptions::new().directory(&authority)).unwrap();
    // This test process holds the run's lock through a prepared import.
    let import = store.prepare_import(&envelope).unwrap();
    assert_refused(
        &resume(&sandbox, &authority, &file),
        BUSY,
        "another process holds the run",
    );
    assert_eq!(
        store.inspect(envelope.run_id()).unwrap().unwrap().phase,
        Phase::Suspended
    );
    import.abort();
    assert_resumes(&resume(&sandbox, &authority, &file));
}
