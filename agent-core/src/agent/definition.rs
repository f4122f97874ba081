//! What a run executes: the [`AgentDefinition`] and its limits.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::MAX_MODEL_BYTES;
use crate::text::check_token;

/// Most turns a definition may allow.
pub const MAX_TURNS: u32 = 1000;
/// Longest agent name, in bytes.
pub const MAX_AGENT_NAME_BYTES: usize = 128;

/// Why an [`AgentDefinition`] is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentDefinitionError {
    /// The name is empty, untrimmed or longer than [`MAX_AGENT_NAME_BYTES`].
    #[error("agent name must be non-empty, trimmed and at most {MAX_AGENT_NAME_BYTES} bytes")]
    Name,
    /// The model is empty, untrimmed or longer than 256 bytes.
    #[error("model must be non-empty, trimmed and at most {MAX_MODEL_BYTES} bytes")]
    Model,
    /// `max_turns` is outside `1..=1000`.
    #[error("max turns must be between 1 and {MAX_TURNS}")]
    MaxTurns,
}

/// What a run executes: a name (for events), the model to ask, and the turn limit.
///
/// ```
/// use agent_core::agent::AgentDefinition;
///
/// let agent = AgentDefinition::new("coder", "gpt-4o-mini", 8)?;
/// assert_eq!((agent.name(), agent.model(), agent.max_turns()), ("coder", "gpt-4o-mini", 8));
/// assert!(AgentDefinition::new("coder", "m", 0).is_err());
/// # Ok::<(), agent_core::agent::AgentDefinitionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "DefinitionParts")]
pub struct AgentDefinition {
    pub(super) name: Arc<str>,
    pub(super) model: Arc<str>,
    max_turns: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DefinitionParts {
    name: String,
    model: String,
    max_turns: u32,
}

impl TryFrom<DefinitionParts> for AgentDefinition {
    type Error = AgentDefinitionError;

    fn try_from(parts: DefinitionParts) -> Result<Self, Self::Error> {
        AgentDefinition::new(parts.name, parts.model, parts.max_turns)
    }
}

fn bounded_token(value: &str, max: usize) -> bool {
    check_token(value, max).is_ok()
}

impl AgentDefinition {
    /// A validated definition.
    pub fn new(
        name: impl Into<Arc<str>>,
        model: impl Into<Arc<str>>,
        max_turns: u32,
    ) -> Result<Self, AgentDefinitionError> {
        let definition = AgentDefinition {
            name: name.into(),
            model: model.into(),
            max_turns,
        };
        definition.validate()?;
        Ok(definition)
    }

    pub(crate) fn validate(&self) -> Result<(), AgentDefinitionError> {
        if !bounded_token(&self.name, MAX_AGENT_NAME_BYTES) {
            return Err(AgentDefinitionError::Name);
        }
        if !bounded_token(&self.model, MAX_MODEL_BYTES) {
            return Err(AgentDefinitionError::Model);
        }
        if !(1..=MAX_TURNS).contains(&self.max_turns) {
            return Err(AgentDefinitionError::MaxTurns);
        }
        Ok(())
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model every request names.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The most turns a run may take.
    pub fn max_turns(&self) -> u32 {
        self.max_turns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_validate_every_field() {
        assert!(AgentDefinition::new("a", "m", 1).is_ok());
        assert!(AgentDefinition::new("a", "m", MAX_TURNS).is_ok());
        assert_eq!(
            AgentDefinition::new("a", "m", MAX_TURNS + 1),
            Err(AgentDefinitionError::MaxTurns)
        );
        assert_eq!(
            AgentDefinition::new(" a", "m", 1),
            Err(AgentDefinitionError::Name)
        );
        assert_eq!(
            AgentDefinition::new("a", "m".repeat(257), 1),
            Err(AgentDefinitionError::Model)
        );
        let json = serde_json::json!({"name": "a", "model": "m", "max_turns": 0});
        assert!(serde_json::from_value::<AgentDefinition>(json).is_err());
    }
}
