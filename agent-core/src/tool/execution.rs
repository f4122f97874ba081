//! Running a tool: the [`Tool`] trait, the [`ToolContext`] a call runs with, and progress
//! reporting through a [`Reporter`].

use std::fmt;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::call::Call;
use super::definition::Definition;
use super::result::{ExecutionError, ToolResult, bounded_note};
use crate::future::BoxFuture;

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
            message: bounded_note(message.as_ref()),
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
