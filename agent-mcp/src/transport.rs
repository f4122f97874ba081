//! The stdio transport of one server session: rmcp's framed writer, and our own reader,
//! bounded by [`MAX_MESSAGE_BYTES`].
//!
//! rmcp's own reader drops a line over its limit without a word, so a request answered by
//! such a line waits for its whole timeout and a mutating tool that ran is then reported
//! uncertain. This reader instead answers the request itself, as soon as the message passes
//! the bound and its `id` is known: with a JSON-RPC error that only this reader produces (its
//! id is recorded in `Oversized`), so the call can report what happened.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleClient;
use rmcp::model::{ErrorCode, ErrorData, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};

/// Largest message a server may send, in bytes, without its terminating newline. A larger
/// answer to a request fails that request at once ([`crate::McpError::AnswerTooLarge`]
/// for a call); any other larger message is dropped.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Longest request id kept while the rest of an oversized message is skipped, in bytes.
const MAX_ID_BYTES: usize = 256;
/// Most oversized answers remembered until their request takes them; the oldest goes first
/// (its request no longer waits: it was cancelled or timed out).
const MAX_OVERSIZED_PENDING: usize = 64;
/// The code of the error this reader answers an oversized message with.
const ANSWER_TOO_LARGE: ErrorCode = ErrorCode(-32_000);
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
/// The read buffer's capacity kept between messages; a larger one is given back.
const KEPT_LINE_CAPACITY: usize = 64 * 1024;

/// The requests whose answer was over [`MAX_MESSAGE_BYTES`], as this reader (and no server)
/// recorded them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Oversized(Arc<Mutex<VecDeque<RequestId>>>);

impl Oversized {
    fn record(&self, id: RequestId) {
        let mut ids = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if ids.len() >= MAX_OVERSIZED_PENDING {
            ids.pop_front();
        }
        ids.push_back(id);
    }

    /// Whether the answer to `id` was refused as oversized (and forgets it).
    pub(crate) fn take(&self, id: &RequestId) -> bool {
        let mut ids = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match ids.iter().position(|known| known == id) {
            Some(at) => {
                ids.remove(at);
                true
            }
            None => false,
        }
    }
}

/// A client transport over a child's stdout and stdin.
pub(crate) struct BoundedTransport<R, W: AsyncWrite + Send + Unpin + 'static> {
    read: BufReader<R>,
    /// The message being read, up to the bound; kept across cancelled `receive`s.
    line: Vec<u8>,
    /// Set while the rest of an oversized message is skipped.
    skipping: Option<Skipping>,
    /// Only its writer is used (its reader is empty).
    write: AsyncRwTransport<RoleClient, tokio::io::Empty, W>,
    oversized: Oversized,
}

struct Skipping {
    scanner: IdScanner,
    /// Whether the request was already answered for this message.
    answered: bool,
}

impl<R, W> BoundedTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub(crate) fn new(read: R, write: W, oversized: Oversized) -> Self {
        BoundedTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: None,
            write: AsyncRwTransport::new(tokio::io::empty(), write),
            oversized,
        }
    }

    /// The error answer to the request `id`, recorded as this reader's.
    fn answer_too_large(&self, id: RequestId) -> RxJsonRpcMessage<RoleClient> {
        self.oversized.record(id.clone());
        RxJsonRpcMessage::<RoleClient>::error(
            ErrorData::new(
                ANSWER_TOO_LARGE,
                format!("the answer is larger than {MAX_MESSAGE_BYTES} bytes and was not read"),
                None,
            ),
            Some(id),
        )
    }

    /// Reads until a whole message is buffered (`Some(None)`), an oversized answer must be
    /// reported (`Some(Some(error))`), or the stream ends (`None`). Cancellation safe: every
    /// step after `fill_buf` is synchronous, and the partial state lives on `self`.
    async fn read_message(&mut self) -> Option<Option<RxJsonRpcMessage<RoleClient>>> {
        loop {
            let available = match self.read.fill_buf().await {
                Ok([]) => return None,
                Ok(available) => available,
                Err(error) => {
                    tracing::error!("reading an MCP server's stdout failed: {error}");
                    return None;
                }
            };
            let newline = available.iter().position(|&b| b == b'\n');
            let chunk = &available[..newline.unwrap_or(available.len())];
            let taken = newline.map_or(available.len(), |at| at + 1);
            let mut report = None;
            match &mut self.skipping {
                Some(skipping) => {
                    if !skipping.answered {
                        skipping.scanner.feed(chunk);
                        if let Some(id) = skipping.scanner.id() {
                            skipping.answered = true;
                            report = Some(id);
                        }
                    }
                }
                None if self.line.len() + chunk.len() > MAX_MESSAGE_BYTES => {
                    let mut scanner = IdScanner::default();
                    scanner.feed(&self.line);
                    scanner.feed(chunk);
                    // Give the buffer back: a bound-sized allocation per server is not kept.
                    self.line = Vec::new();
                    report = scanner.id();
                    self.skipping = Some(Skipping {
                        answered: report.is_some(),
                        scanner,
                    });
                    tracing::warn!(
                        max = MAX_MESSAGE_BYTES,
                        "an MCP server sent a message over the bound; it is skipped"
                    );
                }
                None => self.line.extend_from_slice(chunk),
            }
            self.read.consume(taken);
            let ended = newline.is_some();
            if ended && self.skipping.take().is_none() {
                return Some(None);
            }
            if let Some(id) = report {
                return Some(Some(self.answer_too_large(id)));
            }
        }
    }
}

impl<R, W> Transport<RoleClient> for BoundedTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.write.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(error) = self.read_message().await? {
                return Some(error);
            }
            let parsed = {
                let text = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
                let text = text.strip_prefix(UTF8_BOM).unwrap_or(text);
                (!text.iter().all(u8::is_ascii_whitespace))
                    .then(|| serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(text))
            };
            self.line.clear();
            // Keep the allocation for the next message unless it is large.
            if self.line.capacity() > KEPT_LINE_CAPACITY {
                self.line = Vec::new();
            }
            let Some(parsed) = parsed else {
                continue;
            };
            match parsed {
                Ok(message) => return Some(message),
                // Like rmcp: a message that is not JSON-RPC (or a notification of a later
                // revision) is ignored; an answer it should have been times out.
                Err(error) => tracing::debug!("ignoring an unreadable MCP message: {error}"),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.write.close()
    }
}

/// Finds the top-level `"id"` of a JSON-RPC answer fed in pieces, keeping at most
/// [`MAX_ID_BYTES`] of it (and nothing else). A message with a top-level `"method"` (seen so
/// far) is a request or notification of the server's, whose id is not one of ours.
#[derive(Default)]
struct IdScanner {
    depth: usize,
    top_is_object: bool,
    in_string: bool,
    escaped: bool,
    /// At depth 1 of the top object: the next string is a key.
    expect_key: bool,
    /// The key being read (the first seven bytes are enough to tell `id` and `method`).
    key: Option<Vec<u8>>,
    last_key_is_id: bool,
    is_request: bool,
    /// The id's bytes while its value is read.
    value: Option<Vec<u8>>,
    found: Option<RequestId>,
    given_up: bool,
}

impl IdScanner {
    fn id(&self) -> Option<RequestId> {
        self.found.clone().filter(|_| !self.is_request)
    }

    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.found.is_some() || self.given_up || self.is_request {
                return;
            }
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        if let Some(value) = &mut self.value {
            if self.in_string || !matches!(b, b',' | b'}') {
                value.push(b);
                if value.len() > MAX_ID_BYTES || (!self.in_string && matches!(b, b'{' | b'[')) {
                    self.given_up = true;
                    return;
                }
            } else {
                self.found = serde_json::from_slice(value).ok();
                self.given_up = self.found.is_none();
                return;
            }
        }
        if self.in_string {
            if let Some(key) = &mut self.key
                && !self.escaped
                && b != b'"'
                && key.len() < 7
            {
                key.push(b);
            }
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    self.last_key_is_id = key == b"id";
                    self.is_request |= key == b"method";
                }
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.top_is_object && self.expect_key {
                    self.key = Some(Vec::new());
                    self.expect_key = false;
                }
            }
            b'{' | b'[' => {
                if self.depth == 0 {
                    self.top_is_object = b == b'{';
                    self.expect_key = true;
                }
                self.depth += 1;
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if self.depth == 1 => self.expect_key = true,
            b':' if self.depth == 1 && self.top_is_object && self.last_key_is_id => {
                self.last_key_is_id = false;
                self.value = Some(Vec::new());
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(pieces: &[&str]) -> Option<RequestId> {
        let mut scanner = IdScanner::default();
        for piece in pieces {
            scanner.feed(piece.as_bytes());
        }
        scanner.id()
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        assert_eq!(
            scan(&[r#"{"jsonrpc":"2.0","id":7,"result":{"#]),
            Some(RequestId::Number(7))
        );
        assert_eq!(
            scan(&[r#"{"result":{"id":1,"x":"\"id\":2"},"i"#, r#"d": "a\"b" }"#]),
            Some(RequestId::String("a\"b".into()))
        );
        // Not yet known, nested only, or not an id.
        assert_eq!(scan(&[r#"{"jsonrpc":"2.0","id":7"#]), None);
        assert_eq!(scan(&[r#"{"result":{"id":3}"#]), None);
        assert_eq!(scan(&[r#"[{"id":3}]"#]), None);
        // A request of the server's: its id is not one of ours.
        assert_eq!(scan(&[r#"{"method":"ping","id":3,"params":{"#]), None);
        assert_eq!(
            scan(&[r#"{"methods":1,"id":3,"#]),
            Some(RequestId::Number(3))
        );
        assert_eq!(scan(&[r#"{"id":{"a":1},"b":2}"#]), None);
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_ID_BYTES));
        assert_eq!(scan(&[&long]), None);
        let at = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_ID_BYTES - 2));
        assert!(scan(&[&at]).is_some());
    }

    /// Feeds `input` to a transport over an in-memory pipe and returns what it delivers.
    fn deliver(input: Vec<u8>) -> (Vec<RxJsonRpcMessage<RoleClient>>, Oversized) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let (mut server, client) = tokio::io::duplex(64 * 1024);
            let oversized = Oversized::default();
            let mut transport = BoundedTransport::new(client, tokio::io::sink(), oversized.clone());
            let writer = tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                server.write_all(&input).await.unwrap();
            });
            let mut delivered = Vec::new();
            let read = async {
                while let Some(message) = transport.receive().await {
                    delivered.push(message);
                }
            };
            tokio::time::timeout(std::time::Duration::from_secs(60), read)
                .await
                .expect("the transport read everything in time");
            writer.await.unwrap();
            (delivered, oversized)
        })
    }

    fn response(id: u64, bytes: usize, id_last: bool) -> Vec<u8> {
        let line = |pad: &str| {
            let result = format!(r#"{{"content":[{{"type":"text","text":"{pad}"}}]}}"#);
            if id_last {
                format!(r#"{{"jsonrpc":"2.0","result":{result},"id":{id}}}"#)
            } else {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
            }
        };
        let pad = "x".repeat(bytes.saturating_sub(line("").len()));
        let mut line = line(&pad).into_bytes();
        assert!(bytes < 100 || line.len() == bytes);
        line.push(b'\n');
        line
    }

    fn is_error_for(message: &RxJsonRpcMessage<RoleClient>, id: i64) -> bool {
        matches!(message, rmcp::model::JsonRpcMessage::Error(error)
            if error.id == Some(RequestId::Number(id)) && error.error.code == ANSWER_TOO_LARGE)
    }

    #[test]
    fn a_message_at_the_bound_is_delivered_and_past_it_is_answered_for() {
        let mut input = response(1, MAX_MESSAGE_BYTES, false);
        input.extend(response(2, MAX_MESSAGE_BYTES + 1, false));
        input.extend(response(3, MAX_MESSAGE_BYTES + 1, true));
        // No id at all (a notification): dropped without an answer.
        let notification = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":"{}"}}}}"#,
            "x".repeat(MAX_MESSAGE_BYTES)
        );
        input.extend(notification.into_bytes());
        input.extend(b"\n\r\n");
        input.extend(response(4, 10, false));
        let (delivered, oversized) = deliver(input);
        assert_eq!(delivered.len(), 4);
        assert!(
            matches!(&delivered[0], rmcp::model::JsonRpcMessage::Response(r) if r.id == RequestId::Number(1))
        );
        assert!(is_error_for(&delivered[1], 2));
        assert!(is_error_for(&delivered[2], 3));
        assert!(
            matches!(&delivered[3], rmcp::model::JsonRpcMessage::Response(r) if r.id == RequestId::Number(4))
        );
        assert!(oversized.take(&RequestId::Number(2)));
        assert!(oversized.take(&RequestId::Number(3)));
        assert!(!oversized.take(&RequestId::Number(1)));
    }

    #[test]
    fn an_oversized_answer_is_reported_before_its_line_ends() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (mut server, client) = tokio::io::duplex(64 * 1024);
            let mut transport =
                BoundedTransport::new(client, tokio::io::sink(), Oversized::default());
            // The bound is passed, the line never ends, and the writer stays open.
            let writer = tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let head =
                    br#"{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":""#;
                server.write_all(head).await.unwrap();
                server
                    .write_all(&vec![b'x'; MAX_MESSAGE_BYTES])
                    .await
                    .unwrap();
                server
            });
            let message =
                tokio::time::timeout(std::time::Duration::from_secs(60), transport.receive())
                    .await
                    .expect("reported before the line ended")
                    .expect("a message");
            assert!(is_error_for(&message, 9));
            drop(writer.await.unwrap());
        });
    }

    #[test]
    fn oversized_answers_are_remembered_up_to_the_bound() {
        let oversized = Oversized::default();
        for i in 0..=MAX_OVERSIZED_PENDING as i64 {
            oversized.record(RequestId::Number(i));
        }
        assert!(!oversized.take(&RequestId::Number(0)));
        assert!(oversized.take(&RequestId::Number(1)));
        assert!(!oversized.take(&RequestId::Number(1)));
        assert!(oversized.take(&RequestId::Number(MAX_OVERSIZED_PENDING as i64)));
    }
}
