//! Definition sets: canonical, immutable and resolved exactly (docs/daemon.md, "Definitions").

use agent_core::agent::AgentDefinition;
use agent_daemon::definition::{Definition, DefinitionError, DefinitionSet, MAX_DEFINITIONS};

fn def(id: &str, revision: &str, model: &str, turns: u32) -> Definition {
    Definition::new(
        id,
        revision,
        AgentDefinition::new("agent", model, turns).unwrap(),
    )
    .unwrap()
}

#[test]
fn a_set_is_canonical_fingerprinted_and_exact() {
    let a = DefinitionSet::new([
        def("b", "1", "m", 3),
        def("a", "2", "m", 3),
        def("a", "1", "m", 3),
    ])
    .unwrap();
    let b = DefinitionSet::new([
        def("a", "1", "m", 3),
        def("b", "1", "m", 3),
        def("a", "2", "m", 3),
    ])
    .unwrap();
    let order: Vec<(String, String)> = a
        .definitions()
        .iter()
        .map(|d| (d.id().to_owned(), d.revision().to_owned()))
        .collect();
    assert_eq!(
        order,
        [
            ("a".into(), "1".into()),
            ("a".into(), "2".into()),
            ("b".into(), "1".into())
        ]
    );
    assert_eq!(
        a.revision(),
        b.revision(),
        "the fingerprint ignores input order"
    );
    assert_eq!(a.revision().len(), 64);
    assert!(
        a.revision()
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert!(a.verify());
    // Every hashed field changes the fingerprint.
    for changed in [
        DefinitionSet::new([
            def("b", "1", "m", 3),
            def("a", "2", "m", 3),
            def("a", "1", "m", 4),
        ]),
        DefinitionSet::new([
            def("b", "1", "m", 3),
            def("a", "2", "m", 3),
            def("a", "1", "n", 3),
        ]),
        DefinitionSet::new([
            def("b", "1", "m", 3),
            def("a", "2", "m", 3),
            def("a", "0", "m", 3),
        ]),
        DefinitionSet::new([def("b", "1", "m", 3), def("a", "2", "m", 3)]),
    ] {
        assert_ne!(changed.unwrap().revision(), a.revision());
    }
    // Exact resolution only.
    assert_eq!(a.resolve("a", "2").unwrap().revision(), "2");
    assert_eq!(a.resolve("a", "3").unwrap_err(), DefinitionError::NotFound);
    assert_eq!(a.resolve("A", "1").unwrap_err(), DefinitionError::NotFound);
    assert_eq!(a.resolve("a", "1 ").unwrap_err(), DefinitionError::NotFound);
    // The copy is a copy.
    let mut copy = a.definitions();
    copy.clear();
    assert_eq!(a.len(), 3);
}

#[test]
fn sets_and_definitions_are_validated_at_and_past_their_bounds() {
    assert_eq!(DefinitionSet::new([]).unwrap_err(), DefinitionError::Count);
    assert_eq!(
        DefinitionSet::new([def("a", "1", "m", 3), def("a", "1", "n", 2)]).unwrap_err(),
        DefinitionError::Duplicate
    );
    let at = (0..MAX_DEFINITIONS).map(|i| def(&format!("d{i}"), "1", "m", 1));
    assert_eq!(DefinitionSet::new(at).unwrap().len(), MAX_DEFINITIONS);
    let past = (0..=MAX_DEFINITIONS).map(|i| def(&format!("d{i}"), "1", "m", 1));
    assert_eq!(
        DefinitionSet::new(past).unwrap_err(),
        DefinitionError::Count
    );
    let agent = AgentDefinition::new("agent", "m", 1).unwrap();
    for (id, revision) in [
        ("", "1"),
        ("a", ""),
        (" a", "1"),
        ("a", "1\n"),
        (&*"x".repeat(129), "1"),
    ] {
        assert_eq!(
            Definition::new(id, revision, agent.clone()).unwrap_err(),
            DefinitionError::InvalidToken
        );
    }
    let from_beans = DefinitionSet::from_agents([agent.clone()], "r1").unwrap();
    assert_eq!(from_beans.resolve("agent", "r1").unwrap().agent(), &agent);
}
