//! `tracing` spans around runs and dispatches, from outside the kernel.
//!
//! The kernel is not instrumented (it stays free of a logging dependency), so spans come
//! from three places:
//! - `agent.run` and `agent.turn`: the consumer opens them from the run's own events and
//!   emits each record inside its run's (and turn's) span, so a log reader sees the
//!   nesting; they carry only the run pseudonym and the turn number.
//! - `agent.dispatch`: [`DispatchSpans`], a [`ToolDispatchDecorator`], wraps every dispatch
//!   in a span carrying only the tool's declared name and the call pseudonym, live, on the
//!   dispatching task: whatever a tool logs itself lands inside it.
//! - [`EventLogger::run_span`]: an `agent.run` span a caller opens around its own work on a
//!   run (following, waiting), with the same pseudonym.

use std::sync::Arc;

use agent_core::stage::{DispatchError, DispatchRequest, ToolDispatchDecorator, ToolDispatcher};
use agent_core::tool::BoxFuture;
use agent_core::tool::{Definition, ToolResult};
use tracing::{Instrument, Span};

use crate::processor::EventLogger;
use crate::pseudonym::Pseudonyms;

impl EventLogger {
    /// An `agent.run` span (INFO) for run `run_id`, carrying only its pseudonym.
    pub fn run_span(&self, run_id: &str) -> Span {
        tracing::info_span!(
            target: "agent_logging",
            "agent.run",
            run_correlation = self.pseudonyms().run(run_id).as_str()
        )
    }
}

/// Wraps each dispatch in an `agent.dispatch` span (DEBUG) with `tool` (the declared name)
/// and `tool_call_correlation`. List it among an application's decorators (the bean
/// `dispatch-spans` of [`beans::logging`](crate::beans::logging) does).
#[derive(Debug, Clone)]
pub struct DispatchSpans {
    pseudonyms: Pseudonyms,
}

impl DispatchSpans {
    /// Spans whose call pseudonyms are derived by `pseudonyms`.
    pub fn new(pseudonyms: Pseudonyms) -> Self {
        DispatchSpans { pseudonyms }
    }
}

impl ToolDispatchDecorator for DispatchSpans {
    fn wrap(&self, inner: Arc<dyn ToolDispatcher>) -> Option<Arc<dyn ToolDispatcher>> {
        Some(Arc::new(SpannedDispatcher {
            inner,
            pseudonyms: self.pseudonyms.clone(),
        }))
    }
}

struct SpannedDispatcher {
    inner: Arc<dyn ToolDispatcher>,
    pseudonyms: Pseudonyms,
}

impl ToolDispatcher for SpannedDispatcher {
    fn definitions(&self) -> &[Definition] {
        self.inner.definitions()
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        // The pipeline dispatches declared tools only, so the name is a definition's.
        let span = if tracing::enabled!(target: "agent_logging", tracing::Level::DEBUG) {
            tracing::debug_span!(
                target: "agent_logging",
                "agent.dispatch",
                tool = request.call.name(),
                tool_call_correlation = self
                    .pseudonyms
                    .call(request.scope.run_id().as_str(), request.call.id())
                    .as_str()
            )
        } else {
            Span::none()
        };
        Box::pin(self.inner.dispatch(request).instrument(span))
    }
}
