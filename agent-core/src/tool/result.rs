//! What a call produced: the [`ToolResult`] a model sees, or the [`ExecutionError`] of a call
//! that could not complete.
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

/// Largest note a tool, provider or plan source leaves for a host (a progress message, an
/// execution error's text, a model problem's message), in bytes. Distinct from
/// [`message::MAX_TEXT_BYTES`](crate::message::MAX_TEXT_BYTES), which bounds conversation text.
pub const MAX_NOTE_BYTES: usize = 4096;

/// The completed outcome of a [`Call`](super::Call), shown to the model.
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

    /// The [`Call::id`](super::Call::id) this answers.
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

    /// The call id and the content, moved out (the run puts them into history without
    /// copying).
    pub(crate) fn into_parts(self) -> (String, String) {
        (self.call_id, self.content)
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
/// The text is bounded to [`MAX_NOTE_BYTES`] and stripped of control characters; write it
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
        let message = bounded_note(&cause.to_string());
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

    /// The [`Call::id`](super::Call::id) this failure belongs to.
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
/// [`MAX_NOTE_BYTES`].
pub(crate) fn bounded_note(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_NOTE_BYTES));
    for ch in text.chars() {
        let ch = if ch.is_control() { ' ' } else { ch };
        if out.len() + ch.len_utf8() > MAX_NOTE_BYTES {
            break;
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execution_errors_are_bounded_and_keep_their_cause() {
        let long = format!("line one\nline two {}", "x".repeat(10_000));
        let error = ExecutionError::definitive("c1", long);
        assert!(error.message().len() <= MAX_NOTE_BYTES);
        assert!(!error.message().contains('\n'));
        assert!(error.source().is_some());
        assert_eq!(error.retry(), RetryDisposition::Never);
        let multibyte = "é".repeat(MAX_NOTE_BYTES);
        assert!(bounded_note(&multibyte).len() <= MAX_NOTE_BYTES);
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
