//! From an MCP tool to a kernel [`Definition`]: the annotation table, trust that only
//! tightens, and operator overrides as the only relaxation.
//!
//! | hints (trusted server) | effect | replay | capabilities |
//! | --- | --- | --- | --- |
//! | `readOnlyHint`, `openWorldHint: false` | `read_only` | `safe` | server's |
//! | `readOnlyHint`, open world | `mutating` | `idempotent` | + `network.access` |
//! | not read-only, `idempotentHint` | `mutating` | `idempotent` | + `network.access` if open world |
//! | not read-only, not idempotent, or no annotations | `mutating` | `unsafe` | + `network.access` if open world |
//!
//! The kernel forbids `network.access` (and the write capabilities) on a read-only tool,
//! because reaching outside is a way to change the world; such a tool is therefore
//! `mutating`/`idempotent` (a read repeated changes nothing more). `readOnlyHint` together
//! with an explicit `destructiveHint: true` contradicts itself and is read as not
//! read-only. An untrusted server's hints could only move a tool toward the worst case,
//! which the spec's defaults already are, so every tool of an untrusted server is
//! `mutating`, `unsafe`, `network.access` plus the server's configured capabilities. An
//! override pinned to the tool's fingerprint replaces all three; one pinned to another
//! fingerprint is ignored (the tool changed since the operator looked at it).

use std::collections::BTreeSet;

use agent_core::tool::{Capability, Definition, DefinitionError, Effect, ReplaySafety};
use rmcp::model::{Tool as McpTool, ToolAnnotations};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::{ServerConfig, ToolOverride};

/// Where a tool's effect, replay safety and capabilities came from, for audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// An operator override pinned to this tool's fingerprint.
    Operator,
    /// The hints of a trusted server.
    Hint,
    /// The worst case: the server is not trusted, so its hints were not used.
    Untrusted,
}

impl Basis {
    /// The serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Operator => "operator",
            Basis::Hint => "hint",
            Basis::Untrusted => "untrusted",
        }
    }
}

/// The kernel metadata chosen for one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The effect.
    pub effect: Effect,
    /// The replay safety.
    pub replay: ReplaySafety,
    /// The capabilities, sorted and unique.
    pub capabilities: Vec<Capability>,
    /// Where they came from.
    pub basis: Basis,
    /// Whether the server said (or left unsaid, which means yes) the tool may destroy data;
    /// advisory only, for guards and display.
    pub destructive: bool,
    /// An override existed for this tool name but was pinned to another fingerprint.
    pub stale_override: bool,
}

/// The annotation hints after the spec's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// `readOnlyHint` (default false).
    pub read_only: bool,
    /// `destructiveHint` as sent (the default, true, applies when `None`).
    pub destructive: Option<bool>,
    /// `idempotentHint` (default false).
    pub idempotent: bool,
    /// `openWorldHint` (default true).
    pub open_world: bool,
}

impl Hints {
    /// The hints of `annotations`, with the spec's defaults for absent fields.
    pub fn of(annotations: Option<&ToolAnnotations>) -> Self {
        let get = |f: fn(&ToolAnnotations) -> Option<bool>| annotations.and_then(f);
        Hints {
            read_only: get(|a| a.read_only_hint).unwrap_or(false),
            destructive: get(|a| a.destructive_hint),
            idempotent: get(|a| a.idempotent_hint).unwrap_or(false),
            open_world: get(|a| a.open_world_hint).unwrap_or(true),
        }
    }
}

/// Maps one tool. `fingerprint` is [`server_tool_fingerprint`] of the tool.
pub fn map(
    hints: Hints,
    trusted: bool,
    server_capabilities: &[Capability],
    override_: Option<&ToolOverride>,
    fingerprint: &str,
) -> Mapping {
    let destructive = hints.destructive.unwrap_or(true);
    let stale_override = override_.is_some_and(|o| o.fingerprint != fingerprint);
    if let Some(o) = override_.filter(|o| o.fingerprint == fingerprint) {
        return Mapping {
            effect: o.effect,
            replay: o.replay,
            capabilities: o.capabilities.clone(),
            basis: Basis::Operator,
            destructive,
            stale_override,
        };
    }
    let mut capabilities: BTreeSet<Capability> = server_capabilities.iter().copied().collect();
    let (effect, replay, basis) = if !trusted {
        capabilities.insert(Capability::NetworkAccess);
        (Effect::Mutating, ReplaySafety::Unsafe, Basis::Untrusted)
    } else {
        if hints.open_world {
            capabilities.insert(Capability::NetworkAccess);
        }
        let contradicted = hints.read_only && hints.destructive == Some(true);
        let read_only = hints.read_only && !contradicted;
        let read_only_allowed = capabilities.iter().all(|c| {
            matches!(
                c,
                Capability::EnvironmentRead | Capability::FilesystemRead | Capability::SecretsRead
            )
        });
        if read_only && read_only_allowed {
            (Effect::ReadOnly, ReplaySafety::Safe, Basis::Hint)
        } else if read_only || hints.idempotent {
            (Effect::Mutating, ReplaySafety::Idempotent, Basis::Hint)
        } else {
            (Effect::Mutating, ReplaySafety::Unsafe, Basis::Hint)
        }
    };
    Mapping {
        effect,
        replay,
        capabilities: capabilities.into_iter().collect(),
        basis,
        destructive,
        stale_override,
    }
}

/// The fingerprint an operator pins an override to: lowercase hex SHA-256 over the server
/// tool's name, description, compact input schema and compact annotations (length-prefixed
/// fields), so any change the server makes to what it tells us changes it.
pub fn server_tool_fingerprint(tool: &McpTool) -> String {
    let schema = Value::Object((*tool.input_schema).clone()).to_string();
    let annotations = tool
        .annotations
        .as_ref()
        .and_then(|a| serde_json::to_string(a).ok())
        .unwrap_or_default();
    let mut hasher = Sha256::new();
    for field in [
        tool.name.as_bytes(),
        tool.description.as_deref().unwrap_or("").as_bytes(),
        schema.as_bytes(),
        annotations.as_bytes(),
    ] {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A description the kernel accepts: the server's, cut to the kernel's bound on a character
/// boundary with `…` when longer, or a stated default when empty.
pub fn bounded_description(server: &str, tool: &McpTool) -> String {
    let raw = tool.description.as_deref().unwrap_or("").trim();
    if raw.is_empty() {
        return format!("Tool `{}` of MCP server `{server}`.", tool.name);
    }
    let max = Definition::MAX_DESCRIPTION_BYTES;
    if raw.len() <= max {
        return raw.to_owned();
    }
    let mut end = max - '…'.len_utf8();
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &raw[..end])
}

/// Builds the kernel definition of `tool` of `server` under `name`.
pub fn definition(
    server: &ServerConfig,
    name: &str,
    tool: &McpTool,
    mapping: &Mapping,
) -> Result<Definition, DefinitionError> {
    Definition::builder(name, bounded_description(&server.key, tool))
        .input_schema(Value::Object((*tool.input_schema).clone()))
        .effect(mapping.effect)
        .replay_safety(mapping.replay)
        .capabilities(mapping.capabilities.iter().copied())
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Capability::*;
    use Effect::*;
    use ReplaySafety::*;

    fn hints(
        read_only: Option<bool>,
        destructive: Option<bool>,
        idempotent: Option<bool>,
        open: Option<bool>,
    ) -> Hints {
        let annotations: ToolAnnotations = serde_json::from_value(serde_json::json!({
            "readOnlyHint": read_only, "destructiveHint": destructive,
            "idempotentHint": idempotent, "openWorldHint": open,
        }))
        .unwrap();
        Hints::of(Some(&annotations))
    }

    /// The whole table: hints × trust × server capabilities × override.
    #[test]
    fn mapping_table() {
        let fp = "a".repeat(64);
        let ro_override = ToolOverride {
            fingerprint: fp.clone(),
            effect: ReadOnly,
            replay: Safe,
            capabilities: vec![],
        };
        let stale = ToolOverride {
            fingerprint: "b".repeat(64),
            ..ro_override.clone()
        };
        let none = Hints::of(None);
        let t = Some(true);
        let f = Some(false);
        #[rustfmt::skip]
        type Expected = (Effect, ReplaySafety, Vec<Capability>, Basis);
        type Row<'a> = (
            Hints,
            bool,
            Vec<Capability>,
            Option<&'a ToolOverride>,
            Expected,
        );
        let rows: Vec<Row<'_>> = vec![
            // No annotations: the worst case, trusted or not.
            (
                none,
                false,
                vec![],
                None,
                (Mutating, Unsafe, vec![NetworkAccess], Basis::Untrusted),
            ),
            (
                none,
                true,
                vec![],
                None,
                (Mutating, Unsafe, vec![NetworkAccess], Basis::Hint),
            ),
            // Read-only, closed world.
            (
                hints(t, None, t, f),
                true,
                vec![],
                None,
                (ReadOnly, Safe, vec![], Basis::Hint),
            ),
            (
                hints(t, None, t, f),
                false,
                vec![],
                None,
                (Mutating, Unsafe, vec![NetworkAccess], Basis::Untrusted),
            ),
            (
                hints(t, None, None, f),
                true,
                vec![FilesystemRead],
                None,
                (ReadOnly, Safe, vec![FilesystemRead], Basis::Hint),
            ),
            // Read-only but open world, or with a write capability: idempotent mutation.
            (
                hints(t, None, None, None),
                true,
                vec![],
                None,
                (Mutating, Idempotent, vec![NetworkAccess], Basis::Hint),
            ),
            (
                hints(t, None, None, f),
                true,
                vec![ProcessExecute],
                None,
                (Mutating, Idempotent, vec![ProcessExecute], Basis::Hint),
            ),
            // Contradiction: read-only and destructive.
            (
                hints(t, t, f, f),
                true,
                vec![],
                None,
                (Mutating, Unsafe, vec![], Basis::Hint),
            ),
            (
                hints(t, t, t, f),
                true,
                vec![],
                None,
                (Mutating, Idempotent, vec![], Basis::Hint),
            ),
            // Not read-only.
            (
                hints(f, t, t, f),
                true,
                vec![],
                None,
                (Mutating, Idempotent, vec![], Basis::Hint),
            ),
            (
                hints(f, f, f, f),
                true,
                vec![],
                None,
                (Mutating, Unsafe, vec![], Basis::Hint),
            ),
            (
                hints(f, f, None, None),
                true,
                vec![],
                None,
                (Mutating, Unsafe, vec![NetworkAccess], Basis::Hint),
            ),
            (
                hints(f, None, t, None),
                false,
                vec![FilesystemWrite],
                None,
                (
                    Mutating,
                    Unsafe,
                    vec![FilesystemWrite, NetworkAccess],
                    Basis::Untrusted,
                ),
            ),
            // Overrides: the only relaxation, and only when pinned to this fingerprint.
            (
                none,
                false,
                vec![],
                Some(&ro_override),
                (ReadOnly, Safe, vec![], Basis::Operator),
            ),
            (
                none,
                false,
                vec![],
                Some(&stale),
                (Mutating, Unsafe, vec![NetworkAccess], Basis::Untrusted),
            ),
            (
                hints(t, None, t, f),
                true,
                vec![],
                Some(&stale),
                (ReadOnly, Safe, vec![], Basis::Hint),
            ),
        ];
        for (i, (hints, trusted, caps, o, (effect, replay, capabilities, basis))) in
            rows.into_iter().enumerate()
        {
            let m = map(hints, trusted, &caps, o, &fp);
            assert_eq!(
                (m.effect, m.replay, &m.capabilities, m.basis),
                (effect, replay, &capabilities, basis),
                "row {i}"
            );
            assert_eq!(
                m.stale_override,
                o.is_some_and(|o| o.fingerprint != fp),
                "row {i}"
            );
            // Every mapped triple is one the kernel accepts.
            Definition::builder("x", "d")
                .effect(m.effect)
                .replay_safety(m.replay)
                .capabilities(m.capabilities)
                .build()
                .unwrap();
        }
    }

    /// Trust only tightens: for any hints, the untrusted mapping is at least as strict as
    /// the trusted one on every axis.
    #[test]
    fn untrusted_is_never_looser_than_trusted() {
        let options = [None, Some(false), Some(true)];
        let rank = |r: ReplaySafety| match r {
            Safe => 0,
            Idempotent => 1,
            Unsafe => 2,
        };
        for a in options {
            for b in options {
                for c in options {
                    for d in options {
                        let h = hints(a, b, c, d);
                        let trusted = map(h, true, &[], None, "");
                        let untrusted = map(h, false, &[], None, "");
                        assert!(untrusted.effect == Mutating || trusted.effect == ReadOnly);
                        assert!(rank(untrusted.replay) >= rank(trusted.replay));
                        assert!(
                            trusted
                                .capabilities
                                .iter()
                                .all(|c| untrusted.capabilities.contains(c))
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn descriptions_are_bounded_on_a_char_boundary() {
        let tool = |d: &str| -> McpTool {
            serde_json::from_value(serde_json::json!({"name": "t", "description": d, "inputSchema": {"type": "object"}})).unwrap()
        };
        let max = Definition::MAX_DESCRIPTION_BYTES;
        assert_eq!(bounded_description("s", &tool(&"a".repeat(max))).len(), max);
        let long = bounded_description("s", &tool(&"é".repeat(max)));
        assert!(long.len() <= max && long.ends_with('…'));
        assert_eq!(
            bounded_description("s", &tool(" ")),
            "Tool `t` of MCP server `s`."
        );
    }

    #[test]
    fn fingerprints_change_with_annotations() {
        let tool = |ro: bool| -> McpTool {
            serde_json::from_value(serde_json::json!({"name": "t", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": ro}})).unwrap()
        };
        assert_ne!(
            server_tool_fingerprint(&tool(true)),
            server_tool_fingerprint(&tool(false))
        );
        assert_eq!(server_tool_fingerprint(&tool(true)).len(), 64);
    }
}
