//! What each tool call was asked and answered, for the command line's tool lines and its
//! `--json` `tool_call` records.
//!
//! The kernel's events carry no arguments or results on purpose (they may hold secrets, and
//! events are logged and sent to daemon clients). The CLI gets them instead from a dispatch
//! decorator, [`ToolCallObserver`], which wraps the tool plan's pipeline (outside the
//! approval guard, so it sees refusals too) and records each call and its result in the
//! [`ToolCallJournal`] before the kernel sees the result, and so before the call's
//! `tool.completed` or `tool.failed` event exists. The journal stays in this process: it
//! is off unless the one-shot CLI turns it on, bounded, and each entry is taken once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agent_core::bean;
use agent_core::stage::{DispatchError, DispatchRequest, ToolDispatchDecorator, ToolDispatcher};
use agent_core::tool::{BoxFuture, Definition, ToolResult};
use serde_json::Value;

/// The most calls the journal holds that nobody took yet; the oldest go first.
pub const MAX_JOURNAL_ENTRIES: usize = 256;

/// How a call ended, with its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallResult {
    /// The tool answered: its result text.
    Success(String),
    /// A model-visible problem (a refusal, invalid arguments, a missing file): its text.
    Problem(String),
    /// The dispatch failed: the error's text.
    Failed(String),
    /// The dispatch was cancelled.
    Cancelled,
}

/// One observed call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call id (the one the call's events carry).
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments the model gave.
    pub arguments: Value,
    /// How it ended.
    pub result: CallResult,
}

/// The observed calls not yet taken, oldest first.
#[derive(Debug, Default)]
pub struct ToolCallJournal {
    enabled: AtomicBool,
    calls: Mutex<VecDeque<ToolCall>>,
}

impl ToolCallJournal {
    /// Starts recording (the one-shot CLI does; a daemon never does).
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::SeqCst);
    }

    /// Whether calls are recorded.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::SeqCst)
    }

    /// Records `call` when enabled, dropping the oldest entry beyond
    /// [`MAX_JOURNAL_ENTRIES`].
    pub fn record(&self, call: ToolCall) {
        if !self.is_enabled() {
            return;
        }
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if calls.len() >= MAX_JOURNAL_ENTRIES {
            calls.pop_front();
        }
        calls.push_back(call);
    }

    /// Takes the call with id `call_id`, if it was recorded and not taken yet.
    pub fn take(&self, call_id: &str) -> Option<ToolCall> {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let index = calls.iter().position(|c| c.call_id == call_id)?;
        calls.remove(index)
    }
}

/// The decorator that fills a [`ToolCallJournal`].
#[derive(Debug)]
pub struct ToolCallObserver {
    journal: Arc<ToolCallJournal>,
}

impl ToolDispatchDecorator for ToolCallObserver {
    fn wrap(&self, inner: Arc<dyn ToolDispatcher>) -> Option<Arc<dyn ToolDispatcher>> {
        Some(Arc::new(Observed {
            inner,
            journal: self.journal.clone(),
        }))
    }
}

struct Observed {
    inner: Arc<dyn ToolDispatcher>,
    journal: Arc<ToolCallJournal>,
}

impl ToolDispatcher for Observed {
    fn definitions(&self) -> &[Definition] {
        self.inner.definitions()
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        if !self.journal.is_enabled() {
            return self.inner.dispatch(request);
        }
        Box::pin(async move {
            let call = request.call;
            let outcome = self.inner.dispatch(request).await;
            let result = match &outcome {
                Ok(result) if result.is_problem() => {
                    CallResult::Problem(result.content().to_owned())
                }
                Ok(result) => CallResult::Success(result.content().to_owned()),
                Err(DispatchError::Cancelled { .. }) => CallResult::Cancelled,
                Err(error) => CallResult::Failed(error.to_string()),
            };
            self.journal.record(ToolCall {
                call_id: call.id().to_owned(),
                name: call.name().to_owned(),
                arguments: call.arguments().clone(),
                result,
            });
            outcome
        })
    }
}

/// The journal bean: off until the CLI enables it.
#[bean(name = "tool-call-journal")]
pub fn tool_call_journal() -> Arc<ToolCallJournal> {
    Arc::new(ToolCallJournal::default())
}

/// The decorator bean: the tool plan's pipeline records into the journal.
#[bean(name = "tool-call-observer")]
pub fn tool_call_observer(
    tool_call_journal: Arc<ToolCallJournal>,
) -> Arc<dyn ToolDispatchDecorator> {
    Arc::new(ToolCallObserver {
        journal: tool_call_journal,
    })
}

agent_core::bean_set! {
    /// The journal and its decorator.
    pub tool_calls = [tool_call_journal, tool_call_observer];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            call_id: id.to_owned(),
            name: "read_file".to_owned(),
            arguments: serde_json::json!({"path": "README.md"}),
            result: CallResult::Success("# Hi".to_owned()),
        }
    }

    #[test]
    fn records_only_when_enabled_and_each_call_is_taken_once() {
        let journal = ToolCallJournal::default();
        journal.record(call("c1"));
        assert_eq!(journal.take("c1"), None, "off by default");
        journal.enable();
        journal.record(call("c1"));
        assert_eq!(journal.take("c1"), Some(call("c1")));
        assert_eq!(journal.take("c1"), None);
    }

    #[test]
    fn the_journal_is_bounded() {
        let journal = ToolCallJournal::default();
        journal.enable();
        for n in 0..=MAX_JOURNAL_ENTRIES {
            journal.record(call(&format!("c{n}")));
        }
        assert_eq!(journal.take("c0"), None, "the oldest went first");
        assert!(journal.take(&format!("c{MAX_JOURNAL_ENTRIES}")).is_some());
    }
}
