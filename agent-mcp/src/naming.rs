//! The namespacing rule: a server tool `T` of server key `S` is offered to the model as
//! `n(S).n(T)`, where `n` lowercases ASCII letters, turns every character outside
//! `a-z 0-9 . - _` into `_`, collapses a run of separators into its first one and strips
//! separators from both ends; a segment that does not start with a letter gets a `t` in
//! front. A name longer than the grammar's 128 bytes keeps its first 111 bytes, then `-` and
//! 16 hex digits of the SHA-256 of the server tool name, so it stays deterministic and
//! distinct. The result always follows the kernel's name grammar (`agent_core::tool`
//! definition names).

use sha2::{Digest, Sha256};

/// Longest model-facing name, in bytes (the kernel's identity bound).
pub const MAX_NAME_BYTES: usize = agent_core::tool::Definition::MAX_NAME_BYTES;

/// Bytes kept of an over-long name before the hash suffix (`-` + 16 hex digits).
const KEPT_BYTES: usize = MAX_NAME_BYTES - 17;

/// Normalizes one segment; `None` when nothing of it is left.
pub fn normalize_segment(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut previous_separator = true; // drops leading separators
    for ch in raw.chars() {
        let ch = ch.to_ascii_lowercase();
        let mapped =
            if ch.is_ascii_lowercase() || ch.is_ascii_digit() || matches!(ch, '.' | '-' | '_') {
                ch
            } else {
                '_'
            };
        let separator = matches!(mapped, '.' | '-' | '_');
        if separator && previous_separator {
            continue;
        }
        previous_separator = separator;
        out.push(mapped);
    }
    while out.ends_with(['.', '-', '_']) {
        out.pop();
    }
    if out.is_empty() {
        return None;
    }
    if !out.starts_with(|c: char| c.is_ascii_lowercase()) {
        out.insert(0, 't');
    }
    Some(out)
}

/// The model-facing name of server tool `tool` in `namespace` (already normalized).
pub fn model_name(namespace: &str, tool: &str) -> String {
    let segment = normalize_segment(tool).unwrap_or_else(|| "tool".to_owned());
    let name = format!("{namespace}.{segment}");
    if name.len() <= MAX_NAME_BYTES {
        return name;
    }
    let digest = Sha256::digest(tool.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    // ASCII only, so any byte index is a char boundary.
    let mut kept = name[..KEPT_BYTES].to_owned();
    while kept.ends_with(['.', '-', '_']) {
        kept.pop();
    }
    format!("{kept}-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::tool::{Definition, Effect, ReplaySafety};

    fn valid(name: &str) -> bool {
        Definition::builder(name, "d")
            .effect(Effect::ReadOnly)
            .replay_safety(ReplaySafety::Safe)
            .build()
            .is_ok()
    }

    #[test]
    fn names_follow_the_rule() {
        assert_eq!(
            model_name("memory", "create_entities"),
            "memory.create_entities"
        );
        assert_eq!(model_name("everything", "get-sum"), "everything.get-sum");
        assert_eq!(model_name("x", "Get Sum!!"), "x.get_sum");
        assert_eq!(model_name("x", "__9lives"), "x.t9lives");
        assert_eq!(model_name("x", "!!!"), "x.tool");
        assert_eq!(normalize_segment("My Server"), Some("my_server".to_owned()));
        assert_eq!(normalize_segment("--"), None);
    }

    #[test]
    fn every_name_is_valid_and_long_ones_stay_distinct() {
        for raw in ["a", "A__b", "ü", "x..y", "1", "é-é", "a-", &"z".repeat(200)] {
            let name = model_name("srv", raw);
            assert!(valid(&name), "{raw:?} -> {name:?}");
        }
        let at_bound = "a".repeat(MAX_NAME_BYTES - 4);
        assert_eq!(model_name("srv", &at_bound).len(), MAX_NAME_BYTES);
        assert_eq!(model_name("srv", &at_bound), format!("srv.{at_bound}"));
        let past = |c: char| format!("{}{c}", "a".repeat(MAX_NAME_BYTES));
        let (a, b) = (model_name("srv", &past('x')), model_name("srv", &past('y')));
        assert_ne!(a, b);
        assert_eq!(a.len(), MAX_NAME_BYTES);
        assert!(valid(&a) && valid(&b));
    }
}
