//! The guarantees of runs on a Restate cluster, against the real engine and real worker
//! processes killed with SIGKILL (docs/scale-out.md, "Guarantees").
//!
//! Each test starts its own engine from the pinned npm package and two workers behind one
//! balanced address; the tests take turns, so timings stay meaningful on two cores.

#[path = "support/engine.rs"]
mod engine;
#[path = "support/fixture.rs"]
mod fixture;
#[path = "support/workers.rs"]
mod workers;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use workers::{Balancer, Worker};

/// Not a test: the worker process's entry (see `workers::Worker::start`).
#[test]
fn worker_process() {
    workers::worker_main(fixture::Fixture::new());
}

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How long a test waits for a run to reach a state.
const PATIENCE: Duration = Duration::from_secs(60);

const RUN_COMPLETED: i64 = 2;
const RUN_FAILED: i64 = 3;
const RUN_CANCELLED: i64 = 4;
const MODEL_DELTA: i64 = 9;
const TOOL_COMPLETED: i64 = 14;

enum Engines {
    One(engine::Engine),
    Three(engine::Cluster),
}

impl Engines {
    /// The single engine, or n1 (the node workers register with).
    fn first(&self) -> &engine::Engine {
        match self {
            Engines::One(engine) => engine,
            Engines::Three(cluster) => cluster.node(1),
        }
    }
}

struct Setup {
    engines: Engines,
    /// The ingress clients and workers use: the engine's, or a balancer over the nodes'.
    ingress: String,
    /// Keeps the nodes' ingress balancer alive.
    _ingress_balancer: Option<Balancer>,
    balancer: Balancer,
    workers: Vec<Worker>,
    dir: PathBuf,
    env: Vec<(String, String)>,
}

impl Setup {
    fn start(env: &[(&str, &str)]) -> Option<Setup> {
        let binary = engine::require()?;
        Some(Setup::on(Engines::One(engine::Engine::start(&binary)), env))
    }

    /// Three nodes; clients and workers reach the ingress through a balancer over all
    /// three, so any one node may die.
    fn start_cluster(env: &[(&str, &str)]) -> Option<Setup> {
        let binary = engine::require()?;
        Some(Setup::on(
            Engines::Three(engine::Cluster::start(&binary)),
            env,
        ))
    }

    fn on(engines: Engines, env: &[(&str, &str)]) -> Setup {
        let (ingress, ingress_balancer) = match &engines {
            Engines::One(engine) => (engine.ingress_url(), None),
            Engines::Three(cluster) => {
                let balancer = Balancer::start();
                for i in 1..=3 {
                    let url = cluster.node(i).ingress_url();
                    balancer.add(url.trim_start_matches("http://").parse().unwrap());
                }
                (balancer.url(), Some(balancer))
            }
        };
        let dir = engines.first().dir().join("fixture");
        std::fs::create_dir_all(&dir).unwrap();
        let balancer = Balancer::start();
        let mut setup = Setup {
            engines,
            ingress,
            _ingress_balancer: ingress_balancer,
            balancer,
            workers: Vec::new(),
            dir,
            // Waiting runs suspend after a second, so the tests see suspension.
            env: [("AGENT_RESTATE_SUSPEND_AFTER_MS", "1000")]
                .iter()
                .chain(env)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        setup.add_worker();
        setup.add_worker();
        setup
    }

    fn add_worker(&mut self) {
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let worker = Worker::start(
            &self.dir,
            &self.engines.first().admin_url(),
            &self.ingress,
            &self.balancer.url(),
            &env,
        );
        self.balancer.add(worker.address);
        self.workers.push(worker);
        self.wait_registered();
    }

    /// Waits until `done`, failing with `what` and the logs after [`PATIENCE`].
    fn wait_until(&self, what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done() {
            assert!(Instant::now() < deadline, "{what}\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the run waits for an answer.
    fn wait_pending(&self, run_id: &str) {
        self.wait_until("no pending interaction", || {
            !self.state(run_id)["pending"].as_array().unwrap().is_empty()
        });
    }

    fn wait_registered(&self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let (status, body) = self.call("Runs/catalog", json!(null));
            if status == 200 && body.contains(fixture::DEFINITION) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the workers never registered: {status} {body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn call(&self, path: &str, body: Value) -> (u16, String) {
        let url = format!("{}/{path}", self.ingress);
        // A handler without input takes an empty body.
        let text = (!body.is_null()).then(|| body.to_string());
        engine::http("POST", &url, text.as_deref()).unwrap_or((0, String::new()))
    }

    fn start_run(&self, run_id: &str, input: &str) {
        let (status, body) = self.call(
            "Runs/start",
            json!({ "run_id": run_id, "definition": fixture::DEFINITION, "input": input }),
        );
        assert_eq!(status, 200, "start refused: {body}");
    }

    fn record(&self, run_id: &str, handler: &str, body: Value) -> (u16, String) {
        self.call(&format!("RunRecord/{run_id}/{handler}"), body)
    }

    fn state(&self, run_id: &str) -> Value {
        let (status, body) = self.record(run_id, "state", json!(null));
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    fn events(&self, run_id: &str) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let after = events.len() as u64;
            let (status, body) =
                self.record(run_id, "events", json!({ "after": after, "limit": 512 }));
            assert_eq!(status, 200, "{body}");
            let page: Value = serde_json::from_str(&body).unwrap();
            let batch = page["events"].as_array().unwrap().clone();
            if batch.is_empty() {
                return events;
            }
            events.extend(batch);
        }
    }

    /// The sequences an observer of published events saw for `run_id`, in order.
    fn observed(&self, run_id: &str) -> Vec<u64> {
        let text = std::fs::read_to_string(self.dir.join("observed.log")).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let mut words = line.split(' ');
                (words.next() == Some(run_id)).then(|| words.next()?.parse().ok())?
            })
            .collect()
    }

    fn wait_ended(&self, run_id: &str) -> Vec<Value> {
        self.wait_until(&format!("run {run_id} never ended"), || {
            !self.state(run_id)["ended"].is_null()
        });
        let events = self.events(run_id);
        check_gap_free_with_one_terminal(&events);
        events
    }

    /// Waits for a line starting with `prefix` in the fixture file `file`; its last word is
    /// the pid of the worker that wrote it.
    fn wait_line(&self, file: &str, prefix: &str) -> u32 {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
            if let Some(line) = text.lines().find(|l| l.starts_with(prefix)) {
                return line.rsplit(' ').next().unwrap().parse().unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "no `{prefix}` in {file}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn lines(&self, file: &str, prefix: &str) -> usize {
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        text.lines().filter(|l| l.starts_with(prefix)).count()
    }

    /// The status of the run's workflow invocation, from the engine's own tables.
    fn invocation_status(&self, run_id: &str) -> String {
        let query = format!(
            "SELECT status FROM sys_invocation WHERE target_service_name = 'AgentRun' \
             AND target_service_key = '{run_id}'"
        );
        let url = format!("{}/query", self.engines.first().admin_url());
        let body = json!({ "query": query }).to_string();
        let (_, text) = engine::http("POST", &url, Some(&body)).unwrap_or_default();
        let rows: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        rows["rows"][0]["status"].as_str().unwrap_or("").to_owned()
    }

    fn kill_worker(&mut self, pid: u32) {
        let worker = self
            .workers
            .iter_mut()
            .find(|w| w.pid() == pid)
            .expect("a worker with that pid");
        worker.kill9();
    }

    fn logs(&self) -> String {
        let mut out = format!("engine log:\n{}\n", self.engines.first().log_tail());
        for worker in &self.workers {
            let path = self
                .dir
                .join(format!("worker-{}.log", worker.address.port()));
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let tail: String = text.lines().rev().take(20).collect::<Vec<_>>().join("\n");
            out.push_str(&format!(
                "worker {} log (last lines, newest first):\n{tail}\n",
                worker.pid()
            ));
        }
        out
    }
}

fn kind(event: &Value) -> i64 {
    event["kind"].as_i64().unwrap()
}

fn check_gap_free_with_one_terminal(events: &[Value]) {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(
            event["sequence"].as_u64(),
            Some(i as u64 + 1),
            "a gap before {event}"
        );
    }
    let terminals: Vec<_> = events
        .iter()
        .filter(|e| [RUN_COMPLETED, RUN_FAILED, RUN_CANCELLED].contains(&kind(e)))
        .collect();
    assert_eq!(terminals.len(), 1, "exactly one terminal: {terminals:?}");
    assert!(
        std::ptr::eq(terminals[0], events.last().unwrap()),
        "the terminal is last"
    );
}

fn deltas_containing(events: &[Value], text: &str) -> usize {
    events
        .iter()
        .filter(|e| kind(e) == MODEL_DELTA && e["payload_json"].as_str().unwrap().contains(text))
        .count()
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn a_killed_worker_s_run_continues_elsewhere_without_asking_a_finished_turn_again() {
    let _turn = lock();
    let Some(mut setup) = Setup::start(&[("FIXTURE_SLOW_MS", "3000")]) else {
        return;
    };
    setup.start_run("run-failover", "failover safe slow");
    // Turn 0 (a tool call) finished; turn 1 streams its first delta, then dies with its worker.
    let pid = setup.wait_line("model.log", "failover 1 slow");
    setup.kill_worker(pid);
    let events = setup.wait_ended("run-failover");
    assert_eq!(kind(events.last().unwrap()), RUN_COMPLETED, "{events:?}");
    assert_eq!(
        setup.lines("model.log", "failover 0 "),
        1,
        "a finished turn is not asked again"
    );
    assert_eq!(
        setup.lines("model.log", "failover 1 "),
        2,
        "the cut-off turn is asked again"
    );
    assert_eq!(
        deltas_containing(&events, "partial"),
        1,
        "no duplicated partial delta"
    );
    assert_eq!(setup.lines("count_safe.count", "call-0"), 1);
    let published: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(
        setup.observed("run-failover"),
        published,
        "observed once each, in order"
    );
    let last_pid = std::fs::read_to_string(setup.dir.join("model.log"))
        .unwrap()
        .lines()
        .rfind(|l| l.starts_with("failover 1 "))
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned();
    assert_ne!(last_pid, pid.to_string(), "another worker finished the run");
    if let Some(path) = std::env::var_os("AGENT_RESTATE_TRANSCRIPT") {
        write_transcript(&setup, pid, &events, std::path::Path::new(&path));
    }
}

/// The failover as a reader follows it: the workers, every real model request (tag, turn,
/// plan word, pid), the kill, and the published events.
fn write_transcript(setup: &Setup, killed: u32, events: &[Value], path: &std::path::Path) {
    let workers: Vec<String> = setup.workers.iter().map(|w| w.pid().to_string()).collect();
    let mut out = format!("workers (pids): {}\n", workers.join(", "));
    out.push_str("model requests (tag turn word pid):\n");
    let log = std::fs::read_to_string(setup.dir.join("model.log")).unwrap_or_default();
    for line in log.lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out.push_str(&format!(
        "killed with SIGKILL: {killed}, while turn 1 streamed\n"
    ));
    out.push_str("published events (sequence kind payload):\n");
    for event in events {
        out.push_str(&format!(
            "  {} {} {}\n",
            event["sequence"], event["kind"], event["payload_json"]
        ));
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn a_replay_unsafe_call_that_may_have_started_is_never_run_again() {
    let _turn = lock();
    let Some(mut setup) = Setup::start(&[("FIXTURE_TOOL_MS", "3000")]) else {
        return;
    };
    setup.start_run("run-unsafe", "unsafe unsafe");
    let pid = setup.wait_line("count_unsafe.count", "call-0");
    setup.kill_worker(pid);
    let events = setup.wait_ended("run-unsafe");
    assert_eq!(kind(events.last().unwrap()), RUN_COMPLETED);
    assert_eq!(
        setup.lines("count_unsafe.count", "call-0"),
        1,
        "executed once"
    );
    assert!(
        events.iter().any(|e| kind(e) == TOOL_COMPLETED),
        "{events:?}"
    );
    assert_eq!(
        setup.lines("uncertain.log", "unsafe 1"),
        1,
        "the model read it as uncertain"
    );
}

#[test]
fn a_replay_safe_call_cut_off_by_a_crash_runs_again() {
    let _turn = lock();
    let Some(mut setup) = Setup::start(&[("FIXTURE_TOOL_MS", "3000")]) else {
        return;
    };
    setup.start_run("run-safe", "safe safe");
    let pid = setup.wait_line("count_safe.count", "call-0");
    setup.kill_worker(pid);
    let events = setup.wait_ended("run-safe");
    assert_eq!(kind(events.last().unwrap()), RUN_COMPLETED);
    assert_eq!(
        setup.lines("count_safe.count", "call-0"),
        2,
        "run again after the crash"
    );
}

#[test]
fn an_approval_survives_every_worker_and_bad_answers_change_nothing() {
    let _turn = lock();
    let Some(mut setup) = Setup::start(&[]) else {
        return;
    };
    setup.start_run("run-ask", "ask ask");
    setup.wait_pending("run-ask");
    // The waiting run suspends: it holds no worker.
    setup.wait_until("never suspended", || {
        setup.invocation_status("run-ask") == "suspended"
    });
    // Every worker dies while the run waits; a new one serves the answer.
    let pids: Vec<u32> = setup.workers.iter().map(Worker::pid).collect();
    for pid in pids {
        setup.kill_worker(pid);
    }
    setup.add_worker();
    let answer = |id: &str, value: Value| {
        setup.record(
            "run-ask",
            "answer",
            json!({ "interaction_id": id, "value": value }),
        )
    };
    assert_eq!(answer("approve-call-0", json!("maybe")).0, 400, "malformed");
    assert_eq!(answer("approve-call-9", json!(true)).0, 404, "foreign");
    assert_eq!(
        setup.state("run-ask")["pending"].as_array().unwrap().len(),
        1,
        "unchanged"
    );
    assert_eq!(answer("approve-call-0", json!(true)).0, 200);
    assert_eq!(
        answer("approve-call-0", json!(true)).0,
        409,
        "a second answer"
    );
    let events = setup.wait_ended("run-ask");
    assert_eq!(kind(events.last().unwrap()), RUN_COMPLETED);
    // Two executions ran (before and after the answer), on different workers.
    let published: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(
        setup.observed("run-ask"),
        published,
        "observed once each, in order"
    );
    assert_eq!(setup.lines("guarded.count", "call-0"), 1);
}

#[test]
fn cancellation_ends_a_running_and_a_waiting_run_once() {
    let _turn = lock();
    let Some(setup) = Setup::start(&[("FIXTURE_SLOW_MS", "20000")]) else {
        return;
    };
    setup.start_run("run-cancel-running", "running slow");
    setup.wait_line("model.log", "running 0 slow");
    assert_eq!(
        setup.record("run-cancel-running", "cancel", json!(null)).0,
        200
    );
    let events = setup.wait_ended("run-cancel-running");
    assert_eq!(kind(events.last().unwrap()), RUN_CANCELLED);

    setup.start_run("run-cancel-waiting", "waiting ask");
    setup.wait_pending("run-cancel-waiting");
    assert_eq!(
        setup.record("run-cancel-waiting", "cancel", json!(null)).0,
        200
    );
    let events = setup.wait_ended("run-cancel-waiting");
    assert_eq!(kind(events.last().unwrap()), RUN_CANCELLED);
    assert_eq!(
        setup.lines("guarded.count", ""),
        0,
        "the refused call never ran"
    );
}

#[test]
fn runs_continue_when_the_engine_is_killed_and_restarted() {
    let _turn = lock();
    let Some(mut setup) = Setup::start(&[("FIXTURE_SLOW_MS", "3000")]) else {
        return;
    };
    setup.start_run("run-engine", "engine safe slow");
    setup.wait_line("model.log", "engine 1 slow");
    let Engines::One(engine) = &mut setup.engines else {
        unreachable!("one engine")
    };
    engine.kill9();
    engine.restart();
    let events = setup.wait_ended("run-engine");
    assert_eq!(
        kind(events.last().unwrap()),
        RUN_COMPLETED,
        "{}",
        setup.logs()
    );
    assert_eq!(setup.lines("model.log", "engine 0 "), 1);
}

#[test]
fn bad_starts_are_refused_and_change_nothing() {
    let _turn = lock();
    let Some(setup) = Setup::start(&[]) else {
        return;
    };
    let start = |run_id: &str, definition: &str, input: &str| {
        setup
            .call(
                "Runs/start",
                json!({ "run_id": run_id, "definition": definition, "input": input }),
            )
            .0
    };
    assert_eq!(
        start("run-bad-1", "nobody", "text"),
        404,
        "unknown definition"
    );
    let oversized = "x".repeat(agent_client::MAX_INPUT_TEXT_BYTES + 1);
    assert_eq!(
        start("run-bad-2", fixture::DEFINITION, &oversized),
        400,
        "oversized input"
    );
    assert_eq!(
        start("run-bad-3", fixture::DEFINITION, "  "),
        400,
        "empty input"
    );
    assert_eq!(start(" ", fixture::DEFINITION, "text"), 400, "not a run id");
    let (status, listed) = setup.call("RunIndex/all/list", json!(null));
    assert_eq!(
        (status, listed.as_str()),
        (200, "[]"),
        "nothing was created"
    );
    setup.start_run("run-good", "good text");
    assert_eq!(
        start("run-good", fixture::DEFINITION, "other"),
        409,
        "a taken id"
    );
    let events = setup.wait_ended("run-good");
    assert_eq!(kind(events.last().unwrap()), RUN_COMPLETED);
}

#[test]
fn a_three_node_cluster_loses_a_node_mid_run_and_the_run_continues() {
    let _turn = lock();
    let Some(mut setup) = Setup::start_cluster(&[("FIXTURE_SLOW_MS", "3000")]) else {
        return;
    };
    setup.start_run("run-node-lost", "nodelost safe slow");
    setup.wait_line("model.log", "nodelost 1 slow");
    let Engines::Three(cluster) = &mut setup.engines else {
        unreachable!("three nodes")
    };
    // n1 provisioned the cluster and holds the workers' registration; n2 is any other node.
    cluster.kill9(2);
    let events = setup.wait_ended("run-node-lost");
    assert_eq!(
        kind(events.last().unwrap()),
        RUN_COMPLETED,
        "{}",
        setup.logs()
    );
    assert_eq!(
        setup.lines("model.log", "nodelost 0 "),
        1,
        "a finished turn is not asked again"
    );
    assert_eq!(deltas_containing(&events, "partial"), 1);
}

#[test]
fn a_worker_runs_at_most_its_bound_of_executions_at_once() {
    let _turn = lock();
    let Some(mut setup) = Setup::start(&[
        ("FIXTURE_SLOW_MS", "2000"),
        ("AGENT_RESTATE_MAX_EXECUTIONS", "1"),
    ]) else {
        return;
    };
    // One worker serves both runs: the bound is a worker's own.
    let second = setup.workers[1].pid();
    setup.kill_worker(second);
    setup.start_run("run-bound-a", "bounda slow");
    setup.start_run("run-bound-b", "boundb slow");
    setup.wait_until("no run executes", || {
        setup.lines("model.log", "bounda") + setup.lines("model.log", "boundb") == 1
    });
    // The other run waits for the one execution the worker allows.
    std::thread::sleep(Duration::from_millis(1000));
    let executing = setup.lines("model.log", "bounda") + setup.lines("model.log", "boundb");
    assert_eq!(executing, 1, "past the bound, the second run waits");
    for run in ["run-bound-a", "run-bound-b"] {
        let events = setup.wait_ended(run);
        assert_eq!(kind(events.last().unwrap()), RUN_COMPLETED);
    }
    assert_eq!(setup.lines("model.log", "bounda 0 "), 1);
    assert_eq!(setup.lines("model.log", "boundb 0 "), 1);
}
