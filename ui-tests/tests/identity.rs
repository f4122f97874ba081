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

/// The safety rules are written twice too: `agent-compose` checks a typed tool's effect,
/// replay safety and capabilities at compile time, `DefinitionBuilder::build` at run time.
/// Every effect, replay safety and subset of capabilities gets the same verdict from both.
#[test]
fn typed_tool_safety_rules_agree_with_the_definition_builder() {
    use agent_compose::attr::typed::{CAPABILITIES, safety_errors};
    use agent_core::tool::Capability;
    let known: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
    let compiled: Vec<&str> = CAPABILITIES.iter().map(|(s, _, _)| *s).collect();
    assert_eq!(known, compiled, "the capability tables differ");
    for (text, variant, _) in CAPABILITIES {
        let parsed: Capability = text.parse().unwrap();
        assert_eq!(format!("{parsed:?}"), variant);
    }
    let mut checked = 0;
    for effect in Effect::ALL {
        for replay in ReplaySafety::ALL {
            for mask in 0..(1u32 << Capability::ALL.len()) {
                let chosen: Vec<Capability> = Capability::ALL
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, c)| *c)
                    .collect();
                let runtime = Definition::builder("t", "A tool.")
                    .effect(*effect)
                    .replay_safety(*replay)
                    .capabilities(chosen.iter().copied())
                    .build();
                let words: Vec<&str> = chosen.iter().map(|c| c.as_str()).collect();
                let errors = safety_errors(effect.as_str(), replay.as_str(), &words);
                assert_eq!(
                    runtime.is_ok(),
                    errors.is_empty(),
                    "{effect:?} {replay:?} {words:?}: {runtime:?} vs {errors:?}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 2 * 3 * 128);
}
