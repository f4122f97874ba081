//! `agent run`, `runs`, `attach` and `cancel` with `--restate URL`, end to end: a real
//! Restate engine, two `agent worker` processes behind one balanced address, and the `agent`
//! CLI as a user runs it, side by side with the same commands against a local `agent serve`
//! in the same workspace. Output shapes and exit codes must agree (docs/scale-out.md,
//! "Clients").
//!
//! No model is configured, so both run the offline model, paced by `AGENT_OFFLINE_PACE_MS`
//! so that a run is still in flight when the test cancels it. Needs the engine of
//! `agent-restate/tests/npm` (`npm ci` there); without it the test says so and passes,
//! except under `CI`.
#![cfg(unix)]

#[path = "support/lines.rs"]
mod lines;
use lines::lines;

#[path = "../../agent-restate/tests/support/engine.rs"]
mod engine;
#[path = "../../agent-restate/tests/support/workers.rs"]
mod workers;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use workers::{Balancer, Worker};

const AGENT: &str = env!("CARGO_BIN_EXE_agent");
/// Every wait of this test is bounded by this.
const DEADLINE: Duration = Duration::from_secs(60);
/// The offline model's pause before each stream item: a run takes a few seconds.
const PACE_MS: &str = "300";
const TASK: &str = "What is this repository?";

/// A private temp tree: `ws/` (the workspace of the daemon and the workers), `scope/` (the
/// daemon's endpoint scope; short, as socket paths are bounded), `auth/` and `config/`.
struct Sandbox {
    base: PathBuf,
}

impl Sandbox {
    fn new(tag: &str) -> Sandbox {
        use std::os::unix::fs::DirBuilderExt;
        let base = PathBuf::from(format!("/tmp/arc-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for dir in ["ws", "config", "logs"] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(base.join(dir))
                .unwrap();
        }
        std::fs::write(base.join("ws/README.md"), "# Demo\nA demo workspace.\n").unwrap();
        Sandbox { base }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    /// `agent ARGS` in the workspace, with this sandbox's scope, authority and (empty)
    /// config, no provider of the developer's, and the offline model's pace.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(AGENT);
        command
            .args(args)
            .current_dir(self.path("ws"))
            .env("AGENT_SCOPE_DIR", self.path("scope"))
            .env("AGENT_AUTHORITY_DIR", self.path("auth"))
            .env("AGENT_CONFIG_DIR", self.path("config"))
            .env("AGENT_OFFLINE_PACE_MS", PACE_MS)
            .env("RUST_LOG", "warn")
            .env_remove("AGENT_RESTATE_URL")
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("AGENT_PROVIDER")
            .env_remove("AGENT_MODEL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::null());
        command
    }

    /// `agent ARGS` to its end: (exit code, stdout, stderr).
    fn agent(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let mut process = Proc::spawn(self.command(args));
        process.finish()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// A child whose output lines arrive over channels; killed on drop.
struct Proc {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    out: Vec<String>,
    err: Vec<String>,
}

impl Proc {
    fn spawn(mut command: Command) -> Proc {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agent");
        Proc {
            stdout: lines(child.stdout.take().unwrap()),
            stderr: lines(child.stderr.take().unwrap()),
            child,
            out: Vec::new(),
            err: Vec::new(),
        }
    }

    /// The first line of `pipe` containing `needle`, waiting for it.
    fn line(&mut self, stdout: bool, needle: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (pipe, seen) = if stdout {
                (&self.stdout, &mut self.out)
            } else {
                (&self.stderr, &mut self.err)
            };
            match pipe.recv_timeout(left) {
                Ok(line) => {
                    seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {needle:?}: {:?} {:?}", self.out, self.err),
            }
        }
    }

    fn finish(&mut self) -> (Option<i32>, String, String) {
        let deadline = Instant::now() + DEADLINE;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("agent did not exit in time: {:?} {:?}", self.out, self.err);
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        while let Ok(line) = self.stdout.recv_timeout(DEADLINE) {
            self.out.push(line);
        }
        while let Ok(line) = self.stderr.recv_timeout(DEADLINE) {
            self.err.push(line);
        }
        (status.code(), self.out.join("\n"), self.err.join("\n"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The run id of `agent: run RUN in …` on stderr.
fn announced(stderr: &str) -> String {
    stderr
        .lines()
        .find(|l| l.starts_with("agent: run "))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or_else(|| panic!("no run announced: {stderr}"))
        .to_owned()
}

/// `text` with `run` written as `RUN`.
fn unnamed(text: &str, run: &str) -> String {
    text.replace(run, "RUN")
}

/// The (sequence, kind) of each JSON event line and the text of its deltas; the sequences
/// must be gap-free with exactly one run terminal, the last.
fn event_shape(json_lines: &str) -> (Vec<(u64, String)>, String) {
    let events: Vec<Value> = json_lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    let shape: Vec<(u64, String)> = events
        .iter()
        .map(|e| {
            (
                e["sequence"].as_u64().unwrap(),
                e["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for (i, (sequence, _)) in shape.iter().enumerate() {
        assert_eq!(*sequence, i as u64 + 1, "gap-free: {shape:?}");
    }
    let terminals: Vec<usize> = shape
        .iter()
        .enumerate()
        .filter(|(_, (_, kind))| {
            matches!(
                kind.as_str(),
                "run.completed" | "run.failed" | "run.cancelled"
            )
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        terminals,
        [shape.len() - 1],
        "one run terminal, last: {shape:?}"
    );
    let text = events
        .iter()
        .filter(|e| e["kind"] == "model.delta")
        .map(|e| e["data"]["text"].as_str().unwrap().to_owned())
        .collect();
    (shape, text)
}

/// The `STATE\tDEFINITION` of each line of `agent runs`, in order, by run id.
fn listed(out: &str) -> Vec<(String, String)> {
    out.lines()
        .map(|l| {
            let fields: Vec<&str> = l.split('\t').collect();
            assert_eq!(fields.len(), 3, "RUN STATE DEFINITION: {l}");
            (
                fields[0].to_owned(),
                format!("{}\t{}", fields[1], fields[2]),
            )
        })
        .collect()
}

/// The two places runs run: the cluster (`--restate URL`) and the local daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Cluster,
    Daemon,
}

struct Fixture {
    sandbox: Sandbox,
    engine: engine::Engine,
    balancer: Balancer,
    _workers: Vec<Worker>,
    _daemon: Proc,
}

impl Fixture {
    fn start() -> Option<Fixture> {
        let binary = engine::require()?;
        let sandbox = Sandbox::new("both");
        let engine = engine::Engine::start(&binary);
        let balancer = Balancer::start();
        let workers = (0..2)
            .map(|_| {
                let worker = Worker::spawn(&sandbox.path("logs"), |address| {
                    let mut command =
                        sandbox.command(&["worker", "--listen", &address.to_string()]);
                    command
                        .args(["--advertise", &balancer.url()])
                        .args(["--admin", &engine.admin_url()])
                        .args(["--ingress", &engine.ingress_url()])
                        .args(["--suspend-after", "1"]);
                    command
                });
                balancer.add(worker.address);
                worker
            })
            .collect();
        let mut daemon = Proc::spawn(sandbox.command(&["serve"]));
        daemon.line(false, "serving on");
        let fixture = Fixture {
            sandbox,
            engine,
            balancer,
            _workers: workers,
            _daemon: daemon,
        };
        fixture.wait_registered();
        Some(fixture)
    }

    fn wait_registered(&self) {
        let url = format!("{}/Runs/catalog", self.engine.ingress_url());
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Ok((200, body)) = engine::http("POST", &url, None)
                && body.contains("coding-agent")
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the workers never registered\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `agent SUBCOMMAND [ARGS]` against `place`: `--restate URL` after the subcommand, or
    /// `--daemon` for `run`.
    fn args(&self, place: Place, args: &[&str]) -> Vec<String> {
        let mut full = vec![args[0].to_owned()];
        match place {
            Place::Cluster => full.extend(["--restate".to_owned(), self.engine.ingress_url()]),
            Place::Daemon if args[0] == "run" => full.push("--daemon".to_owned()),
            Place::Daemon => {}
        }
        full.extend(args[1..].iter().map(|a| (*a).to_owned()));
        full
    }

    fn agent(&self, place: Place, args: &[&str]) -> (Option<i32>, String, String) {
        let args = self.args(place, args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.sandbox.agent(&args)
    }

    fn spawn(&self, place: Place, args: &[&str]) -> Proc {
        let args = self.args(place, args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Proc::spawn(self.sandbox.command(&args))
    }

    fn logs(&self) -> String {
        let mut out = format!("engine log:\n{}\n", self.engine.log_tail());
        if let Ok(dir) = std::fs::read_dir(self.sandbox.path("logs")) {
            for entry in dir.flatten() {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                out.push_str(&format!("{}:\n{text}\n", entry.path().display()));
            }
        }
        let _ = &self.balancer;
        out
    }
}

/// What one place did with the same commands.
#[derive(Debug, Default)]
struct Outcomes {
    json_shape: Vec<(u64, String)>,
    json_text: String,
    text: String,
    text_ending: String,
    failed_code: Option<i32>,
    failed_ending: String,
    attach: (Option<i32>, String, String),
    attach_from: String,
    cancel: (Option<i32>, String),
    cancel_again: (Option<i32>, String),
    unknown_attach: Option<i32>,
    unknown_cancel: Option<i32>,
    runs: Vec<String>,
}

fn last_line(text: &str) -> String {
    text.lines().last().unwrap_or_default().to_owned()
}

fn exercise(fixture: &Fixture, place: Place) -> Outcomes {
    let began = Instant::now();
    let mut outcomes = Outcomes::default();
    let host = match place {
        Place::Cluster => "the cluster",
        Place::Daemon => "the daemon",
    };

    // A completed run, as JSON lines and as text.
    let (code, out, err) = fixture.agent(place, &["run", "--json", TASK]);
    assert_eq!(code, Some(0), "{place:?}: {out}\n{err}\n{}", fixture.logs());
    let json_run = announced(&err);
    assert!(
        err.contains(&format!("agent: run {json_run} in {host}")),
        "{err}"
    );
    (outcomes.json_shape, outcomes.json_text) = event_shape(&out);
    let (code, out, err) = fixture.agent(place, &["run", TASK]);
    assert_eq!(code, Some(0), "{place:?}: {err}");
    let text_run = announced(&err);
    outcomes.text = out;
    outcomes.text_ending = unnamed(&last_line(&err), &text_run);

    // A failed run: the offline model refuses to change files.
    let (code, _, err) = fixture.agent(place, &["run", "Add a CHANGELOG.md"]);
    let failed_run = announced(&err);
    outcomes.failed_code = code;
    outcomes.failed_ending = unnamed(&last_line(&err), &failed_run);

    // Attach replays a run that ended, from the start and after a sequence.
    let (code, out, err) = fixture.agent(place, &["attach", &text_run]);
    outcomes.attach = (code, out, unnamed(&err, &text_run));
    let (_, out, _) = fixture.agent(place, &["attach", &text_run, "--from", "4"]);
    outcomes.attach_from = out;

    // Cancel a run in flight, then once more.
    let mut follower = fixture.spawn(place, &["run", "--json", "survey the workspace"]);
    let line = follower.line(false, "agent: run ");
    let cancelled_run = announced(&line);
    follower.line(true, "\"run.started\"");
    let (code, out, err) = fixture.agent(place, &["cancel", &cancelled_run]);
    assert_eq!(code, Some(0), "{place:?}: {err}");
    outcomes.cancel = (code, unnamed(&out, &cancelled_run));
    let (code, out, err) = follower.finish();
    match place {
        // Nobody owns a run on the cluster: the follower sees it end, cancelled.
        Place::Cluster => {
            assert_eq!(code, Some(130), "{out}\n{err}");
            let (shape, _) = event_shape(&out);
            assert_eq!(shape.last().unwrap().1, "run.cancelled");
            assert!(
                err.contains(&format!("cancelled: run {cancelled_run}")),
                "{err}"
            );
        }
        // The daemon's cancel reconnects as the run's owner, which fences the follower.
        Place::Daemon => {
            assert_eq!(code, Some(1), "{out}\n{err}");
            assert!(err.contains("`agent cancel` took over run"), "{err}");
        }
    }
    let (code, out, _) = fixture.agent(place, &["cancel", &cancelled_run]);
    outcomes.cancel_again = (code, unnamed(&out, &cancelled_run));

    outcomes.unknown_attach = fixture.agent(place, &["attach", "run-nowhere"]).0;
    outcomes.unknown_cancel = fixture.agent(place, &["cancel", "run-nowhere"]).0;

    // The list: each run with its state, oldest first. The cluster's index learns a run's
    // end a moment after its record does.
    let ours = [&json_run, &text_run, &failed_run, &cancelled_run];
    let deadline = Instant::now() + DEADLINE;
    outcomes.runs = loop {
        let (code, out, err) = fixture.agent(place, &["runs"]);
        assert_eq!(code, Some(0), "{place:?}: {err}");
        let listed = listed(&out);
        let states: Vec<String> = ours
            .iter()
            .map(|run| {
                listed
                    .iter()
                    .find(|(r, _)| r == *run)
                    .map_or_else(|| "missing".to_owned(), |(_, s)| s.clone())
            })
            .collect();
        if !states.iter().any(|s| s.starts_with("running")) || Instant::now() > deadline {
            // The daemon's index orders by the second a run was recorded, then by id.
            if place == Place::Cluster {
                let order: Vec<&String> = listed
                    .iter()
                    .map(|(r, _)| r)
                    .filter(|r| ours.contains(r))
                    .collect();
                assert_eq!(order, ours, "oldest first");
            }
            break states;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("{place:?}: every command in {:?}", began.elapsed());
    outcomes
}

#[test]
fn run_runs_attach_and_cancel_on_a_cluster_say_what_they_say_against_the_daemon() {
    let Some(fixture) = Fixture::start() else {
        return;
    };
    let cluster = exercise(&fixture, Place::Cluster);
    let daemon = exercise(&fixture, Place::Daemon);

    assert_eq!(cluster.json_shape, daemon.json_shape, "the same events");
    assert_eq!(cluster.json_text, daemon.json_text);
    assert!(
        cluster.json_text.contains("offline model"),
        "{}",
        cluster.json_text
    );
    assert_eq!(cluster.text, daemon.text, "the same rendered text");
    assert_eq!(cluster.text_ending, "done: run RUN");
    assert_eq!(cluster.text_ending, daemon.text_ending);
    assert_eq!(
        (cluster.failed_code, daemon.failed_code),
        (Some(1), Some(1))
    );
    assert!(
        cluster.failed_ending.starts_with("failed ("),
        "{}",
        cluster.failed_ending
    );
    assert_eq!(cluster.failed_ending, daemon.failed_ending);

    let (code, out, err) = &cluster.attach;
    assert_eq!(*code, Some(0), "{err}");
    assert_eq!(out, &cluster.text, "attach replays what the run printed");
    assert!(
        err.contains("agent: attached to run RUN; Ctrl-C detaches (the run goes on)"),
        "{err}"
    );
    assert_eq!(cluster.attach, daemon.attach);
    assert_eq!(cluster.attach_from, daemon.attach_from);
    assert_ne!(
        cluster.attach_from, cluster.text,
        "--from skips the first events"
    );

    assert_eq!(cluster.cancel, (Some(0), "cancelled: run RUN".to_owned()));
    assert_eq!(cluster.cancel, daemon.cancel);
    assert_eq!(
        cluster.cancel_again,
        (Some(0), "run RUN already ended (cancelled)".to_owned())
    );
    assert_eq!(cluster.cancel_again, daemon.cancel_again);
    assert_eq!(
        (cluster.unknown_attach, cluster.unknown_cancel),
        (Some(1), Some(1))
    );
    assert_eq!(
        (cluster.unknown_attach, cluster.unknown_cancel),
        (daemon.unknown_attach, daemon.unknown_cancel)
    );

    let expected = [
        "completed\tcoding-agent",
        "completed\tcoding-agent",
        "failed\tcoding-agent",
        "cancelled\tcoding-agent",
    ];
    assert_eq!(cluster.runs, expected);
    assert_eq!(cluster.runs, daemon.runs);
}

/// The variable names the cluster when the flag is not given; an unreachable cluster is
/// refused at once, with exit code 1.
#[test]
fn agent_restate_url_names_the_cluster_and_an_unreachable_one_is_refused() {
    let sandbox = Sandbox::new("gone");
    let port = workers::free_port();
    let mut command = sandbox.command(&["runs"]);
    command.env("AGENT_RESTATE_URL", format!("http://127.0.0.1:{port}"));
    let began = Instant::now();
    let (code, out, err) = Proc::spawn(command).finish();
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "the Restate cluster at http://127.0.0.1:{port}: unavailable"
        )),
        "{err}"
    );
    let mut command = sandbox.command(&["run", TASK]);
    command.env("AGENT_RESTATE_URL", format!("http://127.0.0.1:{port}"));
    let (code, _, err) = Proc::spawn(command).finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "the Restate cluster at http://127.0.0.1:{port}: unavailable"
        )),
        "{err}"
    );
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
}
