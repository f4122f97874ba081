//! No input, however malformed, makes the compiler panic, and mistakes come back as coded
//! errors spanned at the offending token.
//!
//! The properties generate token soup, damaged descriptors, raw identifiers in lists several
//! chunks long, and signatures nested past the bound. `cargo test` runs a bounded number of
//! cases per property (300 to 2,000); `PROPTEST_CASES=10000` runs 10,000 of each, as
//! `.ci/run` does:
//!
//! ```sh
//! PROPTEST_CASES=10000 cargo test -p agent-compose --test robustness
//! ```
//!
//! Every property expands in this process. A panic is caught and reported as the failing
//! case; a stack overflow cannot be caught, and aborts the whole test process (SIGSEGV or
//! SIGABRT), which the harness reports as a failure, never as a pass. Cases that parse near
//! the nesting bound run on a thread with rustc's 8 MiB stack ([`on_rustc_stack`]), so an
//! overflow there is an overflow rustc would have too.

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
    assert!(out.contains("[not-a-function]"), "{out}");
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
        // The typed-tool grammar, so the soup reaches that path too.
        "effect",
        "replay",
        "capabilities",
        "read_only",
        "safe",
        "args",
        "ToolContext",
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

/// Cases per property: `PROPTEST_CASES` when set (`.ci/run` sets 10,000), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(1500), failure_persistence: None, ..ProptestConfig::default() })]

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

/// Output that is either a coded error or Rust that parses as items.
fn well_formed(what: &str, out: &str) {
    assert!(
        out.contains("compile_error") || syn::parse_str::<syn::File>(out).is_ok(),
        "{what}: malformed output {out}"
    );
}

/// Descriptors of `fns` as a chain hands them to a finisher, each reached by `m::<fn>`.
fn descriptors(fns: &[String]) -> String {
    fns.iter()
        .enumerate()
        .map(|(i, f)| {
            format!(
                r#"{{ path = {{ m::{f} }} agent_core_descriptor_v2 kind = bean fn = {f} output = {{ Arc<T{i}> }} location = "a.rs:{i}:1" crate = "app" }}"#
            )
        })
        .collect()
}

#[test]
fn a_raw_set_name_is_a_valid_set() {
    let out = no_panic("bean_set", || bean_set(tokens("pub r#type = [a];")));
    assert!(!out.contains("compile_error"), "{out}");
    well_formed("bean_set", &out);
    assert!(out.contains("mod r#type"), "{out}");
    assert!(out.contains("as r#type"), "{out}");
}

#[test]
fn a_raw_member_keeps_its_raw_name_in_the_set_finisher() {
    let input = format!(
        "{{ f }} [] [ {} ] {{ @set __export [ {{ r#type }} {{ m::r#match }} ] }}",
        descriptors(&["r#type".into(), "m::r#match".into()])
            .replace("m::m::", "m::")
            .replace("{ m::r#type }", "{ r#type }")
    );
    let out = no_panic("finish", || finish(tokens(&input), "app"));
    assert!(!out.contains("compile_error"), "{out}");
    assert!(out.contains("$ ($ me) * :: r#type"), "{out}");
    assert!(out.contains("$ ($ me) * :: r#match"), "{out}");
}

#[test]
fn raw_names_with_more_than_one_chunk_of_entries() {
    let entries: Vec<String> = (0..200).map(|i| format!("r#f{i}")).collect();
    let list = entries.join(", ");
    let app = no_panic("compose", || {
        compose(tokens(&format!("pub struct r#App {{ beans: [{list}] }}")))
    });
    assert!(!app.contains("compile_error"), "{app}");
    well_formed("compose", &app);
    assert!(app.contains("__agent_core_relay_app_App_3"), "{app}");
    let set = no_panic("bean_set", || {
        bean_set(tokens(&format!("pub r#type = [{list}];")))
    });
    assert!(!set.contains("compile_error"), "{set}");
    well_formed("bean_set", &set);
    assert!(set.contains("__agent_core_relay_set_type_3"), "{set}");
    // And the application finisher over raw functions, with a raw application name.
    let fns: Vec<String> = (0..200).map(|i| format!("r#f{i}")).collect();
    let input = format!(
        "{{ f }} [] [ {} ] {{ pub struct r#App }}",
        descriptors(&fns)
    );
    let out = no_panic("finish", || finish(tokens(&input), "app"));
    assert!(!out.contains("compile_error"), "{out}");
    well_formed("finish", &out);
    assert!(out.contains("struct AppComponents"), "{out}");
}

/// Runs `f` on a thread with the 8 MiB of stack that rustc runs macros on (its main thread's
/// default), not the 2 MiB of a test thread: unoptimized, parsing a signature at the nesting
/// bound takes about 4 MiB.
fn on_rustc_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(f)
        .expect("thread")
        .join()
        .unwrap_or_else(|_| panic!("panicked"))
}

/// `n` levels of `Vec<..>` around `u8`.
fn vecs(n: usize) -> String {
    format!("{}u8{}", "Vec<".repeat(n), ">".repeat(n))
}

/// A factory returning `output` (plain, so the return type sits at depth 0).
fn factory(output: &str) -> TokenStream {
    tokens(&format!("pub fn deep() -> {output} {{ todo!() }}"))
}

#[test]
fn nesting_at_the_bound_is_accepted_end_to_end() {
    on_rustc_stack(nesting_at_the_bound);
}

fn nesting_at_the_bound() {
    use agent_compose::nesting::MAX_DEPTH;
    // The attribute, then the descriptor re-read by the finisher, then generation.
    let ty = format!("Arc<{}>", vecs(MAX_DEPTH - 1));
    let analysis = bean::analyze(BeanKind::Bean, TokenStream::new(), factory(&ty))
        .unwrap_or_else(|_| panic!("accepted"));
    let errors = analysis.errors.to_compile_errors().to_string();
    assert!(errors.is_empty(), "{errors}");
    let fields = analysis.descriptor.fields();
    let input = tokens(&format!(
        "{{ f }} [] [ {{ path = {{ m::deep }} {fields} }} ] {{ pub struct App }}"
    ));
    let out = no_panic("finish", || finish(input, "app"));
    assert!(!out.contains("compile_error"), "{out}");
    // The same depth as a parameter (inside the parameter list's parentheses) and as a
    // `Box<dyn Fn(..)>` chain.
    let param = tokens(&format!(
        "pub fn deep(x: {}) -> u8 {{ 1 }}",
        vecs(MAX_DEPTH - 1)
    ));
    let out = bean_attribute(BeanKind::Bean, TokenStream::new(), param).to_string();
    assert!(!out.contains("compile_error"), "{out}");
    let half = MAX_DEPTH / 2;
    let boxed = format!("{}u8{}", "Box<dyn Fn(".repeat(half), ")>".repeat(half));
    let out = bean_attribute(BeanKind::Bean, TokenStream::new(), factory(&boxed)).to_string();
    assert!(!out.contains("nesting-too-deep"), "{out}");
    // `compose!` and `bean_set!` entries are paths; a group at the bound is still read.
    let group = format!(
        "{}x{}",
        "(".repeat(MAX_DEPTH - 2),
        ")".repeat(MAX_DEPTH - 2)
    );
    let out = compose(tokens(&format!("pub struct App {{ beans: [{group}] }}"))).to_string();
    assert!(
        out.contains("[invalid-syntax]") && !out.contains("nesting"),
        "{out}"
    );
}

#[test]
fn nesting_past_the_bound_is_refused_at_every_entry_point() {
    use agent_compose::nesting::MAX_DEPTH;
    let too_deep = vecs(MAX_DEPTH + 1);
    let attribute = no_panic("bean", || {
        bean_attribute(BeanKind::Bean, TokenStream::new(), factory(&too_deep))
    });
    assert!(attribute.contains("[nesting-too-deep]"), "{attribute}");
    // The function stays, and a poisoned descriptor keeps `compose!` quiet.
    assert!(attribute.contains("pub fn deep"), "{attribute}");
    assert!(attribute.contains("poisoned"), "{attribute}");
    let args = no_panic("bean args", || {
        bean_attribute(
            BeanKind::Bean,
            tokens(&format!("name = {}", too_deep)),
            factory("u8"),
        )
    });
    assert!(args.contains("[nesting-too-deep]"), "{args}");
    // A modifier above moves below by tokens; the bean attribute reports once.
    let moved = no_panic("modifier", || {
        modifier_attribute(
            Modifier::Primary,
            TokenStream::new(),
            tokens(&format!(
                "#[bean] pub fn deep() -> {too_deep} {{ todo!() }}"
            )),
        )
    });
    assert!(!moved.contains("compile_error"), "{moved}");
    assert!(moved.contains("__agent_core_moved :: primary"), "{moved}");
    let moved_then_bean = no_panic("bean", || {
        bean_attribute(
            BeanKind::Bean,
            TokenStream::new(),
            tokens(&moved.replacen("# [bean]", "", 1)),
        )
    });
    assert_eq!(
        moved_then_bean.matches("compile_error").count(),
        1,
        "{moved_then_bean}"
    );
    assert!(
        !moved_then_bean.contains("__agent_core_moved"),
        "{moved_then_bean}"
    );
    let group = format!(
        "{}x{}",
        "(".repeat(MAX_DEPTH + 1),
        ")".repeat(MAX_DEPTH + 1)
    );
    for (what, out) in [
        (
            "compose",
            compose(tokens(&format!("pub struct App {{ beans: [{group}] }}"))),
        ),
        ("bean_set", bean_set(tokens(&format!("pub s = [{group}];")))),
        (
            "finish header",
            finish(
                tokens(&format!("{{ f }} [] [] {{ pub struct App {group} }}")),
                "app",
            ),
        ),
        (
            "finish descriptor",
            finish(
                tokens(&format!(
                    r#"{{ f }} [] [ {{ path = {{ m::f }} agent_core_descriptor_v2 kind = bean fn = f output = {{ {too_deep} }} location = "a.rs:1:1" crate = "app" }} ] {{ pub struct App }}"#
                )),
                "app",
            ),
        ),
    ] {
        let out = out.to_string();
        assert!(out.contains("[nesting-too-deep]"), "{what}: {out}");
    }
}

#[test]
fn signatures_hundreds_of_levels_deep_are_errors_not_crashes() {
    for depth in [80, 250] {
        let ty = format!("{}u8{}", "Box<dyn Fn(".repeat(depth), ")>".repeat(depth));
        let item = tokens(&format!("pub fn deep(f: {ty}) -> Arc<T> {{ todo!() }}"));
        let out = no_panic("bean", || {
            bean_attribute(BeanKind::Tool, TokenStream::new(), item)
        });
        assert!(out.contains("[nesting-too-deep]"), "{depth}");
        let out = no_panic("bean", || {
            bean_attribute(BeanKind::Bean, TokenStream::new(), factory(&vecs(depth)))
        });
        assert!(out.contains("[nesting-too-deep]"), "{depth}");
    }
}

/// Identifiers as users write them: plain, raw keywords, raw plain names, non-ASCII.
fn identifier() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9_]{0,6}",
        prop::sample::select(vec![
            "r#type", "r#match", "r#fn", "r#struct", "r#async", "r#dyn", "r#gen", "r#try", "r#App",
            "r#read", "r#x", "é", "r#é", "_x", "r#_x", "Tool",
        ])
        .prop_map(str::to_owned),
    ]
    // A bare keyword is not an identifier (users write it raw).
    .prop_filter("an identifier", |s| syn::parse_str::<syn::Ident>(s).is_ok())
}

/// A nested type around `u8`, `levels` wrappers deep, each picked from `forms`.
fn nested_type(forms: &[u8]) -> (String, usize) {
    let mut open = String::new();
    let mut close = String::new();
    let mut depth = 0;
    for form in forms {
        let (o, c, d) = match form % 5 {
            0 => ("Vec<", ">", 1),
            1 => ("Box<dyn Fn(", ")>", 2),
            2 => ("(", ",)", 1),
            3 => ("[", "; 2]", 1),
            _ => ("Option<Arc<", ">>", 2),
        };
        open.push_str(o);
        close.insert_str(0, c);
        depth += d;
    }
    (format!("{open}u8{close}"), depth)
}

proptest! {
    // Each case expands lists of up to 200 entries four times and parses the output: about
    // 10 ms unoptimized, so `cargo test` runs a few hundred and CI the full count.
    #![proptest_config(ProptestConfig { cases: cases(300), failure_persistence: None, ..ProptestConfig::default() })]

    /// Raw and plain identifiers as function, set and application names, in lists up to
    /// several chunks long: never a panic, always a valid expansion.
    #[test]
    fn raw_identifiers_and_long_lists_expand(
        app in identifier(),
        set in identifier(),
        members in prop::collection::vec(identifier(), 0..200),
    ) {
        let list: Vec<String> = members.iter().enumerate().map(|(i, m)| format!("m{i}::{m}")).collect();
        let list = list.join(", ");
        let out = no_panic("compose", || compose(tokens(&format!("pub struct {app} {{ beans: [{list}] }}"))));
        well_formed("compose", &out);
        let out = no_panic("bean_set", || bean_set(tokens(&format!("pub {set} = [{list}];"))));
        well_formed("bean_set", &out);
        let fns: Vec<String> = members.clone();
        let entries: String = members.iter().enumerate().map(|(i, m)| format!("{{ m{i}::{m} }}")).collect();
        let set_input = format!("{{ f }} [] [ {} ] {{ @set __export [ {entries} ] }}",
            fns.iter().enumerate().map(|(i, f)| format!(
                r#"{{ path = {{ m{i}::{f} }} agent_core_descriptor_v2 kind = bean fn = {f} location = "a.rs:{i}:1" crate = "app" }}"#
            )).collect::<String>());
        let out = no_panic("set finisher", || finish(tokens(&set_input), "app"));
        prop_assert!(!out.contains("compile_error"), "{}", out);
        let app_input = format!("{{ f }} [] [ {} ] {{ pub struct {app} }}", descriptors(&fns));
        let out = no_panic("finish", || finish(tokens(&app_input), "app"));
        well_formed("finish", &out);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(2000), failure_persistence: None, ..ProptestConfig::default() })]

    /// Signatures nested up to several times the bound: accepted up to it, a coded error
    /// past it, never a crash.
    #[test]
    fn deep_signatures_are_bounded(forms in prop::collection::vec(any::<u8>(), 0..200), in_param in any::<bool>()) {
        let (ty, depth) = nested_type(&forms);
        let (item, depth) = if in_param {
            (format!("pub fn deep(x: {ty}) -> u8 {{ 1 }}"), depth + 1)
        } else {
            (format!("pub fn deep() -> {ty} {{ todo!() }}"), depth)
        };
        let src = item.clone();
        let out = on_rustc_stack(move || {
            no_panic("bean", || bean_attribute(BeanKind::Bean, TokenStream::new(), tokens(&src)))
        });
        let refused = out.contains("[nesting-too-deep]");
        prop_assert_eq!(refused, depth > agent_compose::nesting::MAX_DEPTH, "{} at depth {}", item, depth);
    }
}

/// The typed-tool grammar: every argument a typed `#[tool]` reads, with valid and invalid
/// values, duplicated and contradictory; and the argument-less words that make the
/// attribute typed.
fn typed_argument() -> impl Strategy<Value = String> {
    let effect = prop::sample::select(vec![
        "read_only",
        "mutating",
        "\"read_only\"",
        "sideways",
        "1",
        "",
    ]);
    let replay = prop::sample::select(vec![
        "safe",
        "idempotent",
        "unsafe",
        "\"safe\"",
        "never",
        "",
    ]);
    let capability = prop::sample::select(vec![
        "\"environment.read\"",
        "\"environment.write\"",
        "\"filesystem.read\"",
        "\"filesystem.write\"",
        "\"network.access\"",
        "\"process.execute\"",
        "\"secrets.read\"",
        "\"disk.read\"",
        "1",
        "x",
    ]);
    prop_oneof![
        effect.prop_map(|v| format!("effect = {v}")),
        replay.prop_map(|v| format!("replay = {v}")),
        prop::collection::vec(capability, 0..4)
            .prop_map(|c| format!("capabilities = [{}]", c.join(", "))),
        prop::sample::select(vec![
            "effect",
            "replay",
            "capabilities",
            "capabilities = \"filesystem.read\"",
            "name = \"read\"",
            "name = \"Bad Name\"",
            "aliases = [\"r\"]",
            "crate = agent_core",
            "crate = 1",
            "primary",
            "order = 1",
        ])
        .prop_map(str::to_owned),
    ]
}

/// One parameter of a typed tool: `#[args]`, the call context (by type or `#[context]`),
/// dependencies, and the shapes a tool cannot take.
fn typed_param() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "#[args] a: A",
        "#[args] b: B",
        "#[args] #[args] a: A",
        "#[args] (a, b): (A, B)",
        "ctx: ToolContext<'_>",
        "ctx: agent_core::tool::ToolContext<'_>",
        "#[context] c: C",
        "dep: Arc<D>",
        "deps: Vec<Arc<D>>",
        "#[qualifier(\"x\")] dep: Arc<D>",
        "_: Arc<D>",
        "x: &u8",
        "x: impl Send",
    ])
    .prop_map(str::to_owned)
}

/// A typed tool's item: a function in all its forms, or an item that is not one.
/// `(item, whether it is a complete function)`.
fn typed_item() -> impl Strategy<Value = (String, bool)> {
    let function = (
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(typed_param(), 0..4),
        prop::sample::select(vec!["", "-> u8", "-> Result<String, E>", "-> Json<T>"]),
        prop::sample::select(vec!["<T>", ""]),
        // A receiver is only valid Rust first in the list.
        prop::sample::select(vec!["", "self", "&self"]),
    )
        .prop_map(|(doc, is_async, mut params, output, generics, receiver)| {
            let doc = if doc { "/// Reads.\n" } else { "" };
            let asyncness = if is_async { "async " } else { "" };
            if !receiver.is_empty() {
                params.insert(0, receiver.to_owned());
            }
            format!(
                "{doc}pub {asyncness}fn f{generics}({}) {output} {{ todo!() }}",
                params.join(", ")
            )
        })
        .prop_map(|item| (item, true));
    let other = prop::sample::select(vec![
        "",
        "pub struct Config;",
        "struct S { #[args] a: A }",
        "enum E { A }",
        "impl S { fn f(#[args] a: A) {} }",
        "trait T { fn f(#[args] a: A); }",
        "const F: fn(#[args] A) = f;",
        "static F: u8 = 1;",
        "mod m { fn f(#[args] a: A) {} }",
        "m!(fn f(#[args] a: A) {});",
        "fn f(#[args] a: A);",
        "/// Reads.\npub fn f(#[args] a: A) -> u8",
        "type T = fn(#[args] A);",
        "use a::b;",
    ])
    .prop_map(|item| (item.to_owned(), false));
    prop_oneof![3 => function, 1 => other]
}

/// Every `compile_error!` the output holds starts with a stable code.
fn every_error_is_coded(out: &str) -> bool {
    out.matches("compile_error").count() == out.matches("compile_error ! { \"[").count()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(1000), failure_persistence: None, ..ProptestConfig::default() })]

    /// The typed-tool grammar, valid and not, on functions and on items that are not: a
    /// coded error or an expansion, never a panic or a crash; `[not-a-function]` exactly
    /// when the item is not a complete function; and each contradiction or duplicate of the
    /// safety metadata reported with its code.
    #[test]
    fn typed_tools_are_coded_errors_or_expansions(
        args in prop::collection::vec(typed_argument(), 0..6),
        (item, is_function) in typed_item(),
    ) {
        let args_text = args.join(", ");
        let (a, i) = (args_text.clone(), item.clone());
        let out = on_rustc_stack(move || {
            no_panic("typed tool", || bean_attribute(BeanKind::Tool, tokens(&a), tokens(&i)))
        });
        prop_assert!(every_error_is_coded(&out), "#[tool({})] {}: {}", args_text, item, out);
        prop_assert_eq!(out.contains("[not-a-function]"), !is_function, "#[tool({})] {}: {}", args_text, item, out);
        if !is_function {
            prop_assert_eq!(out.matches("compile_error").count(), 1, "#[tool({})] {}: {}", args_text, item, out);
            return Ok(());
        }
        let said = |word: &str| args.iter().filter(|a| a.as_str() == word).count();
        let valid = |head: &str, values: &[&str]| {
            values.iter().map(|v| said(&format!("{head} = {v}"))).sum::<usize>()
        };
        let effects = valid("effect", &["read_only", "mutating", "\"read_only\""]);
        let replays = valid("replay", &["safe", "idempotent", "unsafe", "\"safe\""]);
        if effects > 1 || replays > 1 {
            prop_assert!(out.contains("[duplicate-attribute]"), "#[tool({})] {}: {}", args_text, item, out);
        }
        let unreadable = args.iter().any(|a| {
            (a.starts_with("effect =") || a.starts_with("replay =")) && !a.contains('_') && !["replay = safe", "replay = idempotent", "replay = unsafe", "replay = \"safe\"", "effect = mutating"].contains(&a.as_str())
        });
        let typed = !args.is_empty() && args.iter().any(|a| ["effect", "replay", "capabilities"].iter().any(|w| a.starts_with(w)))
            || item.contains("#[args]");
        if typed && !unreadable && effects == 1 && replays == 1 {
            let read_only = said("effect = read_only") + said("effect = \"read_only\"") == 1;
            let safe = said("replay = safe") + said("replay = \"safe\"") == 1;
            if read_only && !safe {
                prop_assert!(out.contains("[read-only-replay]"), "#[tool({})] {}: {}", args_text, item, out);
            }
            if !read_only && safe {
                prop_assert!(out.contains("[mutating-replay]"), "#[tool({})] {}: {}", args_text, item, out);
            }
        }
        if typed && !unreadable && (effects == 0 || replays == 0) {
            prop_assert!(out.contains("[missing-tool-safety]"), "#[tool({})] {}: {}", args_text, item, out);
        }
    }

    /// A typed tool whose parameters nest around the bound: accepted up to it, one coded
    /// error past it, never a crash (65 levels used to recurse through the typed path until
    /// the stack overflowed).
    #[test]
    fn deep_typed_tools_are_bounded(depth in 55usize..75, in_args in any::<bool>()) {
        use agent_compose::nesting::MAX_DEPTH;
        let param = if in_args { "#[args] a: A" } else { "ctx: ToolContext<'_>" };
        // The parameter list is one level; each parenthesized pattern group one more.
        let item = format!(
            "/// Reads.\npub fn f(#[args] x: X, y: {}u8{}, {param}) -> u8 {{ 1 }}",
            "(".repeat(depth - 1),
            ",)".repeat(depth - 1),
        );
        let i = item.clone();
        let out = on_rustc_stack(move || {
            no_panic("typed tool", || bean_attribute(BeanKind::Tool, tokens("effect = read_only, replay = safe"), tokens(&i)))
        });
        prop_assert!(every_error_is_coded(&out), "{}: {}", item, out);
        let refused = out.contains("[nesting-too-deep]");
        prop_assert_eq!(refused, depth > MAX_DEPTH, "{} at depth {}: {}", item, depth, out);
        if refused {
            prop_assert_eq!(out.matches("compile_error").count(), 1, "{}", out);
        }
    }
}

/// The inputs of the fuzz campaign that overflowed the stack, one by one.
#[test]
fn the_typed_inputs_that_overflowed_the_stack_are_coded_errors() {
    let deep = format!(
        "fn f({}#[args] a: A{}) {{}}",
        "(".repeat(65),
        ")".repeat(65)
    );
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "effect = read_only, replay = safe",
            "pub struct Config;".into(),
            "[not-a-function]",
        ),
        ("effect", deep, "[nesting-too-deep]"),
        ("replay", String::new(), "[not-a-function]"),
        ("replay", "struct S;".into(), "[not-a-function]"),
        ("replay", "fn f(#[args] a: A);".into(), "[not-a-function]"),
        (
            "replay",
            "const F: fn(#[args] A) = f;".into(),
            "[not-a-function]",
        ),
        ("", "fn f(#[args] a: A);".into(), "[not-a-function]"),
    ];
    for (args, item, code) in cases {
        let i = item.clone();
        let out = on_rustc_stack(move || {
            no_panic("typed tool", || {
                bean_attribute(BeanKind::Tool, tokens(args), tokens(&i))
            })
        });
        assert!(out.contains(code), "#[tool({args})] {item}: {out}");
        assert_eq!(out.matches("compile_error").count(), 1, "{out}");
    }
}
