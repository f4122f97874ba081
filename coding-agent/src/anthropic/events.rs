//! Anthropic's streamed Messages API events as stream items.

use std::collections::BTreeMap;

use agent_core::model::{MAX_OPERATION_TOOL_CALLS, StreamEvent, Usage};
use serde_json::Value;

use super::errors::event_problem;
use crate::http::calls::{PartialCall, too_many_calls};
use crate::http::config::ApiKey;
use crate::http::problems::{ErrorBody, stream_problem};
use crate::http::sse::{Output, Protocol};

/// The state of one response: the `tool_use` blocks being assembled (by content block
/// index), how many calls it made, and its usage.
pub(super) struct Events {
    key: ApiKey,
    calls: BTreeMap<u64, PartialCall>,
    call_count: usize,
    usage: Usage,
}

impl Events {
    pub(super) fn new(key: ApiKey) -> Self {
        Events {
            key,
            calls: BTreeMap::new(),
            call_count: 0,
            usage: Usage::default(),
        }
    }

    /// `content_block_start`: text may already carry some; a `tool_use` block starts a call.
    /// Other blocks (thinking, server tools) are not ours to show.
    fn block_start(&mut self, index: u64, block: &Value, out: &mut Output) {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => out.text(text(block.get("text"))),
            Some("tool_use") => {
                if self.call_count >= MAX_OPERATION_TOOL_CALLS {
                    return out.failed(too_many_calls());
                }
                self.call_count += 1;
                let call = PartialCall::new(text(block.get("id")), text(block.get("name")));
                self.calls.insert(index, call);
            }
            _ => {}
        }
    }

    /// `content_block_delta`: more text, or more of a call's input JSON.
    fn block_delta(&mut self, index: u64, delta: &Value, out: &mut Output) {
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => out.text(text(delta.get("text"))),
            Some("input_json_delta") => {
                let Some(call) = self.calls.get_mut(&index) else {
                    return;
                };
                if let Err(problem) = call.push_arguments(text(delta.get("partial_json")), index) {
                    out.failed(problem);
                }
            }
            _ => {}
        }
    }

    /// `content_block_stop`: a `tool_use` block's input is complete, so its call is emitted.
    fn block_stop(&mut self, index: u64, out: &mut Output) {
        if let Some(call) = self.calls.remove(&index) {
            match call.finish(index) {
                Ok(call) => out.event(StreamEvent::ToolCall(call)),
                Err(problem) => out.failed(problem),
            }
        }
    }

    /// Token counts from a `usage` object: input counts every input token, cached or not;
    /// a count that is absent keeps its earlier value.
    fn usage(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage.filter(|usage| usage.is_object()) else {
            return;
        };
        let count = |field: &str| usage.get(field).and_then(Value::as_u64);
        let input = [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ]
        .into_iter()
        .filter_map(count)
        .reduce(u64::saturating_add);
        if let Some(input) = input {
            self.usage.input_tokens = input;
        }
        if let Some(output) = count("output_tokens") {
            self.usage.output_tokens = output;
        }
    }
}

fn text(value: Option<&Value>) -> &str {
    value.and_then(Value::as_str).unwrap_or_default()
}

impl Protocol for Events {
    fn frame(&mut self, frame: &Value, out: &mut Output) {
        let index = frame.get("index").and_then(Value::as_u64).unwrap_or(0);
        match frame.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                self.usage(
                    frame
                        .get("message")
                        .and_then(|message| message.get("usage")),
                );
            }
            Some("content_block_start") => {
                let block = frame.get("content_block").unwrap_or(&Value::Null);
                self.block_start(index, block, out);
            }
            Some("content_block_delta") => {
                let delta = frame.get("delta").unwrap_or(&Value::Null);
                self.block_delta(index, delta, out);
            }
            Some("content_block_stop") => self.block_stop(index, out),
            // `delta.stop_reason` says why the model stopped; a call cut short by
            // `max_tokens` has already failed as invalid JSON at its block's stop.
            Some("message_delta") => self.usage(frame.get("usage")),
            Some("message_stop") => {
                // Blocks never stopped: their calls count if their input is complete.
                for index in self.calls.keys().copied().collect::<Vec<_>>() {
                    self.block_stop(index, out);
                }
                out.complete(self.usage);
            }
            Some("error") => {
                let error = frame.get("error").unwrap_or(&Value::Null);
                out.failed(event_problem(&ErrorBody::from_value(error, &self.key)));
            }
            // `ping`, and event types added later, carry nothing we use.
            _ => {}
        }
    }

    /// Only `message_stop` completes a response.
    fn end(&mut self, _marker: bool, out: &mut Output) {
        out.fail(stream_problem(
            "the model server closed the stream before `message_stop`",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::sse::tests::decode_with;
    use agent_core::model::ModelProblem;
    use serde_json::json;

    fn decode(frames: &[Value]) -> Vec<Result<StreamEvent, ModelProblem>> {
        let body: String = frames.iter().map(|f| format!("data: {f}\n\n")).collect();
        decode_with(Events::new(ApiKey::for_tests("sk-ant-test")), &[&body])
    }

    #[test]
    fn cache_tokens_count_as_input_and_output_is_the_last_count() {
        let items = decode(&[
            json!({"type": "message_start", "message": {"usage": {
                "input_tokens": 5, "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 20, "output_tokens": 1}}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 42}}),
            json!({"type": "message_stop"}),
        ]);
        assert_eq!(
            items,
            vec![Ok(StreamEvent::Completed {
                usage: Usage::new(125, 42)
            })]
        );
    }

    #[test]
    fn thinking_blocks_are_skipped_and_errors_are_typed_and_scrubbed() {
        let items = decode(&[
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
            json!({"type": "error", "error": {"type": "overloaded_error",
                   "message": "Overloaded for sk-ant-test"}}),
        ]);
        let [Ok(StreamEvent::Failed(problem))] = &items[..] else {
            panic!("{items:?}");
        };
        assert_eq!(problem.code(), "overloaded");
        assert!(problem.is_retryable());
        assert_eq!(problem.message(), "Overloaded for <redacted>");
    }
}
