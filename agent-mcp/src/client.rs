//! One running server: the rmcp client session over its stdio, its tool list, and the
//! kernel [`Tool`] that calls one of its tools with the outcome rules of an MCP call.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_core::tool::{
    BoxFuture, Call, Definition, Effect, ExecutionError, Tool, ToolContext, ToolResult,
};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientNotification, ClientRequest, ErrorCode, ListToolsRequest, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerResult, Tool as McpToolInfo,
};
use rmcp::service::{
    ClientInitializeError, NotificationContext, PeerRequestOptions, RunningService, ServiceError,
};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::config::ServerConfig;
use crate::error::McpError;
use crate::process::{self, ProcessGroup};
use crate::result::{bounded_preview, render_content};
use crate::transport::{BoundedTransport, MAX_MESSAGE_BYTES, Oversized};

/// Most tools one server may list.
pub const MAX_TOOLS_PER_SERVER: usize = 1024;
/// Most `tools/list` pages followed for one listing.
pub const MAX_LIST_PAGES: usize = 64;
/// How long a `notifications/cancelled` may take to be handed to the transport.
const CANCEL_SEND_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest protocol version a refusal quotes, in characters (the server chose the text).
const MAX_QUOTED_VERSION_CHARS: usize = 64;

/// What a server session tells the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// `notifications/tools/list_changed` from this launch.
    ListChanged {
        /// The server's index in the configuration.
        server: usize,
        /// The launch it came from.
        launch: u64,
    },
    /// The server process exited.
    Exited {
        /// The server's index.
        server: usize,
        /// The launch that exited.
        launch: u64,
    },
}

/// Progress messages buffered per call; more are dropped (progress is advisory).
pub const PROGRESS_BUFFER: usize = 64;
/// Longest progress message forwarded to the kernel's reporter, in bytes.
pub const MAX_PROGRESS_BYTES: usize = 1024;

/// Where the progress notifications of each call in flight go, by progress token.
type ProgressRoutes = Arc<Mutex<HashMap<ProgressToken, mpsc::Sender<String>>>>;

/// The client side of one session: forwards `tools/list_changed` to the host and
/// `notifications/progress` to the call it belongs to.
#[derive(Clone)]
pub(crate) struct Notifier {
    server: usize,
    launch: u64,
    signals: mpsc::UnboundedSender<Signal>,
    progress: ProgressRoutes,
    /// Set while a `ListChanged` of this launch waits in the host's queue, so a server
    /// flooding notifications queues one at a time.
    queued: Arc<AtomicBool>,
}

impl ClientHandler for Notifier {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if self.queued.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = self.signals.send(Signal::ListChanged {
            server: self.server,
            launch: self.launch,
        });
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let route = self
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&params.progress_token)
            .cloned();
        if let Some(route) = route {
            let _ = route.try_send(progress_text(&params));
        }
    }
}

/// `progress[/total][: message]`, cut to [`MAX_PROGRESS_BYTES`] on a character boundary.
fn progress_text(params: &ProgressNotificationParam) -> String {
    let mut text = match params.total {
        Some(total) => format!("{}/{total}", params.progress),
        None => params.progress.to_string(),
    };
    if let Some(message) = params.message.as_deref().filter(|m| !m.trim().is_empty()) {
        text.push_str(": ");
        text.push_str(message);
    }
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut end = text.len().min(MAX_PROGRESS_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// One launch of one server: its session, process group and health.
pub struct ServerInstance {
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) launch: u64,
    peer: Peer<RoleClient>,
    progress: ProgressRoutes,
    queued: Arc<AtomicBool>,
    /// The requests whose answer the transport refused as over [`MAX_MESSAGE_BYTES`].
    oversized: Oversized,
    service: Mutex<Option<RunningService<RoleClient, Notifier>>>,
    /// Taken out by the shutdown; dropping it (with the instance) kills the group.
    group: Mutex<Option<ProcessGroup>>,
    pgid: i32,
    stderr: Arc<process::StderrTail>,
    alive: AtomicBool,
    shut_down: AtomicBool,
}

impl std::fmt::Debug for ServerInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerInstance")
            .field("server", &self.config.key)
            .field("launch", &self.launch)
            .field("pgid", &self.pgid)
            .finish_non_exhaustive()
    }
}

impl ServerInstance {
    /// Launches the server and completes `initialize`, all within the startup timeout;
    /// a failure after spawning kills the group before returning.
    pub(crate) async fn start(
        config: Arc<ServerConfig>,
        index: usize,
        launch: u64,
        signals: mpsc::UnboundedSender<Signal>,
    ) -> Result<Arc<Self>, McpError> {
        let key = config.key.clone();
        let resolved = process::resolve(&config).map_err(|source| McpError::Launch {
            server: key.clone(),
            source,
        })?;
        let launched = process::spawn(&config, &resolved).map_err(|source| McpError::Launch {
            server: key.clone(),
            source,
        })?;
        let process::Launched {
            stdin,
            stdout,
            group,
        } = launched;
        let stderr = group.stderr().clone();
        let pgid = group.pgid();
        let mut exit = group.exit_watch();
        let progress: ProgressRoutes = Arc::default();
        let queued = Arc::new(AtomicBool::new(false));
        let notifier = Notifier {
            server: index,
            launch,
            signals: signals.clone(),
            progress: progress.clone(),
            queued: queued.clone(),
        };
        let startup = config.timeouts.startup;
        let oversized = Oversized::default();
        let transport = BoundedTransport::new(stdout, stdin, oversized.clone());
        let service = match tokio::time::timeout(startup, notifier.serve(transport)).await {
            Ok(Ok(service)) => service,
            Ok(Err(error)) => {
                // A closed or broken pipe usually means the server is exiting: wait for
                // it (bounded), so the error says that and quotes all it wrote.
                let exiting = matches!(
                    error,
                    ClientInitializeError::ConnectionClosed(_)
                        | ClientInitializeError::TransportError { .. }
                );
                let grace = if exiting { EXIT_GRACE } else { Duration::ZERO };
                return Err(startup_failure(
                    key,
                    plain_initialize_error(&error),
                    &mut exit,
                    &stderr,
                    grace,
                )
                .await);
            }
            Err(_) => {
                let reason = format!("it did not answer initialize within {startup:?}");
                return Err(startup_failure(key, reason, &mut exit, &stderr, Duration::ZERO).await);
            }
        };
        // The specification: a client that does not support the version the server answered
        // with disconnects. Returning drops the session and then the group (killed).
        let version = service
            .peer_info()
            .map(|info| info.protocol_version.clone());
        if !version
            .as_ref()
            .is_some_and(|v| ProtocolVersion::KNOWN_VERSIONS.contains(v))
        {
            let version = version.map(|v| v.to_string()).unwrap_or_default();
            return Err(McpError::UnsupportedProtocol {
                server: key,
                version: version
                    .chars()
                    .take(MAX_QUOTED_VERSION_CHARS)
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect(),
            });
        }
        let peer = service.peer().clone();
        let instance = Arc::new(ServerInstance {
            config,
            launch,
            peer,
            progress,
            queued,
            oversized,
            service: Mutex::new(Some(service)),
            group: Mutex::new(Some(group)),
            pgid,
            stderr,
            alive: AtomicBool::new(true),
            shut_down: AtomicBool::new(false),
        });
        let watcher = Arc::downgrade(&instance);
        tokio::spawn(async move {
            let _ = exit.wait_for(Option::is_some).await;
            if let Some(instance) = watcher.upgrade() {
                instance.alive.store(false, Ordering::SeqCst);
            }
            let _ = signals.send(Signal::Exited {
                server: index,
                launch,
            });
        });
        Ok(instance)
    }

    /// Takes this launch's queued list change: later notifications queue a new one.
    pub(crate) fn take_queued_list_change(&self) {
        self.queued.store(false, Ordering::SeqCst);
    }

    /// The server's key.
    pub fn key(&self) -> &str {
        &self.config.key
    }

    /// The process group id.
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Whether the process is still running.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// The newest stderr output.
    pub fn stderr_tail(&self) -> String {
        self.stderr.text()
    }

    /// Lists every tool (following cursors), within the given timeout per page.
    pub(crate) async fn list_tools(&self, timeout: Duration) -> Result<Vec<McpToolInfo>, McpError> {
        let fail = |reason: String| McpError::List {
            server: self.config.key.clone(),
            reason,
        };
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let params = cursor
                .take()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let request = ClientRequest::ListToolsRequest(ListToolsRequest {
                method: Default::default(),
                params,
                extensions: Default::default(),
            });
            let handle = self
                .peer
                .send_cancellable_request(request, PeerRequestOptions::with_timeout(timeout))
                .await
                .map_err(|e| fail(plain_service_error(&e)))?;
            let result = handle
                .await_response()
                .await
                .map_err(|e| fail(plain_service_error(&e)))?;
            let ServerResult::ListToolsResult(page) = result else {
                return Err(fail(
                    "the answer to tools/list is not a tool list".to_owned(),
                ));
            };
            tools.extend(page.tools);
            if tools.len() > MAX_TOOLS_PER_SERVER {
                return Err(fail(format!(
                    "lists more than {MAX_TOOLS_PER_SERVER} tools"
                )));
            }
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => return Ok(tools),
            }
        }
        Err(fail(format!(
            "tools/list has more than {MAX_LIST_PAGES} pages"
        )))
    }

    /// Closes the session (the server's stdin), waits up to the shutdown timeout for it to
    /// exit, then kills its group. Runs at most once; later calls return at once.
    pub(crate) async fn shutdown(&self) {
        if self.shut_down.swap(true, Ordering::SeqCst) {
            return;
        }
        let service = self
            .service
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(service) = service {
            // Cancelling drops the transport, which closes the server's stdin.
            service.cancellation_token().cancel();
            drop(service);
        }
        let group = self
            .group
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut group) = group {
            group.shutdown(self.config.timeouts.shutdown).await;
        }
    }

    /// Whether the shutdown (closing stdin, then killing the group) has run.
    pub fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::SeqCst)
    }

    /// Makes one `tools/call`, for the kernel tool `definition`.
    pub(crate) async fn call(
        &self,
        definition: &Definition,
        server_tool: &str,
        call: Call,
        ctx: ToolContext<'_>,
        result_limit: usize,
    ) -> Result<ToolResult, ExecutionError> {
        let call_id = call.id().to_owned();
        let key = &self.config.key;
        let arguments = match call.arguments().clone() {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                let kind = agent_core::tool::json_kind(&other);
                return Ok(ToolResult::problem(
                    call_id,
                    format!("arguments must be an object, got {kind}"),
                ));
            }
        };
        let mut params = CallToolRequestParams::new(server_tool.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let after_send = |what: String| -> ExecutionError {
            let cause = McpError::CallInterrupted {
                server: key.clone(),
                tool: server_tool.to_owned(),
                reason: what,
            };
            if definition.effect() == Effect::Mutating {
                ExecutionError::uncertain(call_id.clone(), cause)
            } else {
                ExecutionError::definitive(call_id.clone(), cause)
            }
        };
        if ctx.is_cancelled() {
            return Err(ExecutionError::cancelled(call_id));
        }
        if !self.is_alive() || self.is_shut_down() {
            return Err(ExecutionError::definitive(
                call_id.clone(),
                McpError::ServerDown {
                    server: key.clone(),
                    reason: "the server is not running".to_owned(),
                },
            ));
        }
        let timeout = self.config.timeouts.call;
        // Until the request is handed over, nothing was sent: a failure here is definitive.
        let handle = match self
            .peer
            .send_cancellable_request(request, PeerRequestOptions::with_timeout(timeout))
            .await
        {
            Ok(handle) => handle,
            Err(error) => {
                return Err(ExecutionError::definitive(
                    call_id.clone(),
                    McpError::CallNotSent {
                        server: key.clone(),
                        tool: server_tool.to_owned(),
                        reason: plain_service_error(&error),
                    },
                ));
            }
        };
        // The dispatcher drops this future when the run is cancelled; the guard then sends
        // `notifications/cancelled` on its own task. A late response is discarded by rmcp,
        // because nobody waits for this request id any more.
        let request_id = handle.id.clone();
        let mut guard = CancelOnDrop {
            peer: Some(handle.peer.clone()),
            id: Some(handle.id.clone()),
        };
        let (progress_tx, mut progress_rx) = mpsc::channel(PROGRESS_BUFFER);
        let route = RouteGuard::new(&self.progress, handle.progress_token.clone(), progress_tx);
        let response = handle.await_response();
        tokio::pin!(response);
        let outcome = loop {
            tokio::select! {
                biased;
                outcome = &mut response => break outcome,
                () = ctx.cancelled() => {
                    guard.send();
                    return Err(if definition.effect() == Effect::Mutating {
                        after_send("cancelled after the request was sent".to_owned())
                    } else {
                        ExecutionError::cancelled(call_id)
                    });
                }
                Some(message) = progress_rx.recv() => {
                    // A reporter failure is the dispatcher's to record; the call goes on.
                    let _ = ctx.report(&call_id, message).await;
                }
            }
        };
        drop(route);
        // rmcp sends the cancellation itself on its own timeout; any answer disarms us.
        guard.disarm();
        match outcome {
            Ok(ServerResult::CallToolResult(result)) => {
                let text = render_content(&result.content, result.structured_content.as_ref());
                let text = bounded_preview(&text, result_limit);
                Ok(if result.is_error == Some(true) {
                    ToolResult::problem(call_id, text)
                } else {
                    ToolResult::success(call_id, text)
                })
            }
            Ok(_) => Err(after_send(
                "the server answered tools/call with another result kind".to_owned(),
            )),
            // The write to the transport failed: the server never got the request.
            Err(ServiceError::TransportSend(_)) => Err(ExecutionError::definitive(
                call_id.clone(),
                McpError::CallNotSent {
                    server: key.clone(),
                    tool: server_tool.to_owned(),
                    reason: "the connection to the server broke".to_owned(),
                },
            )),
            // Our reader answered for the server: the answer came, and was too large to
            // read. What the tool did is known to have ended; its result is lost.
            Err(ServiceError::McpError(_)) if self.oversized.take(&request_id) => {
                Err(ExecutionError::definitive(
                    call_id.clone(),
                    McpError::AnswerTooLarge {
                        server: key.clone(),
                        tool: server_tool.to_owned(),
                        limit: MAX_MESSAGE_BYTES,
                    },
                ))
            }
            // The server refused the request itself: it did not run the tool.
            Err(ServiceError::McpError(error)) if refused_before_running(error.code) => {
                Err(ExecutionError::definitive(
                    call_id.clone(),
                    McpError::CallRefused {
                        server: key.clone(),
                        tool: server_tool.to_owned(),
                        reason: error.message.to_string(),
                    },
                ))
            }
            Err(ServiceError::Timeout { timeout }) => Err(after_send(format!(
                "no response within {timeout:?} (notifications/cancelled was sent)"
            ))),
            Err(error) => Err(after_send(plain_service_error(&error))),
        }
    }
}

/// JSON-RPC errors that mean the request was rejected before the tool ran.
fn refused_before_running(code: ErrorCode) -> bool {
    [
        ErrorCode::METHOD_NOT_FOUND,
        ErrorCode::INVALID_PARAMS,
        ErrorCode::INVALID_REQUEST,
        ErrorCode::PARSE_ERROR,
    ]
    .contains(&code)
}

/// How long a server whose pipe closed during start-up is given to exit, and then to
/// finish its stderr, before the error is reported without them.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The start-up error: [`McpError::Exited`] when the server exited (waited for up to
/// `grace`), else [`McpError::Startup`] with `reason`; either quotes its last stderr lines.
async fn startup_failure(
    server: String,
    reason: String,
    exit: &mut tokio::sync::watch::Receiver<Option<Option<std::process::ExitStatus>>>,
    stderr: &process::StderrTail,
    grace: Duration,
) -> McpError {
    let _ = tokio::time::timeout(grace, exit.wait_for(Option::is_some)).await;
    let status = *exit.borrow();
    match status {
        Some(status) => {
            let _ = tokio::time::timeout(EXIT_GRACE, stderr.ended()).await;
            McpError::Exited {
                server,
                status: status
                    .map_or_else(|| "its exit status is unknown".to_owned(), describe_exit),
                stderr: stderr.last_lines().join("\n"),
            }
        }
        None => McpError::Startup {
            server,
            reason,
            stderr: stderr.last_lines().join("\n"),
        },
    }
}

/// `exit status N`, or `killed by signal N`.
fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// What went wrong with `initialize`, in plain words: no rmcp type names, no transport
/// internals.
fn plain_initialize_error(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::ConnectionClosed(_) => {
            "it closed its connection before answering initialize".to_owned()
        }
        ClientInitializeError::TransportError { .. } => {
            "the connection to it broke while sending initialize".to_owned()
        }
        ClientInitializeError::JsonRpcError(data) => {
            format!("it refused initialize: {}", data.message)
        }
        ClientInitializeError::NoCompatibleProtocolVersion { .. } => {
            "it supports no protocol version this client does".to_owned()
        }
        _ => "its answer to initialize was not a valid initialize result".to_owned(),
    }
}

/// What went wrong with a request after start-up, in plain words.
pub(crate) fn plain_service_error(error: &ServiceError) -> String {
    match error {
        ServiceError::McpError(data) => data.message.to_string(),
        ServiceError::TransportSend(_) => "the connection to the server broke".to_owned(),
        ServiceError::TransportClosed => "the server closed its connection".to_owned(),
        ServiceError::UnexpectedResponse => {
            "the server answered with another kind of result".to_owned()
        }
        ServiceError::Cancelled { .. } => "the request was cancelled".to_owned(),
        ServiceError::Timeout { timeout } => format!("no response within {timeout:?}"),
        _ => "the request failed".to_owned(),
    }
}

/// A server tool as a kernel tool, bound to one launch of its server.
pub struct McpTool {
    pub(crate) definition: Definition,
    pub(crate) server_tool: String,
    pub(crate) instance: Arc<ServerInstance>,
    pub(crate) result_limit: usize,
}

impl Tool for McpTool {
    fn definition(&self) -> &Definition {
        &self.definition
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(self.instance.call(
            &self.definition,
            &self.server_tool,
            call,
            ctx,
            self.result_limit,
        ))
    }
}

/// Routes one call's progress notifications while it is in flight.
struct RouteGuard<'a> {
    routes: &'a ProgressRoutes,
    token: ProgressToken,
}

impl<'a> RouteGuard<'a> {
    fn new(routes: &'a ProgressRoutes, token: ProgressToken, sender: mpsc::Sender<String>) -> Self {
        routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token.clone(), sender);
        RouteGuard { routes, token }
    }
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.token);
    }
}

/// Sends `notifications/cancelled` for a request whose caller went away without an answer.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: Option<rmcp::model::RequestId>,
}

impl CancelOnDrop {
    fn disarm(&mut self) {
        self.peer = None;
        self.id = None;
    }

    /// Hands the notification to its own task, bounded by [`CANCEL_SEND_TIMEOUT`].
    fn send(&mut self) {
        let (Some(peer), Some(id)) = (self.peer.take(), self.id.take()) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let notification = CancelledNotification::new(CancelledNotificationParam::new(
                Some(id),
                Some("cancelled by the agent".to_owned()),
            ));
            let _ = tokio::time::timeout(
                CANCEL_SEND_TIMEOUT,
                peer.send_notification(ClientNotification::CancelledNotification(notification)),
            )
            .await;
        });
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.send();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(message: &str) -> ProgressNotificationParam {
        serde_json::from_value(
            serde_json::json!({"progressToken": 1, "progress": 2, "total": 3, "message": message}),
        )
        .unwrap()
    }

    #[test]
    fn progress_text_is_bounded_at_max_progress_bytes() {
        assert_eq!(progress_text(&params("half\nway")), "2/3: half way");
        let prefix = "2/3: ".len();
        let at = "a".repeat(MAX_PROGRESS_BYTES - prefix);
        assert_eq!(progress_text(&params(&at)).len(), MAX_PROGRESS_BYTES);
        let past = "é".repeat(MAX_PROGRESS_BYTES);
        let text = progress_text(&params(&past));
        assert!(text.len() <= MAX_PROGRESS_BYTES && text.ends_with('é'));
    }
}
