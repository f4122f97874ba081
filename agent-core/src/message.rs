//! Provider-neutral conversation messages: a role and one or more parts (text, tool calls,
//! tool results, extensions), validated and bounded when built.
//!
//! ```
//! use agent_core::message::{Message, Part, Role};
//!
//! let question = Message::user("What is in this directory?")?;
//! assert_eq!(question.role(), Role::User);
//! assert_eq!(question.text(), "What is in this directory?");
//! assert!(matches!(question.parts(), [Part::Text(_)]));
//! # Ok::<(), agent_core::message::MessageError>(())
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::{Call, MAX_CALL_ID_BYTES, MAX_PAYLOAD_BYTES};

/// Largest text part, in bytes.
pub const MAX_TEXT_BYTES: usize = 1 << 20;
/// Most parts in one message: room for the most tool calls one model operation may request
/// plus its text, split into parts of at most [`MAX_TEXT_BYTES`].
pub const MAX_PARTS: usize = 256;
/// Largest message, in accounted bytes (see [`Message::size_bytes`]).
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;
/// Longest extension namespace, in bytes.
pub const MAX_NAMESPACE_BYTES: usize = 256;

/// Who authored a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions from the host application.
    System,
    /// Input from the user.
    User,
    /// Output of the model.
    Assistant,
    /// Results of tools, fed back to the model.
    Tool,
}

/// The result of one tool call, as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResultPart {
    /// The call this answers.
    pub call_id: String,
    /// The tool that was called.
    pub name: String,
    /// What the tool returned (or the problem it described).
    pub content: String,
    /// Whether `content` describes a problem rather than a result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub problem: bool,
}

/// One piece of a [`Message`]. Serialized externally tagged in snake case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// Text (not trimmed, never empty).
    Text(String),
    /// The model asks for a tool call (assistant messages only).
    ToolCall(Call),
    /// A tool's answer (tool messages only).
    ToolResult(ToolResultPart),
    /// Provider- or host-specific data, namespaced.
    Extension {
        /// Who owns the value, e.g. `"openai.reasoning"`.
        namespace: String,
        /// The value.
        value: Value,
    },
}

impl Part {
    fn size_bytes(&self) -> usize {
        match self {
            Part::Text(text) => text.len(),
            Part::ToolCall(call) => {
                call.id().len() + call.name().len() + json_size(call.arguments())
            }
            Part::ToolResult(result) => {
                result.call_id.len() + result.name.len() + result.content.len() + 1
            }
            Part::Extension { namespace, value } => namespace.len() + json_size(value),
        }
    }

    fn validate(&self) -> Result<(), MessageError> {
        match self {
            Part::Text(text) if text.is_empty() => Err(MessageError::EmptyText),
            Part::Text(text) if text.len() > MAX_TEXT_BYTES => Err(MessageError::TooLarge {
                what: "text part",
                limit: MAX_TEXT_BYTES,
            }),
            Part::Text(_) | Part::ToolCall(_) => Ok(()),
            Part::ToolResult(result) => {
                check_token("tool result call id", &result.call_id)?;
                check_token("tool result name", &result.name)?;
                if result.content.len() > MAX_PAYLOAD_BYTES {
                    return Err(MessageError::TooLarge {
                        what: "tool result content",
                        limit: MAX_PAYLOAD_BYTES,
                    });
                }
                Ok(())
            }
            Part::Extension { namespace, value } => {
                if namespace.is_empty()
                    || namespace.trim() != namespace
                    || namespace.len() > MAX_NAMESPACE_BYTES
                {
                    return Err(MessageError::InvalidToken {
                        what: "extension namespace",
                    });
                }
                if json_size(value) > MAX_PAYLOAD_BYTES {
                    return Err(MessageError::TooLarge {
                        what: "extension value",
                        limit: MAX_PAYLOAD_BYTES,
                    });
                }
                Ok(())
            }
        }
    }
}

fn check_token(what: &'static str, value: &str) -> Result<(), MessageError> {
    if value.is_empty() || value.trim() != value || value.len() > MAX_CALL_ID_BYTES {
        return Err(MessageError::InvalidToken { what });
    }
    Ok(())
}

/// The serialized size of a JSON value, computed without allocating.
pub(crate) fn json_size(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing into a counter cannot fail: serde_json only fails on I/O or non-string keys,
    // and a Value's keys are strings.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Why a [`Message`] could not be built. The text never includes the rejected content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// A message needs at least one part.
    #[error("a message needs at least one part")]
    NoParts,
    /// Too many parts.
    #[error("a message has at most {MAX_PARTS} parts")]
    TooManyParts,
    /// A text part is empty.
    #[error("a text part must not be empty")]
    EmptyText,
    /// Something is larger than its bound.
    #[error("{what} exceeds {limit} bytes")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// The bound.
        limit: usize,
    },
    /// An id, name or namespace is empty, untrimmed or too long.
    #[error("{what} must be non-empty, trimmed and bounded")]
    InvalidToken {
        /// Which field.
        what: &'static str,
    },
    /// A part is not allowed in a message of this role.
    #[error("a {part} part is not allowed in a {role:?} message")]
    PartNotAllowed {
        /// The part's kind.
        part: &'static str,
        /// The message's role.
        role: Role,
    },
}

/// One validated conversation entry: a role and 1 to [`MAX_PARTS`] parts. Tool calls appear
/// only in assistant messages and tool results only in tool messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "MessageParts")]
pub struct Message {
    role: Role,
    parts: Vec<Part>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageParts {
    role: Role,
    parts: Vec<Part>,
}

impl TryFrom<MessageParts> for Message {
    type Error = MessageError;

    fn try_from(value: MessageParts) -> Result<Self, Self::Error> {
        Message::new(value.role, value.parts)
    }
}

impl Message {
    /// A validated message.
    ///
    /// ```
    /// use agent_core::message::{Message, MessageError, Part, Role};
    ///
    /// assert_eq!(Message::new(Role::User, vec![]), Err(MessageError::NoParts));
    /// let message = Message::new(Role::Assistant, vec![Part::Text("Done.".into())])?;
    /// assert_eq!(message.text(), "Done.");
    /// # Ok::<(), MessageError>(())
    /// ```
    pub fn new(role: Role, parts: Vec<Part>) -> Result<Self, MessageError> {
        if parts.is_empty() {
            return Err(MessageError::NoParts);
        }
        if parts.len() > MAX_PARTS {
            return Err(MessageError::TooManyParts);
        }
        let mut size = 0usize;
        for part in &parts {
            part.validate()?;
            let allowed = match part {
                Part::ToolCall(_) => role == Role::Assistant,
                Part::ToolResult(_) => role == Role::Tool,
                Part::Text(_) | Part::Extension { .. } => true,
            };
            if !allowed {
                return Err(MessageError::PartNotAllowed {
                    part: match part {
                        Part::ToolCall(_) => "tool_call",
                        _ => "tool_result",
                    },
                    role,
                });
            }
            size = size.saturating_add(part.size_bytes());
        }
        if size > MAX_MESSAGE_BYTES {
            return Err(MessageError::TooLarge {
                what: "message",
                limit: MAX_MESSAGE_BYTES,
            });
        }
        Ok(Message { role, parts })
    }

    fn text_message(role: Role, text: impl Into<String>) -> Result<Self, MessageError> {
        Self::new(role, vec![Part::Text(text.into())])
    }

    /// A [`Role::System`] message of one text part.
    pub fn system(text: impl Into<String>) -> Result<Self, MessageError> {
        Self::text_message(Role::System, text)
    }

    /// A [`Role::User`] message of one text part.
    pub fn user(text: impl Into<String>) -> Result<Self, MessageError> {
        Self::text_message(Role::User, text)
    }

    /// A [`Role::Assistant`] message of one text part.
    pub fn assistant(text: impl Into<String>) -> Result<Self, MessageError> {
        Self::text_message(Role::Assistant, text)
    }

    /// Who wrote it.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Its parts, in order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The text parts joined (borrowed when there is exactly one).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        let mut texts = self.parts.iter().filter_map(|part| match part {
            Part::Text(text) => Some(text.as_str()),
            _ => None,
        });
        match (texts.next(), texts.next()) {
            (None, _) => std::borrow::Cow::Borrowed(""),
            (Some(only), None) => std::borrow::Cow::Borrowed(only),
            (Some(first), Some(second)) => {
                let mut joined = String::from(first);
                joined.push_str(second);
                texts.for_each(|t| joined.push_str(t));
                std::borrow::Cow::Owned(joined)
            }
        }
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &Call> {
        self.parts.iter().filter_map(|part| match part {
            Part::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The accounted size: the sum of every part's strings and JSON.
    pub fn size_bytes(&self) -> usize {
        self.parts.iter().map(Part::size_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bounds_are_enforced_at_the_edge() {
        assert!(Message::user("x".repeat(MAX_TEXT_BYTES)).is_ok());
        assert_eq!(
            Message::user("x".repeat(MAX_TEXT_BYTES + 1)),
            Err(MessageError::TooLarge {
                what: "text part",
                limit: MAX_TEXT_BYTES
            })
        );
        assert_eq!(Message::user(""), Err(MessageError::EmptyText));
        let many = vec![Part::Text("a".into()); MAX_PARTS];
        assert!(Message::new(Role::User, many.clone()).is_ok());
        let mut too_many = many;
        too_many.push(Part::Text("a".into()));
        assert_eq!(
            Message::new(Role::User, too_many),
            Err(MessageError::TooManyParts)
        );
        let big = vec![Part::Text("x".repeat(MAX_TEXT_BYTES)); 5];
        assert_eq!(
            Message::new(Role::User, big),
            Err(MessageError::TooLarge {
                what: "message",
                limit: MAX_MESSAGE_BYTES
            })
        );
    }

    #[test]
    fn parts_must_suit_the_role() {
        let call = Part::ToolCall(Call::new("c1", "read", json!({})).unwrap());
        let result = Part::ToolResult(ToolResultPart {
            call_id: "c1".into(),
            name: "read".into(),
            content: "{}".into(),
            problem: false,
        });
        assert!(Message::new(Role::Assistant, vec![call.clone()]).is_ok());
        assert!(Message::new(Role::Tool, vec![result.clone()]).is_ok());
        assert_eq!(
            Message::new(Role::User, vec![call]),
            Err(MessageError::PartNotAllowed {
                part: "tool_call",
                role: Role::User
            })
        );
        assert!(Message::new(Role::Assistant, vec![result]).is_err());
    }

    #[test]
    fn tool_result_tokens_and_extension_namespaces_are_checked() {
        let result = |id: &str| {
            Part::ToolResult(ToolResultPart {
                call_id: id.into(),
                name: "read".into(),
                content: String::new(),
                problem: true,
            })
        };
        assert!(Message::new(Role::Tool, vec![result(" c1")]).is_err());
        assert!(Message::new(Role::Tool, vec![result(&"c".repeat(129))]).is_err());
        assert!(Message::new(Role::Tool, vec![result(&"c".repeat(128))]).is_ok());
        let extension = |namespace: &str| Part::Extension {
            namespace: namespace.into(),
            value: json!({"k": 1}),
        };
        assert!(Message::new(Role::User, vec![extension("host.note")]).is_ok());
        assert!(Message::new(Role::User, vec![extension("")]).is_err());
        assert!(Message::new(Role::User, vec![extension(&"n".repeat(257))]).is_err());
    }

    #[test]
    fn serde_round_trips_and_validates() {
        let message = Message::new(
            Role::Assistant,
            vec![
                Part::Text("Reading.".into()),
                Part::ToolCall(Call::new("c1", "read", json!({"path": "a"})).unwrap()),
            ],
        )
        .unwrap();
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(
            json,
            json!({"role": "assistant", "parts": [
                {"text": "Reading."},
                {"tool_call": {"id": "c1", "name": "read", "arguments": {"path": "a"}}}
            ]})
        );
        assert_eq!(serde_json::from_value::<Message>(json).unwrap(), message);
        assert!(serde_json::from_value::<Message>(json!({"role": "user", "parts": []})).is_err());
        assert!(
            serde_json::from_value::<Message>(
                json!({"role": "user", "parts": [{"text": "a"}], "x": 1})
            )
            .is_err()
        );
    }

    #[test]
    fn text_joins_text_parts() {
        let message = Message::new(
            Role::Assistant,
            vec![Part::Text("a".into()), Part::Text("b".into())],
        )
        .unwrap();
        assert_eq!(message.text(), "ab");
        assert_eq!(message.tool_calls().count(), 0);
        assert_eq!(message.size_bytes(), 2);
        assert_eq!(json_size(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#.len());
    }
}
