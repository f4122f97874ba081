//! `agent worker` on a real Restate engine: the coding agent's run survives the SIGKILL of
//! the worker executing it, with an OpenAI-compatible model scripted on loopback that
//! counts its requests (docs/scale-out.md). Needs the engine of `agent-restate/tests/npm`
//! (`npm ci` there); without it the test says so and passes, except under `CI`.

#[path = "support/http.rs"]
mod http;

#[path = "../../agent-restate/tests/support/engine.rs"]
mod engine;
#[path = "../../agent-restate/tests/support/workers.rs"]
mod workers;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use workers::{Balancer, Worker};

/// How long the scripted model pauses inside its second answer: the window the test kills
/// the worker in.
const PAUSE: Duration = Duration::from_secs(4);
const PATIENCE: Duration = Duration::from_secs(60);

fn frame(value: Value) -> String {
    format!("data: {value}\n\n")
}

/// Turn 0 reads README.md; turn 1 streams "partial ", pauses, then finishes.
async fn serve(mut socket: TcpStream, turns: Arc<Mutex<Vec<usize>>>) {
    let Some(request) = http::read_json_request(&mut socket).await else {
        return;
    };
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let turn = usize::from(messages.iter().any(|m| m["role"] == "tool"));
    turns.lock().unwrap().push(turn);
    // A close-delimited body, so the second answer can pause mid-stream.
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    let _ = socket.write_all(head.as_bytes()).await;
    let end = frame(json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}))
        + "data: [DONE]\n\n";
    if turn == 0 {
        let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call-1", "type": "function",
             "function": {"name": "read_file", "arguments": "{\"path\":\"README.md\"}"}}
        ]}}]});
        let stop = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
        let body = frame(call) + &frame(stop) + &end;
        let _ = socket.write_all(body.as_bytes()).await;
    } else {
        let first = frame(json!({"choices": [{"index": 0, "delta": {"content": "partial "}}]}));
        let _ = socket.write_all(first.as_bytes()).await;
        let _ = socket.flush().await;
        tokio::time::sleep(PAUSE).await;
        let rest = frame(json!({"choices": [{"index": 0, "delta": {"content": "rest"}}]}))
            + &frame(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
            + &end;
        let _ = socket.write_all(rest.as_bytes()).await;
    }
    let _ = socket.shutdown().await;
}

/// The scripted model on a background thread: its base URL and the turn of every request.
fn start_model() -> (String, Arc<Mutex<Vec<usize>>>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let address = listener.local_addr().unwrap();
    let turns: Arc<Mutex<Vec<usize>>> = Arc::default();
    let recorded = turns.clone();
    std::thread::spawn(move || {
        runtime.block_on(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, recorded.clone()));
            }
        });
    });
    (format!("http://{address}/v1"), turns)
}

struct Cluster {
    engine: engine::Engine,
    balancer: Balancer,
    workspace: PathBuf,
    base_url: String,
}

impl Cluster {
    fn worker(&self) -> Worker {
        let config = self.workspace.join(".config");
        Worker::spawn(self.engine.dir(), |address| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_agent"));
            command
                .args(["worker", "--listen", &address.to_string()])
                .args(["--advertise", &self.balancer.url()])
                .args(["--admin", &self.engine.admin_url()])
                .args(["--ingress", &self.engine.ingress_url()])
                .args(["--suspend-after", "1"])
                .current_dir(&self.workspace)
                .env("AGENT_CONFIG_DIR", &config)
                .env("AGENT_PROVIDER", "openai")
                .env("OPENAI_BASE_URL", &self.base_url)
                .env("OPENAI_API_KEY", "sk-test-key")
                .env("OPENAI_MODEL", "test-model")
                .env_remove("RUST_LOG");
            command
        })
    }

    fn call(&self, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/{path}", self.engine.ingress_url());
        let body = body.map(|b| b.to_string());
        let (status, text) = engine::http("POST", &url, body.as_deref()).unwrap();
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    fn wait_until(&self, what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done() {
            assert!(
                Instant::now() < deadline,
                "{what}\n{}",
                self.engine.log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn workspace(dir: &Path) -> PathBuf {
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(workspace.join(".config")).unwrap();
    std::fs::write(workspace.join("README.md"), "# Demo\nA demo workspace.\n").unwrap();
    workspace
}

#[test]
fn a_coding_agent_run_survives_the_kill_of_its_worker() {
    let Some(binary) = engine::require() else {
        return;
    };
    let engine = engine::Engine::start(&binary);
    let (base_url, turns) = start_model();
    let cluster = Cluster {
        workspace: workspace(engine.dir()),
        engine,
        balancer: Balancer::start(),
        base_url,
    };
    let mut first = cluster.worker();
    cluster.balancer.add(first.address);
    cluster.wait_until("the worker never registered", || {
        let url = format!("{}/Runs/catalog", cluster.engine.ingress_url());
        matches!(engine::http("POST", &url, None), Ok((200, body)) if body.contains("coding-agent"))
    });
    let start = json!({"run_id": "run-worker-kill", "definition": "coding-agent",
                       "input": "Summarize README.md"});
    cluster.call("Runs/start", Some(start));
    cluster.wait_until("the second turn never started", || {
        turns.lock().unwrap().contains(&1)
    });
    // The second worker joins; the first dies mid-stream of the second turn.
    let second = cluster.worker();
    cluster.balancer.add(second.address);
    first.kill9();
    cluster.wait_until("the run never ended", || {
        !cluster.call("RunRecord/run-worker-kill/state", None)["ended"].is_null()
    });
    let page = cluster.call(
        "RunRecord/run-worker-kill/events",
        Some(json!({"after": 0, "limit": 512})),
    );
    let events = page["events"].as_array().unwrap();
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["sequence"].as_u64(), Some(i as u64 + 1), "gap-free");
    }
    let run_terminals = events
        .iter()
        .filter(|e| [2, 3, 4].contains(&e["kind"].as_i64().unwrap()));
    assert_eq!(run_terminals.count(), 1, "one terminal");
    assert_eq!(events.last().unwrap()["kind"], 2, "completed: {events:?}");
    let partial = events
        .iter()
        .filter(|e| e["kind"] == 9 && e["payload_json"].as_str().unwrap().contains("partial"))
        .count();
    assert_eq!(partial, 1, "the cut-off turn's delta is published once");
    assert_eq!(
        *turns.lock().unwrap(),
        [0, 1, 1],
        "turn 0 once; turn 1 again after the kill"
    );
}
