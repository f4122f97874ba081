//! Both HTTP providers against the third-party `mockllm` server (PyPI `mockllm`, pinned by
//! `tests/mockllm/requirements.txt`), started on a free loopback port. The venv is
//! `$MOCKLLM_VENV`, or `target/mockllm-venv` under the workspace root, which `.ci/run`
//! creates; without it the test skips with one line saying how to create it, except under
//! `CI`, where it is required.
//!
//! What mockllm 0.0.8 does, read from its source: `/v1/chat/completions` streams OpenAI
//! chunks ending in `data: [DONE]`; `/v1/messages` streams the same kind of `data:` lines
//! (`message_delta` objects with the text nested in them, then `data: [DONE]`), not
//! Anthropic's event sequence. A request without a user message is a `400` with a
//! `{"detail": ...}` body. Streaming looks the answer up again as a prompt, so the
//! responses file maps the answer to itself.

mod support;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_core::message::Message;
use agent_core::model::{ModelProvider, ModelRequest, StreamEvent};
use coding_agent::anthropic::{AnthropicConfig, AnthropicProvider};
use coding_agent::openai::{OpenAiConfig, OpenAiProvider};
use support::{drain, skip_or_fail};

const KEY: &str = "sk-mockllm-0123456789";
const PROMPT: &str = "Say hello.";
const ANSWER: &str = "Hello from mockllm.";
/// The longest the server may take to listen.
const STARTUP: Duration = Duration::from_secs(20);

/// The mockllm server, killed (and its directory removed) on drop.
struct MockLlm {
    origin: String,
    child: Child,
    dir: PathBuf,
}

impl MockLlm {
    /// Starts `python -m uvicorn mockllm.server:app` on a free loopback port. (mockllm's
    /// own `mockllm start` always turns on uvicorn's reloader, whose worker process would
    /// outlive a killed parent.)
    fn start(python: &Path) -> MockLlm {
        let dir = std::env::temp_dir().join(format!("mockllm-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let responses = dir.join("responses.yml");
        std::fs::write(
            &responses,
            format!(
                "responses:\n  \"{PROMPT}\": \"{ANSWER}\"\n  \"{ANSWER}\": \"{ANSWER}\"\n\
                 defaults:\n  unknown_response: \"Unknown prompt.\"\n"
            ),
        )
        .unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let child = Command::new(python)
            .args(["-m", "uvicorn", "mockllm.server:app", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .env("MOCKLLM_RESPONSES_FILE", &responses)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("mockllm starts");
        let mut server = MockLlm {
            origin: format!("http://127.0.0.1:{port}"),
            child,
            dir,
        };
        server.await_listening(port);
        server
    }

    /// Polls the port until the server accepts, at most [`STARTUP`].
    fn await_listening(&mut self, port: u16) {
        let deadline = Instant::now() + STARTUP;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "mockllm exited ({status}) before listening:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "mockllm did not listen within {STARTUP:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The venv's interpreter, if mockllm is installed there.
fn mockllm_python() -> Option<PathBuf> {
    let venv = std::env::var_os("MOCKLLM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mockllm-venv"));
    let installed = venv.join("bin/mockllm").is_file();
    installed.then(|| venv.join("bin/python"))
}

fn request(model: &str, messages: Vec<Message>) -> ModelRequest {
    ModelRequest::new("run-1/model/1", model, messages).unwrap()
}

/// The text of a stream that must complete.
async fn answer(provider: &dyn ModelProvider, request: ModelRequest) -> String {
    let mut stream = provider.stream(request).await.expect("the stream starts");
    let events = drain(&mut stream).await.expect("the stream ends cleanly");
    let Some(StreamEvent::Completed { .. }) = events.last() else {
        panic!("the response did not complete: {events:?}");
    };
    let texts = events.iter().filter_map(|event| match event {
        StreamEvent::TextDelta(text) => Some(text.as_str()),
        _ => None,
    });
    texts.collect()
}

/// The code of the failure of a request mockllm refuses.
async fn refusal(provider: &dyn ModelProvider, request: ModelRequest) -> String {
    let Err(error) = provider.stream(request).await else {
        panic!("expected mockllm to refuse the request");
    };
    assert!(!format!("{error} {error:?}").contains(KEY), "{error:?}");
    assert!(error.problem().message().contains("400"), "{error}");
    error.problem().code().to_owned()
}

#[tokio::test]
async fn both_providers_against_mockllm() {
    let Some(python) = mockllm_python() else {
        skip_or_fail("mockllm (pip install mockllm==0.0.8 into target/mockllm-venv)");
        return;
    };
    let server = MockLlm::start(&python);
    let system_only = || vec![Message::system("No question here.").unwrap()];
    let conversation = || vec![Message::user(PROMPT).unwrap()];

    let openai_config = OpenAiConfig::new(&format!("{}/v1", server.origin), KEY, "gpt-4o-mini")
        .unwrap()
        .with_system_prompt("You are a coding agent.");
    let openai = OpenAiProvider::new(openai_config).unwrap();
    // A text answer end to end: the system prompt and the user's prompt as mockllm reads
    // them (an unknown prompt would get "Unknown prompt.").
    let text = answer(&openai, request("gpt-4o-mini", conversation())).await;
    assert_eq!(text, ANSWER);
    // Its error path: no user message is a 400.
    let code = refusal(&openai, request("gpt-4o-mini", system_only())).await;
    assert_eq!(code, "bad_request");

    let anthropic_config = AnthropicConfig::new(&server.origin, KEY, "claude-3-haiku-20240307")
        .unwrap()
        .with_system_prompt("You are a coding agent.");
    let anthropic = AnthropicProvider::new(anthropic_config).unwrap();
    // mockllm accepts the request (top-level `system`, string content), but its stream is
    // not Anthropic's: no `message_start`, no content blocks, and a `data: [DONE]` that is
    // not JSON. The provider shows none of it as text and fails the stream as malformed.
    let request_for_claude = request("claude-3-haiku-20240307", conversation());
    let mut stream = anthropic.stream(request_for_claude).await.unwrap();
    let error = drain(&mut stream)
        .await
        .expect_err("the stream is not Anthropic's");
    assert_eq!(error.problem().code(), "bad_frame", "{error}");
    // Its error path: no user message (the system text goes to `system`) is a 400.
    let code = refusal(
        &anthropic,
        request("claude-3-haiku-20240307", system_only()),
    )
    .await;
    assert_eq!(code, "bad_request");
    drop(server);
}
