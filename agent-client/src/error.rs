//! Typed errors (docs/client.md, "Errors and retries"). Every error keeps only the safe
//! facts of the wire status: a fixed message token, whether the same request
//! may be retried, and the operation it concerns. Constructors reject facts
//! that contradict each other, so a value of these types is always
//! consistent.

use std::fmt;

use crate::token::is_token;
use crate::values::{OperationId, ProtocolRange, RunRef, ValueError};

/// The longest message of an error's facts, in bytes.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 2048;

/// The safe facts every typed error carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorFacts {
    message: String,
    retryable: bool,
    operation: Option<OperationId>,
}

impl ErrorFacts {
    /// Facts with a message token of at most [`MAX_ERROR_MESSAGE_BYTES`].
    pub fn new(
        message: &str,
        retryable: bool,
        operation: Option<OperationId>,
    ) -> Result<Self, ValueError> {
        if !is_token(message, MAX_ERROR_MESSAGE_BYTES) {
            return Err(ValueError::new(
                "error message is not a token of at most 2048 bytes",
            ));
        }
        Ok(Self {
            message: message.to_owned(),
            retryable,
            operation,
        })
    }

    /// The message (fixed text from the daemon's status or from the adapter).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the same request may be sent again.
    pub fn retryable(&self) -> bool {
        self.retryable
    }

    /// The operation the failure concerns, if any.
    pub fn operation(&self) -> Option<&OperationId> {
        self.operation.as_ref()
    }
}

/// The code of a [`StatusError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusCode {
    /// The request was malformed.
    InvalidArgument,
    /// The endpoint credential was refused.
    Unauthenticated,
    /// The named run, interaction or definition does not exist.
    NotFound,
    /// The daemon cannot serve now (stopping, or the transport is down).
    Unavailable,
    /// The request was cancelled.
    Cancelled,
    /// The request's deadline passed.
    DeadlineExceeded,
    /// The request conflicts with the current state.
    Conflict,
    /// The daemon or the adapter failed internally, or the peer broke the protocol.
    Internal,
}

impl StatusCode {
    /// The stable dotted-free name, e.g. `invalid-argument`.
    pub fn name(self) -> &'static str {
        match self {
            Self::InvalidArgument => "invalid-argument",
            Self::Unauthenticated => "unauthenticated",
            Self::NotFound => "not-found",
            Self::Unavailable => "unavailable",
            Self::Cancelled => "cancelled",
            Self::DeadlineExceeded => "deadline-exceeded",
            Self::Conflict => "conflict",
            Self::Internal => "internal",
        }
    }
}

/// A failure without a recovery detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusError {
    /// The code.
    pub code: StatusCode,
    /// The safe facts.
    pub facts: ErrorFacts,
}

/// The replay cursor lies outside the retained window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CursorGapError {
    run: RunRef,
    requested: u64,
    earliest: u64,
    latest: u64,
    recovery: u64,
    facts: ErrorFacts,
}

impl CursorGapError {
    /// Either too old (`requested < earliest - 1`, recovery `earliest - 1`)
    /// or too new (`requested > latest`, recovery `latest`), over a valid
    /// window (`0 < earliest <= latest`).
    pub fn new(
        run: RunRef,
        requested: u64,
        earliest: u64,
        latest: u64,
        recovery: u64,
        facts: ErrorFacts,
    ) -> Result<Self, ValueError> {
        if earliest == 0 || latest < earliest {
            return Err(ValueError::new("cursor gap window is invalid"));
        }
        let too_old = requested < earliest - 1 && recovery == earliest - 1;
        let too_new = requested > latest && recovery == latest;
        if !(too_old || too_new) {
            return Err(ValueError::new(
                "cursor gap facts are inconsistent with the window",
            ));
        }
        Ok(Self {
            run,
            requested,
            earliest,
            latest,
            recovery,
            facts,
        })
    }
    /// The run.
    pub fn run(&self) -> &RunRef {
        &self.run
    }
    /// The cursor that was requested.
    pub fn requested(&self) -> u64 {
        self.requested
    }
    /// The earliest retained sequence.
    pub fn earliest(&self) -> u64 {
        self.earliest
    }
    /// The latest sequence.
    pub fn latest(&self) -> u64 {
        self.latest
    }
    /// The cursor to resume from.
    pub fn recovery(&self) -> u64 {
        self.recovery
    }
    /// The safe facts.
    pub fn facts(&self) -> &ErrorFacts {
        &self.facts
    }
}

/// The session's ownership epoch is no longer current.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleSessionError {
    expected: u64,
    observed: u64,
    facts: ErrorFacts,
}

impl StaleSessionError {
    /// `expected > 0` and `observed != expected`.
    pub fn new(expected: u64, observed: u64, facts: ErrorFacts) -> Result<Self, ValueError> {
        if expected == 0 || observed == expected {
            return Err(ValueError::new("stale session epochs are inconsistent"));
        }
        Ok(Self {
            expected,
            observed,
            facts,
        })
    }
    /// The epoch the request carried.
    pub fn expected(&self) -> u64 {
        self.expected
    }
    /// The epoch the daemon holds.
    pub fn observed(&self) -> u64 {
        self.observed
    }
    /// The safe facts.
    pub fn facts(&self) -> &ErrorFacts {
        &self.facts
    }
}

/// Client and daemon share no protocol version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionMismatchError {
    client: ProtocolRange,
    server: ProtocolRange,
    facts: ErrorFacts,
}

impl VersionMismatchError {
    /// The two ranges must not overlap.
    pub fn new(
        client: ProtocolRange,
        server: ProtocolRange,
        facts: ErrorFacts,
    ) -> Result<Self, ValueError> {
        if client.overlaps(&server) {
            return Err(ValueError::new("version mismatch ranges overlap"));
        }
        Ok(Self {
            client,
            server,
            facts,
        })
    }
    /// The client's range.
    pub fn client(&self) -> &ProtocolRange {
        &self.client
    }
    /// The daemon's range.
    pub fn server(&self) -> &ProtocolRange {
        &self.server
    }
    /// The safe facts.
    pub fn facts(&self) -> &ErrorFacts {
        &self.facts
    }
}

/// Required capabilities are missing on the daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapabilityMismatchError {
    required: Vec<String>,
    available: Vec<String>,
    missing: Vec<String>,
    facts: ErrorFacts,
}

impl CapabilityMismatchError {
    /// Three valid capability sets; `missing` equals `required - available`
    /// and is non-empty.
    pub fn new(
        required: Vec<String>,
        available: Vec<String>,
        missing: Vec<String>,
        facts: ErrorFacts,
    ) -> Result<Self, ValueError> {
        for set in [&required, &available, &missing] {
            crate::values::validate_capabilities(set)?;
        }
        let expected: Vec<&String> = required
            .iter()
            .filter(|r| available.binary_search(r).is_err())
            .collect();
        if missing.is_empty() || expected != missing.iter().collect::<Vec<_>>() {
            return Err(ValueError::new(
                "missing capabilities are not required minus available",
            ));
        }
        Ok(Self {
            required,
            available,
            missing,
            facts,
        })
    }
    /// What the client required.
    pub fn required(&self) -> &[String] {
        &self.required
    }
    /// What the daemon offers.
    pub fn available(&self) -> &[String] {
        &self.available
    }
    /// Required but not offered.
    pub fn missing(&self) -> &[String] {
        &self.missing
    }
    /// The safe facts.
    pub fn facts(&self) -> &ErrorFacts {
        &self.facts
    }
}

/// A bounded resource is exhausted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverloadError {
    resource: String,
    limit: u64,
    observed: u64,
    facts: ErrorFacts,
}

/// The longest resource name of an [`OverloadError`], in bytes.
pub const MAX_OVERLOAD_RESOURCE_BYTES: usize = 256;

impl OverloadError {
    /// Resource is a token of at most 256 bytes; `0 < limit < observed`.
    pub fn new(
        resource: &str,
        limit: u64,
        observed: u64,
        facts: ErrorFacts,
    ) -> Result<Self, ValueError> {
        if !is_token(resource, MAX_OVERLOAD_RESOURCE_BYTES) {
            return Err(ValueError::new("overload resource is not a token"));
        }
        if limit == 0 || observed <= limit {
            return Err(ValueError::new("overload needs 0 < limit < observed"));
        }
        Ok(Self {
            resource: resource.to_owned(),
            limit,
            observed,
            facts,
        })
    }
    /// The resource's name.
    pub fn resource(&self) -> &str {
        &self.resource
    }
    /// Its limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }
    /// The demand that exceeded it.
    pub fn observed(&self) -> u64 {
        self.observed
    }
    /// The safe facts.
    pub fn facts(&self) -> &ErrorFacts {
        &self.facts
    }
}

/// A snapshot was written by an incompatible format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotVersionMismatchError {
    expected: String,
    observed: String,
    facts: ErrorFacts,
}

impl SnapshotVersionMismatchError {
    /// Two distinct tokens of at most 256 bytes.
    pub fn new(expected: &str, observed: &str, facts: ErrorFacts) -> Result<Self, ValueError> {
        if !is_token(expected, 256) || !is_token(observed, 256) || expected == observed {
            return Err(ValueError::new(
                "snapshot versions must be two distinct tokens",
            ));
        }
        Ok(Self {
            expected: expected.to_owned(),
            observed: observed.to_owned(),
            facts,
        })
    }
    /// The format the daemon reads.
    pub fn expected(&self) -> &str {
        &self.expected
    }
    /// The format the snapshot has.
    pub fn observed(&self) -> &str {
        &self.observed
    }
    /// The safe facts.
    pub fn facts(&self) -> &ErrorFacts {
        &self.facts
    }
}

/// A mutation may or may not have happened: the transport failed after the
/// request left, or the daemon itself could not tell. Never retry blindly:
/// inspect the run (events, export) first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UncertainOperationError {
    operation: OperationId,
    kind: String,
    facts: ErrorFacts,
}

impl UncertainOperationError {
    /// The facts' operation, if present, must be `operation`; `kind` is a
    /// token of at most 256 bytes.
    pub fn new(operation: OperationId, kind: &str, facts: ErrorFacts) -> Result<Self, ValueError> {
        if !is_token(kind, 256) {
            return Err(ValueError::new("operation kind is not a token"));
        }
        if facts.operation().is_some_and(|o| *o != operation) {
            return Err(ValueError::new(
                "uncertain operation differs from the facts' operation",
            ));
        }
        Ok(Self {
            operation,
            kind: kind.to_owned(),
            facts,
        })
    }
    /// The operation.
    pub fn operation(&self) -> &OperationId {
        &self.operation
    }
    /// Its kind, e.g. `start`.
    pub fn kind(&self) -> &str {
        &self.kind
    }
    /// The safe facts.
    pub fn facts(&self) -> &ErrorFacts {
        &self.facts
    }
}

/// The run is already terminal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalError {
    /// The run.
    pub run: RunRef,
    /// The safe facts.
    pub facts: ErrorFacts,
}

/// An Initialize with an attempt id got no answer the client can trust; the
/// same attempt may be sent again (byte-identical) to learn the committed
/// outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitializationReplayError {
    attempt: crate::values::InitializationAttemptId,
    facts: ErrorFacts,
}

impl InitializationReplayError {
    /// The facts must be retryable and name no operation.
    pub fn new(
        attempt: crate::values::InitializationAttemptId,
        facts: ErrorFacts,
    ) -> Result<Self, ValueError> {
        if !facts.retryable() || facts.operation().is_some() {
            return Err(ValueError::new(
                "initialization replay must be retryable without an operation",
            ));
        }
        Ok(Self { attempt, facts })
    }
    /// The attempt to replay.
    pub fn attempt(&self) -> &crate::values::InitializationAttemptId {
        &self.attempt
    }
    /// The safe facts.
    pub fn facts(&self) -> &ErrorFacts {
        &self.facts
    }
}

/// Every failure of the seam. The recovery errors are boxed so a
/// `Result<_, Error>` stays small.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A failure without recovery detail.
    Status(StatusError),
    /// The replay cursor lies outside the window.
    CursorGap(Box<CursorGapError>),
    /// The session's epoch is stale.
    StaleSession(Box<StaleSessionError>),
    /// No common protocol version.
    VersionMismatch(Box<VersionMismatchError>),
    /// Required capabilities are missing.
    CapabilityMismatch(Box<CapabilityMismatchError>),
    /// A bounded resource is exhausted.
    Overload(Box<OverloadError>),
    /// The snapshot format is incompatible.
    SnapshotVersionMismatch(Box<SnapshotVersionMismatchError>),
    /// A mutation's outcome is unknown.
    UncertainOperation(Box<UncertainOperationError>),
    /// The run is already terminal.
    Terminal(Box<TerminalError>),
    /// An Initialize attempt may be replayed.
    InitializationReplay(Box<InitializationReplayError>),
    /// The session or stream was closed locally (or fenced by a reconnect).
    Closed,
    /// The daemon broke the protocol contract; the message is fixed.
    Protocol(&'static str),
    /// A value the caller passed failed validation.
    Invalid(ValueError),
}

impl Error {
    /// The fixed message for a daemon response that broke the contract.
    pub const PROTOCOL_VIOLATION: &'static str = "daemon response violated the protocol contract";

    /// The safe facts, for the errors that carry them.
    pub fn facts(&self) -> Option<&ErrorFacts> {
        Some(match self {
            Self::Status(e) => &e.facts,
            Self::CursorGap(e) => e.facts(),
            Self::StaleSession(e) => e.facts(),
            Self::VersionMismatch(e) => e.facts(),
            Self::CapabilityMismatch(e) => e.facts(),
            Self::Overload(e) => e.facts(),
            Self::SnapshotVersionMismatch(e) => e.facts(),
            Self::UncertainOperation(e) => e.facts(),
            Self::Terminal(e) => &e.facts,
            Self::InitializationReplay(e) => e.facts(),
            Self::Closed | Self::Protocol(_) | Self::Invalid(_) => return None,
        })
    }

    /// Whether the same request may be sent again unchanged.
    pub fn retryable(&self) -> bool {
        self.facts().is_some_and(ErrorFacts::retryable)
    }

    /// The status code, for a [`Error::Status`].
    pub fn status_code(&self) -> Option<StatusCode> {
        match self {
            Self::Status(e) => Some(e.code),
            _ => None,
        }
    }

    /// A status error with a fixed message (for adapters).
    pub fn status(code: StatusCode, message: &'static str, retryable: bool) -> Self {
        let facts = ErrorFacts::new(message, retryable, None)
            .unwrap_or_else(|_| unreachable_facts(retryable));
        Self::Status(StatusError { code, facts })
    }
}

/// Facts for a fixed adapter message that is not a token (a programming
/// error in the adapter); keeps the retry flag so nothing is lost.
fn unreachable_facts(retryable: bool) -> ErrorFacts {
    ErrorFacts {
        message: "internal".to_owned(),
        retryable,
        operation: None,
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(e) => write!(f, "{}: {}", e.code.name(), e.facts.message()),
            Self::CursorGap(e) => write!(
                f,
                "replay cursor {} outside [{}, {}]; resume after {}",
                e.requested, e.earliest, e.latest, e.recovery
            ),
            Self::StaleSession(_) => f.write_str("session ownership is stale"),
            Self::VersionMismatch(_) => f.write_str("no common protocol version"),
            Self::CapabilityMismatch(_) => f.write_str("required capabilities are not available"),
            Self::Overload(e) => write!(
                f,
                "resource {} exhausted: {} > {}",
                e.resource, e.observed, e.limit
            ),
            Self::SnapshotVersionMismatch(_) => f.write_str("snapshot format is incompatible"),
            Self::UncertainOperation(e) => {
                write!(f, "outcome of {} operation is uncertain", e.kind)
            }
            Self::Terminal(_) => f.write_str("run is already terminal"),
            Self::InitializationReplay(_) => {
                f.write_str("initialization outcome is unknown; replay the attempt")
            }
            Self::Closed => f.write_str("closed"),
            Self::Protocol(m) => f.write_str(m),
            Self::Invalid(e) => write!(f, "invalid value: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<CursorGapError> for Error {
    fn from(e: CursorGapError) -> Self {
        Self::CursorGap(Box::new(e))
    }
}

impl From<StaleSessionError> for Error {
    fn from(e: StaleSessionError) -> Self {
        Self::StaleSession(Box::new(e))
    }
}

impl From<VersionMismatchError> for Error {
    fn from(e: VersionMismatchError) -> Self {
        Self::VersionMismatch(Box::new(e))
    }
}

impl From<CapabilityMismatchError> for Error {
    fn from(e: CapabilityMismatchError) -> Self {
        Self::CapabilityMismatch(Box::new(e))
    }
}

impl From<OverloadError> for Error {
    fn from(e: OverloadError) -> Self {
        Self::Overload(Box::new(e))
    }
}

impl From<SnapshotVersionMismatchError> for Error {
    fn from(e: SnapshotVersionMismatchError) -> Self {
        Self::SnapshotVersionMismatch(Box::new(e))
    }
}

impl From<UncertainOperationError> for Error {
    fn from(e: UncertainOperationError) -> Self {
        Self::UncertainOperation(Box::new(e))
    }
}

impl From<TerminalError> for Error {
    fn from(e: TerminalError) -> Self {
        Self::Terminal(Box::new(e))
    }
}

impl From<InitializationReplayError> for Error {
    fn from(e: InitializationReplayError) -> Self {
        Self::InitializationReplay(Box::new(e))
    }
}

impl From<StatusError> for Error {
    fn from(e: StatusError) -> Self {
        Self::Status(e)
    }
}

impl From<ValueError> for Error {
    fn from(e: ValueError) -> Self {
        Self::Invalid(e)
    }
}
