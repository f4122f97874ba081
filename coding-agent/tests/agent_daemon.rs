//! The daemon you run and attach to, end to end with real processes: `agent serve` daemons
//! and `agent` clients over real Unix sockets, each daemon isolated in its own temp scope
//! directory (and run authority). Every child is killed when its test ends; every wait is
//! bounded by [`DEADLINE`].
//!
//! No model is configured (no config file, no provider variables), so the coding agent's
//! definition runs the offline model, paced by `AGENT_OFFLINE_PACE_MS` where a run must stay
//! in flight.
#![cfg(unix)]

#[path = "support/lines.rs"]
mod lines;
use lines::lines;

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const AGENT: &str = env!("CARGO_BIN_EXE_agent");
/// Every wait of these tests is bounded by this.
const DEADLINE: Duration = Duration::from_secs(60);
/// The offline model's pace for runs that must still be in flight when the test acts.
const SLOW_PACE_MS: &str = "1000";

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A private temp tree (short: socket paths are bounded): `ws/` (the daemons' workspace),
/// `auth/` (the shared run authority) and one scope directory per daemon.
struct Sandbox {
    base: PathBuf,
}

impl Sandbox {
    fn new(tag: &str) -> Sandbox {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = PathBuf::from(format!("/tmp/ad-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(base.join("ws"))
            .unwrap();
        std::fs::write(base.join("ws/README.md"), "# sandbox\n").unwrap();
        Sandbox { base }
    }

    fn scope(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    fn env(&self, scope: &str, pace: Option<&str>) -> Vec<(String, String)> {
        let mut env = vec![
            (
                "AGENT_SCOPE_DIR".to_owned(),
                self.scope(scope).display().to_string(),
            ),
            (
                "AGENT_AUTHORITY_DIR".to_owned(),
                self.path("auth").display().to_string(),
            ),
            ("RUST_LOG".to_owned(), "warn".to_owned()),
            // Holds no config.toml: no configuration of the user's applies.
            (
                "AGENT_CONFIG_DIR".to_owned(),
                self.path("config").display().to_string(),
            ),
        ];
        if let Some(pace) = pace {
            env.push(("AGENT_OFFLINE_PACE_MS".to_owned(), pace.to_owned()));
        }
        env
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// A child process with its output lines forwarded over channels; killed on drop.
struct Proc {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    seen_out: Vec<String>,
    seen_err: Vec<String>,
}

impl Proc {
    fn spawn(sandbox: &Sandbox, args: &[&str], env: &[(String, String)]) -> Proc {
        Proc::spawn_in(&sandbox.path("ws"), args, env)
    }

    /// Like [`Proc::spawn`], in directory `dir`.
    fn spawn_in(dir: &Path, args: &[&str], env: &[(String, String)]) -> Proc {
        let mut child = Command::new(AGENT)
            .args(args)
            .current_dir(dir)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("AGENT_PROVIDER")
            .env_remove("AGENT_MODEL")
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
            seen_out: Vec::new(),
            seen_err: Vec::new(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a stderr line containing `needle`; returns it.
    fn stderr_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    self.seen_err.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!("no stderr line with {needle:?}: {:?}", self.seen_err),
            }
        }
    }

    /// Waits for a stdout line containing `needle`.
    fn stdout_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) => {
                    self.seen_out.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!("no stdout line with {needle:?}: {:?}", self.seen_out),
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
        // The pipes close at exit: drain what is left.
        while let Ok(line) = self.stdout.recv_timeout(DEADLINE) {
            self.seen_out.push(line);
        }
        while let Ok(line) = self.stderr.recv_timeout(DEADLINE) {
            self.seen_err.push(line);
        }
        (status, self.seen_out.join("\n"), self.seen_err.join("\n"))
    }

    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `agent serve --fixture` in `scope`, waited for until it serves.
fn serve(sandbox: &Sandbox, scope: &str, pace: Option<&str>) -> Proc {
    let mut daemon = Proc::spawn(sandbox, &["serve", "--fixture"], &sandbox.env(scope, pace));
    daemon.stderr_line("serving on");
    daemon
}

/// Runs an `agent` command to its end: (exit code, stdout, stderr).
fn agent(sandbox: &Sandbox, scope: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let mut p = Proc::spawn(sandbox, args, &sandbox.env(scope, None));
    let (status, out, err) = p.finish();
    (status.code(), out, err)
}

/// The run id an `agent run --daemon` announces on stderr.
fn announced_run(p: &mut Proc) -> String {
    let line = p.stderr_line("in the daemon");
    line.split_whitespace()
        .nth(2)
        .expect("agent: run RUN in the daemon")
        .to_owned()
}

fn run_terminals(json_lines: &str) -> Vec<String> {
    json_lines
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["kind"].as_str().map(str::to_owned))
        .filter(|k| matches!(k.as_str(), "run.completed" | "run.failed" | "run.cancelled"))
        .collect()
}

/// The daemon pid a scope's endpoint record names.
fn published_pid(scope: &Path) -> Option<u32> {
    let bytes = std::fs::read(scope.join("endpoint.json")).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    value["process_id"].as_u64().map(|p| p as u32)
}

/// Kills (SIGKILL) a daemon the CLI started, by the pid its scope publishes.
struct Published(Option<u32>);

impl Drop for Published {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Start, stream, suspend (which fences the streaming client), export, import into a
/// second daemon process, follow it there to its end; a second import of the same snapshot
/// is refused.
#[test]
fn a_run_moves_between_daemons_through_a_signed_snapshot() {
    let sandbox = Sandbox::new("move");
    let mut first = serve(&sandbox, "a", Some(SLOW_PACE_MS));
    let _second = serve(&sandbox, "b", Some(SLOW_PACE_MS));

    let mut client = Proc::spawn(
        &sandbox,
        &["run", "--daemon", "--yes", "--json", "survey the workspace"],
        &sandbox.env("a", None),
    );
    let run = announced_run(&mut client);
    client.stdout_line("\"run.started\"");
    // `agent runs` does not fence the streaming client: it reports the run as attached.
    let (code, out, err) = agent(&sandbox, "a", &["runs"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("{run}\tattached")), "{out}");

    let (code, out, err) = agent(&sandbox, "a", &["suspend", &run]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("suspended {run}")), "{out}");
    // The suspend reconnected as the run's owner: the streaming client was fenced.
    let (status, streamed, err) = client.finish();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "agent: `agent suspend` took over run {run} (this one detached)"
        )),
        "{err}"
    );
    assert!(run_terminals(&streamed).is_empty(), "{streamed}");

    let (code, _, err) = agent(&sandbox, "a", &["runs"]);
    assert_eq!(code, Some(0), "{err}");

    let snapshot = sandbox.path("run.snapshot");
    let snapshot = snapshot.to_str().unwrap();
    let (code, _, err) = agent(&sandbox, "a", &["export", &run, "-o", snapshot]);
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::metadata(snapshot).unwrap().len() > 0);

    // The first daemon lets the run go when it stops (its host holds the run while it
    // serves); stopping it is SIGTERM, which exits 0.
    first.signal("-TERM");
    let (status, _, err) = first.finish();
    assert_eq!(status.code(), Some(0), "{err}");

    let (code, out, err) = agent(&sandbox, "b", &["import", snapshot]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), run);
    let (code, out, err) = agent(&sandbox, "b", &["attach", &run]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(err.contains(&format!("done: run {run}")), "{err}");
    assert!(out.contains("offline model"), "{out}");

    let (code, _, err) = agent(&sandbox, "b", &["import", snapshot]);
    assert_eq!(code, Some(1), "a second import is refused: {err}");
    let (code, out, _) = agent(&sandbox, "b", &["runs"]);
    assert_eq!(code, Some(0));
    assert!(out.contains(&format!("{run}\tcompleted")), "{out}");
}

/// A client killed with SIGKILL mid-stream: the daemon keeps serving, and the run stays
/// reachable through `agent attach` (which reconnects as its owner).
#[test]
fn a_killed_client_leaves_the_daemon_serving() {
    let sandbox = Sandbox::new("killed");
    let _daemon = serve(&sandbox, "a", None);
    let mut client = Proc::spawn(
        &sandbox,
        &[
            "run",
            "--daemon",
            "--json",
            "--definition",
            "01-fixture-pending",
            "wait",
        ],
        &sandbox.env("a", None),
    );
    let run = announced_run(&mut client);
    client.stdout_line("\"model.started\"");
    client.signal("-KILL");
    let (status, _, _) = client.finish();
    assert_eq!(status.code(), None, "killed by a signal");

    let (code, out, err) = agent(
        &sandbox,
        "a",
        &[
            "run",
            "--daemon",
            "--json",
            "--definition",
            "00-fixture-text",
            "hi",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(run_terminals(&out), ["run.completed"]);
    let text_run = err
        .lines()
        .find(|l| l.contains("in the daemon"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap()
        .to_owned();
    // `attach --from SEQ` replays only what follows SEQ: the text delta is event 4.
    let (code, out, err) = agent(&sandbox, "a", &["attach", &text_run, "--from", "3"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("fixture reply"), "{out}");
    let (code, out, err) = agent(&sandbox, "a", &["attach", &text_run, "--from", "4"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!out.contains("fixture reply"), "{out}");

    // The killed client's run is still there: `agent runs` reconnects as its owner (the
    // killed process's attachment lock died with it) and finds it running.
    let (code, out, err) = agent(&sandbox, "a", &["runs"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("{run}\trunning")), "{out}");
}

/// A daemon killed with SIGKILL and started again in the same scope: the stale socket and
/// endpoint record do not block the restart, a run it had suspended is still importable
/// (into the new daemon), and no run it had is replayed there.
#[test]
fn a_daemon_killed_with_sigkill_restarts_cleanly() {
    let sandbox = Sandbox::new("sigkill");
    let mut daemon = serve(&sandbox, "a", Some(SLOW_PACE_MS));
    // One run left active, one suspended and exported.
    let mut pending = Proc::spawn(
        &sandbox,
        &[
            "run",
            "--daemon",
            "--json",
            "--definition",
            "01-fixture-pending",
            "wait",
        ],
        &sandbox.env("a", None),
    );
    let active = announced_run(&mut pending);
    pending.stdout_line("\"model.started\"");
    let mut client = Proc::spawn(
        &sandbox,
        &["run", "--daemon", "--yes", "--json", "survey"],
        &sandbox.env("a", None),
    );
    let run = announced_run(&mut client);
    client.stdout_line("\"run.started\"");
    let (code, _, err) = agent(&sandbox, "a", &["suspend", &run]);
    assert_eq!(code, Some(0), "{err}");
    let snapshot = sandbox.path("run.snapshot");
    let snapshot = snapshot.to_str().unwrap();
    let (code, _, err) = agent(&sandbox, "a", &["export", &run, "-o", snapshot]);
    assert_eq!(code, Some(0), "{err}");

    daemon.signal("-KILL");
    daemon.finish();
    pending.finish();
    assert!(
        sandbox.scope("a").join("agent.sock").exists(),
        "the socket is stale"
    );
    assert!(
        sandbox.scope("a").join("endpoint.json").exists(),
        "the record is stale"
    );

    let _restarted = serve(&sandbox, "a", None);
    // No run was replayed: the new daemon does not know the old active run.
    let (code, _, err) = agent(&sandbox, "a", &["suspend", &active]);
    assert_eq!(code, Some(1), "{err}");
    let (code, out, err) = agent(&sandbox, "a", &["runs"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("{active}\tunknown")), "{out}");
    // The suspended run is importable and finishes here.
    let (code, out, err) = agent(&sandbox, "a", &["import", snapshot]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), run);
    let (code, _, err) = agent(&sandbox, "a", &["attach", &run]);
    assert_eq!(code, Some(0), "{err}");
}

/// Two `agent run --daemon` racing with no daemon running start exactly one daemon (the
/// startup lock and the re-discovery under it), and both runs complete there.
#[test]
fn racing_clients_start_exactly_one_daemon() {
    let sandbox = Sandbox::new("race");
    let mut clients: Vec<Proc> = (0..2)
        .map(|n| {
            Proc::spawn(
                &sandbox,
                &["run", "--daemon", "--json", "--yes", &format!("task {n}")],
                &sandbox.env("a", None),
            )
        })
        .collect();
    let mut outcomes = Vec::new();
    for client in &mut clients {
        outcomes.push(client.finish());
    }
    let _daemon = Published(published_pid(&sandbox.scope("a")));
    for (status, out, err) in &outcomes {
        assert_eq!(status.code(), Some(0), "{err}");
        assert_eq!(run_terminals(out), ["run.completed"], "{out}");
    }
    let log = std::fs::read_to_string(sandbox.scope("a").join("daemon.log")).unwrap();
    assert_eq!(log.matches("serving on").count(), 1, "{log}");
    // The daemon outlives the clients that started it.
    let (code, _, err) = agent(&sandbox, "a", &["runs"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(_daemon.0.is_some());
}

/// Ctrl-C (SIGINT to the CLI) sends a cancel, and the CLI exits 130 once the run's one
/// terminal event (`run.cancelled`) arrived.
#[test]
fn ctrl_c_cancels_the_daemon_run_and_exits_130() {
    let sandbox = Sandbox::new("ctrlc");
    let _daemon = serve(&sandbox, "a", None);
    let mut client = Proc::spawn(
        &sandbox,
        &[
            "run",
            "--daemon",
            "--json",
            "--definition",
            "01-fixture-pending",
            "wait",
        ],
        &sandbox.env("a", None),
    );
    announced_run(&mut client);
    client.stdout_line("\"model.started\"");
    client.signal("-INT");
    let (status, out, err) = client.finish();
    assert_eq!(status.code(), Some(130), "{err}");
    assert_eq!(run_terminals(&out), ["run.cancelled"], "{out}");
}

/// Suspend and resume in one daemon: the run stops at a turn boundary, `agent runs` says
/// so, and after `agent resume` it finishes (followed by `agent attach`).
#[test]
fn a_run_suspends_and_resumes_in_its_daemon() {
    let sandbox = Sandbox::new("resume");
    let _daemon = serve(&sandbox, "a", Some(SLOW_PACE_MS));
    let mut client = Proc::spawn(
        &sandbox,
        &["run", "--daemon", "--yes", "--json", "survey"],
        &sandbox.env("a", None),
    );
    let run = announced_run(&mut client);
    client.stdout_line("\"run.started\"");
    let (code, _, err) = agent(&sandbox, "a", &["suspend", &run]);
    assert_eq!(code, Some(0), "{err}");
    client.finish();
    let (code, out, _) = agent(&sandbox, "a", &["runs"]);
    assert_eq!(code, Some(0));
    assert!(out.contains(&format!("{run}\tsuspended")), "{out}");
    let (code, out, err) = agent(&sandbox, "a", &["resume", &run]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("resumed {run}")), "{out}");
    let (code, out, err) = agent(&sandbox, "a", &["attach", &run]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("offline model"), "{out}");
    let (_, out, _) = agent(&sandbox, "a", &["runs"]);
    assert!(out.contains(&format!("{run}\tcompleted")), "{out}");
}

/// Runs an `agent` command in directory `dir` to its end: (exit code, stdout, stderr).
fn agent_in(
    sandbox: &Sandbox,
    dir: &Path,
    scope: &str,
    args: &[&str],
) -> (Option<i32>, String, String) {
    let mut p = Proc::spawn_in(dir, args, &sandbox.env(scope, None));
    let (status, out, err) = p.finish();
    (status.code(), out, err)
}

/// A daemon serves one workspace: a run started from another directory is refused before
/// anything starts, naming both directories, whether the CLI refuses it (it reads the
/// daemon's root from `daemon.json`) or the daemon does (without that file); `--workspace`
/// naming the daemon's directory runs there.
#[test]
fn a_run_from_another_directory_is_refused_naming_both() {
    let sandbox = Sandbox::new("where");
    let _daemon = serve(&sandbox, "a", None);
    let other = sandbox.path("other");
    std::fs::create_dir(&other).unwrap();
    let daemon_root = std::fs::canonicalize(sandbox.path("ws")).unwrap();
    let asked = std::fs::canonicalize(&other).unwrap();
    let expected = format!(
        "agent: this daemon works in {}; the run asks for {} — stop it with `agent daemon stop` or run from {}",
        daemon_root.display(),
        asked.display(),
        daemon_root.display()
    );
    let text_run = ["run", "--daemon", "--definition", "00-fixture-text", "hi"];

    let (code, out, err) = agent_in(&sandbox, &other, "a", &text_run);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(err.contains(&expected), "{err}");
    assert!(!err.contains("in the daemon"), "nothing started: {err}");

    // Without the state file the CLI cannot tell: the daemon refuses the start itself.
    std::fs::remove_file(sandbox.scope("a").join("daemon.json")).unwrap();
    let (code, out, err) = agent_in(&sandbox, &other, "a", &text_run);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(err.contains(&expected), "{err}");
    assert!(!err.contains("in the daemon"), "nothing started: {err}");
    let (code, out, err) = agent(&sandbox, "a", &["runs"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "", "no run was started");

    let root = daemon_root.to_str().unwrap();
    let (code, out, err) = agent_in(
        &sandbox,
        &other,
        "a",
        &[
            "run",
            "--daemon",
            "--workspace",
            root,
            "--json",
            "--definition",
            "00-fixture-text",
            "hi",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(run_terminals(&out), ["run.completed"]);
}

/// A daemon a client starts is announced (pid, workspace, a private log file), and `agent
/// daemon status` and `agent daemon stop` find it, describe it and stop it; with none
/// running both exit 3.
#[test]
fn a_started_daemon_is_announced_described_and_stopped() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new("announce");
    let (code, out, err) = agent(
        &sandbox,
        "a",
        &["run", "--daemon", "--yes", "--json", "say hello"],
    );
    let pid = published_pid(&sandbox.scope("a"));
    let _daemon = Published(pid);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(run_terminals(&out), ["run.completed"], "{out}");
    let pid = pid.expect("the started daemon publishes its pid");
    let root = std::fs::canonicalize(sandbox.path("ws")).unwrap();
    let log = sandbox.scope("a").join("daemon.log");
    let announced = format!(
        "agent: started a daemon (pid {pid}) for {}; its log is {}; stop it with `agent daemon stop`",
        root.display(),
        log.display()
    );
    assert!(err.contains(&announced), "{err}");
    let mode = std::fs::metadata(&log).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // A second client attaches to it: nothing is announced.
    let (code, _, err) = agent(
        &sandbox,
        "a",
        &["run", "--daemon", "--yes", "--json", "say hello"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("started a daemon"), "{err}");

    let (code, out, err) = agent(&sandbox, "a", &["daemon", "status"]);
    assert_eq!(code, Some(0), "{err}");
    for expected in [
        format!("daemon: running (pid {pid})"),
        format!("scope: {}", sandbox.scope("a").display()),
        format!("workspace: {}", root.display()),
        "protocol: 1.".to_owned(),
        "active runs: ".to_owned(),
        format!("log: {}", log.display()),
    ] {
        assert!(out.contains(&expected), "{expected}: {out}");
    }

    let (code, out, err) = agent(&sandbox, "a", &["daemon", "stop"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains(&format!("stopped the daemon (pid {pid})")),
        "{out}"
    );
    assert_eq!(
        published_pid(&sandbox.scope("a")),
        None,
        "its record is gone"
    );
    let (code, _, err) = agent(&sandbox, "a", &["daemon", "status"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("no local daemon is running"), "{err}");
    let (code, _, err) = agent(&sandbox, "a", &["daemon", "stop"]);
    assert_eq!(code, Some(3), "{err}");
}

/// A second `attach` takes the run over from the first, and both say so; `agent cancel`
/// from another terminal ends the run (`cancelled: run RUN`, exit 0), and a second cancel
/// says the run already ended.
#[test]
fn cancel_and_a_second_attach_say_what_they_did() {
    let sandbox = Sandbox::new("cancel");
    let _daemon = serve(&sandbox, "a", None);
    let mut client = Proc::spawn(
        &sandbox,
        &[
            "run",
            "--daemon",
            "--json",
            "--definition",
            "01-fixture-pending",
            "wait",
        ],
        &sandbox.env("a", None),
    );
    let run = announced_run(&mut client);
    client.stdout_line("\"model.started\"");

    let mut first = Proc::spawn(&sandbox, &["attach", &run], &sandbox.env("a", None));
    first.stderr_line("took over run");
    let (status, _, err) = client.finish();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "agent: another attach took over run {run} (this one detached)"
        )),
        "{err}"
    );

    let mut second = Proc::spawn(&sandbox, &["attach", &run], &sandbox.env("a", None));
    second.stderr_line(&format!("agent: took over run {run} from another client"));
    let (status, _, err) = first.finish();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "agent: another attach took over run {run} (this one detached)"
        )),
        "{err}"
    );

    let (code, out, err) = agent(&sandbox, "a", &["cancel", &run]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), format!("cancelled: run {run}"));
    let (status, _, err) = second.finish();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("`agent cancel` took over run {run}")),
        "{err}"
    );

    let (code, out, err) = agent(&sandbox, "a", &["cancel", &run]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), format!("run {run} already ended (cancelled)"));
    let (_, out, _) = agent(&sandbox, "a", &["runs"]);
    assert!(out.contains(&format!("{run}\tcancelled")), "{out}");
}

/// `agent suspend` of a run waiting on its model says what it waits for, gives up after
/// `--timeout` with exit code 124, and leaves the run going (it can still be cancelled).
#[test]
fn a_suspend_that_reaches_no_boundary_gives_up_after_its_timeout() {
    let sandbox = Sandbox::new("suswait");
    let _daemon = serve(&sandbox, "a", None);
    let mut client = Proc::spawn(
        &sandbox,
        &[
            "run",
            "--daemon",
            "--json",
            "--definition",
            "01-fixture-pending",
            "wait",
        ],
        &sandbox.env("a", None),
    );
    let run = announced_run(&mut client);
    client.stdout_line("\"model.started\"");

    let (code, out, err) = agent(&sandbox, "a", &["suspend", "--timeout", "1", &run]);
    assert_eq!(code, Some(124), "{out}\n{err}");
    assert!(
        err.contains(&format!("waiting for run {run} to reach a turn boundary…")),
        "{err}"
    );
    assert!(err.contains("withdrawn"), "{err}");
    assert!(!out.contains("suspended"), "{out}");

    let (code, out, err) = agent(&sandbox, "a", &["cancel", &run]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), format!("cancelled: run {run}"));
    client.finish();
}
