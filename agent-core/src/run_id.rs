//! The kernel's run id and its rule. The run authority applies the daemon-token rule to run
//! ids instead; docs/protocol.md, "Tokens", states both.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::text::{TokenProblem, check_token};

/// Longest run id, in bytes.
pub const MAX_RUN_ID_BYTES: usize = 96;

/// The rule as one static sentence, for errors that carry only a `&'static str`.
pub(crate) const RUN_ID_RULE: &str = "run id must be non-empty, trimmed and at most 96 bytes";

/// The id of one run: non-empty, at most [`MAX_RUN_ID_BYTES`] bytes, without surrounding
/// whitespace. Every kernel type that names a run (dispatch and interaction scopes,
/// snapshots, the engine) holds one, so the rule is checked here and nowhere else.
///
/// It displays and serializes as the plain string, so snapshots and events read the same as
/// when they held a string:
///
/// ```
/// use agent_core::RunId;
///
/// let id = RunId::new("run-1")?;
/// assert_eq!(id.as_str(), "run-1");
/// assert_eq!(id.to_string(), "run-1");
/// assert_eq!(id, "run-1"); // compares with the text
/// assert_eq!(&*std::sync::Arc::<str>::from(&id), "run-1");
/// assert_eq!(serde_json::to_string(&id)?, r#""run-1""#);
/// assert!(RunId::new(" run-1").is_err());
/// assert!(serde_json::from_str::<RunId>(r#""""#).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(Arc<str>);

/// Why a [`RunId`] was rejected; the rejected text is not echoed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunIdError {
    /// The id is empty.
    #[error("run id must not be empty")]
    Empty,
    /// The id is longer than [`MAX_RUN_ID_BYTES`].
    #[error("run id must be at most {MAX_RUN_ID_BYTES} bytes")]
    TooLong,
    /// The id starts or ends with whitespace.
    #[error("run id must not have surrounding whitespace")]
    Untrimmed,
}

impl RunIdError {
    /// What is wrong, in the words every token check uses.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            RunIdError::Empty => TokenProblem::Empty,
            RunIdError::TooLong => TokenProblem::TooLong,
            RunIdError::Untrimmed => TokenProblem::Untrimmed,
        }
        .reason()
    }
}

impl RunId {
    /// A validated run id.
    pub fn new(id: impl Into<Arc<str>>) -> Result<RunId, RunIdError> {
        let id = id.into();
        RunId::check(&id)?;
        Ok(RunId(id))
    }

    /// Checks `id` against the rule without building a [`RunId`].
    pub fn check(id: &str) -> Result<(), RunIdError> {
        check_token(id, MAX_RUN_ID_BYTES).map_err(|problem| match problem {
            TokenProblem::Empty => RunIdError::Empty,
            TokenProblem::TooLong => RunIdError::TooLong,
            TokenProblem::Untrimmed => RunIdError::Untrimmed,
        })
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The shared string, for cheap copies into events and logs.
    pub(crate) fn as_arc(&self) -> &Arc<str> {
        &self.0
    }
}

/// Compares with the plain string, so a host checks an id against text without building a
/// [`RunId`]: `run.id() == "run-1"`.
impl PartialEq<str> for RunId {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for RunId {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

/// The shared string, without copying it: what constructors that take a run id as text
/// (`impl Into<Arc<str>>`) accept, so a scope is built from a run's [`RunId`] directly.
impl From<&RunId> for Arc<str> {
    fn from(id: &RunId) -> Arc<str> {
        Arc::clone(&id.0)
    }
}

impl From<RunId> for Arc<str> {
    fn from(id: RunId) -> Arc<str> {
        id.0
    }
}

/// Formats like the string it holds, so structures that held a string debug-print the same.
impl fmt::Debug for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for RunId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RunId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RunId, D::Error> {
        let id = String::deserialize(deserializer)?;
        RunId::new(id).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_in_one_place() {
        assert!(RunId::new("r").is_ok());
        assert!(RunId::new("r".repeat(MAX_RUN_ID_BYTES)).is_ok());
        assert_eq!(RunId::new(""), Err(RunIdError::Empty));
        assert_eq!(
            RunId::new("r".repeat(MAX_RUN_ID_BYTES + 1)),
            Err(RunIdError::TooLong)
        );
        assert_eq!(RunId::new("r "), Err(RunIdError::Untrimmed));
        assert_eq!(RunId::new("\tr"), Err(RunIdError::Untrimmed));
        let id = RunId::new("run-7").unwrap();
        assert_eq!(format!("{id:?}"), format!("{:?}", "run-7"));
        assert!(RUN_ID_RULE.contains(&format!(" {MAX_RUN_ID_BYTES} bytes")));
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(serde_json::from_str::<RunId>(&json).unwrap(), id);
    }
}
