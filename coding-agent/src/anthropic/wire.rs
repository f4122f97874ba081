//! Our messages and tool definitions as an Anthropic Messages API request.

use agent_core::message::{Message, Part, Role};
use agent_core::model::ModelRequest;
use agent_core::tool::Definition;
use serde_json::{Map, Value, json};

use crate::http::calls::wire_name;

/// The Messages API request for `request`: the configured `system_prompt` and the
/// conversation's system messages joined into the top-level `system`, everything else as
/// alternating `user`/`assistant` messages.
pub(super) fn request_body(
    request: &ModelRequest,
    system_prompt: Option<&str>,
    max_tokens: u32,
) -> Value {
    let mut system: Vec<String> = system_prompt.map(str::to_owned).into_iter().collect();
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in request.messages() {
        let (role, blocks) = match message.role() {
            Role::System => {
                let text = message.text();
                if !text.is_empty() {
                    system.push(text.into_owned());
                }
                continue;
            }
            Role::User => ("user", text_blocks(message)),
            Role::Assistant => ("assistant", assistant_blocks(message)),
            Role::Tool => ("user", result_blocks(message)),
        };
        if blocks.is_empty() {
            continue;
        }
        // The API wants user and assistant turns to alternate, and all results of one
        // assistant turn's tool calls in the one user message after it.
        match messages.last_mut() {
            Some((last, previous)) if *last == role => previous.extend(blocks),
            _ => messages.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, blocks)| json!({ "role": role, "content": content(blocks) }))
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model()));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools().is_empty() {
        let tools = request.tools().iter().map(wire_tool).collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// A message's content: a lone text block as a plain string (the common case, and the
/// shorter form), anything else as blocks.
fn content(blocks: Vec<Value>) -> Value {
    match &blocks[..] {
        [block] if block["type"] == "text" => block["text"].clone(),
        _ => Value::Array(blocks),
    }
}

/// The message's text as one `text` block, or none (the API rejects empty text blocks).
fn text_blocks(message: &Message) -> Vec<Value> {
    let text = message.text();
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({ "type": "text", "text": text })]
    }
}

/// Text, then each tool call as a `tool_use` block.
fn assistant_blocks(message: &Message) -> Vec<Value> {
    let mut blocks = text_blocks(message);
    blocks.extend(message.tool_calls().map(|call| {
        json!({
            "type": "tool_use",
            "id": call.id(),
            "name": wire_name(call.name()),
            "input": call.arguments(),
        })
    }));
    blocks
}

/// Each tool result as a `tool_result` block; a problem is marked `is_error`.
fn result_blocks(message: &Message) -> Vec<Value> {
    message
        .parts()
        .iter()
        .filter_map(|part| match part {
            Part::ToolResult(result) => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": result.call_id,
                    "content": result.content,
                });
                if result.problem {
                    block["is_error"] = json!(true);
                }
                Some(block)
            }
            _ => None,
        })
        .collect()
}

/// A tool definition as an Anthropic tool.
fn wire_tool(tool: &Definition) -> Value {
    json!({
        "name": wire_name(tool.name()),
        "description": tool.description(),
        "input_schema": tool.input_schema(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::message::ToolResultPart;
    use agent_core::tool::Call;

    fn result(id: &str, problem: bool) -> Part {
        Part::ToolResult(ToolResultPart {
            call_id: id.to_owned(),
            name: "fs.read".to_owned(),
            content: format!("content of {id}"),
            problem,
        })
    }

    #[test]
    fn consecutive_results_and_user_text_merge_into_one_user_message() {
        let call = |id: &str| Part::ToolCall(Call::new(id, "fs.read", json!({})).unwrap());
        let messages = vec![
            Message::user("go").unwrap(),
            Message::new(Role::Assistant, vec![call("c1"), call("c2")]).unwrap(),
            Message::new(Role::Tool, vec![result("c1", false)]).unwrap(),
            Message::new(Role::Tool, vec![result("c2", true)]).unwrap(),
            Message::user("and then?").unwrap(),
        ];
        let request = ModelRequest::new("op", "claude", messages).unwrap();
        let body = request_body(&request, None, 10);
        assert!(body.get("system").is_none());
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[0], json!({"role": "user", "content": "go"}));
        assert_eq!(messages[1]["content"][1]["name"], "fs__read");
        assert_eq!(
            messages[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "content of c1"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "content of c2",
                 "is_error": true},
                {"type": "text", "text": "and then?"},
            ]})
        );
    }
}
