//! The [`Call`] a model makes, validated on construction, and its limits.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest call id, in bytes.
pub const MAX_CALL_ID_BYTES: usize = 128;
/// Largest serialized call arguments or result content, in bytes (1 MiB).
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;

/// Why a [`Call`] was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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
/// LF or TAB, at most [`MAX_CALL_ID_BYTES`]. Tool occurrences hold their call ids and names
/// to it too.
pub(crate) fn check_identity(value: &str) -> Result<(), &'static str> {
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
}
