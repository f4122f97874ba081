//! Definitions the daemon serves (docs/daemon.md, "Definitions"): a canonical, fingerprinted
//! [`DefinitionSet`] with exact resolution by id and revision.

use std::fmt;

use agent_core::agent::AgentDefinition;
use sha2::{Digest, Sha256};

use crate::token::is_daemon_token;

/// The most definitions one set holds.
pub const MAX_DEFINITIONS: usize = 4096;

/// Why a definition or a set was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefinitionError {
    /// The id or the revision is not a daemon token.
    InvalidToken,
    /// The embedded agent definition does not re-validate.
    InvalidAgent,
    /// The set is empty or holds more than [`MAX_DEFINITIONS`].
    Count,
    /// Two definitions share an (id, revision).
    Duplicate,
    /// No definition has exactly this id and revision.
    NotFound,
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DefinitionError::InvalidToken => "definition id or revision is not a valid token",
            DefinitionError::InvalidAgent => "agent definition is invalid",
            DefinitionError::Count => "definition set must hold 1..=4096 definitions",
            DefinitionError::Duplicate => "definition set repeats an (id, revision)",
            DefinitionError::NotFound => "no definition has this id and revision",
        })
    }
}

impl std::error::Error for DefinitionError {}

/// One served definition: a daemon-token id and revision wrapping a kernel
/// [`AgentDefinition`] (which owns the model and turn policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    id: String,
    revision: String,
    agent: AgentDefinition,
}

impl Definition {
    /// Validates the id and revision and re-validates the agent definition.
    pub fn new(
        id: impl Into<String>,
        revision: impl Into<String>,
        agent: AgentDefinition,
    ) -> Result<Definition, DefinitionError> {
        let (id, revision) = (id.into(), revision.into());
        if !is_daemon_token(&id) || !is_daemon_token(&revision) {
            return Err(DefinitionError::InvalidToken);
        }
        AgentDefinition::new(agent.name(), agent.model(), agent.max_turns())
            .map_err(|_| DefinitionError::InvalidAgent)?;
        Ok(Definition {
            id,
            revision,
            agent,
        })
    }

    /// The definition id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The definition revision.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// The kernel definition a run of it uses.
    pub fn agent(&self) -> &AgentDefinition {
        &self.agent
    }
}

/// An immutable, canonically ordered set of [`Definition`]s with a revision fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionSet {
    definitions: Vec<Definition>,
    revision: String,
}

fn lp(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_be_bytes());
    hasher.update(bytes);
}

impl DefinitionSet {
    /// Sorts a copy by (id, revision); refuses an empty or oversized set and duplicates.
    pub fn new(
        values: impl IntoIterator<Item = Definition>,
    ) -> Result<DefinitionSet, DefinitionError> {
        let mut definitions: Vec<Definition> = values.into_iter().collect();
        if definitions.is_empty() || definitions.len() > MAX_DEFINITIONS {
            return Err(DefinitionError::Count);
        }
        definitions.sort_by(|a, b| (&a.id, &a.revision).cmp(&(&b.id, &b.revision)));
        if definitions
            .windows(2)
            .any(|w| (&w[0].id, &w[0].revision) == (&w[1].id, &w[1].revision))
        {
            return Err(DefinitionError::Duplicate);
        }
        let revision = fingerprint(&definitions);
        Ok(DefinitionSet {
            definitions,
            revision,
        })
    }

    /// A set from the composed graph's agent-definition beans: each bean is served under its
    /// agent name as id and `revision`.
    pub fn from_agents(
        agents: impl IntoIterator<Item = AgentDefinition>,
        revision: &str,
    ) -> Result<DefinitionSet, DefinitionError> {
        let values = agents
            .into_iter()
            .map(|agent| Definition::new(agent.name().to_owned(), revision, agent))
            .collect::<Result<Vec<_>, _>>()?;
        DefinitionSet::new(values)
    }

    /// The revision fingerprint: lowercase hex SHA-256 over u32be(count), then per
    /// definition lp(id), lp(revision), lp(agent name), lp(model), u32be(max_turns).
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// The definitions in canonical order (a copy).
    pub fn definitions(&self) -> Vec<Definition> {
        self.definitions.clone()
    }

    /// How many definitions the set holds.
    pub fn len(&self) -> usize {
        self.definitions.len()
    }

    /// Never true: a set holds at least one definition.
    pub fn is_empty(&self) -> bool {
        self.definitions.is_empty()
    }

    /// The definition with exactly this id and revision.
    pub fn resolve(&self, id: &str, revision: &str) -> Result<&Definition, DefinitionError> {
        self.definitions
            .binary_search_by(|d| (d.id.as_str(), d.revision.as_str()).cmp(&(id, revision)))
            .map(|index| &self.definitions[index])
            .map_err(|_| DefinitionError::NotFound)
    }

    /// Whether re-deriving the fingerprint gives the stored one (the run host checks this at
    /// construction).
    pub fn verify(&self) -> bool {
        fingerprint(&self.definitions) == self.revision
    }
}

fn fingerprint(definitions: &[Definition]) -> String {
    let mut hasher = Sha256::new();
    hasher.update((definitions.len() as u32).to_be_bytes());
    for d in definitions {
        lp(&mut hasher, d.id.as_bytes());
        lp(&mut hasher, d.revision.as_bytes());
        lp(&mut hasher, d.agent.name().as_bytes());
        lp(&mut hasher, d.agent.model().as_bytes());
        hasher.update(d.agent.max_turns().to_be_bytes());
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
