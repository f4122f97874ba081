//! The identity of a tool plan generation: its [`PlanId`] and the form of its fingerprint.

use std::fmt;
use std::sync::Arc;

/// Largest plan id, in bytes.
pub const MAX_PLAN_ID_BYTES: usize = 256;

/// The identity of one tool plan generation. A source promises that one id always denotes
/// the same definitions and the same code.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct PlanId(Arc<str>);

/// Why a [`PlanId`] was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plan id {0:?} must be 1 to 256 bytes without whitespace or control characters")]
pub struct PlanIdError(String);

impl PlanId {
    /// A validated plan id: 1 to [`MAX_PLAN_ID_BYTES`] bytes, no whitespace or control
    /// characters anywhere.
    ///
    /// ```
    /// use agent_core::stage::PlanId;
    /// assert!(PlanId::new("static:1f2e").is_ok());
    /// assert!(PlanId::new("two words").is_err());
    /// ```
    pub fn new(id: impl Into<String>) -> Result<Self, PlanIdError> {
        let id = id.into();
        if is_plan_id(&id) {
            Ok(PlanId(Arc::from(id)))
        } else {
            Err(PlanIdError(id))
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The shared string, for cheap copies into events.
    pub(crate) fn as_arc(&self) -> &Arc<str> {
        &self.0
    }

    /// An id the caller built to satisfy the rule (a static plan's `static:<hex>`).
    pub(super) fn from_trusted(id: Arc<str>) -> Self {
        PlanId(id)
    }
}

impl fmt::Display for PlanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `value` follows the rule of [`PlanId::new`].
pub(crate) fn is_plan_id(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_PLAN_ID_BYTES
        && !value.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Whether `value` is a plan fingerprint: `sha256:` followed by 64 lowercase hex digits.
pub(crate) fn is_sha256_fingerprint(value: &str) -> bool {
    value.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}
