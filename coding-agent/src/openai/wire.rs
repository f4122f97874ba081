//! Our messages and tool definitions as OpenAI's chat completions request, and tool names
//! back from the calls a model makes.

use agent_core::message::{Message, Part, Role};
use agent_core::model::ModelRequest;
use agent_core::tool::Definition;
use serde_json::{Value, json};

/// The chat completions request for `request`, led by the `system` message when given.
pub(super) fn request_body(request: &ModelRequest, system: Option<&str>) -> Value {
    let system = system
        .filter(|text| !text.is_empty())
        .map(|text| json!({ "role": "system", "content": text }));
    let messages: Vec<Value> = system
        .into_iter()
        .chain(request.messages().iter().flat_map(wire_messages))
        .collect();
    let mut body = json!({
        "model": request.model(),
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if !request.tools().is_empty() {
        let tools: Vec<Value> = request.tools().iter().map(wire_tool).collect();
        body["tools"] = Value::Array(tools);
    }
    body
}

/// One of our messages as zero or more OpenAI messages. Extension parts are skipped (a
/// message of nothing else disappears); each tool result becomes its own `tool` message.
fn wire_messages(message: &Message) -> Vec<Value> {
    let text = message.text();
    match message.role() {
        Role::System | Role::User if text.is_empty() => Vec::new(),
        Role::System => vec![json!({ "role": "system", "content": text })],
        Role::User => vec![json!({ "role": "user", "content": text })],
        Role::Assistant => {
            let calls: Vec<Value> = message
                .tool_calls()
                .map(|call| {
                    json!({
                        "id": call.id(),
                        "type": "function",
                        "function": {
                            "name": wire_name(call.name()),
                            "arguments": call.arguments().to_string(),
                        },
                    })
                })
                .collect();
            if text.is_empty() && calls.is_empty() {
                return Vec::new();
            }
            let mut wire = json!({ "role": "assistant", "content": text });
            if text.is_empty() {
                wire["content"] = Value::Null;
            }
            if !calls.is_empty() {
                wire["tool_calls"] = Value::Array(calls);
            }
            vec![wire]
        }
        Role::Tool => message
            .parts()
            .iter()
            .filter_map(|part| match part {
                Part::ToolResult(result) => Some(json!({
                    "role": "tool",
                    "tool_call_id": result.call_id,
                    "content": result.content,
                })),
                _ => None,
            })
            .collect(),
    }
}

/// A tool name as OpenAI accepts it (`^[a-zA-Z0-9_-]+$`): each `.` becomes `__`. Reversible,
/// because a valid tool name never has two separators in a row.
fn wire_name(name: &str) -> String {
    name.replace('.', "__")
}

/// The tool name a model wrote, undoing [`wire_name`].
pub(super) fn tool_name(wire: &str) -> String {
    wire.replace("__", ".")
}

/// A tool definition as an OpenAI function tool.
fn wire_tool(tool: &Definition) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": wire_name(tool.name()),
            "description": tool.description(),
            "parameters": tool.input_schema(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::message::ToolResultPart;
    use agent_core::tool::Call;

    #[test]
    fn dotted_tool_names_round_trip() {
        assert_eq!(wire_name("fs.read_file"), "fs__read_file");
        assert_eq!(tool_name(&wire_name("fs.read_file")), "fs.read_file");
        assert_eq!(tool_name("list_dir"), "list_dir");
    }

    #[test]
    fn calls_are_json_strings_and_each_result_is_its_own_tool_message() {
        let call = Call::new("c1", "fs.read", json!({ "path": "a" })).unwrap();
        let assistant = Message::new(Role::Assistant, vec![Part::ToolCall(call)]).unwrap();
        let [wire] = &wire_messages(&assistant)[..] else {
            panic!("one assistant message");
        };
        assert_eq!(wire["content"], Value::Null);
        assert_eq!(wire["tool_calls"][0]["function"]["name"], "fs__read");
        assert_eq!(
            wire["tool_calls"][0]["function"]["arguments"],
            r#"{"path":"a"}"#
        );

        let result = |id: &str| {
            Part::ToolResult(ToolResultPart {
                call_id: id.to_owned(),
                name: "fs.read".to_owned(),
                content: format!("content of {id}"),
                problem: false,
            })
        };
        let tool = Message::new(Role::Tool, vec![result("c1"), result("c2")]).unwrap();
        let wire = wire_messages(&tool);
        assert_eq!(wire.len(), 2);
        assert_eq!(wire[1]["role"], "tool");
        assert_eq!(wire[1]["tool_call_id"], "c2");
        assert_eq!(wire[1]["content"], "content of c2");
    }
}
