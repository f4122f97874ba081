//! Running a tool: the [`Call`] a model makes, the [`ToolResult`] it gets back, the
//! [`ExecutionError`] for calls that could not complete, progress reporting, and the [`Tool`]
//! trait itself.
//!
//! The error model has three outcomes, and the types keep them apart:
//!
//! | outcome | type | model sees it | run continues |
//! | --- | --- | --- | --- |
//! | success | `Ok(ToolResult::success(..))` | yes | yes |
//! | problem (bad arguments, file not found, refused) | `Ok(ToolResult::problem(..))` | yes | yes |
//! | infrastructure failure | `Err(ExecutionError)` | no | no |
//!
//! A tool returns `Result<ToolResult, ExecutionError>`, so "a result and an error at once" and
//! "an untyped error" cannot be written. An [`ExecutionError`] is `definitive` (nothing
//! happened, or what happened is known) or `uncertain` (a side effect may or may not have
//! happened); an uncertain error never allows a retry, which its constructors enforce.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Definition;
use crate::future::BoxFuture;

/// Largest call id, in bytes.
pub const MAX_CALL_ID_BYTES: usize = 128;
/// Largest serialized call arguments or result content, in bytes (1 MiB).
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;
/// Largest progress message or execution error text, in bytes.
pub const MAX_TEXT_BYTES: usize = 4096;

/// Why a [`Call`] was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The call id is empty, too long, has surrounding whitespace or a control character.
    #[error("call id {id:?} is invalid: {reason}")]
    InvalidId {
        /// The rejected id.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The tool name is empty, too long, has surrounding whitespace or a control character.
    #[error("tool name {name:?} is invalid: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The arguments serialize to more than [`MAX_PAYLOAD_BYTES`].
    #[error("call arguments are {size} bytes; at most {MAX_PAYLOAD_BYTES} are allowed")]
    ArgumentsTooLarge {
        /// Serialized size.
        size: usize,
    },
}

/// Checks an identity such as a call id: non-empty, no surrounding whitespace, no NUL, CR,
/// LF or TAB, at most [`MAX_CALL_ID_BYTES`].
fn check_identity(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        Err("it is empty")
    } else if value.len() > MAX_CALL_ID_BYTES {
        Err("it is longer than 128 bytes")
    } else if value.trim() != value {
        Err("it has surrounding whitespace")
    } else if value.contains(['\0', '\r', '\n', '\t']) {
        Err("it contains NUL, CR, LF or TAB")
    } else {
        Ok(())
    }
}

/// A model's request to run one tool. Constructed only through [`Call::new`], so every call
/// a tool sees has a valid id and name and bounded arguments.
///
/// ```
/// use agent_core::tool::Call;
/// use serde_json::json;
///
/// let call = Call::new("call-1", "read", json!({ "path": "README.md" }))?;
/// assert_eq!((call.id(), call.name()), ("call-1", "read"));
/// assert!(Call::new(" call-1", "read", json!({})).is_err());
/// # Ok::<(), agent_core::tool::CallError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "CallParts")]
pub struct Call {
    id: String,
    name: String,
    arguments: Value,
}

#[derive(Deserialize)]
struct CallParts {
    id: String,
    name: String,
    arguments: Value,
}

impl TryFrom<CallParts> for Call {
    type Error = CallError;

    fn try_from(parts: CallParts) -> Result<Self, CallError> {
        Call::new(parts.id, parts.name, parts.arguments)
    }
}

impl Call {
    /// A validated call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Result<Self, CallError> {
        let (id, name) = (id.into(), name.into());
        if let Err(reason) = check_identity(&id) {
            return Err(CallError::InvalidId { id, reason });
        }
        if let Err(reason) = check_identity(&name) {
            return Err(CallError::InvalidName { name, reason });
        }
        let size = serialized_len(&arguments);
        if size > MAX_PAYLOAD_BYTES {
            return Err(CallError::ArgumentsTooLarge { size });
        }
        Ok(Call {
            id,
            name,
            arguments,
        })
    }

    /// The id chosen by the model or provider; every answer echoes it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The tool to run.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The arguments, as the model wrote them (never validated against the schema here).
    pub fn arguments(&self) -> &Value {
        &self.arguments
    }
}

fn serialized_len(value: &Value) -> usize {
    // Serializing a `Value` into a String cannot fail.
    serde_json::to_string(value).map_or(usize::MAX, |s| s.len())
}

/// The completed outcome of a [`Call`], shown to the model.
///
/// A *problem* result (bad arguments, file not found, refused by the user) is still a
/// completed call: the model sees it and can react. Infrastructure failures are
/// [`ExecutionError`]s instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    call_id: String,
    content: String,
    is_problem: bool,
}

impl ToolResult {
    /// A successful result.
    pub fn success(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ToolResult {
            call_id: call_id.into(),
            content: content.into(),
            is_problem: false,
        }
    }

    /// A problem result: the call completed and the model is told what went wrong.
    pub fn problem(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ToolResult {
            call_id: call_id.into(),
            content: content.into(),
            is_problem: true,
        }
    }

    /// The [`Call::id`] this answers.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The text shown to the model.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// Whether the content describes a problem.
    pub fn is_problem(&self) -> bool {
        self.is_problem
    }
}

/// Whether an infrastructure failure left the world in a known state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionState {
    /// Nothing happened, or exactly what happened is known.
    Definitive,
    /// A side effect may or may not have happened.
    Uncertain,
}

/// Whether running the same call again is advised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryDisposition {
    /// Do not retry.
    Never,
    /// A retry may succeed.
    Allowed,
}

/// The cause of an operation that was cancelled. Look for it in a `source()` chain (or use
/// [`ExecutionError::is_cancelled`]) to tell a cancellation from a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;

/// A call that could not complete: an infrastructure failure, correlated with exactly one
/// call, never shown to the model.
///
/// The text is bounded to [`MAX_TEXT_BYTES`] and stripped of control characters; write it
/// without secrets or arguments, since it may be logged. The cause stays reachable through
/// [`source`](StdError::source), so a [`Cancelled`] cause is still discoverable.
///
/// ```
/// use agent_core::tool::{ExecutionError, ExecutionState, RetryDisposition};
///
/// let timeout = ExecutionError::retryable("call-1", "upstream timed out");
/// assert_eq!(timeout.retry(), RetryDisposition::Allowed);
///
/// // An uncertain outcome never allows a retry: there is no constructor for that.
/// let maybe_written = ExecutionError::uncertain("call-2", "connection lost after sending");
/// assert_eq!((maybe_written.state(), maybe_written.retry()), (ExecutionState::Uncertain, RetryDisposition::Never));
///
/// assert!(ExecutionError::cancelled("call-3").is_cancelled());
/// ```
#[derive(Debug, Clone)]
pub struct ExecutionError {
    call_id: String,
    state: ExecutionState,
    retry: RetryDisposition,
    message: String,
    cause: Arc<dyn StdError + Send + Sync>,
}

impl ExecutionError {
    fn new(
        call_id: impl Into<String>,
        state: ExecutionState,
        retry: RetryDisposition,
        cause: impl Into<Box<dyn StdError + Send + Sync>>,
    ) -> Self {
        let cause: Arc<dyn StdError + Send + Sync> = Arc::from(cause.into());
        let message = bounded_text(&cause.to_string());
        ExecutionError {
            call_id: call_id.into(),
            state,
            retry,
            message,
            cause,
        }
    }

    /// Nothing happened (or what happened is known), and retrying will not help.
    pub fn definitive(
        call_id: impl Into<String>,
        cause: impl Into<Box<dyn StdError + Send + Sync>>,
    ) -> Self {
        Self::new(
            call_id,
            ExecutionState::Definitive,
            RetryDisposition::Never,
            cause,
        )
    }

    /// Nothing happened, and a retry may succeed (a timeout before sending, say).
    pub fn retryable(
        call_id: impl Into<String>,
        cause: impl Into<Box<dyn StdError + Send + Sync>>,
    ) -> Self {
        Self::new(
            call_id,
            ExecutionState::Definitive,
            RetryDisposition::Allowed,
            cause,
        )
    }

    /// A side effect may or may not have happened; never retried automatically.
    pub fn uncertain(
        call_id: impl Into<String>,
        cause: impl Into<Box<dyn StdError + Send + Sync>>,
    ) -> Self {
        Self::new(
            call_id,
            ExecutionState::Uncertain,
            RetryDisposition::Never,
            cause,
        )
    }

    /// The call was cancelled before it had any effect.
    pub fn cancelled(call_id: impl Into<String>) -> Self {
        Self::definitive(call_id, Cancelled)
    }

    /// The [`Call::id`] this failure belongs to.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// Definitive or uncertain.
    pub fn state(&self) -> ExecutionState {
        self.state
    }

    /// Whether a retry is advised.
    pub fn retry(&self) -> RetryDisposition {
        self.retry
    }

    /// The bounded, control-character-free text.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the cause chain contains [`Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        let mut next: Option<&(dyn StdError + 'static)> = Some(&*self.cause);
        while let Some(error) = next {
            if error.is::<Cancelled>() {
                return true;
            }
            next = error.source();
        }
        false
    }
}

impl fmt::Display for ExecutionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for ExecutionError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.cause)
    }
}

impl PartialEq for ExecutionError {
    /// Equal when everything but the cause object is equal.
    fn eq(&self, other: &Self) -> bool {
        (
            self.call_id.as_str(),
            self.state,
            self.retry,
            self.message.as_str(),
        ) == (
            other.call_id.as_str(),
            other.state,
            other.retry,
            other.message.as_str(),
        )
    }
}

/// `text` with control characters replaced by spaces, truncated on a character boundary to
/// [`MAX_TEXT_BYTES`].
pub(crate) fn bounded_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_TEXT_BYTES));
    for ch in text.chars() {
        let ch = if ch.is_control() { ' ' } else { ch };
        if out.len() + ch.len_utf8() > MAX_TEXT_BYTES {
            break;
        }
        out.push(ch);
    }
    out
}

/// A progress note about a running call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    call_id: String,
    message: String,
}

impl Progress {
    /// A note for the call `call_id`.
    pub fn new(call_id: impl Into<String>, message: impl Into<String>) -> Self {
        Progress {
            call_id: call_id.into(),
            message: message.into(),
        }
    }

    /// The call this note is about.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The note.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Progress reporting failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("progress reporting failed: {message}")]
pub struct ReportError {
    message: String,
}

impl ReportError {
    /// A failure with bounded text.
    pub fn new(message: impl AsRef<str>) -> Self {
        ReportError {
            message: bounded_text(message.as_ref()),
        }
    }

    /// What went wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Receives progress notes from running tools.
pub trait Reporter: Send + Sync {
    /// Delivers one note.
    fn report(&self, progress: Progress) -> BoxFuture<'_, Result<(), ReportError>>;
}

/// A reporter that accepts and drops every note.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopReporter;

impl Reporter for NoopReporter {
    fn report(&self, _progress: Progress) -> BoxFuture<'_, Result<(), ReportError>> {
        Box::pin(async { Ok(()) })
    }
}

/// What a running tool may use: its call's reporter and cancellation.
#[derive(Clone, Copy)]
pub struct ToolContext<'a> {
    reporter: &'a dyn Reporter,
    cancel: &'a CancellationToken,
}

impl<'a> ToolContext<'a> {
    /// A context over a reporter and a cancellation token.
    pub fn new(reporter: &'a dyn Reporter, cancel: &'a CancellationToken) -> Self {
        ToolContext { reporter, cancel }
    }

    /// Reports progress for `call_id`.
    pub async fn report(
        &self,
        call_id: &str,
        message: impl Into<String>,
    ) -> Result<(), ReportError> {
        self.reporter.report(Progress::new(call_id, message)).await
    }

    /// Whether the call was cancelled. Long-running tools should check it (or await
    /// [`ToolContext::cancelled`]) and return [`ExecutionError::cancelled`].
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the call is cancelled.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }

    /// The reporter.
    pub fn reporter(&self) -> &'a dyn Reporter {
        self.reporter
    }
}

impl fmt::Debug for ToolContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("cancelled", &self.cancel.is_cancelled())
            .finish()
    }
}

/// A tool a model can call.
///
/// Contract: one instance serves concurrent calls; a model-visible problem is
/// `Ok(ToolResult::problem(..))`; an infrastructure failure is `Err(ExecutionError)` for the
/// same call id; the reporter is not used after `execute` returns. Dispatchers check what
/// types cannot: call ids, `uncertain` only from mutating tools, and retry advice only from
/// replay-safe ones; they also contain panics.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::tool::{BoxFuture, Call, Definition, Effect, ExecutionError, ReplaySafety, Tool, ToolContext, ToolResult};
/// use serde_json::json;
///
/// struct Echo(Definition);
///
/// impl Tool for Echo {
///     fn definition(&self) -> &Definition {
///         &self.0
///     }
///
///     fn execute<'a>(&'a self, call: Call, _ctx: ToolContext<'a>) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
///         Box::pin(async move {
///             Ok(match call.arguments()["text"].as_str() {
///                 Some(text) => ToolResult::success(call.id(), text),
///                 None => ToolResult::problem(call.id(), "`text` must be a string"),
///             })
///         })
///     }
/// }
///
/// let definition = Definition::builder("echo", "Repeat the given text.")
///     .effect(Effect::ReadOnly)
///     .replay_safety(ReplaySafety::Safe)
///     .build()?;
/// let tool: Arc<dyn Tool> = Arc::new(Echo(definition));
/// assert_eq!(tool.definition().name(), "echo");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Tool: Send + Sync + 'static {
    /// The tool's definition; dispatchers snapshot it once.
    fn definition(&self) -> &Definition;

    /// Runs one call.
    fn execute<'a>(
        &'a self,
        call: Call,
        ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_are_validated() {
        assert!(Call::new("c1", "read", json!({})).is_ok());
        for (id, name) in [
            ("", "read"),
            (" c", "read"),
            ("c\n", "read"),
            ("c", ""),
            ("c", "a\tb"),
        ] {
            assert!(Call::new(id, name, json!({})).is_err(), "{id:?} {name:?}");
        }
        assert!(Call::new("x".repeat(129), "read", json!({})).is_err());
        let big = json!({ "data": "x".repeat(MAX_PAYLOAD_BYTES) });
        assert!(matches!(
            Call::new("c", "read", big),
            Err(CallError::ArgumentsTooLarge { .. })
        ));
    }

    #[test]
    fn calls_deserialize_through_validation() {
        let ok: Call =
            serde_json::from_value(json!({ "id": "c1", "name": "read", "arguments": {} })).unwrap();
        assert_eq!(ok.id(), "c1");
        assert!(
            serde_json::from_value::<Call>(json!({ "id": "", "name": "read", "arguments": {} }))
                .is_err()
        );
    }

    #[test]
    fn execution_errors_are_bounded_and_keep_their_cause() {
        let long = format!("line one\nline two {}", "x".repeat(10_000));
        let error = ExecutionError::definitive("c1", long);
        assert!(error.message().len() <= MAX_TEXT_BYTES);
        assert!(!error.message().contains('\n'));
        assert!(error.source().is_some());
        assert_eq!(error.retry(), RetryDisposition::Never);
        let multibyte = "é".repeat(MAX_TEXT_BYTES);
        assert!(bounded_text(&multibyte).len() <= MAX_TEXT_BYTES);
    }

    #[derive(Debug, thiserror::Error)]
    #[error("request aborted")]
    struct Aborted(#[source] Cancelled);

    #[test]
    fn cancellation_is_found_anywhere_in_the_cause_chain() {
        assert!(ExecutionError::cancelled("c").is_cancelled());
        assert!(ExecutionError::definitive("c", Aborted(Cancelled)).is_cancelled());
        assert!(!ExecutionError::definitive("c", "disk full").is_cancelled());
    }

    #[test]
    fn results_carry_their_kind() {
        let ok = ToolResult::success("c", "done");
        let problem = ToolResult::problem("c", "no such file");
        assert!(!ok.is_problem() && problem.is_problem());
        assert_eq!(problem.call_id(), "c");
        assert_eq!(problem.content(), "no such file");
    }
}
