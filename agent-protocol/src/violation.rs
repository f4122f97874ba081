//! [`Violation`], the typed form of a broken protocol rule. A leaf below the validators
//! that report it ([`crate::negotiate`], [`crate::status`]), so that the status model may
//! validate the ranges and capability names that negotiation defines.

use std::fmt;

use crate::pb::common::v1::{ErrorCode, Status, status::Detail};

/// A broken protocol rule: its [`ErrorCode`], a fixed message naming the rule
/// (never text from the peer) and the detail the code requires.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    code: ErrorCode,
    message: &'static str,
    detail: Option<Detail>,
}

impl Violation {
    /// A violation with `code` and no detail.
    pub fn new(code: ErrorCode, message: &'static str) -> Self {
        Self {
            code,
            message,
            detail: None,
        }
    }

    /// An `INVALID_ARGUMENT` violation: the peer sent something malformed.
    pub fn invalid(message: &'static str) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    /// An `INTERNAL` violation: our own inputs or outputs broke a rule.
    pub fn internal(message: &'static str) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// The same violation carrying `detail`.
    pub fn with_detail(mut self, detail: Detail) -> Self {
        self.detail = Some(detail);
        self
    }

    /// The same rule reported under another code (preflight re-labels a
    /// failed server-input check as `INTERNAL`, for example).
    pub fn recode(mut self, code: ErrorCode) -> Self {
        self.code = code;
        self
    }

    /// The error code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The fixed message naming the broken rule.
    pub fn message(&self) -> &'static str {
        self.message
    }

    /// The typed detail, if the code carries one.
    pub fn detail(&self) -> Option<&Detail> {
        self.detail.as_ref()
    }

    /// The wire status of this violation.
    pub fn into_status(self) -> Status {
        Status {
            code: self.code as i32,
            message: self.message.to_owned(),
            retryable: false,
            operation_id: String::new(),
            detail: self.detail,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str_name(), self.message)
    }
}

impl std::error::Error for Violation {}

impl From<Violation> for Status {
    fn from(violation: Violation) -> Self {
        violation.into_status()
    }
}
