//! What the provider tests share: a one-connection HTTP/1.1 server on 127.0.0.1 that
//! records the request it reads and writes a scripted response in pieces with small
//! delays (so frames split across reads), and the rule for tests needing outside tools.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use agent_core::model::{EventStream, StreamError, StreamEvent};
use serde_json::Value;
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

/// Ends a test whose tool from outside the Rust toolchain is missing: under `CI` (set and
/// not empty, as `.ci/run` sets it) the test is required and fails; elsewhere it prints
/// one line saying what to install, and passes.
pub fn skip_or_fail(needs: &str) {
    if std::env::var_os("CI").is_some_and(|ci| !ci.is_empty()) {
        panic!("CI is set, so this test is required: it needs {needs}");
    }
    // Written to stderr itself: the test harness captures `eprintln!` of passing tests.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("skipped: needs {needs}\n").as_bytes(),
    );
}
