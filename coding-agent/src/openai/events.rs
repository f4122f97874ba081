//! OpenAI's streamed chat completion chunks as stream items.

use std::collections::BTreeMap;

use agent_core::model::{MAX_OPERATION_TOOL_CALLS, ModelProblem, StreamEvent, Usage};
use serde_json::Value;

use crate::http::calls::{PartialCall, too_many_calls};
use crate::http::config::ApiKey;
use crate::http::problems::{ErrorBody, stream_problem};
use crate::http::sse::{Output, Protocol};

/// The state of one response: its tool calls by index, its usage, whether it finished.
pub(super) struct Chunks {
    key: ApiKey,
    calls: BTreeMap<u64, PartialCall>,
    usage: Usage,
    /// A `finish_reason` arrived: the end of the body completes the response.
    finished: bool,
}

impl Chunks {
    pub(super) fn new(key: ApiKey) -> Self {
        Chunks {
            key,
            calls: BTreeMap::new(),
            usage: Usage::default(),
            finished: false,
        }
    }

    /// One fragment of `delta.tool_calls`: the first carries `id` and `function.name`,
    /// later ones more `function.arguments`.
    fn fragment(&mut self, position: usize, fragment: &Value, out: &mut Output) {
        let index = fragment
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        if !self.calls.contains_key(&index) && self.calls.len() >= MAX_OPERATION_TOOL_CALLS {
            return out.failed(too_many_calls());
        }
        fn text(value: Option<&Value>) -> &str {
            value.and_then(Value::as_str).unwrap_or_default()
        }
        let id = text(fragment.get("id"));
        let function = fragment.get("function");
        let name = text(function.and_then(|f| f.get("name")));
        let call = self
            .calls
            .entry(index)
            .or_insert_with(|| PartialCall::new(id, name));
        if call.id.is_empty() {
            call.id = id.to_owned();
        }
        if call.name.is_empty() {
            call.name = name.to_owned();
        }
        let arguments = text(function.and_then(|f| f.get("arguments")));
        if let Err(problem) = call.push_arguments(arguments, index) {
            out.failed(problem);
        }
    }

    /// Emits every assembled tool call, in index order.
    fn flush_calls(&mut self, out: &mut Output) {
        for (index, call) in std::mem::take(&mut self.calls) {
            match call.finish(index) {
                Ok(call) => out.event(StreamEvent::ToolCall(call)),
                Err(problem) => return out.failed(problem),
            }
        }
    }
}

impl Protocol for Chunks {
    const END_MARKER: Option<&'static [u8]> = Some(b"[DONE]");

    /// One `chat.completion.chunk` (or an `error` object).
    fn frame(&mut self, frame: &Value, out: &mut Output) {
        if let Some(error) = frame.get("error").filter(|error| !error.is_null()) {
            let body = ErrorBody::from_value(error, &self.key);
            let message = body
                .message
                .unwrap_or_else(|| "the model server reported an error".to_owned());
            return out.failed(ModelProblem::new("server_error", message).retryable(true));
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
                    out.text(text);
                }
            }
            if let Some(fragments) = delta.get("tool_calls").and_then(Value::as_array) {
                for (position, fragment) in fragments.iter().enumerate() {
                    if out.is_done() {
                        return;
                    }
                    self.fragment(position, fragment, out);
                }
            }
        }
        if choice
            .get("finish_reason")
            .is_some_and(|reason| !reason.is_null())
        {
            self.finished = true;
            self.flush_calls(out);
        }
    }

    /// `[DONE]`, or the end of the body after a `finish_reason`, completes the response:
    /// pending tool calls, then `Completed`.
    fn end(&mut self, marker: bool, out: &mut Output) {
        if marker || self.finished {
            self.flush_calls(out);
            out.complete(self.usage);
        } else {
            out.fail(stream_problem(
                "the model server closed the stream before the response finished",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::sse::tests::decode_with;

    fn decode(chunks: &[&str]) -> Vec<Result<StreamEvent, ModelProblem>> {
        decode_with(Chunks::new(ApiKey::for_tests("sk-test")), chunks)
    }

    #[test]
    fn finish_then_eof_completes_and_done_without_finish_completes() {
        let items = decode(&[
            "data: {\"choices\":[{\"index\":0,\n",
            "data: \"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n",
        ]);
        assert_eq!(items.len(), 2);
        assert!(matches!(items[1], Ok(StreamEvent::Completed { .. })));
        let items = decode(&["data: {\"choices\":[]}\n\ndata: [DONE]\n\n"]);
        assert!(matches!(&items[..], [Ok(StreamEvent::Completed { .. })]));
    }

    #[test]
    fn mid_stream_errors_are_scrubbed_failures() {
        let items = decode(&["data: {\"error\":{\"message\":\"overloaded, key sk-test\"}}\n\n"]);
        let [Ok(StreamEvent::Failed(problem))] = &items[..] else {
            panic!("{items:?}");
        };
        assert_eq!(problem.code(), "server_error");
        assert_eq!(problem.message(), "overloaded, key <redacted>");
    }
}
