//! What the provider tests share: a one-connection HTTP/1.1 server on 127.0.0.1 that
//! records the request it reads and writes a scripted response in pieces with small
//! delays (so frames split across reads), and the rule for tests needing outside tools.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use agent_core::message::{Message, Part, Role, ToolResultPart};
use agent_core::model::{
    EventStream, ModelProblem, ModelProvider, ModelRequest, ProviderError, StreamError, StreamEvent,
};
use agent_core::tool::{Call, Definition, Effect, ReplaySafety};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};

/// A status that makes the server send nothing at all.
pub const SILENT: &str = "";

/// How the response body is framed.
#[derive(Clone, Copy)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`, one chunk per piece.
    Chunked,
    /// No length: the body ends when the server closes the connection.
    Close,
}

/// What the server does after its last piece.
#[derive(Clone, Copy, PartialEq)]
pub enum End {
    /// Ends the body properly (last chunk, or closing a `Connection: close` body).
    Finish,
    /// Closes the socket without ending a chunked body.
    Abort,
    /// Keeps the connection open and waits (up to 5 s) for the client to close it.
    AwaitClose,
}

/// One scripted response.
pub struct Script {
    pub status: &'static str,
    pub content_type: &'static str,
    pub framing: Framing,
    pub pieces: Vec<String>,
    pub end: End,
}

impl Script {
    /// A `200` event stream of `pieces`, chunked, ended properly.
    pub fn events(pieces: Vec<String>) -> Self {
        Script {
            status: "200 OK",
            content_type: "text/event-stream",
            framing: Framing::Chunked,
            pieces,
            end: End::Finish,
        }
    }

    /// A `200` event stream of one `piece`, framed and ended as given.
    pub fn framed(piece: String, framing: Framing, end: End) -> Self {
        Script {
            framing,
            end,
            ..Script::events(vec![piece])
        }
    }

    /// A JSON error `body` with `status`, ending with the connection.
    pub fn error(status: &'static str, body: Value) -> Self {
        Script {
            status,
            content_type: "application/json",
            framing: Framing::Close,
            pieces: vec![body.to_string()],
            end: End::Finish,
        }
    }
}

/// What the server saw.
#[derive(Debug)]
pub struct Served {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// With [`End::AwaitClose`]: whether the client closed the connection.
    pub client_closed: bool,
}

impl Served {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// A one-connection server; also reports when the request has been read.
pub struct Server {
    /// `http://127.0.0.1:{port}`.
    pub origin: String,
    pub received: oneshot::Receiver<()>,
    pub handle: JoinHandle<Served>,
}

impl Server {
    pub async fn start(script: Script) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (received_tx, received) = oneshot::channel();
        let handle = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut served = read_request(&mut socket).await;
            let _ = received_tx.send(());
            respond(&mut socket, &script, &mut served).await;
            served
        });
        Server {
            origin: format!("http://127.0.0.1:{port}"),
            received,
            handle,
        }
    }

    /// The server's record, once it is done (within 5 s).
    pub async fn served(self) -> Served {
        timeout(Duration::from_secs(5), self.handle)
            .await
            .expect("the server finished")
            .unwrap()
    }
}

/// A loopback URL where nothing listens.
pub async fn closed_origin() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

async fn read_request(socket: &mut TcpStream) -> Served {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let read = socket.read(&mut chunk).await.unwrap();
        assert!(read > 0, "the client closed before sending a request");
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap().split(' ');
    let method = request_line.next().unwrap().to_owned();
    let path = request_line.next().unwrap().to_owned();
    let headers: Vec<(String, String)> = lines
        .map(|line| {
            let (name, value) = line.split_once(':').unwrap();
            (name.trim().to_ascii_lowercase(), value.trim().to_owned())
        })
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .map_or(0, |(_, value)| value.parse().unwrap());
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let read = socket.read(&mut chunk).await.unwrap();
        assert!(read > 0, "the client closed mid-body");
        body.extend_from_slice(&chunk[..read]);
    }
    Served {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap(),
        client_closed: false,
    }
}

async fn respond(socket: &mut TcpStream, script: &Script, served: &mut Served) {
    let framing = match script.framing {
        Framing::Chunked => "Transfer-Encoding: chunked",
        Framing::Close => "Connection: close",
    };
    if script.status == SILENT {
        return await_close(socket, served).await;
    }
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\n{framing}\r\n\r\n",
        script.status, script.content_type
    );
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    for piece in &script.pieces {
        let bytes = match script.framing {
            Framing::Chunked => format!("{:x}\r\n{piece}\r\n", piece.len()),
            Framing::Close => piece.clone(),
        };
        if socket.write_all(bytes.as_bytes()).await.is_err() {
            return;
        }
        let _ = socket.flush().await;
        sleep(Duration::from_millis(15)).await;
    }
    match script.end {
        End::Finish => {
            if let Framing::Chunked = script.framing {
                let _ = socket.write_all(b"0\r\n\r\n").await;
            }
            let _ = socket.shutdown().await;
        }
        End::Abort => {}
        End::AwaitClose => await_close(socket, served).await,
    }
}

/// Waits up to 5 s for the client to close the connection (EOF or reset).
async fn await_close(socket: &mut TcpStream, served: &mut Served) {
    let mut buffer = [0u8; 256];
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let read = timeout(Duration::from_millis(100), socket.read(&mut buffer)).await;
        if let Ok(Ok(0) | Err(_)) = read {
            served.client_closed = true;
            return;
        }
    }
}

/// Cuts `text` into pieces at the given byte offsets.
pub fn split_at(text: &str, cuts: &[usize]) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for &cut in cuts {
        pieces.push(text[start..cut].to_owned());
        start = cut;
    }
    pieces.push(text[start..].to_owned());
    pieces
}

/// Every event until the stream ends or fails (each wait bounded by 5 s).
pub async fn drain(stream: &mut Box<dyn EventStream>) -> Result<Vec<StreamEvent>, StreamError> {
    let mut events = Vec::new();
    while let Some(event) = timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("the stream answered")?
    {
        events.push(event);
    }
    Ok(events)
}

// `skip_or_fail`, the rule for tests that need a tool from outside the Rust toolchain: one
// implementation, kept with agent-endpoint's tests.
#[path = "../../../agent-endpoint/tests/support/mod.rs"]
mod outside;
#[allow(unused_imports)]
pub use outside::skip_or_fail;

/// Builds the provider under test for a server's origin (`http://127.0.0.1:{port}`).
pub type Build<P> = fn(&str) -> P;

/// Serves `script`, streams `request` through the provider built for the server, and
/// returns every event (the stream must end without a stream error) and what the server
/// saw.
pub async fn exchange<P: ModelProvider>(
    build: Build<P>,
    script: Script,
    request: ModelRequest,
) -> (Vec<StreamEvent>, Served) {
    let server = Server::start(script).await;
    let provider = build(&server.origin);
    let mut stream = provider.stream(request).await.expect("the stream starts");
    let events = drain(&mut stream).await.expect("the stream ends cleanly");
    (events, server.served().await)
}

/// Serves `script` and asserts that the provider makes exactly `expected` of it.
pub async fn assert_events<P: ModelProvider>(
    build: Build<P>,
    script: Script,
    request: ModelRequest,
    expected: Vec<StreamEvent>,
) {
    let (events, _) = exchange(build, script, request).await;
    assert_eq!(events, expected);
}

/// Serves `script`, whose response must fail with a `code` problem alone (no event
/// before it), and returns that problem.
pub async fn assert_response_fails<P: ModelProvider>(
    build: Build<P>,
    script: Script,
    request: ModelRequest,
    code: &str,
) -> ModelProblem {
    let (events, _) = exchange(build, script, request).await;
    let [StreamEvent::Failed(problem)] = &events[..] else {
        panic!("expected one failure, got {events:?}");
    };
    assert_eq!(problem.code(), code);
    problem.clone()
}

/// Serves `script`, which must make the provider fail before any stream exists.
pub async fn refused<P: ModelProvider>(
    build: Build<P>,
    script: Script,
    request: ModelRequest,
) -> ProviderError {
    let server = Server::start(script).await;
    let provider = build(&server.origin);
    let error = match provider.stream(request).await {
        Ok(_) => panic!("expected a provider error"),
        Err(error) => error,
    };
    server.served().await;
    error
}

/// Asserts that a provider pointed at a port where nothing listens fails `unavailable`,
/// retryable, and never prints `key`.
pub async fn assert_unreachable_is_unavailable<P: ModelProvider>(
    build: Build<P>,
    request: ModelRequest,
    key: &str,
) {
    let provider = build(&closed_origin().await);
    let Err(error) = provider.stream(request).await else {
        panic!("expected a provider error");
    };
    assert_eq!(error.problem().code(), "unavailable");
    assert!(error.problem().is_retryable());
    assert!(!format!("{error} {error:?}").contains(key));
}

/// Asserts that `script` gives `first`, then a retryable `provider_stream` error, then
/// nothing.
pub async fn assert_cut_stream_fails<P: ModelProvider>(
    build: Build<P>,
    script: Script,
    request: ModelRequest,
    first: StreamEvent,
) {
    let server = Server::start(script).await;
    let provider = build(&server.origin);
    let mut stream = provider.stream(request).await.unwrap();
    assert_eq!(stream.next().await.unwrap(), Some(first));
    let error = timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .expect_err("the stream fails");
    assert_eq!(error.problem().code(), "provider_stream");
    assert!(error.problem().is_retryable());
    assert_eq!(stream.next().await.unwrap(), None);
    server.served().await;
}

/// Asserts that dropping the stream after `first` (decoded from `piece`, after which the
/// server keeps the connection open) closes the connection within a second.
pub async fn assert_dropping_the_stream_closes<P: ModelProvider>(
    build: Build<P>,
    piece: String,
    request: ModelRequest,
    first: StreamEvent,
) {
    let server = Server::start(Script {
        end: End::AwaitClose,
        ..Script::events(vec![piece])
    })
    .await;
    let provider = build(&server.origin);
    let mut stream = provider.stream(request).await.unwrap();
    assert_eq!(stream.next().await.unwrap(), Some(first));
    drop(stream);
    let served = timeout(Duration::from_secs(1), server.handle)
        .await
        .expect("the server saw the connection close within a second")
        .unwrap();
    assert!(served.client_closed);
}

/// An environment lookup over fixed `pairs`.
pub fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name: &str| {
        pairs
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned())
    }
}

/// Asserts that `error` is a `code` problem, retryable or not, that shows neither `key`
/// nor the loopback address.
pub fn assert_problem(error: &ProviderError, code: &str, retryable: bool, key: &str) {
    assert_eq!(error.problem().code(), code, "{error}");
    assert_eq!(error.problem().is_retryable(), retryable, "{error}");
    assert_discreet(error, key);
}

/// Asserts that neither `key` nor the loopback address shows in what `error` prints.
pub fn assert_discreet(error: &ProviderError, key: &str) {
    for shown in [error.to_string(), format!("{error:?}")] {
        assert!(!shown.contains(key), "{shown}");
        assert!(!shown.contains("127.0.0.1"), "{shown}");
    }
}

/// A conversation with a message of every kind, for the request mapping tests: a system
/// message, user text, a user message of only an extension part (which providers skip),
/// an assistant's text with two tool calls (`call_a`: `files.read {"path": "a"}`,
/// `call_b`: `list_dir {}`), and one tool message with both results, the second a problem.
pub fn conversation() -> Vec<Message> {
    let result = |call_id: &str, name: &str, content: &str, problem| {
        Part::ToolResult(ToolResultPart {
            call_id: call_id.into(),
            name: name.into(),
            content: content.into(),
            problem,
        })
    };
    let note = Part::Extension {
        namespace: "host.note".into(),
        value: json!({"skipped": true}),
    };
    let calls = vec![
        Part::Text("Reading.".into()),
        Part::ToolCall(Call::new("call_a", "files.read", json!({"path": "a"})).unwrap()),
        Part::ToolCall(Call::new("call_b", "list_dir", json!({})).unwrap()),
    ];
    let results = vec![
        result("call_a", "files.read", "alpha", false),
        result("call_b", "list_dir", "no such directory", true),
    ];
    vec![
        Message::system("Be brief.").unwrap(),
        Message::user("Read a, list b.").unwrap(),
        Message::new(Role::User, vec![note]).unwrap(),
        Message::new(Role::Assistant, calls).unwrap(),
        Message::new(Role::Tool, results).unwrap(),
    ]
}

/// The tools of [`conversation`]: `files.read` (with a `path` property) and `list_dir`
/// (with the default empty schema).
pub fn tools() -> Vec<Definition> {
    let files_read = Definition::builder("files.read", "Reads a file.")
        .input_schema(json!({"type": "object", "properties": {"path": {"type": "string"}}}))
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .build()
        .unwrap();
    let list_dir = Definition::builder("list_dir", "Lists a directory.")
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .build()
        .unwrap();
    vec![files_read, list_dir]
}

/// A text delta.
pub fn text(text: &str) -> StreamEvent {
    StreamEvent::TextDelta(text.into())
}

/// A tool call of `name` with `arguments`.
pub fn call(id: &str, name: &str, arguments: Value) -> StreamEvent {
    StreamEvent::ToolCall(Call::new(id, name, arguments).unwrap())
}

/// The response completed with these token counts.
pub fn completed(input_tokens: u64, output_tokens: u64) -> StreamEvent {
    StreamEvent::Completed {
        usage: agent_core::model::Usage::new(input_tokens, output_tokens),
    }
}
