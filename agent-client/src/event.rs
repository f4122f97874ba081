//! Run events: 19 kinds with dotted names and a closed detail union with one
//! detail shape per kind (docs/client.md, "Streams").

use std::fmt;
use std::time::SystemTime;

use crate::token::{is_token, token};
use crate::values::ValueError;
use crate::values::{MAX_ID_BYTES, MAX_NAME_BYTES, RunRef};

/// Longest model delta text, in bytes (256 KiB).
pub const MAX_MODEL_DELTA_BYTES: usize = 256 * 1024;
/// Longest status text of a failed or cancelled run or turn, in bytes (1 MiB).
pub const MAX_STATUS_TEXT_BYTES: usize = 1024 * 1024;
/// Longest tool progress message, in bytes.
pub const MAX_PROGRESS_BYTES: usize = 4096;
/// Longest model failure message, in bytes.
pub const MAX_MODEL_FAILURE_MESSAGE_BYTES: usize = 4096;
/// Longest tool problem text, in bytes.
pub const MAX_TOOL_PROBLEM_BYTES: usize = 4096;
/// Longest interaction problem text, in bytes.
pub const MAX_INTERACTION_PROBLEM_BYTES: usize = 2048;

/// The 19 event kinds, in wire order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `run.started`
    RunStarted,
    /// `run.completed`
    RunCompleted,
    /// `run.failed`
    RunFailed,
    /// `run.cancelled`
    RunCancelled,
    /// `turn.started`
    TurnStarted,
    /// `turn.completed`
    TurnCompleted,
    /// `turn.failed`
    TurnFailed,
    /// `model.started`
    ModelStarted,
    /// `model.delta`
    ModelDelta,
    /// `model.completed`
    ModelCompleted,
    /// `model.failed`
    ModelFailed,
    /// `tool.started`
    ToolStarted,
    /// `tool.progress`
    ToolProgress,
    /// `tool.completed`
    ToolCompleted,
    /// `tool.failed`
    ToolFailed,
    /// `interaction.started`
    InteractionStarted,
    /// `interaction.completed`
    InteractionCompleted,
    /// `interaction.failed`
    InteractionFailed,
    /// `interaction.cancelled`
    InteractionCancelled,
}

impl EventKind {
    /// Every kind, in wire order (wire number = index + 1).
    pub const ALL: [Self; 19] = [
        Self::RunStarted,
        Self::RunCompleted,
        Self::RunFailed,
        Self::RunCancelled,
        Self::TurnStarted,
        Self::TurnCompleted,
        Self::TurnFailed,
        Self::ModelStarted,
        Self::ModelDelta,
        Self::ModelCompleted,
        Self::ModelFailed,
        Self::ToolStarted,
        Self::ToolProgress,
        Self::ToolCompleted,
        Self::ToolFailed,
        Self::InteractionStarted,
        Self::InteractionCompleted,
        Self::InteractionFailed,
        Self::InteractionCancelled,
    ];

    /// The dotted name, e.g. `run.started`.
    pub fn name(self) -> &'static str {
        match self {
            Self::RunStarted => "run.started",
            Self::RunCompleted => "run.completed",
            Self::RunFailed => "run.failed",
            Self::RunCancelled => "run.cancelled",
            Self::TurnStarted => "turn.started",
            Self::TurnCompleted => "turn.completed",
            Self::TurnFailed => "turn.failed",
            Self::ModelStarted => "model.started",
            Self::ModelDelta => "model.delta",
            Self::ModelCompleted => "model.completed",
            Self::ModelFailed => "model.failed",
            Self::ToolStarted => "tool.started",
            Self::ToolProgress => "tool.progress",
            Self::ToolCompleted => "tool.completed",
            Self::ToolFailed => "tool.failed",
            Self::InteractionStarted => "interaction.started",
            Self::InteractionCompleted => "interaction.completed",
            Self::InteractionFailed => "interaction.failed",
            Self::InteractionCancelled => "interaction.cancelled",
        }
    }

    /// Whether the kind ends its scope (every completed, failed and cancelled kind).
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            Self::RunStarted
                | Self::TurnStarted
                | Self::ModelStarted
                | Self::ModelDelta
                | Self::ToolStarted
                | Self::ToolProgress
                | Self::InteractionStarted
        )
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a tool call ended, as far as the kernel knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolOutcome {
    /// The tool ran and returned.
    Completed,
    /// The tool failed before or without side effects.
    Failed,
    /// The tool may have had side effects; the result is unknown.
    Uncertain,
}

/// Whether the kernel may call the tool again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolRetry {
    /// It may retry.
    Allowed,
    /// It must not retry (always so for an uncertain outcome).
    Never,
}

/// The end of a tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolTerminal {
    call_id: String,
    name: String,
    problem: Option<String>,
    outcome: ToolOutcome,
    retry: ToolRetry,
}

impl ToolTerminal {
    /// Call id and name are tokens ≤ 128; the problem, if any, is a token ≤
    /// [`MAX_TOOL_PROBLEM_BYTES`]; [`ToolOutcome::Completed`] has no problem,
    /// the others need one; an uncertain outcome needs [`ToolRetry::Never`].
    pub fn new(
        call_id: &str,
        name: &str,
        problem: Option<&str>,
        outcome: ToolOutcome,
        retry: ToolRetry,
    ) -> Result<Self, ValueError> {
        let call_id = token(call_id, MAX_ID_BYTES, "tool call id is not a token")?;
        let name = token(name, MAX_ID_BYTES, "tool name is not a token")?;
        let problem = problem
            .map(|p| token(p, MAX_TOOL_PROBLEM_BYTES, "tool problem is not a token"))
            .transpose()?;
        if (outcome == ToolOutcome::Completed) != problem.is_none() {
            return Err(ValueError::new(
                "a completed tool has no problem; a failed one needs one",
            ));
        }
        if outcome == ToolOutcome::Uncertain && retry != ToolRetry::Never {
            return Err(ValueError::new(
                "an uncertain tool outcome must never retry",
            ));
        }
        Ok(Self {
            call_id,
            name,
            problem,
            outcome,
            retry,
        })
    }
    /// The call id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The problem's fixed text, for a failure.
    pub fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }
    /// The outcome.
    pub fn outcome(&self) -> ToolOutcome {
        self.outcome
    }
    /// The retry rule.
    pub fn retry(&self) -> ToolRetry {
        self.retry
    }
}

/// Token usage of one model call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

/// A model call's failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFailure {
    code: String,
    message: String,
    retryable: bool,
    before_stream: bool,
}

impl ModelFailure {
    /// Code a token ≤ 256; message a token ≤ [`MAX_MODEL_FAILURE_MESSAGE_BYTES`].
    pub fn new(
        code: &str,
        message: &str,
        retryable: bool,
        before_stream: bool,
    ) -> Result<Self, ValueError> {
        Ok(Self {
            code: token(code, MAX_NAME_BYTES, "model failure code is not a token")?,
            message: token(
                message,
                MAX_MODEL_FAILURE_MESSAGE_BYTES,
                "model failure message is not a token of at most 4096 bytes",
            )?,
            retryable,
            before_stream,
        })
    }
    /// The provider-neutral code.
    pub fn code(&self) -> &str {
        &self.code
    }
    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// Whether the provider said a retry may help.
    pub fn retryable(&self) -> bool {
        self.retryable
    }
    /// Whether it failed before any output streamed.
    pub fn before_stream(&self) -> bool {
        self.before_stream
    }
}

/// The closed detail union: exactly one shape per [`EventKind`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventDetail {
    /// `run.started`: the definition id.
    RunStarted {
        /// The definition id.
        definition: String,
    },
    /// `run.completed`: nothing.
    RunCompleted,
    /// `run.failed`, `run.cancelled`, `turn.failed`: a status text.
    Status {
        /// The text, ≤ [`MAX_STATUS_TEXT_BYTES`], not blank.
        text: String,
    },
    /// `turn.started`, `turn.completed`: the turn number.
    Turn {
        /// The turn number (from 1).
        turn: u32,
    },
    /// `model.started`.
    ModelStarted {
        /// The turn.
        turn: u32,
        /// The model call's operation id, when the daemon's kernel names one (this
        /// workspace's kernel sends only the turn).
        operation: Option<String>,
    },
    /// `model.delta`: streamed text.
    ModelDelta {
        /// The text, ≤ [`MAX_MODEL_DELTA_BYTES`].
        text: String,
    },
    /// `model.completed`: usage.
    ModelCompleted {
        /// Token usage.
        usage: Usage,
    },
    /// `model.failed`.
    ModelFailed(ModelFailure),
    /// `tool.started`.
    ToolStarted {
        /// The call id.
        call_id: String,
        /// The tool's name.
        name: String,
    },
    /// `tool.progress`.
    ToolProgress {
        /// The call id.
        call_id: String,
        /// The message, ≤ [`MAX_PROGRESS_BYTES`].
        message: String,
    },
    /// `tool.completed`, `tool.failed`.
    ToolTerminal(ToolTerminal),
    /// `interaction.started`.
    InteractionStarted {
        /// The interaction id.
        id: String,
        /// Its kind.
        kind: String,
    },
    /// `interaction.completed`, `interaction.failed`, `interaction.cancelled`.
    InteractionTerminal {
        /// The interaction id.
        id: String,
        /// The problem (≤ [`MAX_INTERACTION_PROBLEM_BYTES`]), for failed and cancelled.
        problem: Option<String>,
    },
}

fn check_detail(kind: EventKind, d: &EventDetail) -> Result<(), ValueError> {
    use EventDetail as D;
    use EventKind as K;
    let shape_ok = match (kind, d) {
        (K::RunStarted, D::RunStarted { definition }) => is_token(definition, MAX_NAME_BYTES),
        (K::RunCompleted, D::RunCompleted) => true,
        (K::RunFailed | K::RunCancelled | K::TurnFailed, D::Status { text }) => {
            !text.trim().is_empty() && text.len() <= MAX_STATUS_TEXT_BYTES
        }
        (K::TurnStarted | K::TurnCompleted, D::Turn { turn }) => *turn > 0,
        (K::ModelStarted, D::ModelStarted { turn, operation }) => {
            *turn > 0
                && operation
                    .as_deref()
                    .is_none_or(|o| is_token(o, MAX_ID_BYTES))
        }
        (K::ModelDelta, D::ModelDelta { text }) => text.len() <= MAX_MODEL_DELTA_BYTES,
        (K::ModelCompleted, D::ModelCompleted { .. }) => true,
        (K::ModelFailed, D::ModelFailed(_)) => true,
        (K::ToolStarted, D::ToolStarted { call_id, name }) => {
            is_token(call_id, MAX_ID_BYTES) && is_token(name, MAX_ID_BYTES)
        }
        (K::ToolProgress, D::ToolProgress { call_id, message }) => {
            is_token(call_id, MAX_ID_BYTES) && is_token(message, MAX_PROGRESS_BYTES)
        }
        (K::ToolCompleted, D::ToolTerminal(t)) => t.outcome() == ToolOutcome::Completed,
        (K::ToolFailed, D::ToolTerminal(t)) => t.outcome() != ToolOutcome::Completed,
        (K::InteractionStarted, D::InteractionStarted { id, kind }) => {
            is_token(id, MAX_ID_BYTES) && is_token(kind, MAX_ID_BYTES)
        }
        (K::InteractionCompleted, D::InteractionTerminal { id, problem }) => {
            is_token(id, MAX_ID_BYTES) && problem.is_none()
        }
        (
            K::InteractionFailed | K::InteractionCancelled,
            D::InteractionTerminal { id, problem },
        ) => {
            is_token(id, MAX_ID_BYTES)
                && problem
                    .as_deref()
                    .is_some_and(|p| is_token(p, MAX_INTERACTION_PROBLEM_BYTES))
        }
        _ => return Err(ValueError::new("event detail does not belong to the kind")),
    };
    if shape_ok {
        Ok(())
    } else {
        Err(ValueError::new("event detail breaks a bound of its kind"))
    }
}

/// One run event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    run: RunRef,
    sequence: u64,
    time: SystemTime,
    kind: EventKind,
    detail: EventDetail,
}

impl Event {
    /// Sequence > 0, time after the Unix epoch, detail of the kind's shape
    /// within its bounds.
    ///
    /// ```
    /// use agent_client::*;
    /// let e = Event::new(
    ///     RunRef::new("run-1").unwrap(), 3,
    ///     std::time::UNIX_EPOCH + std::time::Duration::from_secs(1),
    ///     EventKind::ModelDelta, EventDetail::ModelDelta { text: "hi".into() },
    /// ).unwrap();
    /// assert_eq!(e.kind().name(), "model.delta");
    /// assert!(Event::new(e.run().clone(), 3, e.time(), EventKind::RunCompleted,
    ///     EventDetail::ModelDelta { text: "hi".into() }).is_err());
    /// ```
    pub fn new(
        run: RunRef,
        sequence: u64,
        time: SystemTime,
        kind: EventKind,
        detail: EventDetail,
    ) -> Result<Self, ValueError> {
        if sequence == 0 {
            return Err(ValueError::new("event sequence is zero"));
        }
        if time <= std::time::UNIX_EPOCH {
            return Err(ValueError::new("event time is not after the Unix epoch"));
        }
        check_detail(kind, &detail)?;
        Ok(Self {
            run,
            sequence,
            time,
            kind,
            detail,
        })
    }
    /// The run.
    pub fn run(&self) -> &RunRef {
        &self.run
    }
    /// The sequence (gap-free per run, from 1).
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
    /// When the daemon recorded it.
    pub fn time(&self) -> SystemTime {
        self.time
    }
    /// The kind.
    pub fn kind(&self) -> EventKind {
        self.kind
    }
    /// The kind's detail.
    pub fn detail(&self) -> &EventDetail {
        &self.detail
    }
    /// Whether the event ends its scope.
    pub fn is_terminal(&self) -> bool {
        self.kind.is_terminal()
    }
}
