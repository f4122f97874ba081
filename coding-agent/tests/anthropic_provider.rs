//! The Anthropic Messages API provider against a real HTTP/1.1 server on 127.0.0.1 (the
//! loopback server of `support`): raw responses written in pieces with small delays, so
//! events split across reads.

mod support;

use std::num::NonZeroU32;

use agent_core::message::{Message, Part, Role, ToolResultPart};
use agent_core::model::{ModelRequest, StreamEvent};
use agent_core::tool::Call;
use coding_agent::anthropic::{AnthropicConfig, AnthropicProvider, ConfigError};
use serde_json::{Value, json};
use support::*;

const KEY: &str = "sk-ant-test-secret-0123456789";

fn config(origin: &str) -> AnthropicConfig {
    AnthropicConfig::new(origin, KEY, "config-default-model").unwrap()
}

fn provider(origin: &str) -> AnthropicProvider {
    AnthropicProvider::new(config(origin)).unwrap()
}

/// `event: <type>` and `data: <json>`, then a blank line, as Anthropic sends them.
fn event(value: Value) -> String {
    let kind = value["type"].as_str().unwrap_or("unknown").to_owned();
    format!("event: {kind}\ndata: {value}\n\n")
}

fn message_start(input_tokens: u64) -> String {
    event(json!({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": "claude-test", "stop_reason": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }}))
}

fn text_start(index: u64) -> String {
    event(json!({"type": "content_block_start", "index": index,
                 "content_block": {"type": "text", "text": ""}}))
}

fn text_delta(index: u64, text: &str) -> String {
    event(json!({"type": "content_block_delta", "index": index,
                 "delta": {"type": "text_delta", "text": text}}))
}

fn tool_start(index: u64, id: &str, name: &str) -> String {
    event(json!({"type": "content_block_start", "index": index,
                 "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}))
}

fn json_delta(index: u64, partial: &str) -> String {
    event(json!({"type": "content_block_delta", "index": index,
                 "delta": {"type": "input_json_delta", "partial_json": partial}}))
}

fn block_stop(index: u64) -> String {
    event(json!({"type": "content_block_stop", "index": index}))
}

fn message_end(stop_reason: &str, output_tokens: u64) -> Vec<String> {
    vec![
        event(json!({"type": "message_delta",
                     "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                     "usage": {"output_tokens": output_tokens}})),
        event(json!({"type": "message_stop"})),
    ]
}

fn request() -> ModelRequest {
    ModelRequest::new(
        "run-1/model/1",
        "claude-test",
        vec![Message::user("hi").unwrap()],
    )
    .unwrap()
}

/// A complete response with no content.
fn empty_response() -> Script {
    let body = [message_start(1)]
        .into_iter()
        .chain(message_end("end_turn", 1));
    Script::events(body.collect())
}

fn result(call_id: &str, content: &str, problem: bool) -> Part {
    Part::ToolResult(ToolResultPart {
        call_id: call_id.into(),
        name: "files.read".into(),
        content: content.into(),
        problem,
    })
}

#[tokio::test]
async fn streams_text_split_mid_line_and_sends_the_mapped_request() {
    let body = [
        message_start(12),
        ": a comment\r\n\r\n".to_owned(),
        event(json!({"type": "ping"})).replace('\n', "\r\n"),
        text_start(0),
        text_delta(0, "Hel"),
        text_delta(0, "lo, "),
        text_delta(0, "world"),
        block_stop(0),
    ]
    .concat()
        + &message_end("end_turn", 5).concat();
    // Cuts inside `event:`, inside `data:`, inside JSON, between `\r` and `\n`.
    let crlf = body.find("\r\n").unwrap();
    let mut cuts = vec![
        3,
        body.find("data:").unwrap() + 2,
        crlf + 1,
        body.find("lo, ").unwrap() + 2,
        body.find("message_stop").unwrap() + 4,
    ];
    cuts.sort_unstable();
    fn prompted(origin: &str) -> AnthropicProvider {
        let config = config(origin)
            .with_system_prompt("You are a coding agent.")
            .with_max_tokens(NonZeroU32::new(1000).unwrap());
        AnthropicProvider::new(config).unwrap()
    }

    let mut messages = conversation();
    messages.push(Message::assistant("It says alpha.").unwrap());
    messages.push(Message::user("Thanks.").unwrap());
    let request = ModelRequest::new("run-1/model/2", "claude-test", messages)
        .unwrap()
        .with_tools(tools())
        .unwrap();

    let script = Script::events(split_at(&body, &cuts));
    let (events, served) = exchange(prompted, script, request).await;
    // Each delta as sent, however the bytes were cut; the usage of both usage events.
    let expected = vec![text("Hel"), text("lo, "), text("world"), completed(12, 5)];
    assert_eq!(events, expected);
    assert_eq!(served.method, "POST");
    assert_eq!(served.path, "/v1/messages");
    assert_eq!(served.header("x-api-key"), Some(KEY));
    assert_eq!(served.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(served.header("content-type"), Some("application/json"));
    assert_eq!(served.header("authorization"), None);
    assert_eq!(
        served.body,
        json!({
            "model": "claude-test",
            "max_tokens": 1000,
            "stream": true,
            "system": "You are a coding agent.\n\nBe brief.",
            "messages": [
                {"role": "user", "content": "Read a, list b."},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "call_a", "name": "files__read",
                     "input": {"path": "a"}},
                    {"type": "tool_use", "id": "call_b", "name": "list_dir", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_a", "content": "alpha"},
                    {"type": "tool_result", "tool_use_id": "call_b",
                     "content": "no such directory", "is_error": true},
                ]},
                {"role": "assistant", "content": "It says alpha."},
                {"role": "user", "content": "Thanks."},
            ],
            "tools": [
                {"name": "files__read", "description": "Reads a file.",
                 "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
                {"name": "list_dir", "description": "Lists a directory.",
                 "input_schema": {"type": "object", "properties": {}}},
            ],
        })
    );
}

#[tokio::test]
async fn without_a_system_prompt_or_tools_those_members_are_absent() {
    let (_, served) = exchange(provider, empty_response(), request()).await;
    assert_eq!(
        served.body,
        json!({
            "model": "claude-test",
            "max_tokens": 4096,
            "stream": true,
            "messages": [{"role": "user", "content": "hi"}],
        })
    );
}

#[tokio::test]
async fn tool_results_are_sent_back_as_tool_result_blocks_in_one_user_message() {
    let calls = vec![
        Part::ToolCall(Call::new("toolu_a", "files.read", json!({"path": "a"})).unwrap()),
        Part::ToolCall(Call::new("toolu_b", "files.read", json!({"path": "b"})).unwrap()),
    ];
    let messages = vec![
        Message::user("Read a and b.").unwrap(),
        Message::new(Role::Assistant, calls).unwrap(),
        Message::new(Role::Tool, vec![result("toolu_a", "alpha", false)]).unwrap(),
        Message::new(Role::Tool, vec![result("toolu_b", "no such file", true)]).unwrap(),
    ];
    let request = ModelRequest::new("run-1/model/3", "claude-test", messages).unwrap();
    let (_, served) = exchange(provider, empty_response(), request).await;
    assert_eq!(
        served.body["messages"],
        json!([
            {"role": "user", "content": "Read a and b."},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_a", "name": "files__read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "toolu_b", "name": "files__read", "input": {"path": "b"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "alpha"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such file",
                 "is_error": true},
            ]},
        ])
    );
}

#[tokio::test]
async fn assembles_a_tool_call_from_input_json_deltas() {
    let body = [
        message_start(30),
        tool_start(0, "toolu_1", "files__read"),
        json_delta(0, ""),
        json_delta(0, "{\"pa"),
        json_delta(0, "th\": \"src/"),
        json_delta(0, "main.rs\"}"),
        block_stop(0),
    ]
    .into_iter()
    .chain(message_end("tool_use", 9))
    .collect();
    let expected = vec![
        call("toolu_1", "files.read", json!({"path": "src/main.rs"})),
        completed(30, 9),
    ];
    assert_events(provider, Script::events(body), request(), expected).await;
}

#[tokio::test]
async fn two_tool_calls_between_text_blocks_each_come_at_their_block_stop() {
    let body = [
        message_start(7),
        text_start(0),
        text_delta(0, "Both."),
        block_stop(0),
        tool_start(1, "toolu_a", "read_file"),
        json_delta(1, "{\"path\":"),
        json_delta(1, " \"a.txt\"}"),
        block_stop(1),
        text_start(2),
        text_delta(2, "And:"),
        block_stop(2),
        tool_start(3, "toolu_b", "list_dir"),
        // No input at all: the call's arguments are `{}`.
        block_stop(3),
    ]
    .concat()
        + &message_end("tool_use", 3).concat();
    let pieces = split_at(&body, &[body.len() / 3, 2 * body.len() / 3]);
    let expected = vec![
        text("Both."),
        call("toolu_a", "read_file", json!({"path": "a.txt"})),
        text("And:"),
        call("toolu_b", "list_dir", json!({})),
        completed(7, 3),
    ];
    assert_events(provider, Script::events(pieces), request(), expected).await;
}

#[tokio::test]
async fn a_tool_call_cut_by_max_tokens_fails_the_response() {
    let body = vec![
        message_start(1),
        tool_start(0, "toolu_1", "read_file"),
        json_delta(0, "{\"path\": "),
        block_stop(0),
    ];
    let script = Script::events(body);
    let problem = assert_response_fails(provider, script, request(), "bad_tool_arguments").await;
    assert!(!problem.is_retryable());
}

#[tokio::test]
async fn unauthorized_never_repeats_the_server_or_shows_the_key() {
    let body = json!({"type": "error", "error": {
        "type": "authentication_error",
        "message": format!("invalid x-api-key {KEY}"),
    }});
    let error = refused(provider, Script::error("401 Unauthorized", body), request()).await;
    assert_problem(&error, "auth", false, KEY);
    assert_eq!(
        error.problem().message(),
        "HTTP 401: the server rejected the API key"
    );
    assert!(!format!("{error:?}").contains("invalid x-api-key"));
}

#[tokio::test]
async fn an_unknown_model_is_named() {
    let body = json!({"type": "error", "error": {
        "type": "not_found_error", "message": "model: claude-test",
    }});
    let error = refused(provider, Script::error("404 Not Found", body), request()).await;
    assert_problem(&error, "unknown_model", false, KEY);
    assert!(
        error.problem().message().contains("`claude-test`"),
        "{error}"
    );
}

#[tokio::test]
async fn rate_limits_are_retryable_and_never_show_the_key() {
    let body = json!({"type": "error", "error": {
        "type": "rate_limit_error",
        "message": format!("Number of request tokens has exceeded your rate limit ({KEY})"),
    }});
    let error = refused(
        provider,
        Script::error("429 Too Many Requests", body),
        request(),
    )
    .await;
    assert_problem(&error, "rate_limited", true, KEY);
    assert!(error.problem().message().contains("429"));
    assert!(
        error
            .problem()
            .message()
            .contains("exceeded your rate limit (<redacted>)")
    );
}

#[tokio::test]
async fn statuses_map_to_typed_problems() {
    let cases = [
        ("529 Overloaded", "overloaded_error", "overloaded", true),
        (
            "500 Internal Server Error",
            "api_error",
            "server_error",
            true,
        ),
        ("503 Service Unavailable", "api_error", "server_error", true),
        ("403 Forbidden", "permission_error", "auth", false),
        (
            "400 Bad Request",
            "invalid_request_error",
            "bad_request",
            false,
        ),
        (
            "413 Payload Too Large",
            "request_too_large",
            "bad_request",
            false,
        ),
        // A 404 that is not about the model: most likely a base URL ending in `/v1`.
        ("404 Not Found", "other", "not_found", false),
    ];
    for (status, error_type, code, retryable) in cases {
        let body = json!({"type": "error", "error": {
            "type": error_type, "message": format!("failed for {KEY}"),
        }});
        let error = refused(provider, Script::error(status, body), request()).await;
        assert_problem(&error, code, retryable, KEY);
        assert!(error.problem().message().contains("<redacted>"), "{status}");
    }
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    assert_unreachable_is_unavailable(provider, request(), KEY).await;
}

#[tokio::test]
async fn an_error_event_mid_stream_fails_the_response() {
    let body = vec![
        message_start(3),
        text_start(0),
        text_delta(0, "Start"),
        event(json!({"type": "error", "error": {
            "type": "overloaded_error", "message": format!("Overloaded ({KEY})"),
        }})),
        // Nothing after the failure is read.
        text_delta(0, " never shown"),
    ];
    let (events, _) = exchange(provider, Script::events(body), request()).await;
    let [StreamEvent::TextDelta(delta), StreamEvent::Failed(problem)] = &events[..] else {
        panic!("expected text then a failure, got {events:?}");
    };
    assert_eq!(delta, "Start");
    assert_eq!(problem.code(), "overloaded");
    assert!(problem.is_retryable());
    assert_eq!(problem.message(), "Overloaded (<redacted>)");
}

#[tokio::test]
async fn a_stream_cut_before_message_stop_is_a_stream_error() {
    let complete_but_unstopped = [
        message_start(3),
        text_start(0),
        text_delta(0, "partial"),
        block_stop(0),
        event(
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                     "usage": {"output_tokens": 2}}),
        ),
    ]
    .concat();
    let cut_mid_event = message_start(3)
        + &text_start(0)
        + &text_delta(0, "partial")
        + "event: content_block_delta\ndata: {\"type\": \"content_bl";
    for (body, framing, end) in [
        (
            complete_but_unstopped.clone(),
            Framing::Chunked,
            End::Finish,
        ),
        (complete_but_unstopped, Framing::Close, End::Finish),
        (cut_mid_event, Framing::Chunked, End::Abort),
    ] {
        let script = Script::framed(body, framing, end);
        assert_cut_stream_fails(provider, script, request(), text("partial")).await;
    }
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let piece = message_start(1) + &text_start(0) + &text_delta(0, "first");
    let first = text("first");
    assert_dropping_the_stream_closes(provider, piece, request(), first).await;
}

#[test]
fn config_reads_variables_and_requires_a_key() {
    let missing = AnthropicConfig::from_vars(vars(&[])).unwrap_err();
    assert_eq!(missing, ConfigError::MissingApiKey("ANTHROPIC_API_KEY"));
    assert_eq!(missing.to_string(), "ANTHROPIC_API_KEY is not set");
    let defaults = AnthropicConfig::from_vars(vars(&[("ANTHROPIC_API_KEY", KEY)])).unwrap();
    assert_eq!(defaults.base_url(), "https://api.anthropic.com");
    assert_eq!(defaults.model(), "claude-sonnet-4-5");
    assert_eq!(defaults.max_tokens().get(), 4096);
    assert_eq!(defaults.system_prompt(), None);
    let custom = AnthropicConfig::from_vars(vars(&[
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", "http://localhost:4000/"),
        ("ANTHROPIC_MODEL", "claude-haiku-4-5"),
    ]))
    .unwrap();
    assert_eq!(custom.base_url(), "http://localhost:4000");
    assert_eq!(custom.model(), "claude-haiku-4-5");
    let error = AnthropicConfig::from_vars(|name| match name {
        "ANTHROPIC_API_KEY" => Some(KEY.to_owned()),
        "ANTHROPIC_BASE_URL" => Some("https://user:pass@example.com".to_owned()),
        _ => None,
    })
    .unwrap_err();
    assert_eq!(error, ConfigError::InvalidBaseUrl("ANTHROPIC_BASE_URL"));
    assert!(!error.to_string().contains("pass"));
    assert_eq!(
        AnthropicConfig::new("https://example.com", "sk bad\nkey", "m").unwrap_err(),
        ConfigError::InvalidApiKey("ANTHROPIC_API_KEY")
    );
}

#[test]
fn debug_output_redacts_the_key() {
    let config = AnthropicConfig::new("https://example.com", KEY, "claude-test")
        .unwrap()
        .with_system_prompt("secret-free prompt");
    let provider = AnthropicProvider::new(config.clone()).unwrap();
    let shown = format!("{config:?} {provider:?} {provider:#?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    assert!(shown.contains("claude-test"), "{shown}");
}
