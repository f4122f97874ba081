//! No input, however malformed, makes the compiler panic, and mistakes come back as coded
//! errors spanned at the offending token.

use agent_compose::__testing::finish;
use agent_compose::attr::expand as bean;
use agent_compose::{BeanKind, Modifier, bean_attribute, bean_set, compose, modifier_attribute};
use proc_macro2::TokenStream;
use proptest::prelude::*;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::str::FromStr;

fn tokens(src: &str) -> TokenStream {
    TokenStream::from_str(src).unwrap_or_else(|e| panic!("{src}: {e}"))
}

/// `(attribute kind, attribute args, item, expected code, text of the token the error spans)`.
const CORPUS: &[(BeanKind, &str, &str, &str, &str)] = &[
    (
        BeanKind::Bean,
        r#"name = "Read Tool""#,
        "fn f() -> u8 { 1 }",
        "invalid-name",
        r#""Read Tool""#,
    ),
    (
        BeanKind::Bean,
        r#"aliases = ["f"]"#,
        "fn f() -> u8 { 1 }",
        "invalid-name",
        r#""f""#,
    ),
    (
        BeanKind::Bean,
        r#"aliases = ["x", "x"]"#,
        "fn f() -> u8 { 1 }",
        "duplicate-attribute",
        r#""x""#,
    ),
    (
        BeanKind::Bean,
        "order = 1",
        "#[order(2)] fn f() -> u8 { 1 }",
        "duplicate-attribute",
        "order",
    ),
    (
        BeanKind::Bean,
        "primary, fallback",
        "fn f() -> u8 { 1 }",
        "conflicting-selection",
        "fallback",
    ),
    (
        BeanKind::Bean,
        "",
        "#[primary] #[fallback] fn f() -> u8 { 1 }",
        "conflicting-selection",
        "fallback",
    ),
    (
        BeanKind::Bean,
        "colour = 1",
        "fn f() -> u8 { 1 }",
        "invalid-syntax",
        "colour",
    ),
    (
        BeanKind::Bean,
        "order = 2000000",
        "fn f() -> u8 { 1 }",
        "invalid-syntax",
        "2000000",
    ),
    (
        BeanKind::Bean,
        "",
        "fn f<T>() -> T { todo!() }",
        "unsupported-factory",
        "<T>",
    ),
    (BeanKind::Bean, "", "fn f() {}", "unsupported-factory", "f"),
    (
        BeanKind::Bean,
        "",
        "fn f(x: &u8) -> u8 { *x }",
        "unsupported-factory",
        "&u8",
    ),
    (
        BeanKind::Bean,
        "",
        "fn f() -> impl Send { 1 }",
        "unsupported-factory",
        "impl Send",
    ),
    (
        BeanKind::Bean,
        "",
        "fn f() -> Vec<u8> { vec![] }",
        "wrong-output",
        "Vec<u8>",
    ),
    (
        BeanKind::Bean,
        "",
        "fn f() -> Result<Option<u8>, E> { todo!() }",
        "wrong-output",
        "Option<u8>",
    ),
    (
        BeanKind::Stage,
        "",
        "fn f() -> String { todo!() }",
        "wrong-output",
        "String",
    ),
    (
        BeanKind::Bean,
        "",
        "#[tool] fn f() -> u8 { 1 }",
        "duplicate-attribute",
        "tool",
    ),
    (
        BeanKind::Bean,
        "",
        "fn f(#[qualifier(\"Bad\")] x: u8) -> u8 { x }",
        "invalid-name",
        r#""Bad""#,
    ),
    (
        BeanKind::Bean,
        "",
        "fn f(#[qualifier(1)] x: u8) -> u8 { x }",
        "invalid-syntax",
        "1",
    ),
    (
        BeanKind::Bean,
        "",
        "fn f(#[order(1)] x: u8) -> u8 { x }",
        "invalid-syntax",
        "order",
    ),
    (
        // The default name comes from the function: the error points at its identifier.
        BeanKind::Bean,
        "",
        "fn Read() -> u8 { 1 }",
        "invalid-name",
        "Read",
    ),
    (
        BeanKind::Bean,
        "crate = agent, crate = other",
        "fn f() -> u8 { 1 }",
        "duplicate-attribute",
        "crate",
    ),
    (
        BeanKind::Bean,
        r#"crate = "agent""#,
        "fn f() -> u8 { 1 }",
        "invalid-syntax",
        r#""agent""#,
    ),
];

#[test]
fn corpus_errors_are_coded_and_spanned_at_the_offending_token() {
    for (kind, args, item, code, spanned) in CORPUS {
        let analysis = bean::analyze(*kind, tokens(args), tokens(item))
            .unwrap_or_else(|_| panic!("{item} is a function"));
        let err = analysis.errors.into_result().expect_err(item);
        let first = err.into_iter().next().expect("one error");
        let message = first.to_string();
        assert!(
            message.starts_with(&format!("[{code}]")),
            "{args} {item}: {message}"
        );
        assert_eq!(
            first.span().source_text().as_deref(),
            Some(*spanned),
            "{args} {item}: {message}"
        );
        assert!(analysis.descriptor.poisoned, "{item}");
    }
}

#[test]
fn a_bean_attribute_on_a_non_function_keeps_the_item() {
    let out = bean_attribute(BeanKind::Tool, TokenStream::new(), tokens("struct S;")).to_string();
    assert!(out.contains("[unsupported-factory]"), "{out}");
    assert!(out.contains("struct S"), "{out}");
}

/// Random, balanced token soup built from the words these macros care about.
fn soup(depth: u32) -> impl Strategy<Value = String> {
    let leaf = prop::sample::select(vec![
        "fn",
        "pub",
        "async",
        "struct",
        "beans",
        "name",
        "aliases",
        "qualifiers",
        "primary",
        "fallback",
        "order",
        "Result",
        "Managed",
        "Vec",
        "Option",
        "BTreeMap",
        "String",
        "Arc",
        "dyn",
        "Tool",
        "impl",
        "self",
        "crate",
        "super",
        "where",
        "T",
        "x",
        "_",
        "path",
        "agent_core_descriptor_v2",
        "kind",
        "params",
        "<",
        ">",
        ",",
        ":",
        "::",
        "=",
        "-",
        "#",
        "&",
        "'a",
        ";",
        "!",
        "->",
        "\"read\"",
        "\"Bad Name\"",
        "10",
        "-5",
        "1e9",
        "'c'",
        "true",
        "b\"x\"",
    ])
    .prop_map(str::to_owned);
    leaf.prop_recursive(depth, 64, 8, |inner| {
        (prop::collection::vec(inner, 0..8), 0..4u8).prop_map(|(items, delim)| {
            let body = items.join(" ");
            match delim {
                0 => format!("({body})"),
                1 => format!("[{body}]"),
                2 => format!("{{{body}}}"),
                _ => body,
            }
        })
    })
}

fn no_panic(what: &str, f: impl FnOnce() -> TokenStream) -> String {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(out) => out.to_string(),
        Err(_) => panic!("{what} panicked"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn no_entry_point_panics(a in soup(3), b in soup(3)) {
        let (a, b) = (tokens(&a), tokens(&b));
        for kind in BeanKind::ALL {
            no_panic("bean attribute", || bean_attribute(kind, a.clone(), b.clone()));
        }
        for modifier in Modifier::ALL {
            no_panic("modifier", || modifier_attribute(modifier, a.clone(), b.clone()));
        }
        no_panic("bean_set", || bean_set(a.clone()));
        no_panic("compose", || compose(a.clone()));
        let out = no_panic("finish", || finish(a.clone(), "app"));
        prop_assert!(out.contains("compile_error"), "finish accepted {}", a);
    }

    /// Descriptor-shaped input with random holes: still a coded error, never a panic.
    #[test]
    fn damaged_descriptors_are_errors(hole in soup(2), at in 0usize..40) {
        let mut words: Vec<&str> = GOOD.split(' ').collect();
        let at = at.min(words.len() - 1);
        let hole = hole.replace(['[', ']', '{', '}'], " ");
        words[at] = &hole;
        let damaged = words.join(" ");
        if let Ok(input) = TokenStream::from_str(&damaged) {
            let out = no_panic("finish", || finish(input, "app"));
            // A hole can happen to spell another valid descriptor; then the output must be
            // well-formed Rust.
            prop_assert!(
                out.contains("compile_error") || syn::parse_str::<syn::File>(&out).is_ok(),
                "accepted {} with malformed output {}", damaged, out
            );
        }
    }
}

/// One descriptor as a chain hands it to the finisher, with every optional field present.
const GOOD: &str = r#"{ f } [] [ [ [] ] { path = { m::f } agent_core_descriptor_v2 kind = bean fn = f name = "g" aliases = ["h"] qualifiers = ["q"] primary order = -3 async form = result output = { u8 } params = [ { x { Option<u16> } ["q"] } ] location = "a.rs:1:1" crate = "app" } ] { pub struct App }"#;

#[test]
fn an_intact_descriptor_is_accepted() {
    let out = finish(tokens(GOOD), "app").to_string();
    assert!(!out.contains("compile_error"), "{out}");
    assert!(out.contains("pub struct App"), "{out}");
}
