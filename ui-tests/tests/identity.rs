//! The identity grammar is written twice: `agent-compose` checks bean names, aliases and
//! qualifiers at compile time, `agent-core` checks tool names at run time (the macro crate
//! cannot depend on the kernel). This crate depends on both, so here one case table is run
//! through both checkers and they must agree on every case.

use agent_core::tool::{Definition, Effect, ReplaySafety};

/// `(input, accepted)`: the documented examples and one or more cases per rule.
const CASES: &[(&str, bool)] = &[
    ("read", true),
    ("a", true),
    ("z9", true),
    ("official.default", true),
    ("fallback-only", true),
    ("snake_case_name", true),
    ("a1_b2", true),
    ("x.y-z_w", true),
    ("v2.tool-1_x", true),
    // Empty.
    ("", false),
    // Must start with `a-z`.
    ("Read", false),
    ("1a", false),
    (".a", false),
    ("-a", false),
    ("_a", false),
    ("é", false),
    (" a", false),
    // Only `a-z`, `0-9`, `.`, `-`, `_`.
    ("aB", false),
    ("read tool", false),
    ("a/b", false),
    ("ab:c", false),
    ("aé", false),
    ("a\n", false),
    // No two separators in a row.
    ("a..b", false),
    ("a-_b", false),
    ("ab_.c", false),
    // No trailing separator.
    ("a-", false),
    ("a.", false),
    ("a_", false),
];

/// Whether agent-core accepts `name` as a tool name (every other part is valid).
fn runtime_accepts(name: &str) -> bool {
    Definition::builder(name, "A tool.")
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .build()
        .is_ok()
}

#[test]
fn both_checkers_agree_on_one_case_table() {
    let max = agent_compose::ident::MAX_LEN;
    let long_ok = "a".repeat(max);
    let too_long = "a".repeat(max + 1);
    let cases = CASES
        .iter()
        .copied()
        .chain([(long_ok.as_str(), true), (too_long.as_str(), false)]);
    for (input, accepted) in cases {
        assert_eq!(
            agent_compose::ident::check(input).is_ok(),
            accepted,
            "agent-compose on {input:?}"
        );
        assert_eq!(runtime_accepts(input), accepted, "agent-core on {input:?}");
    }
}

#[test]
fn both_limits_are_one_number() {
    assert_eq!(agent_compose::ident::MAX_LEN, Definition::MAX_NAME_BYTES);
}
