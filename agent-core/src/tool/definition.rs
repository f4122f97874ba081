//! The validated description of a tool: [`Definition`], its [`DefinitionBuilder`], the
//! [`DefinitionError`] for each rule, and the secret-free [`ToolFacts`].

use std::collections::BTreeSet;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::capability::{Capability, Effect, ReplaySafety};
use crate::ident;

/// The immutable, validated description of a tool: what a model is told about
/// it and what a host needs to decide whether and how to run it.
///
/// Build one with [`Definition::builder`]:
///
/// ```
/// use agent_core::tool::{Capability, Definition, Effect, ReplaySafety};
/// use serde_json::json;
///
/// let definition = Definition::builder("files.read", "Read a UTF-8 text file.")
///     .input_schema(json!({
///         "type": "object",
///         "properties": { "path": { "type": "string" } },
///         "required": ["path"],
///     }))
///     .effect(Effect::ReadOnly)
///     .replay_safety(ReplaySafety::Safe)
///     .capability(Capability::FilesystemRead)
///     .build()?;
///
/// assert_eq!(definition.name(), "files.read");
/// assert_eq!(definition.effect(), Effect::ReadOnly);
/// assert!(definition.capabilities().contains(&Capability::FilesystemRead));
/// # Ok::<(), agent_core::tool::DefinitionError>(())
/// ```
///
/// It serializes to a JSON object with the field names of its getters;
/// deserializing re-runs every check of [`DefinitionBuilder::build`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Definition {
    name: String,
    description: String,
    input_schema: Value,
    effect: Effect,
    replay_safety: ReplaySafety,
    capabilities: BTreeSet<Capability>,
}

impl Definition {
    /// Longest accepted tool name, in bytes.
    pub const MAX_NAME_BYTES: usize = ident::MAX_IDENTITY_BYTES;
    /// Longest accepted description, in bytes.
    pub const MAX_DESCRIPTION_BYTES: usize = 1024;
    /// Longest accepted input schema, in bytes of compact JSON.
    pub const MAX_INPUT_SCHEMA_BYTES: usize = 32 * 1024;

    /// Starts building a definition. [`DefinitionBuilder::effect`] and
    /// [`DefinitionBuilder::replay_safety`] must be set before
    /// [`DefinitionBuilder::build`]; everything else is optional.
    ///
    /// ```
    /// use agent_core::tool::{Definition, DefinitionError, Effect, ReplaySafety};
    ///
    /// // Mutating tools can at best be idempotent, never freely replayable.
    /// let error = Definition::builder("files.write", "Write a file.")
    ///     .effect(Effect::Mutating)
    ///     .replay_safety(ReplaySafety::Safe)
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(error, DefinitionError::MutatingSafe { .. }));
    /// ```
    pub fn builder(name: impl Into<String>, description: impl Into<String>) -> DefinitionBuilder {
        DefinitionBuilder {
            name: name.into(),
            description: description.into(),
            input_schema: default_input_schema(),
            effect: None,
            replay_safety: None,
            capabilities: Vec::new(),
        }
    }

    /// The tool's name; it follows the identity grammar (see
    /// [`DefinitionBuilder::build`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The description shown to the model, exactly as given.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema of the call arguments; always an object schema.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// Whether the tool can change state outside the agent.
    pub fn effect(&self) -> Effect {
        self.effect
    }

    /// Whether a call may be run again.
    pub fn replay_safety(&self) -> ReplaySafety {
        self.replay_safety
    }

    /// The declared capabilities, unique and in canonical order.
    pub fn capabilities(&self) -> &BTreeSet<Capability> {
        &self.capabilities
    }

    /// A stable fingerprint: lowercase hex SHA-256 over the name, description, compact
    /// schema JSON, effect, replay safety and the sorted capabilities. Capability order never
    /// matters; any other change to the definition changes it.
    ///
    /// ```
    /// use agent_core::tool::{Capability, Definition, Effect, ReplaySafety};
    ///
    /// let make = |caps: &[Capability]| {
    ///     Definition::builder("read", "Reads a file.")
    ///         .effect(Effect::ReadOnly)
    ///         .replay_safety(ReplaySafety::Safe)
    ///         .capabilities(caps.iter().copied())
    ///         .build()
    /// };
    /// let a = make(&[Capability::FilesystemRead, Capability::EnvironmentRead])?;
    /// let b = make(&[Capability::EnvironmentRead, Capability::FilesystemRead])?;
    /// assert_eq!(a.fingerprint(), b.fingerprint());
    /// assert_eq!(a.fingerprint().len(), 64);
    /// # Ok::<(), agent_core::tool::DefinitionError>(())
    /// ```
    pub fn fingerprint(&self) -> String {
        let schema = self.input_schema.to_string();
        let mut fields: Vec<&[u8]> = vec![
            self.name.as_bytes(),
            self.description.as_bytes(),
            schema.as_bytes(),
            self.effect.as_str().as_bytes(),
            self.replay_safety.as_str().as_bytes(),
        ];
        fields.extend(self.capabilities.iter().map(|c| c.as_str().as_bytes()));
        crate::hash::fields_hex(fields)
    }
}

/// The secret-free facts of a declared tool: enough to audit a call, or to decide after a
/// crash whether it may be replayed, without its arguments, schema or description.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFacts {
    /// The definition's [`fingerprint`](Definition::fingerprint).
    pub fingerprint: String,
    /// Whether the tool changes the world.
    pub effect: Effect,
    /// Whether it may run again.
    pub replay_safety: ReplaySafety,
    /// What it needs, in canonical order.
    pub capabilities: Vec<Capability>,
}

impl Definition {
    /// This definition's [`ToolFacts`].
    ///
    /// ```
    /// use agent_core::tool::{Definition, Effect, ReplaySafety};
    ///
    /// let read = Definition::builder("read", "Reads.").effect(Effect::ReadOnly).replay_safety(ReplaySafety::Safe).build()?;
    /// let facts = read.facts();
    /// assert_eq!((facts.effect, facts.fingerprint.len()), (Effect::ReadOnly, 64));
    /// # Ok::<(), agent_core::tool::DefinitionError>(())
    /// ```
    pub fn facts(&self) -> ToolFacts {
        ToolFacts {
            fingerprint: self.fingerprint(),
            effect: self.effect,
            replay_safety: self.replay_safety,
            capabilities: self.capabilities.iter().copied().collect(),
        }
    }
}

/// The schema used when a builder is given none: a tool without arguments.
/// `properties` is spelled out because some providers require it.
fn default_input_schema() -> Value {
    serde_json::json!({ "type": "object", "properties": {} })
}

/// Collects the parts of a [`Definition`]; see [`Definition::builder`].
///
/// The builder stores what it is given without judging it, so that
/// [`build`](Self::build) can report problems (including a capability given
/// twice) in one place.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct DefinitionBuilder {
    name: String,
    description: String,
    input_schema: Value,
    effect: Option<Effect>,
    replay_safety: Option<ReplaySafety>,
    capabilities: Vec<Capability>,
}

impl DefinitionBuilder {
    /// Sets the JSON Schema of the call arguments. Defaults to an object
    /// schema with no properties.
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }

    /// Sets the effect (required).
    pub fn effect(mut self, effect: Effect) -> Self {
        self.effect = Some(effect);
        self
    }

    /// Sets the replay safety (required).
    pub fn replay_safety(mut self, replay_safety: ReplaySafety) -> Self {
        self.replay_safety = Some(replay_safety);
        self
    }

    /// Declares one capability. Declaring the same one twice makes
    /// [`build`](Self::build) fail, as it usually signals a copy-paste slip.
    pub fn capability(mut self, capability: Capability) -> Self {
        self.capabilities.push(capability);
        self
    }

    /// Declares several capabilities, as if by repeated
    /// [`capability`](Self::capability).
    pub fn capabilities(mut self, capabilities: impl IntoIterator<Item = Capability>) -> Self {
        self.capabilities.extend(capabilities);
        self
    }

    /// Validates the parts and produces the [`Definition`].
    ///
    /// Rules, checked in this order (the first violation is reported):
    ///
    /// 1. The name is 1 to 128 bytes of ASCII, starts with `a-z`, continues
    ///    with `a-z`, `0-9`, `.`, `-` or `_`, never has two separators in a
    ///    row and does not end with one.
    /// 2. The description is not empty after trimming whitespace and is at
    ///    most [`Definition::MAX_DESCRIPTION_BYTES`] bytes.
    /// 3. The input schema is a JSON object whose `"type"` is `"object"`, and
    ///    its compact serialization is at most
    ///    [`Definition::MAX_INPUT_SCHEMA_BYTES`] bytes.
    /// 4. Effect and replay safety were both set.
    /// 5. [`Effect::ReadOnly`] requires [`ReplaySafety::Safe`];
    ///    [`Effect::Mutating`] forbids it.
    /// 6. No capability is declared twice.
    /// 7. A read-only tool declares none of `environment.write`,
    ///    `filesystem.write`, `network.access`, `process.execute`.
    pub fn build(self) -> Result<Definition, DefinitionError> {
        let Self {
            name,
            description,
            input_schema,
            effect,
            replay_safety,
            capabilities,
        } = self;

        if let Err(reason) = ident::validate_identity(&name) {
            return Err(DefinitionError::InvalidName {
                name,
                reason: reason.to_string(),
            });
        }

        if description.trim().is_empty() {
            return Err(DefinitionError::EmptyDescription { name, description });
        }
        if description.len() > Definition::MAX_DESCRIPTION_BYTES {
            return Err(DefinitionError::DescriptionTooLong {
                name,
                len: description.len(),
            });
        }

        check_input_schema(&name, &input_schema)?;

        let Some(effect) = effect else {
            return Err(DefinitionError::MissingEffect { name });
        };
        let Some(replay_safety) = replay_safety else {
            return Err(DefinitionError::MissingReplaySafety { name });
        };
        let capabilities = match check_shape(effect, replay_safety, capabilities) {
            Ok(unique) => unique,
            Err(violation) => return Err(violation.for_definition(name)),
        };

        Ok(Definition {
            name,
            description,
            input_schema,
            effect,
            replay_safety,
            capabilities,
        })
    }
}

/// A break of rules 5 to 7 of [`DefinitionBuilder::build`]: the rules a definition's
/// [`ToolFacts`] carry, so a decoded `tool.started` occurrence is held to them as well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShapeViolation {
    ReadOnlyNotSafe(ReplaySafety),
    MutatingSafe,
    DuplicateCapability(Capability),
    ReadOnlyCapability(Capability),
}

impl ShapeViolation {
    fn for_definition(self, name: String) -> DefinitionError {
        match self {
            ShapeViolation::ReadOnlyNotSafe(replay_safety) => DefinitionError::ReadOnlyNotSafe {
                name,
                replay_safety,
            },
            ShapeViolation::MutatingSafe => DefinitionError::MutatingSafe { name },
            ShapeViolation::DuplicateCapability(capability) => {
                DefinitionError::DuplicateCapability { name, capability }
            }
            ShapeViolation::ReadOnlyCapability(capability) => {
                DefinitionError::ReadOnlyCapability { name, capability }
            }
        }
    }
}

/// Checks rules 5 to 7 of [`DefinitionBuilder::build`], in that order, and returns the
/// capabilities as a set.
pub(crate) fn check_shape(
    effect: Effect,
    replay_safety: ReplaySafety,
    capabilities: impl IntoIterator<Item = Capability>,
) -> Result<BTreeSet<Capability>, ShapeViolation> {
    match (effect, replay_safety) {
        // Observing twice is indistinguishable from observing once.
        (Effect::ReadOnly, ReplaySafety::Safe) => {}
        (Effect::ReadOnly, replay_safety) => {
            return Err(ShapeViolation::ReadOnlyNotSafe(replay_safety));
        }
        // A repeated mutation is at best idempotent; claiming `safe` would let an engine
        // replay it blindly.
        (Effect::Mutating, ReplaySafety::Safe) => return Err(ShapeViolation::MutatingSafe),
        (Effect::Mutating, _) => {}
    }
    let mut unique = BTreeSet::new();
    for capability in capabilities {
        if !unique.insert(capability) {
            return Err(ShapeViolation::DuplicateCapability(capability));
        }
    }
    if effect == Effect::ReadOnly {
        // Iterating the set keeps the reported capability deterministic.
        if let Some(&capability) = unique.iter().find(|c| !c.allowed_for_read_only()) {
            return Err(ShapeViolation::ReadOnlyCapability(capability));
        }
    }
    Ok(unique)
}

fn check_input_schema(name: &str, schema: &Value) -> Result<(), DefinitionError> {
    let Value::Object(object) = schema else {
        return Err(DefinitionError::SchemaNotObject {
            name: name.to_owned(),
            found: json_kind(schema),
        });
    };
    if object.get("type").and_then(Value::as_str) != Some("object") {
        return Err(DefinitionError::SchemaTypeNotObject {
            name: name.to_owned(),
            found: object.get("type").cloned(),
        });
    }
    // `Value`'s `Display` is the compact serialization.
    let len = schema.to_string().len();
    if len > Definition::MAX_INPUT_SCHEMA_BYTES {
        return Err(DefinitionError::SchemaTooLarge {
            name: name.to_owned(),
            len,
        });
    }
    Ok(())
}

/// The kind of a JSON value with its article (`"a string"`, `"null"`), for messages
/// about arguments or schemas of the wrong kind.
///
/// ```
/// use agent_core::tool::json_kind;
/// assert_eq!(json_kind(&serde_json::json!([1])), "an array");
/// assert_eq!(json_kind(&serde_json::Value::Null), "null");
/// ```
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn describe_schema_type(found: &Option<Value>) -> String {
    match found {
        Some(value) => value.to_string(),
        None => "no \"type\"".to_owned(),
    }
}

/// Why [`DefinitionBuilder::build`] rejected a definition; one variant per
/// rule. Every variant carries the tool name, for reporting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DefinitionError {
    /// The name does not follow the identity grammar.
    #[error("invalid tool name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Which part of the grammar it breaks.
        reason: String,
    },
    /// The description is empty or only whitespace.
    #[error("tool `{name}`: description must not be empty, got {description:?}")]
    EmptyDescription {
        /// The tool name.
        name: String,
        /// The rejected description.
        description: String,
    },
    /// The description is longer than [`Definition::MAX_DESCRIPTION_BYTES`].
    #[error(
        "tool `{name}`: description is {len} bytes; at most {} are allowed",
        Definition::MAX_DESCRIPTION_BYTES
    )]
    DescriptionTooLong {
        /// The tool name.
        name: String,
        /// The description's length in bytes.
        len: usize,
    },
    /// The input schema is not a JSON object.
    #[error("tool `{name}`: input schema must be a JSON object, got {found}")]
    SchemaNotObject {
        /// The tool name.
        name: String,
        /// What was given instead, e.g. `"an array"`.
        found: &'static str,
    },
    /// The input schema's `"type"` is missing or not `"object"`.
    #[error(
        "tool `{name}`: input schema \"type\" must be \"object\", got {}",
        describe_schema_type(.found)
    )]
    SchemaTypeNotObject {
        /// The tool name.
        name: String,
        /// The `"type"` value found, if any.
        found: Option<Value>,
    },
    /// The input schema's compact JSON exceeds
    /// [`Definition::MAX_INPUT_SCHEMA_BYTES`].
    #[error(
        "tool `{name}`: input schema is {len} bytes as compact JSON; at most {} are allowed",
        Definition::MAX_INPUT_SCHEMA_BYTES
    )]
    SchemaTooLarge {
        /// The tool name.
        name: String,
        /// The schema's compact length in bytes.
        len: usize,
    },
    /// [`DefinitionBuilder::effect`] was never called.
    #[error("tool `{name}`: effect must be declared (read_only or mutating)")]
    MissingEffect {
        /// The tool name.
        name: String,
    },
    /// [`DefinitionBuilder::replay_safety`] was never called.
    #[error("tool `{name}`: replay safety must be declared (safe, idempotent or unsafe)")]
    MissingReplaySafety {
        /// The tool name.
        name: String,
    },
    /// A read-only tool declared a replay safety other than `safe`.
    #[error(
        "tool `{name}`: a read_only tool must have replay safety `safe`, not `{replay_safety}`"
    )]
    ReadOnlyNotSafe {
        /// The tool name.
        name: String,
        /// The rejected replay safety.
        replay_safety: ReplaySafety,
    },
    /// A mutating tool declared replay safety `safe`.
    #[error(
        "tool `{name}`: a mutating tool cannot have replay safety `safe`; use `idempotent` or `unsafe`"
    )]
    MutatingSafe {
        /// The tool name.
        name: String,
    },
    /// The same capability was declared more than once.
    #[error("tool `{name}`: capability `{capability}` is declared more than once")]
    DuplicateCapability {
        /// The tool name.
        name: String,
        /// The repeated capability.
        capability: Capability,
    },
    /// A read-only tool declared a capability that can change state.
    #[error("tool `{name}`: a read_only tool cannot declare capability `{capability}`")]
    ReadOnlyCapability {
        /// The tool name.
        name: String,
        /// The rejected capability.
        capability: Capability,
    },
}

/// The wire shape of a [`Definition`]; deserialized and then fed through the
/// builder so that untrusted input gets the same checks as code.
#[derive(Deserialize)]
struct DefinitionParts {
    name: String,
    description: String,
    // Missing means "no arguments", as with the builder; an explicit `null`
    // stays `null` and is rejected.
    #[serde(default = "default_input_schema")]
    input_schema: Value,
    effect: Option<Effect>,
    replay_safety: Option<ReplaySafety>,
    // A list, not a set, so duplicates reach `build` and are rejected.
    #[serde(default)]
    capabilities: Vec<Capability>,
}

impl<'de> Deserialize<'de> for Definition {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let parts = DefinitionParts::deserialize(deserializer)?;
        let mut builder = Definition::builder(parts.name, parts.description)
            .input_schema(parts.input_schema)
            .capabilities(parts.capabilities);
        if let Some(effect) = parts.effect {
            builder = builder.effect(effect);
        }
        if let Some(replay_safety) = parts.replay_safety {
            builder = builder.replay_safety(replay_safety);
        }
        builder.build().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::sample::select;
    use serde_json::json;
    use std::collections::HashSet;

    fn read_only() -> DefinitionBuilder {
        Definition::builder("files.read", "Read a file.")
            .effect(Effect::ReadOnly)
            .replay_safety(ReplaySafety::Safe)
    }

    fn read_only_named_t() -> Definition {
        Definition::builder("t", "d")
            .effect(Effect::ReadOnly)
            .replay_safety(ReplaySafety::Safe)
            .build()
            .unwrap()
    }

    fn mutating() -> DefinitionBuilder {
        Definition::builder("files.write", "Write a file.")
            .effect(Effect::Mutating)
            .replay_safety(ReplaySafety::Idempotent)
    }

    // ---- string enums ----

    // ---- Definition: accepted ----

    #[test]
    fn builds_with_all_parts_and_getters_return_them() {
        let schema = json!({ "type": "object", "properties": { "path": { "type": "string" } } });
        let definition = mutating()
            .input_schema(schema.clone())
            .capability(Capability::NetworkAccess)
            .capabilities([Capability::FilesystemWrite, Capability::EnvironmentRead])
            .build()
            .unwrap();
        assert_eq!(definition.name(), "files.write");
        assert_eq!(definition.description(), "Write a file.");
        assert_eq!(definition.input_schema(), &schema);
        assert_eq!(definition.effect(), Effect::Mutating);
        assert_eq!(definition.replay_safety(), ReplaySafety::Idempotent);
        let capabilities: Vec<_> = definition.capabilities().iter().copied().collect();
        assert_eq!(
            capabilities,
            [
                Capability::EnvironmentRead,
                Capability::FilesystemWrite,
                Capability::NetworkAccess
            ]
        );
    }

    #[test]
    fn default_input_schema_is_an_empty_object_schema() {
        let definition = read_only().build().unwrap();
        assert_eq!(
            definition.input_schema(),
            &json!({ "type": "object", "properties": {} })
        );
        assert!(definition.capabilities().is_empty());
    }

    #[test]
    fn accepts_minimal_object_schema() {
        let definition = read_only()
            .input_schema(json!({ "type": "object" }))
            .build()
            .unwrap();
        assert_eq!(definition.input_schema(), &json!({ "type": "object" }));
    }

    // ---- Definition: name ----

    #[test]
    fn accepts_names_in_the_grammar() {
        for name in ["a", "web-search", "files.read_all", &"x".repeat(128)] {
            let result = Definition::builder(name, "d")
                .effect(Effect::ReadOnly)
                .replay_safety(ReplaySafety::Safe)
                .build();
            assert!(result.is_ok(), "{name:?}: {result:?}");
        }
    }

    #[test]
    fn rejects_names_outside_the_grammar() {
        for name in [
            "",
            "Files",
            "1files",
            "files..read",
            "files.",
            "files read",
            &"x".repeat(129),
        ] {
            let error = Definition::builder(name, "d")
                .effect(Effect::ReadOnly)
                .replay_safety(ReplaySafety::Safe)
                .build()
                .unwrap_err();
            let DefinitionError::InvalidName {
                name: rejected,
                reason,
            } = &error
            else {
                panic!("{name:?}: expected InvalidName, got {error:?}");
            };
            assert_eq!(rejected, name);
            assert!(!reason.is_empty());
            assert!(error.to_string().contains(&format!("{name:?}")), "{error}");
        }
    }

    // ---- Definition: description ----

    #[test]
    fn rejects_empty_or_blank_description() {
        for description in ["", "   ", "\n\t "] {
            let error = Definition::builder("t", description)
                .effect(Effect::ReadOnly)
                .replay_safety(ReplaySafety::Safe)
                .build()
                .unwrap_err();
            assert_eq!(
                error,
                DefinitionError::EmptyDescription {
                    name: "t".into(),
                    description: description.into()
                }
            );
        }
    }

    #[test]
    fn description_limit_is_inclusive_and_in_bytes() {
        let at_limit = "d".repeat(Definition::MAX_DESCRIPTION_BYTES);
        let definition = Definition::builder("t", at_limit.clone())
            .effect(Effect::ReadOnly)
            .replay_safety(ReplaySafety::Safe)
            .build()
            .unwrap();
        // Stored verbatim, not trimmed.
        assert_eq!(definition.description(), at_limit);

        // 513 two-byte characters: 513 chars but 1026 bytes.
        let over = "é".repeat(513);
        let error = Definition::builder("t", over)
            .effect(Effect::ReadOnly)
            .replay_safety(ReplaySafety::Safe)
            .build()
            .unwrap_err();
        assert_eq!(
            error,
            DefinitionError::DescriptionTooLong {
                name: "t".into(),
                len: 1026
            }
        );
        assert!(error.to_string().contains("1026"), "{error}");
    }

    #[test]
    fn description_keeps_surrounding_whitespace() {
        let definition = Definition::builder("t", "  padded\n")
            .effect(Effect::ReadOnly)
            .replay_safety(ReplaySafety::Safe)
            .build()
            .unwrap();
        assert_eq!(definition.description(), "  padded\n");
    }

    // ---- Definition: input schema ----

    #[test]
    fn rejects_non_object_schema() {
        for (schema, found) in [
            (json!(null), "null"),
            (json!(true), "a boolean"),
            (json!(1), "a number"),
            (json!("object"), "a string"),
            (json!([{ "type": "object" }]), "an array"),
        ] {
            let error = read_only().input_schema(schema).build().unwrap_err();
            assert_eq!(
                error,
                DefinitionError::SchemaNotObject {
                    name: "files.read".into(),
                    found
                }
            );
        }
    }

    #[test]
    fn rejects_schema_whose_type_is_not_object() {
        for found in [
            None,
            Some(json!("array")),
            Some(json!(["object"])),
            Some(json!(null)),
        ] {
            let mut schema = json!({ "properties": {} });
            if let Some(found) = &found {
                schema["type"] = found.clone();
            }
            let error = read_only().input_schema(schema).build().unwrap_err();
            assert_eq!(
                error,
                DefinitionError::SchemaTypeNotObject {
                    name: "files.read".into(),
                    found: found.clone()
                }
            );
        }
        let message = read_only()
            .input_schema(json!({ "type": "array" }))
            .build()
            .unwrap_err()
            .to_string();
        assert!(message.contains("\"array\""), "{message}");
        let message = read_only()
            .input_schema(json!({}))
            .build()
            .unwrap_err()
            .to_string();
        assert!(message.contains("no \"type\""), "{message}");
    }

    /// An object schema whose compact JSON is exactly `len` bytes.
    fn schema_of_len(len: usize) -> Value {
        let overhead = json!({ "type": "object", "description": "" })
            .to_string()
            .len();
        let schema = json!({ "type": "object", "description": "x".repeat(len - overhead) });
        assert_eq!(schema.to_string().len(), len);
        schema
    }

    #[test]
    fn schema_size_limit_is_inclusive_and_compact() {
        let limit = Definition::MAX_INPUT_SCHEMA_BYTES;
        assert!(
            read_only()
                .input_schema(schema_of_len(limit))
                .build()
                .is_ok()
        );
        let error = read_only()
            .input_schema(schema_of_len(limit + 1))
            .build()
            .unwrap_err();
        assert_eq!(
            error,
            DefinitionError::SchemaTooLarge {
                name: "files.read".into(),
                len: limit + 1
            }
        );
        assert!(
            error.to_string().contains(&(limit + 1).to_string()),
            "{error}"
        );
    }

    // ---- Definition: effect and replay safety ----

    #[test]
    fn effect_is_required() {
        let error = Definition::builder("t", "d")
            .replay_safety(ReplaySafety::Safe)
            .build()
            .unwrap_err();
        assert_eq!(error, DefinitionError::MissingEffect { name: "t".into() });
    }

    #[test]
    fn replay_safety_is_required() {
        let error = Definition::builder("t", "d")
            .effect(Effect::Mutating)
            .build()
            .unwrap_err();
        assert_eq!(
            error,
            DefinitionError::MissingReplaySafety { name: "t".into() }
        );
    }

    #[test]
    fn read_only_requires_safe() {
        assert!(read_only().build().is_ok());
        for replay_safety in [ReplaySafety::Idempotent, ReplaySafety::Unsafe] {
            let error = read_only()
                .replay_safety(replay_safety)
                .build()
                .unwrap_err();
            assert_eq!(
                error,
                DefinitionError::ReadOnlyNotSafe {
                    name: "files.read".into(),
                    replay_safety
                }
            );
            assert!(
                error.to_string().contains(&format!("`{replay_safety}`")),
                "{error}"
            );
        }
    }

    #[test]
    fn mutating_forbids_safe() {
        for replay_safety in [ReplaySafety::Idempotent, ReplaySafety::Unsafe] {
            assert!(mutating().replay_safety(replay_safety).build().is_ok());
        }
        let error = mutating()
            .replay_safety(ReplaySafety::Safe)
            .build()
            .unwrap_err();
        assert_eq!(
            error,
            DefinitionError::MutatingSafe {
                name: "files.write".into()
            }
        );
        assert!(error.to_string().contains("`safe`"), "{error}");
    }

    // ---- Definition: capabilities ----

    #[test]
    fn read_only_accepts_reading_capabilities() {
        let definition = read_only()
            .capabilities([
                Capability::SecretsRead,
                Capability::FilesystemRead,
                Capability::EnvironmentRead,
            ])
            .build()
            .unwrap();
        assert_eq!(definition.capabilities().len(), 3);
    }

    #[test]
    fn read_only_rejects_state_changing_capabilities() {
        for capability in [
            Capability::FilesystemWrite,
            Capability::ProcessExecute,
            Capability::NetworkAccess,
            Capability::EnvironmentWrite,
        ] {
            let error = read_only()
                .capability(Capability::FilesystemRead)
                .capability(capability)
                .build()
                .unwrap_err();
            assert_eq!(
                error,
                DefinitionError::ReadOnlyCapability {
                    name: "files.read".into(),
                    capability
                }
            );
            assert!(error.to_string().contains(capability.as_str()), "{error}");
        }
    }

    #[test]
    fn mutating_accepts_every_capability() {
        let definition = mutating()
            .capabilities(Capability::ALL.iter().copied())
            .build()
            .unwrap();
        let capabilities: Vec<_> = definition.capabilities().iter().copied().collect();
        assert_eq!(capabilities, Capability::ALL);
    }

    #[test]
    fn rejects_duplicate_capability() {
        let error = mutating()
            .capability(Capability::NetworkAccess)
            .capability(Capability::FilesystemRead)
            .capability(Capability::NetworkAccess)
            .build()
            .unwrap_err();
        assert_eq!(
            error,
            DefinitionError::DuplicateCapability {
                name: "files.write".into(),
                capability: Capability::NetworkAccess
            }
        );
        assert!(error.to_string().contains("`network.access`"), "{error}");
        // Also through `capabilities`, and for read-only tools.
        assert!(
            read_only()
                .capabilities([Capability::SecretsRead, Capability::SecretsRead])
                .build()
                .is_err()
        );
    }

    /// The rules restated independently of `build`.
    fn allowed(effect: Effect, replay_safety: ReplaySafety, capabilities: &[Capability]) -> bool {
        let unique = capabilities.iter().collect::<HashSet<_>>().len() == capabilities.len();
        let consistent = match effect {
            Effect::ReadOnly => replay_safety == ReplaySafety::Safe,
            Effect::Mutating => replay_safety != ReplaySafety::Safe,
        };
        let permitted = effect == Effect::Mutating
            || capabilities.iter().all(|c| {
                matches!(
                    c.as_str(),
                    "filesystem.read" | "secrets.read" | "environment.read"
                )
            });
        unique && consistent && permitted
    }

    fn check_combination(effect: Effect, replay_safety: ReplaySafety, capabilities: &[Capability]) {
        let result = Definition::builder("t", "d")
            .effect(effect)
            .replay_safety(replay_safety)
            .capabilities(capabilities.iter().copied())
            .build();
        assert_eq!(
            result.is_ok(),
            allowed(effect, replay_safety, capabilities),
            "{effect} {replay_safety} {capabilities:?}: {result:?}"
        );
        if let Ok(definition) = result {
            let out: Vec<_> = definition
                .capabilities()
                .iter()
                .map(|c| c.as_str())
                .collect();
            assert!(
                out.windows(2).all(|pair| pair[0] < pair[1]),
                "not canonical: {out:?}"
            );
            let expected: HashSet<_> = capabilities.iter().map(|c| c.as_str()).collect();
            assert_eq!(out.iter().copied().collect::<HashSet<_>>(), expected);
        }
    }

    #[test]
    fn every_effect_replay_and_capability_subset() {
        // Exhaustive over unique subsets (2 x 3 x 2^7 = 768 cases).
        for &effect in Effect::ALL {
            for &replay_safety in ReplaySafety::ALL {
                for mask in 0u32..(1 << Capability::ALL.len()) {
                    let subset: Vec<_> = Capability::ALL
                        .iter()
                        .enumerate()
                        .filter(|(bit, _)| mask & (1 << bit) != 0)
                        .map(|(_, &c)| c)
                        .collect();
                    check_combination(effect, replay_safety, &subset);
                    let reversed: Vec<_> = subset.iter().rev().copied().collect();
                    check_combination(effect, replay_safety, &reversed);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn build_succeeds_exactly_when_rules_allow(
            effect in select(Effect::ALL),
            replay_safety in select(ReplaySafety::ALL),
            // Any order, with duplicates likely (up to 10 draws from 7 values).
            capabilities in proptest::collection::vec(select(Capability::ALL), 0..10),
        ) {
            check_combination(effect, replay_safety, &capabilities);
        }
    }

    // ---- Definition: serde ----

    #[test]
    fn serializes_with_canonical_capabilities() {
        let definition = mutating()
            .capabilities([Capability::ProcessExecute, Capability::FilesystemRead])
            .build()
            .unwrap();
        assert_eq!(
            serde_json::to_value(&definition).unwrap(),
            json!({
                "name": "files.write",
                "description": "Write a file.",
                "input_schema": { "type": "object", "properties": {} },
                "effect": "mutating",
                "replay_safety": "idempotent",
                "capabilities": ["filesystem.read", "process.execute"],
            })
        );
    }

    #[test]
    fn deserializing_round_trips_and_validates() {
        let definition = mutating()
            .capability(Capability::NetworkAccess)
            .build()
            .unwrap();
        let json = serde_json::to_value(&definition).unwrap();
        assert_eq!(
            serde_json::from_value::<Definition>(json).unwrap(),
            definition
        );

        // Capabilities and schema may be omitted, as with the builder.
        let valid = json!({
            "name": "t", "description": "d", "effect": "read_only", "replay_safety": "safe",
        });
        let parsed: Definition = serde_json::from_value(valid.clone()).unwrap();
        assert_eq!(parsed, read_only_named_t());
        let with = |key: &str, value: Value| {
            let mut invalid = valid.clone();
            invalid[key] = value;
            invalid
        };
        let mut without_effect = valid.clone();
        without_effect.as_object_mut().unwrap().remove("effect");
        for (invalid, needle) in [
            (with("name", json!("T")), "invalid tool name"),
            (without_effect, "effect must be declared"),
            (with("effect", json!("mutating")), "mutating tool cannot"),
            (with("input_schema", Value::Null), "got null"),
            (
                with("capabilities", json!(["secrets.read", "secrets.read"])),
                "more than once",
            ),
        ] {
            let error = serde_json::from_value::<Definition>(invalid)
                .unwrap_err()
                .to_string();
            assert!(error.contains(needle), "{error} lacks {needle:?}");
        }
    }
}
