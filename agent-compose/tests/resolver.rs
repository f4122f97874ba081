//! The selection rules of docs/architecture.md ("Resolution"), one test per rule, plus properties that
//! hold for any graph.

mod support;

use agent_compose::__testing::error_codes;
use agent_compose::graph::{Binding, resolve};
use proptest::prelude::*;
use support::{BeanExt, bean};

fn names(beans: &[agent_compose::transport::descriptor::Descriptor], ids: &[usize]) -> Vec<String> {
    ids.iter().map(|&i| beans[i].name.value()).collect()
}

fn codes(beans: &[agent_compose::transport::descriptor::Descriptor]) -> Vec<String> {
    error_codes(&resolve(beans, "app").expect_err("resolution fails"))
}

fn messages(beans: &[agent_compose::transport::descriptor::Descriptor]) -> Vec<String> {
    resolve(beans, "app")
        .expect_err("resolution fails")
        .into_iter()
        .map(|e| e.to_string())
        .collect()
}

fn single(beans: &[agent_compose::transport::descriptor::Descriptor], consumer: usize) -> String {
    let r = resolve(beans, "app").unwrap_or_else(|e| panic!("{e}"));
    match &r.bindings[consumer][0] {
        Binding::Single(i) | Binding::Optional(Some(i)) => beans[*i].name.value(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn one_candidate_is_selected() {
    let beans = [
        bean("log", "Arc<Log>"),
        bean("app", "App").param("log", "Arc<Log>"),
    ];
    assert_eq!(single(&beans, 1), "log");
}

#[test]
fn keys_ignore_spelling_of_std_paths() {
    let beans = [
        bean("log", "std::sync::Arc<Log>"),
        bean("app", "App").param("x", "Arc<crate::Log>"),
    ];
    assert_eq!(single(&beans, 1), "log");
}

#[test]
fn qualifiers_match_name_alias_or_qualifier_and_all_must_match() {
    let beans = [
        bean("read", "Tool").alias("inspect").qualifier("coding"),
        bean("write", "Tool").alias("save").qualifier("coding"),
        bean("a", "A").qualified_param("t", "Tool", &["inspect"]),
        bean("b", "B").qualified_param("t", "Tool", &["save", "coding"]),
        bean("c", "C").qualified_param("t", "Tool", &["read"]),
    ];
    assert_eq!(single(&beans, 2), "read");
    assert_eq!(single(&beans, 3), "write");
    assert_eq!(single(&beans, 4), "read");
    let both = [
        beans[0].clone(),
        beans[1].clone(),
        bean("d", "D").qualified_param("t", "Tool", &["coding"]),
    ];
    assert_eq!(codes(&both), ["ambiguous-dependency"]);
    let none = [
        beans[0].clone(),
        bean("d", "D").qualified_param("t", "Tool", &["coding", "save"]),
    ];
    assert_eq!(codes(&none), ["missing-dependency"]);
}

#[test]
fn fallbacks_yield_to_normal_beans_and_stand_alone() {
    let beans = [
        bean("fallback", "P").fallback(),
        bean("alpha", "P"),
        bean("beta", "P").primary(),
        bean("app", "App").param("provider", "P"),
    ];
    assert_eq!(single(&beans, 3), "beta");
    let only = [
        bean("fallback-only", "S").fallback(),
        bean("app", "App").param("s", "S"),
    ];
    assert_eq!(single(&only, 1), "fallback-only");
    let replaced = [
        bean("d", "S").fallback(),
        bean("n", "S"),
        bean("app", "App").param("s", "S"),
    ];
    assert_eq!(single(&replaced, 2), "n");
    let two_fallbacks = [
        bean("d1", "S").fallback(),
        bean("d2", "S").fallback(),
        bean("app", "App").param("s", "S"),
    ];
    assert_eq!(codes(&two_fallbacks), ["ambiguous-dependency"]);
}

#[test]
fn a_primary_fallback_still_yields_to_a_normal_bean() {
    // Fallback suppression (step 4) runs before primary (step 5).
    let beans = [
        bean("d", "S").fallback().primary(),
        bean("n", "S"),
        bean("app", "App").param("s", "S"),
    ];
    assert_eq!(single(&beans, 2), "n");
}

#[test]
fn two_primaries_are_ambiguous_and_every_candidate_is_named() {
    let beans = [
        bean("first", "T").primary(),
        bean("second", "T").primary(),
        bean("app", "App").param("t", "T"),
    ];
    let m = messages(&beans);
    assert_eq!(m.len(), 1);
    assert!(m[0].starts_with("[ambiguous-dependency] bean `app` (m::app at src/app.rs:1:1) needs one `T` for parameter `t`"), "{}", m[0]);
    assert!(
        m[0].contains("- `first` (m::first at src/first.rs:1:1) [primary]"),
        "{}",
        m[0]
    );
    assert!(
        m[0].contains("- `second` (m::second at src/second.rs:1:1) [primary]"),
        "{}",
        m[0]
    );
}

#[test]
fn ambiguity_help_fits_the_situation() {
    let primaries = [
        bean("p1", "T").primary(),
        bean("p2", "T").primary(),
        bean("app", "App").param("t", "T"),
    ];
    assert!(messages(&primaries)[0].contains("help: keep `primary` on one of them"));
    let fallbacks = [
        bean("f1", "T").fallback(),
        bean("f2", "T").fallback(),
        bean("app", "App").param("t", "T"),
    ];
    let m = messages(&fallbacks);
    assert!(m[0].contains("help: only fallbacks are left"), "{}", m[0]);
    assert!(m[0].contains("[fallback]"), "{}", m[0]);
}

#[test]
fn parameter_name_breaks_ties_by_name_or_alias() {
    let beans = [
        bean("one", "T"),
        bean("two", "T").alias("chosen"),
        bean("app", "App").param("chosen", "T"),
    ];
    assert_eq!(single(&beans, 2), "two");
    let by_name = [
        bean("one", "T"),
        bean("two", "T"),
        bean("app", "App").param("one", "T"),
    ];
    assert_eq!(single(&by_name, 2), "one");
    let dashed = [
        bean("fallback-only", "T"),
        bean("two", "T"),
        bean("app", "App").param("fallback_only", "T"),
    ];
    assert_eq!(single(&dashed, 2), "fallback-only");
    let no_match = [
        bean("one", "T"),
        bean("two", "T"),
        bean("app", "App").param("other", "T"),
    ];
    assert_eq!(codes(&no_match), ["ambiguous-dependency"]);
}

#[test]
fn optional_is_none_when_absent_and_still_ambiguous_when_two() {
    let absent = [bean("app", "App").param("log", "Option<Log>")];
    let r = resolve(&absent, "app").unwrap();
    assert_eq!(r.bindings[0][0], Binding::Optional(None));
    let present = [
        bean("log", "Log"),
        bean("app", "App").param("log", "Option<Log>"),
    ];
    assert_eq!(single(&present, 1), "log");
    let two = [
        bean("a", "Log"),
        bean("b", "Log"),
        bean("app", "App").param("log", "Option<Log>"),
    ];
    assert_eq!(codes(&two), ["ambiguous-dependency"]);
}

#[test]
fn lists_include_fallbacks_ordered_by_order_then_name_then_position() {
    let beans = [
        bean("zeta", "S").order(5),
        bean("suffix", "S").order(20),
        bean("trim", "S").order(-10),
        bean("alpha", "S").order(5).fallback(),
        bean("app", "App").param("stages", "Vec<S>"),
    ];
    let r = resolve(&beans, "app").unwrap();
    let Binding::List(members) = &r.bindings[4][0] else {
        panic!()
    };
    assert_eq!(names(&beans, members), ["trim", "alpha", "zeta", "suffix"]);
}

#[test]
fn empty_collections_are_valid() {
    let beans = [bean("app", "App")
        .param("stages", "Vec<S>")
        .param("tools", "BTreeMap<String, T>")];
    let r = resolve(&beans, "app").unwrap();
    assert_eq!(r.bindings[0], [Binding::List(vec![]), Binding::Map(vec![])]);
}

#[test]
fn maps_are_keyed_by_canonical_names_with_qualifiers_applied() {
    let beans = [
        bean("write", "T").alias("save").qualifier("coding"),
        bean("read", "T").alias("inspect").qualifier("coding"),
        bean("other", "T"),
        bean("app", "App").qualified_param("tools", "BTreeMap<String, T>", &["coding"]),
    ];
    let r = resolve(&beans, "app").unwrap();
    let Binding::Map(members) = &r.bindings[3][0] else {
        panic!()
    };
    let mut keys = names(&beans, members);
    keys.sort();
    assert_eq!(keys, ["read", "write"]);
}

#[test]
fn two_default_names_collide_in_a_map() {
    let beans = [
        bean("build", "T").fn_name("build"),
        bean("build", "T").fn_name("build"),
        bean("app", "App").param("all", "BTreeMap<String, T>"),
    ];
    let mut b = beans;
    b[1].location = "src/other.rs:1:1".into();
    assert_eq!(codes(&b), ["duplicate-collection-name"]);
}

#[test]
fn two_default_names_without_a_map_are_duplicate_bean_names() {
    let mut beans = [
        bean("build", "T").fn_name("build"),
        bean("build", "U").fn_name("build"),
    ];
    beans[1].location = "src/other.rs:2:1".into();
    assert_eq!(codes(&beans), ["duplicate-bean-name"]);
}

#[test]
fn explicit_names_and_aliases_are_unique() {
    let beans = [bean("read", "T"), bean("write", "T").alias("read")];
    assert_eq!(codes(&beans), ["duplicate-bean-name"]);
    let fields = [bean("a-b", "T"), bean("a_b", "U")];
    assert_eq!(codes(&fields), ["duplicate-bean-name"]);
}

#[test]
fn a_factory_listed_twice_is_one_error() {
    let beans = [bean("a", "T"), bean("a", "T")];
    let m = messages(&beans);
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(m[0].contains("is listed twice"), "{}", m[0]);
}

#[test]
fn cycles_name_the_whole_loop() {
    let beans = [
        bean("a", "A").param("b", "B"),
        bean("b", "B").param("c", "C"),
        bean("c", "C").param("a", "A"),
        bean("d", "D").param("a", "A"),
    ];
    let m = messages(&beans);
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(
        m[0].starts_with(
            "[dependency-cycle] beans depend on each other in a loop: `a` (parameter `b`) -> `b` (parameter `c`) -> `c` (parameter `a`) -> `a`"
        ),
        "{}",
        m[0]
    );
    let self_loop = [bean("a", "A").param("inner", "A")];
    assert!(messages(&self_loop)[0].contains("`a` (parameter `inner`) -> `a`"));
    let through_list = [
        bean("a", "A").param("all", "Vec<B>"),
        bean("b", "B").param("a", "Option<A>"),
    ];
    assert_eq!(codes(&through_list), ["dependency-cycle"]);
}

#[test]
fn independent_errors_are_reported_together() {
    let beans = [
        bean("a", "A").param("x", "Missing1"),
        bean("b", "B").param("y", "Missing2"),
        bean("c1", "C"),
        bean("c2", "C"),
        bean("d", "D").param("c", "C"),
    ];
    assert_eq!(
        codes(&beans),
        [
            "missing-dependency",
            "missing-dependency",
            "ambiguous-dependency"
        ]
    );
}

#[test]
fn missing_dependency_hints_at_a_type_of_the_same_name_at_another_path() {
    // Issue 18 turned the old case (`Arc<dyn tool::Tool>` for `Arc<dyn Tool>`) into a match;
    // the hint now points at a type whose path tells it apart.
    let beans = [
        bean("tool", "Arc<dyn other::Tool>"),
        bean("app", "App").param("t", "Arc<dyn tool::Tool>"),
    ];
    let m = messages(&beans);
    assert!(m[0].contains("at another path"), "{}", m[0]);
    assert!(m[0].contains("`tool` (m::tool"), "{}", m[0]);
}

#[test]
fn a_type_written_two_ways_is_one_dependency() {
    let beans = [
        bean("tool", "Arc<dyn tool::Tool>"),
        bean("grep", "Arc<dyn agent_core::tool::Tool>"),
        bean("config", "Arc<config::Config>"),
        bean("app", "App")
            .param("config", "Arc<Config>")
            .param("tools", "Vec<Arc<dyn Tool>>"),
    ];
    let r = resolve(&beans, "app").unwrap();
    assert_eq!(names(&beans, &r.order), ["tool", "grep", "config", "app"]);
}

#[test]
fn two_types_of_one_name_are_told_apart_by_their_paths_or_are_ambiguous() {
    let apart = [
        bean("small", "Arc<a::Limits>"),
        bean("large", "Arc<b::Limits>"),
        bean("app", "App").param("limits", "Arc<b::Limits>"),
    ];
    assert!(resolve(&apart, "app").is_ok());
    let unclear = [
        bean("small", "Arc<a::Limits>"),
        bean("large", "Arc<b::Limits>"),
        bean("app", "App").param("limits", "Arc<Limits>"),
    ];
    let m = messages(&unclear);
    assert!(m[0].starts_with("[ambiguous-type]"), "{}", m[0]);
    assert!(
        m[0].contains("`Arc<a::Limits>` and `Arc<b::Limits>`"),
        "{}",
        m[0]
    );
    assert!(m[0].contains("#[qualifier"), "{}", m[0]);
}

#[test]
fn construction_follows_dependencies_then_list_position() {
    let beans = [
        bean("app", "App").param("b", "B").param("a", "A"),
        bean("b", "B").param("a", "A"),
        bean("z", "Z"),
        bean("a", "A"),
    ];
    let r = resolve(&beans, "app").unwrap();
    assert_eq!(names(&beans, &r.order), ["z", "a", "b", "app"]);
}

/// A random graph: each bean has one of a few types and depends on types of lower-numbered
/// beans only when `acyclic`, otherwise anywhere.
fn graph(
    acyclic: bool,
) -> impl Strategy<Value = Vec<agent_compose::transport::descriptor::Descriptor>> {
    let types = ["A", "B", "C", "D", "E"];
    prop::collection::vec(
        (
            0..types.len(),
            any::<bool>(),
            any::<bool>(),
            -3i64..3,
            prop::collection::vec((0..types.len(), 0..4u8, any::<bool>()), 0..4),
        ),
        1..12,
    )
    .prop_map(move |specs| {
        specs
            .iter()
            .enumerate()
            .map(|(i, (ty, primary, fallback, order, params))| {
                let mut b = bean(&format!("b{i}"), types[*ty]).order(*order);
                b.primary = *primary && !*fallback;
                b.fallback = *fallback;
                if *primary {
                    b = b.qualifier("q");
                }
                for (j, (pty, shape, qualified)) in params.iter().enumerate() {
                    if acyclic && *pty >= *ty {
                        continue;
                    }
                    let wanted = types[*pty];
                    let written = match shape {
                        0 => wanted.to_owned(),
                        1 => format!("Option<{wanted}>"),
                        2 => format!("Vec<{wanted}>"),
                        _ => format!("BTreeMap<String, {wanted}>"),
                    };
                    let qualifiers: &[&str] = if *qualified { &["q"] } else { &[] };
                    b = b.qualified_param(&format!("p{j}"), &written, qualifiers);
                }
                b
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever the graph, resolution returns a valid plan or coded errors; never a panic.
    #[test]
    fn resolution_is_total_and_plans_are_sound(beans in graph(false)) {
        match resolve(&beans, "app") {
            Ok(r) => {
                let mut seen = r.order.clone();
                seen.sort_unstable();
                prop_assert_eq!(seen, (0..beans.len()).collect::<Vec<_>>());
                let position: Vec<usize> = {
                    let mut p = vec![0; beans.len()];
                    for (at, &b) in r.order.iter().enumerate() { p[b] = at; }
                    p
                };
                for (consumer, bindings) in r.bindings.iter().enumerate() {
                    prop_assert_eq!(bindings.len(), beans[consumer].params.len());
                    for (param, binding) in beans[consumer].params.iter().zip(bindings) {
                        for member in binding.members() {
                            prop_assert_eq!(&beans[member].key, &param.key);
                            prop_assert!(position[member] < position[consumer]);
                            for q in &param.qualifiers {
                                prop_assert!(beans[member].matches_qualifier(&q.value()));
                            }
                        }
                        if let Binding::List(m) = binding {
                            let keys: Vec<_> = m.iter().map(|&i| (beans[i].order, beans[i].name.value(), i)).collect();
                            let mut sorted = keys.clone();
                            sorted.sort();
                            prop_assert_eq!(keys, sorted);
                        }
                    }
                }
            }
            Err(e) => {
                for code in error_codes(&e) {
                    prop_assert!(agent_compose::diag::Code::ALL.iter().any(|c| c.as_str() == code), "{}", code);
                }
            }
        }
    }

    /// Acyclic graphs never report a cycle, and resolution is deterministic.
    #[test]
    fn acyclic_graphs_have_no_cycle_and_resolve_deterministically(beans in graph(true)) {
        let first = resolve(&beans, "app");
        let second = resolve(&beans, "app");
        match (&first, &second) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => {
                prop_assert_eq!(a.to_string(), b.to_string());
                prop_assert!(!error_codes(a).iter().any(|c| c == "dependency-cycle"));
            }
            _ => prop_assert!(false, "non-deterministic"),
        }
    }
}
