//! Snapshots that cannot be lost, with the real binary: `--suspend` checks its destination
//! before the run starts, says so when the run ended before a boundary (exit code 11 when it
//! completed), writes its file 0600 and atomically, and shares one envelope format and one
//! authority directory (`$AGENT_AUTHORITY_DIR`) with the daemon, so a one-shot snapshot
//! imports into `agent serve` and a daemon export resumes with `--resume`.
//!
//! Every test uses its own temp tree (workspace, authority, daemon scope and `HOME`), never
//! the real home; every child is killed when its test ends and every wait is bounded.
//! Compiled only without the `openai` feature: the runs use the offline model.
#![cfg(all(unix, not(feature = "openai")))]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const AGENT: &str = env!("CARGO_BIN_EXE_agent");
/// Every wait of these tests is bounded by this.
const DEADLINE: Duration = Duration::from_secs(60);
/// The exit code of `--suspend` when the run ended before a boundary (docs/coding-agent.md).
const NOTHING_SUSPENDED: i32 = 11;

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A private temp tree (short: socket paths are bounded): `ws/` the workspace, `auth/` the
/// run authority, `home/` the user's home, one scope directory per daemon.
struct Sandbox {
    base: PathBuf,
}

impl Sandbox {
    fn new(tag: &str) -> Sandbox {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = PathBuf::from(format!("/tmp/as-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for dir in ["ws", "home"] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(base.join(dir))
                .unwrap();
        }
        std::fs::write(base.join("ws/README.md"), "# sandbox\n").unwrap();
        Sandbox { base }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    /// The environment of every child: the daemon scope, the shared authority directory
    /// and a home of its own (so a default authority would land in the sandbox).
    fn env(&self, pace: Option<&str>) -> Vec<(String, PathBuf)> {
        let mut env = vec![
            ("AGENT_SCOPE_DIR".to_owned(), self.path("scope")),
            ("AGENT_AUTHORITY_DIR".to_owned(), self.path("auth")),
            ("HOME".to_owned(), self.path("home")),
            ("RUST_LOG".to_owned(), PathBuf::from("warn")),
        ];
        if let Some(pace) = pace {
            env.push(("AGENT_OFFLINE_PACE_MS".to_owned(), PathBuf::from(pace)));
        }
        env
    }

    /// The names in `dir`, sorted.
    fn entries(&self, dir: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn lines(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// A child with its output lines forwarded over channels; killed on drop.
struct Proc {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    seen_err: Vec<String>,
}

impl Proc {
    fn spawn(sandbox: &Sandbox, args: &[&str], env: &[(String, PathBuf)]) -> Proc {
        let mut child = Command::new(AGENT)
            .args(args)
            .current_dir(sandbox.path("ws"))
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("XDG_STATE_HOME")
            .env_remove("AGENT_OFFLINE_PACE_MS")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_os_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agent");
        let stdout = lines(child.stdout.take().unwrap());
        let stderr = lines(child.stderr.take().unwrap());
        Proc {
            child,
            stdout,
            stderr,
            seen_err: Vec::new(),
        }
    }

    /// Waits for a stderr line containing `needle`; returns it.
    fn stderr_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => self.seen_err.push(line),
                Err(_) => panic!("no stderr line with {needle:?}: {:?}", self.seen_err),
            }
        }
    }

    /// Waits for the exit (bounded) and drains both pipes.
    fn finish(&mut self) -> (ExitStatus, String, String) {
        let deadline = Instant::now() + DEADLINE;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "the agent did not exit in time");
            std::thread::sleep(Duration::from_millis(10));
        };
        let out: Vec<String> =
            std::iter::from_fn(|| self.stdout.recv_timeout(DEADLINE).ok()).collect();
        let mut err = std::mem::take(&mut self.seen_err);
        err.extend(std::iter::from_fn(|| {
            self.stderr.recv_timeout(DEADLINE).ok()
        }));
        (status, out.join("\n"), err.join("\n"))
    }

    fn terminate(&mut self) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let (status, _, err) = self.finish();
        assert_eq!(status.code(), Some(0), "{err}");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs an `agent` command to its end: (exit code, stdout, stderr).
fn agent(sandbox: &Sandbox, args: &[&str]) -> (Option<i32>, String, String) {
    let (status, out, err) = Proc::spawn(sandbox, args, &sandbox.env(None)).finish();
    (status.code(), out, err)
}

/// `agent serve` on the sandbox's scope and authority, waited for until it serves.
fn serve(sandbox: &Sandbox, pace: Option<&str>) -> Proc {
    let mut daemon = Proc::spawn(sandbox, &["serve"], &sandbox.env(pace));
    daemon.stderr_line("serving on");
    daemon
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn run_id(envelope: &Path) -> String {
    let value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(envelope).unwrap()).expect("a JSON envelope");
    value["run_id"].as_str().expect("run_id").to_owned()
}

/// Before: the run started (its events printed), then the snapshot was lost (exit 1).
#[test]
fn suspend_checks_its_destination_before_the_run_starts() {
    let sandbox = Sandbox::new("dest");
    let missing = sandbox.path("missing/dir/run.json");
    let (code, out, err) = agent(
        &sandbox,
        &["--json", "--suspend", missing.to_str().unwrap(), "survey"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "cannot write the snapshot to {}: its directory {} does not exist",
            missing.display(),
            sandbox.path("missing/dir").display()
        )),
        "{err}"
    );
    assert_eq!(out, "", "no run event: nothing ran");

    // A directory is not replaced; nothing ran, nothing was left behind.
    let (code, out, err) = agent(&sandbox, &["--json", "--suspend", "../ws", "survey"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("cannot write the snapshot to ../ws: it is a directory"),
        "{err}"
    );
    assert_eq!(out, "");
    assert_eq!(sandbox.entries("ws"), ["README.md"]);
}

/// Before: the file was 0644.
#[test]
fn a_snapshot_file_is_private_and_written_whole() {
    let sandbox = Sandbox::new("mode");
    std::fs::create_dir(sandbox.path("out")).unwrap();
    let file = sandbox.path("out/run.json");
    std::fs::write(&file, "an older file, replaced whole").unwrap();
    let (code, _, err) = agent(&sandbox, &["--suspend", file.to_str().unwrap(), "survey"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(mode(&file), 0o600);
    assert!(!run_id(&file).is_empty());
    assert_eq!(sandbox.entries("out"), ["run.json"], "no temp file is left");
}

/// Before: no word about the suspension, and the summary alone.
#[test]
fn a_run_that_ends_before_a_boundary_says_nothing_was_suspended() {
    let sandbox = Sandbox::new("ended");
    let file = sandbox.path("run.json");
    // One turn at most: the run ends (failed: out of turns) where it could be suspended.
    let (code, _, err) = agent(
        &sandbox,
        &[
            "--max-turns",
            "1",
            "--suspend",
            file.to_str().unwrap(),
            "survey",
        ],
    );
    assert!(
        err.contains("the run ended before a turn boundary; nothing to suspend"),
        "{err}"
    );
    assert_eq!(code, Some(1), "a failed run keeps its exit code: {err}");
    assert_ne!(code, Some(NOTHING_SUSPENDED));
    assert!(!file.exists());
    let left: Vec<String> = sandbox
        .entries("")
        .into_iter()
        .filter(|name| name.contains("run.json"))
        .collect();
    assert!(left.is_empty(), "no temp file is left: {left:?}");
}

/// Before: the one-shot CLI used the default directory under `HOME` whatever
/// `AGENT_AUTHORITY_DIR` said.
#[test]
fn the_one_shot_cli_uses_the_authority_directory_of_the_environment() {
    let sandbox = Sandbox::new("env");
    let file = sandbox.path("run.json");
    let (code, _, err) = agent(&sandbox, &["--suspend", file.to_str().unwrap(), "survey"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        sandbox.path("auth/identity.key").exists(),
        "the run is in $AGENT_AUTHORITY_DIR"
    );
    assert!(
        !sandbox.path("home/.local/state").exists(),
        "the default directory was not used"
    );
    // `--authority DIR` still wins: another authority refuses the snapshot (exit 4).
    let other = sandbox.path("other");
    let (code, _, err) = agent(
        &sandbox,
        &[
            "--authority",
            other.to_str().unwrap(),
            "--resume",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(4), "{err}");
    let (code, _, err) = agent(&sandbox, &["--resume", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("done:"), "{err}");
}

/// Before: `agent import` said `snapshot is not an envelope` (and the one-shot run's record
/// was in another directory).
#[test]
fn a_one_shot_snapshot_imports_into_the_daemon() {
    let sandbox = Sandbox::new("in");
    let _daemon = serve(&sandbox, None);
    let file = sandbox.path("run.json");
    let (code, _, err) = agent(&sandbox, &["--suspend", file.to_str().unwrap(), "survey"]);
    assert_eq!(code, Some(0), "{err}");
    let run = run_id(&file);

    let (code, out, err) = agent(&sandbox, &["import", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), run);
    let (code, out, err) = agent(&sandbox, &["attach", &run]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(err.contains(&format!("done: run {run}")), "{err}");
    assert!(out.contains("offline model"), "{out}");
    // Exactly once: the one-shot CLI cannot resume it any more (exit 5).
    let (code, _, err) = agent(&sandbox, &["--resume", file.to_str().unwrap()]);
    assert_eq!(code, Some(5), "{err}");
}

/// Before: the export was the daemon's wire encoding, which `--resume` refused as malformed
/// (exit 3), and the one-shot CLI looked in another authority directory.
#[test]
fn a_daemon_export_resumes_in_the_one_shot_cli() {
    let sandbox = Sandbox::new("out");
    let mut daemon = serve(&sandbox, Some("1000"));
    let mut client = Proc::spawn(
        &sandbox,
        &["run", "--daemon", "--yes", "--json", "survey the workspace"],
        &sandbox.env(None),
    );
    let line = client.stderr_line("in the daemon");
    let run = line
        .split_whitespace()
        .nth(2)
        .expect("agent: run RUN in the daemon")
        .to_owned();
    let (code, _, err) = agent(&sandbox, &["suspend", &run]);
    assert_eq!(code, Some(0), "{err}");
    let _ = client.finish();

    let file = sandbox.path("run.json");
    let (code, _, err) = agent(&sandbox, &["export", &run, "-o", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(mode(&file), 0o600);
    assert_eq!(
        run_id(&file),
        run,
        "the export is the authority's JSON envelope"
    );
    // The daemon holds the run while it serves; stopping it lets the run go.
    daemon.terminate();

    let (code, out, err) = agent(&sandbox, &["--resume", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(err.contains("done:"), "{err}");
    assert!(out.contains("offline model"), "{out}");
}
