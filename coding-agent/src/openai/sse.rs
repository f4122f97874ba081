//! The server-sent events decoder: body bytes in, [`StreamEvent`]s out.

use std::collections::{BTreeMap, VecDeque};

use agent_core::model::{
    MAX_OPERATION_TOOL_CALLS, MAX_TEXT_DELTA_BYTES, ModelProblem, StreamEvent, Usage,
};
use agent_core::tool::{Call, MAX_PAYLOAD_BYTES};
use serde_json::Value;

use super::config::ApiKey;
use super::errors::{ErrorBody, stream_problem};
use super::wire::tool_name;

/// Largest server-sent line or event, in bytes.
const MAX_FRAME_BYTES: usize = 4 << 20;

/// A tool call being assembled from streamed fragments.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl PartialCall {
    fn finish(self, index: u64) -> Result<Call, ModelProblem> {
        if self.id.is_empty() || self.name.is_empty() {
            return Err(ModelProblem::new(
                "bad_tool_call",
                format!("tool call {index} has no id or no function name"),
            ));
        }
        let arguments = if self.arguments.trim().is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            serde_json::from_str(&self.arguments).map_err(|_| {
                ModelProblem::new(
                    "bad_tool_arguments",
                    format!(
                        "the arguments of tool call {index} (`{}`) are not valid JSON",
                        self.name
                    ),
                )
            })?
        };
        Call::new(self.id, tool_name(&self.name), arguments)
            .map_err(|error| ModelProblem::new("bad_tool_call", error.to_string()))
    }
}

/// Server-sent events in, stream items out: splits lines (`\n`, `\r\n` or `\r`, across
/// chunk boundaries), gathers `data:` fields into events (ignoring comments and other
/// fields), and translates each event's JSON.
pub(super) struct Decoder {
    key: ApiKey,
    /// The current, unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a leading `\n` belongs to that line break.
    skip_lf: bool,
    /// The current event's `data` (lines joined by `\n`), once it has any.
    data: Option<Vec<u8>>,
    calls: BTreeMap<u64, PartialCall>,
    usage: Usage,
    /// A `finish_reason` arrived: the end of the body completes the response.
    finished: bool,
    /// A terminal item is queued; further input is ignored.
    pub(super) done: bool,
    pub(super) out: VecDeque<Result<StreamEvent, ModelProblem>>,
}

impl Decoder {
    pub(super) fn new(key: ApiKey) -> Self {
        Decoder {
            key,
            line: Vec::new(),
            skip_lf: false,
            data: None,
            calls: BTreeMap::new(),
            usage: Usage::default(),
            finished: false,
            done: false,
            out: VecDeque::new(),
        }
    }

    pub(super) fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.done {
            if std::mem::take(&mut self.skip_lf) && bytes[0] == b'\n' {
                bytes = &bytes[1..];
                continue;
            }
            let Some(at) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.extend_line(bytes);
                return;
            };
            self.extend_line(&bytes[..at]);
            if self.done {
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
            self.fail(ModelProblem::new(
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
            return self.fail(ModelProblem::new(
                "bad_frame",
                "a stream event exceeds 4 MiB",
            ));
        }
        if !data.is_empty() {
            data.push(b'\n');
        }
        data.extend_from_slice(value);
    }

    /// The connection closed: a pending event counts, then the response must be finished.
    pub(super) fn end_of_body(&mut self) {
        if self.done {
            return;
        }
        // An unterminated last line may be cut short: drop it, as the SSE spec does. Whole
        // `data` lines still waiting for their blank line count when they parse.
        self.line.clear();
        if let Some(data) = self.data.take() {
            let trimmed = data.trim_ascii();
            if trimmed == b"[DONE]" {
                return self.complete();
            }
            if let Ok(frame) = serde_json::from_slice::<Value>(trimmed) {
                self.frame(&frame);
            }
            if self.done {
                return;
            }
        }
        if self.finished {
            self.complete();
        } else {
            self.fail(stream_problem(
                "the model server closed the stream before the response finished",
            ));
        }
    }

    /// A stream error: queued behind what was already decoded; ends the stream.
    pub(super) fn fail(&mut self, problem: ModelProblem) {
        if !self.done {
            self.out.push_back(Err(problem));
            self.done = true;
        }
    }

    /// A [`StreamEvent::Failed`]: queued behind what was already decoded; ends the stream.
    fn failed(&mut self, problem: ModelProblem) {
        if !self.done {
            self.out.push_back(Ok(StreamEvent::Failed(problem)));
            self.done = true;
        }
    }

    /// Pending tool calls, then `Completed`.
    fn complete(&mut self) {
        self.flush_calls();
        if !self.done {
            let usage = self.usage;
            self.out.push_back(Ok(StreamEvent::Completed { usage }));
            self.done = true;
        }
    }

    fn dispatch(&mut self) {
        let Some(data) = self.data.take() else {
            return;
        };
        if self.done {
            return;
        }
        if data.trim_ascii() == b"[DONE]" {
            return self.complete();
        }
        let Ok(frame) = serde_json::from_slice::<Value>(&data) else {
            return self.fail(ModelProblem::new(
                "bad_frame",
                "a stream event is not valid JSON",
            ));
        };
        self.frame(&frame);
    }

    /// One `chat.completion.chunk` (or an `error` object).
    fn frame(&mut self, frame: &Value) {
        if let Some(error) = frame.get("error").filter(|error| !error.is_null()) {
            let body = ErrorBody::from_value(error, &self.key);
            let message = body
                .message
                .unwrap_or_else(|| "the model server reported an error".to_owned());
            let problem = ModelProblem::new("server_error", message).retryable(true);
            return self.failed(problem);
        }
        if let Some(usage) = frame.get("usage").filter(|usage| usage.is_object()) {
            let count = |field: &str| usage.get(field).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Usage::new(count("prompt_tokens"), count("completion_tokens"));
        }
        let choices = frame.get("choices").and_then(Value::as_array);
        let Some(choice) = choices.and_then(|choices| {
            choices
                .iter()
                .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        }) else {
            return;
        };
        if let Some(delta) = choice.get("delta") {
            for field in ["content", "refusal"] {
                if let Some(text) = delta.get(field).and_then(Value::as_str) {
                    self.text(text);
                }
            }
            if let Some(fragments) = delta.get("tool_calls").and_then(Value::as_array) {
                for (position, fragment) in fragments.iter().enumerate() {
                    self.fragment(position, fragment);
                }
            }
        }
        if choice
            .get("finish_reason")
            .is_some_and(|reason| !reason.is_null())
        {
            self.finished = true;
            self.flush_calls();
        }
    }

    /// Text, in deltas of at most [`MAX_TEXT_DELTA_BYTES`]; empty text is dropped.
    fn text(&mut self, mut text: &str) {
        while !text.is_empty() && !self.done {
            let mut end = text.len().min(MAX_TEXT_DELTA_BYTES);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let (head, rest) = text.split_at(end);
            self.out
                .push_back(Ok(StreamEvent::TextDelta(head.to_owned())));
            text = rest;
        }
    }

    /// One fragment of `delta.tool_calls`: the first carries `id` and `function.name`,
    /// later ones more `function.arguments`.
    fn fragment(&mut self, position: usize, fragment: &Value) {
        if self.done {
            return;
        }
        let index = fragment
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        if !self.calls.contains_key(&index) && self.calls.len() >= MAX_OPERATION_TOOL_CALLS {
            return self.failed(ModelProblem::new(
                "bad_tool_call",
                format!("more than {MAX_OPERATION_TOOL_CALLS} tool calls in one response"),
            ));
        }
        let call = self.calls.entry(index).or_default();
        fn text(value: Option<&Value>) -> &str {
            value.and_then(Value::as_str).unwrap_or_default()
        }
        let id = text(fragment.get("id"));
        if call.id.is_empty() {
            call.id = id.to_owned();
        }
        let function = fragment.get("function");
        let name = text(function.and_then(|f| f.get("name")));
        if call.name.is_empty() {
            call.name = name.to_owned();
        }
        call.arguments
            .push_str(text(function.and_then(|f| f.get("arguments"))));
        if call.arguments.len() > MAX_PAYLOAD_BYTES {
            self.failed(ModelProblem::new(
                "bad_tool_arguments",
                format!("the arguments of tool call {index} exceed {MAX_PAYLOAD_BYTES} bytes"),
            ));
        }
    }

    /// Emits every assembled tool call, in index order.
    fn flush_calls(&mut self) {
        for (index, call) in std::mem::take(&mut self.calls) {
            if self.done {
                return;
            }
            match call.finish(index) {
                Ok(call) => self.out.push_back(Ok(StreamEvent::ToolCall(call))),
                Err(problem) => self.failed(problem),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn decode(chunks: &[&str]) -> Vec<Result<StreamEvent, ModelProblem>> {
        let mut decoder = Decoder::new(ApiKey(Arc::from("sk-test")));
        for chunk in chunks {
            decoder.feed(chunk.as_bytes());
        }
        decoder.end_of_body();
        decoder.out.into_iter().collect()
    }

    #[test]
    fn lone_carriage_returns_and_comments_are_line_breaks_and_noise() {
        let items = decode(&[
            ": keep-alive\r",
            "event: message\rdata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\r",
            "\r\n",
            "data: [DONE]\r\r",
        ]);
        assert_eq!(
            items,
            vec![
                Ok(StreamEvent::TextDelta("a".into())),
                Ok(StreamEvent::Completed {
                    usage: Usage::default()
                }),
            ]
        );
    }

    #[test]
    fn multi_line_data_is_joined_and_finish_then_eof_completes() {
        let items = decode(&[
            "data: {\"choices\":[{\"index\":0,\n",
            "data: \"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n",
        ]);
        assert_eq!(items.len(), 2);
        assert!(matches!(items[1], Ok(StreamEvent::Completed { .. })));
    }

    #[test]
    fn bad_json_oversized_lines_and_mid_stream_errors() {
        let items = decode(&["data: {nope\n\n"]);
        assert!(matches!(&items[..], [Err(problem)] if problem.code() == "bad_frame"));

        let mut decoder = Decoder::new(ApiKey(Arc::from("k")));
        decoder.feed(&vec![b'x'; MAX_FRAME_BYTES + 1]);
        assert!(decoder.done);

        let items = decode(&["data: {\"error\":{\"message\":\"overloaded, key sk-test\"}}\n\n"]);
        let [Ok(StreamEvent::Failed(problem))] = &items[..] else {
            panic!("{items:?}");
        };
        assert_eq!(problem.code(), "server_error");
        assert_eq!(problem.message(), "overloaded, key <redacted>");
    }

    #[test]
    fn long_text_is_split_on_char_boundaries() {
        let text = "é".repeat(MAX_TEXT_DELTA_BYTES);
        let frame = json!({"choices": [{"index": 0, "delta": {"content": text}}]});
        let mut decoder = Decoder::new(ApiKey(Arc::from("k")));
        decoder.frame(&frame);
        let deltas: Vec<_> = decoder.out.into_iter().collect();
        assert_eq!(deltas.len(), 2);
        let mut joined = String::new();
        for delta in deltas {
            let Ok(StreamEvent::TextDelta(delta)) = delta else {
                panic!("not a delta");
            };
            assert!(delta.len() <= MAX_TEXT_DELTA_BYTES);
            joined.push_str(&delta);
        }
        assert_eq!(joined, text);
    }
}
