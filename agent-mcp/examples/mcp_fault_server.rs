//! A small MCP server over stdio, built on rmcp's server side, for the fault tests and the
//! benchmark of `agent-mcp` (dev-only: it is an example, so rmcp's server features stay out
//! of the library).
//!
//! Tools: `echo`, `sleep` (read-only, closed world); `add_note` (mutating, not idempotent);
//! `slow_write` (mutating, sleeps first); `crash` (exits mid-call); `giant` (a result of
//! N bytes); `burst` (adds N tools, each followed by `tools/list_changed`); `toggle` (adds or
//! removes one tool, then `tools/list_changed`); `fail`
//! (`isError`); `contradictory` (read-only *and* destructive); `plain` (no annotations);
//! `Bad Name!` (normalized by the client); `spawn_grandchild` (starts `sleep 300` and returns
//! its pid); `stats` (calls and `notifications/cancelled` received). With
//! `FAULT_BIG_SCHEMA=1` it also lists `big_schema`, whose input schema is larger than the
//! kernel's bound. With `FAULT_LIST_PAGES=N` it answers `tools/list` in N pages (the first
//! N-1 pages one tool each, the last page the rest), chained by cursors.
//!
//! `progress` reports `steps` progress notifications (`i/steps`), then answers. With
//! `FAULT_LIST_CHANGED_ON_INIT=1` it adds `extra_0` as soon as the client is initialized and
//! announces the change unasked.
//!
//! With `FAULT_RAW=1` it is instead a hand-written JSON-RPC loop (no rmcp), for the hostile
//! cases rmcp's server would not produce: it answers `initialize` with the version in
//! `FAULT_PROTOCOL_VERSION` (default: the one the client asked for) and lists one mutating
//! tool, `sized`, whose answer is one line of exactly `bytes` bytes before its newline, with
//! the `id` first, or last when `id_last` is true.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, ErrorData, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

#[derive(Clone, Default)]
struct Fault {
    extra: Arc<AtomicU64>,
    calls: Arc<AtomicU64>,
    cancelled: Arc<AtomicU64>,
    notes: Arc<std::sync::Mutex<Vec<String>>>,
}

fn tool(name: &str, description: &str, schema: Value, annotations: Option<Value>) -> Tool {
    let mut value = json!({"name": name, "description": description, "inputSchema": schema});
    if let Some(annotations) = annotations {
        value["annotations"] = annotations;
    }
    serde_json::from_value(value).expect("a valid tool")
}

fn object(properties: Value) -> Value {
    json!({"type": "object", "properties": properties})
}

fn read_only() -> Option<Value> {
    Some(json!({"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}))
}

fn text(s: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(s.into())]))
}

impl Fault {
    fn tools(&self) -> Vec<Tool> {
        let mutating = Some(
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false}),
        );
        let mut tools = vec![
            tool(
                "echo",
                "Echoes `text`.",
                object(json!({"text": {"type": "string"}})),
                read_only(),
            ),
            tool(
                "sleep",
                "Sleeps `ms` milliseconds, then answers.",
                object(json!({"ms": {"type": "integer"}})),
                read_only(),
            ),
            tool(
                "progress",
                "Reports `steps` progress notifications, then answers.",
                object(json!({"steps": {"type": "integer"}})),
                read_only(),
            ),
            tool(
                "add_note",
                "Appends a note.",
                object(json!({"text": {"type": "string"}})),
                mutating.clone(),
            ),
            tool(
                "slow_write",
                "Sleeps `ms`, then appends a note.",
                object(json!({"ms": {"type": "integer"}})),
                mutating.clone(),
            ),
            tool(
                "crash",
                "Exits the server in the middle of the call.",
                object(json!({})),
                mutating.clone(),
            ),
            tool(
                "giant",
                "Answers with `bytes` bytes.",
                object(json!({"bytes": {"type": "integer"}})),
                read_only(),
            ),
            tool(
                "burst",
                "Adds `count` tools, announcing each.",
                object(json!({"count": {"type": "integer"}})),
                mutating.clone(),
            ),
            tool(
                "toggle",
                "Adds `extra_0` or removes it, and announces the change.",
                object(json!({})),
                mutating.clone(),
            ),
            tool(
                "fail",
                "Always reports a tool error.",
                object(json!({})),
                read_only(),
            ),
            tool(
                "contradictory",
                "Claims to be read-only and destructive.",
                object(json!({})),
                Some(
                    json!({"readOnlyHint": true, "destructiveHint": true, "openWorldHint": false}),
                ),
            ),
            tool("plain", "Has no annotations.", object(json!({})), None),
            tool(
                "Bad Name!",
                "Has a name outside the kernel grammar.",
                object(json!({})),
                read_only(),
            ),
            tool(
                "spawn_grandchild",
                "Starts `sleep 300` and returns its pid.",
                object(json!({})),
                mutating,
            ),
            tool(
                "stats",
                "Calls and cancellations received.",
                object(json!({})),
                read_only(),
            ),
        ];
        if std::env::var_os("FAULT_BIG_SCHEMA").is_some() {
            let properties: serde_json::Map<String, Value> = (0..2000)
                .map(|i| (format!("field_{i:05}"), json!({"type": "string"})))
                .collect();
            tools.push(tool(
                "big_schema",
                "Has a huge schema.",
                object(Value::Object(properties)),
                read_only(),
            ));
        }
        for i in 0..self.extra.load(Ordering::SeqCst) {
            tools.push(tool(
                &format!("extra_{i}"),
                "Added by burst.",
                object(json!({})),
                read_only(),
            ));
        }
        tools
    }
}

fn arg_u64(params: &CallToolRequestParams, name: &str) -> u64 {
    params
        .arguments
        .as_ref()
        .and_then(|a| a.get(name))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn arg_str(params: &CallToolRequestParams, name: &str) -> String {
    params
        .arguments
        .as_ref()
        .and_then(|a| a.get(name))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

impl ServerHandler for Fault {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities =
            serde_json::from_value(json!({"tools": {"listChanged": true}})).expect("capabilities");
        ServerConfig::new(capabilities)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let pages: usize = std::env::var("FAULT_LIST_PAGES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1)
            .max(1);
        let page: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let mut tools = self.tools();
        // Pages 0..pages-1 hold one tool each (empty once the tools run out); the last page
        // holds the rest.
        let answer = if page + 1 < pages {
            let one: Vec<Tool> = tools.into_iter().nth(page).into_iter().collect();
            json!({"tools": one, "nextCursor": (page + 1).to_string()})
        } else {
            json!({"tools": tools.split_off(page.min(tools.len()))})
        };
        Ok(serde_json::from_value(answer).expect("a tool list"))
    }

    async fn on_cancelled(
        &self,
        _notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.cancelled.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if std::env::var_os("FAULT_LIST_CHANGED_ON_INIT").is_some() {
            self.extra.store(1, Ordering::SeqCst);
            let _ = context.peer.notify_tool_list_changed().await;
        }
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match params.name.as_ref() {
            "echo" => Ok(text(arg_str(&params, "text"))),
            "sleep" => {
                tokio::time::sleep(Duration::from_millis(arg_u64(&params, "ms"))).await;
                Ok(text("slept"))
            }
            "progress" => {
                use rmcp::model::ProgressNotificationParam as Progress;
                let steps = arg_u64(&params, "steps");
                let token = params
                    .meta
                    .as_ref()
                    .and_then(|meta| meta.get_progress_token())
                    .or_else(|| context.meta.get_progress_token());
                // Spaced like a long-running call's progress, none sent with the answer.
                let pause = Duration::from_millis(20);
                for step in 1..=steps {
                    tokio::time::sleep(pause).await;
                    if let Some(token) = &token {
                        let progress = Progress::new(token.clone(), step as f64)
                            .with_total(steps as f64)
                            .with_message(format!("step {step}"));
                        let _ = context.peer.notify_progress(progress).await;
                    }
                }
                tokio::time::sleep(pause).await;
                Ok(text(format!("{steps} steps")))
            }
            "add_note" | "slow_write" => {
                tokio::time::sleep(Duration::from_millis(arg_u64(&params, "ms"))).await;
                let mut notes = self.notes.lock().expect("notes");
                notes.push(arg_str(&params, "text"));
                Ok(text(format!("{} notes", notes.len())))
            }
            "crash" => std::process::exit(3),
            "giant" => {
                let n = arg_u64(&params, "bytes").max(8) as usize;
                Ok(text(format!("HEAD{}TAIL", "x".repeat(n - 8))))
            }
            "burst" => {
                for _ in 0..arg_u64(&params, "count") {
                    self.extra.fetch_add(1, Ordering::SeqCst);
                    let _ = context.peer.notify_tool_list_changed().await;
                }
                Ok(text("burst"))
            }
            "toggle" => {
                let now = 1 - self.extra.load(Ordering::SeqCst).min(1);
                self.extra.store(now, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                Ok(text(now.to_string()))
            }
            "fail" => Ok(CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text("it failed")]))),
            "contradictory" | "plain" | "Bad Name!" => Ok(text("ok")),
            "spawn_grandchild" => {
                let child = std::process::Command::new("sleep").arg("300").spawn().map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                Ok(text(child.id().to_string()))
            }
            "stats" => Ok(text(
                json!({"calls": self.calls.load(Ordering::SeqCst), "cancelled": self.cancelled.load(Ordering::SeqCst)}).to_string(),
            )),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

/// The `FAULT_RAW` server: one JSON-RPC message per line on stdin, answered on stdout.
mod raw {
    use std::io::{BufRead, Write};

    use serde_json::{Value, json};

    fn sized_answer(id: &Value, bytes: usize, id_last: bool) -> Vec<u8> {
        let line = |pad: &str| {
            let result = json!({"content": [{"type": "text", "text": pad}], "isError": false});
            if id_last {
                format!(r#"{{"jsonrpc":"2.0","result":{result},"id":{id}}}"#)
            } else {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
            }
        };
        let skeleton = line("").len();
        let mut answer = line(&"x".repeat(bytes.saturating_sub(skeleton))).into_bytes();
        answer.push(b'\n');
        answer
    }

    fn answer(message: &Value) -> Option<Vec<u8>> {
        let id = message.get("id")?;
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let result = match method {
            "initialize" => {
                let asked = params
                    .get("protocolVersion")
                    .cloned()
                    .unwrap_or(Value::Null);
                let version = std::env::var("FAULT_PROTOCOL_VERSION")
                    .map(Value::String)
                    .unwrap_or(asked);
                json!({"protocolVersion": version, "capabilities": {"tools": {}},
                       "serverInfo": {"name": "fault-raw", "version": "1"}})
            }
            "tools/list" => json!({"tools": [{
                "name": "sized",
                "description": "Answers with one line of `bytes` bytes.",
                "inputSchema": {"type": "object", "properties": {
                    "bytes": {"type": "integer"}, "id_last": {"type": "boolean"}}},
                "annotations": {"readOnlyHint": false, "destructiveHint": false,
                                "idempotentHint": false, "openWorldHint": false}}]}),
            "tools/call" => {
                let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
                let bytes = arguments.get("bytes").and_then(Value::as_u64).unwrap_or(0);
                let id_last = arguments.get("id_last").and_then(Value::as_bool) == Some(true);
                return Some(sized_answer(id, bytes as usize, id_last));
            }
            "ping" => json!({}),
            _ => {
                let error = json!({"code": -32601, "message": "no such method"});
                let mut line = json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string();
                line.push('\n');
                return Some(line.into_bytes());
            }
        };
        let mut line = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        line.push('\n');
        Some(line.into_bytes())
    }

    pub(crate) fn serve() -> std::io::Result<()> {
        let stdin = std::io::stdin();
        let mut stdout = std::io::stdout().lock();
        for line in stdin.lock().lines() {
            let Ok(message) = serde_json::from_str::<Value>(&line?) else {
                continue;
            };
            if let Some(bytes) = answer(&message) {
                stdout.write_all(&bytes)?;
                stdout.flush()?;
            }
        }
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("FAULT_RAW").is_some() {
        return Ok(raw::serve()?);
    }
    let service = Fault::default().serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
