//! The server-sent events decoder both providers share: body bytes in, each event's JSON
//! handed to the provider's [`Protocol`], stream items out.

use std::collections::VecDeque;

use agent_core::model::{MAX_TEXT_DELTA_BYTES, ModelProblem, StreamEvent, Usage};
use serde_json::Value;

/// Largest server-sent line or event, in bytes.
const MAX_FRAME_BYTES: usize = 4 << 20;

/// One provider's events: what each JSON event means, and what the end of the body means.
pub(crate) trait Protocol: Send {
    /// A `data` value that is not JSON but ends the response (OpenAI's `[DONE]`).
    const END_MARKER: Option<&'static [u8]> = None;

    /// One event's JSON `data`.
    fn frame(&mut self, frame: &Value, out: &mut Output);

    /// The body ended, or [`END_MARKER`](Self::END_MARKER) arrived (`marker`), while no
    /// terminal item is queued: complete the response or fail it.
    fn end(&mut self, marker: bool, out: &mut Output);
}

/// The decoded items waiting to be read; once a terminal one is queued, nothing more is.
#[derive(Default)]
pub(crate) struct Output {
    items: VecDeque<Result<StreamEvent, ModelProblem>>,
    done: bool,
}

impl Output {
    /// Whether a terminal item is queued (further input is ignored).
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// The next item to hand out.
    pub(crate) fn pop(&mut self) -> Option<Result<StreamEvent, ModelProblem>> {
        self.items.pop_front()
    }

    /// A non-terminal event.
    pub(crate) fn event(&mut self, event: StreamEvent) {
        if !self.done {
            self.items.push_back(Ok(event));
        }
    }

    /// Text, in deltas of at most [`MAX_TEXT_DELTA_BYTES`]; empty text is dropped.
    pub(crate) fn text(&mut self, mut text: &str) {
        while !text.is_empty() && !self.done {
            let mut end = text.len().min(MAX_TEXT_DELTA_BYTES);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let (head, rest) = text.split_at(end);
            self.items
                .push_back(Ok(StreamEvent::TextDelta(head.to_owned())));
            text = rest;
        }
    }

    /// A stream error (the transport or the framing broke); ends the stream.
    pub(crate) fn fail(&mut self, problem: ModelProblem) {
        self.terminal(Err(problem));
    }

    /// A [`StreamEvent::Failed`] (the model's response failed); ends the stream.
    pub(crate) fn failed(&mut self, problem: ModelProblem) {
        self.terminal(Ok(StreamEvent::Failed(problem)));
    }

    /// [`StreamEvent::Completed`]; ends the stream.
    pub(crate) fn complete(&mut self, usage: Usage) {
        self.terminal(Ok(StreamEvent::Completed { usage }));
    }

    fn terminal(&mut self, item: Result<StreamEvent, ModelProblem>) {
        if !self.done {
            self.items.push_back(item);
            self.done = true;
        }
    }
}

/// Server-sent events in, stream items out: splits lines (`\n`, `\r\n` or `\r`, across
/// chunk boundaries), gathers `data:` fields into events (ignoring comments and other
/// fields, `event:` included: both providers' JSON names its own type), and hands each
/// event's JSON to `P`.
pub(crate) struct Decoder<P> {
    protocol: P,
    /// The current, unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a leading `\n` belongs to that line break.
    skip_lf: bool,
    /// The current event's `data` (lines joined by `\n`), once it has any.
    data: Option<Vec<u8>>,
    pub(crate) out: Output,
}

impl<P: Protocol> Decoder<P> {
    pub(crate) fn new(protocol: P) -> Self {
        Decoder {
            protocol,
            line: Vec::new(),
            skip_lf: false,
            data: None,
            out: Output::default(),
        }
    }

    pub(crate) fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.out.done {
            if std::mem::take(&mut self.skip_lf) && bytes[0] == b'\n' {
                bytes = &bytes[1..];
                continue;
            }
            let Some(at) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.extend_line(bytes);
                return;
            };
            self.extend_line(&bytes[..at]);
            if self.out.done {
                return;
            }
            self.skip_lf = bytes[at] == b'\r';
            bytes = &bytes[at + 1..];
            let line = std::mem::take(&mut self.line);
            self.line_done(&line);
            self.line = line;
            self.line.clear();
        }
    }

    fn extend_line(&mut self, bytes: &[u8]) {
        if self.line.len() + bytes.len() > MAX_FRAME_BYTES {
            self.out.fail(ModelProblem::new(
                "bad_frame",
                "a stream line exceeds 4 MiB",
            ));
        } else {
            self.line.extend_from_slice(bytes);
        }
    }

    fn line_done(&mut self, line: &[u8]) {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return; // A comment, e.g. a keep-alive.
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        if field != b"data" {
            return; // `event`, `id`, `retry` and unknown fields carry nothing we use.
        }
        let data = self.data.get_or_insert_with(Vec::new);
        if data.len() + value.len() + 1 > MAX_FRAME_BYTES {
            return self.out.fail(ModelProblem::new(
                "bad_frame",
                "a stream event exceeds 4 MiB",
            ));
        }
        if !data.is_empty() {
            data.push(b'\n');
        }
        data.extend_from_slice(value);
    }

    /// The connection closed: a pending event counts, then the protocol decides.
    pub(crate) fn end_of_body(&mut self) {
        if self.out.done {
            return;
        }
        // An unterminated last line may be cut short: drop it, as the SSE spec does. Whole
        // `data` lines still waiting for their blank line count when they parse.
        self.line.clear();
        if let Some(data) = self.data.take() {
            let trimmed = data.trim_ascii();
            if P::END_MARKER == Some(trimmed) {
                return self.protocol.end(true, &mut self.out);
            }
            if let Ok(frame) = serde_json::from_slice::<Value>(trimmed) {
                self.protocol.frame(&frame, &mut self.out);
            }
        }
        if !self.out.done {
            self.protocol.end(false, &mut self.out);
        }
    }

    /// A stream error from the transport: queued behind what was already decoded.
    pub(crate) fn fail(&mut self, problem: ModelProblem) {
        self.out.fail(problem);
    }

    fn dispatch(&mut self) {
        let Some(data) = self.data.take() else {
            return;
        };
        if self.out.done {
            return;
        }
        if P::END_MARKER == Some(data.trim_ascii()) {
            return self.protocol.end(true, &mut self.out);
        }
        match serde_json::from_slice::<Value>(&data) {
            Ok(frame) => self.protocol.frame(&frame, &mut self.out),
            Err(_) => self.out.fail(ModelProblem::new(
                "bad_frame",
                "a stream event is not valid JSON",
            )),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Each frame's `t` as text; `[END]` or a `{"stop": true}` frame completes.
    struct Echo;

    impl Protocol for Echo {
        const END_MARKER: Option<&'static [u8]> = Some(b"[END]");

        fn frame(&mut self, frame: &Value, out: &mut Output) {
            if let Some(text) = frame["t"].as_str() {
                out.text(text);
            }
            if frame["stop"] == true {
                out.complete(Usage::default());
            }
        }

        fn end(&mut self, marker: bool, out: &mut Output) {
            if marker {
                out.complete(Usage::default());
            } else {
                out.fail(ModelProblem::new("provider_stream", "cut"));
            }
        }
    }

    /// Everything `protocol` makes of `chunks` and the end of the body.
    pub(crate) fn decode_with<P: Protocol>(
        protocol: P,
        chunks: &[&str],
    ) -> Vec<Result<StreamEvent, ModelProblem>> {
        let mut decoder = Decoder::new(protocol);
        for chunk in chunks {
            decoder.feed(chunk.as_bytes());
        }
        decoder.end_of_body();
        std::iter::from_fn(|| decoder.out.pop()).collect()
    }

    fn decode(chunks: &[&str]) -> Vec<Result<StreamEvent, ModelProblem>> {
        decode_with(Echo, chunks)
    }

    fn text(text: &str) -> Result<StreamEvent, ModelProblem> {
        Ok(StreamEvent::TextDelta(text.into()))
    }

    const COMPLETED: Result<StreamEvent, ModelProblem> = Ok(StreamEvent::Completed {
        usage: Usage::new(0, 0),
    });

    #[test]
    fn lone_carriage_returns_and_comments_are_line_breaks_and_noise() {
        let items = decode(&[
            ": keep-alive\r",
            "event: message\rdata: {\"t\":\"a\"}\r",
            "\r\n",
            "data: [END]\r\r",
        ]);
        assert_eq!(items, vec![text("a"), COMPLETED]);
    }

    #[test]
    fn multi_line_data_is_joined_and_a_pending_event_counts_at_the_end() {
        let items = decode(&["data: {\"t\":\n", "data: \"x\", \"stop\": true}\n"]);
        assert_eq!(items, vec![text("x"), COMPLETED]);
        let items = decode(&["data: {\"t\":\"y\"}\n\ndata: {\"t\": \"cut sho"]);
        assert_eq!(items.len(), 2);
        assert!(matches!(&items[1], Err(problem) if problem.code() == "provider_stream"));
    }

    #[test]
    fn bad_json_and_oversized_lines_are_bad_frames() {
        let items = decode(&["data: {nope\n\n"]);
        assert!(matches!(&items[..], [Err(problem)] if problem.code() == "bad_frame"));
        let mut decoder = Decoder::new(Echo);
        decoder.feed(&vec![b'x'; MAX_FRAME_BYTES + 1]);
        assert!(decoder.out.is_done());
    }

    #[test]
    fn long_text_is_split_on_char_boundaries() {
        let long = "é".repeat(MAX_TEXT_DELTA_BYTES);
        let mut out = Output::default();
        out.text(&long);
        let mut joined = String::new();
        let mut count = 0;
        while let Some(item) = out.pop() {
            let Ok(StreamEvent::TextDelta(delta)) = item else {
                panic!("not a delta");
            };
            assert!(delta.len() <= MAX_TEXT_DELTA_BYTES);
            joined.push_str(&delta);
            count += 1;
        }
        assert_eq!(count, 2);
        assert_eq!(joined, long);
    }
}
