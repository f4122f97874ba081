//! `crate = path`: with agent-core renamed, no expansion names `::agent_core`.

use agent_compose::__testing::{finish, finisher_input};
use agent_compose::attr::expand as bean;
use agent_compose::{BeanKind, Modifier, bean_set, compose, modifier_attribute};
use proc_macro2::TokenStream;
use quote::quote;

/// Whether `tokens` contain the path segment `agent_core` (identifiers that merely contain
/// it, such as `__agent_core_bean_...`, do not count).
fn names_agent_core(tokens: &TokenStream) -> bool {
    tokens.clone().into_iter().any(|tree| match tree {
        proc_macro2::TokenTree::Ident(i) => i == "agent_core",
        proc_macro2::TokenTree::Group(g) => names_agent_core(&g.stream()),
        _ => false,
    })
}

#[test]
fn attributes_reach_the_renamed_crate() {
    for kind in BeanKind::ALL {
        let output = if kind == BeanKind::Stage {
            quote!(Arc<dyn Step>)
        } else {
            quote!(Arc<Log>)
        };
        let out = agent_compose::bean_attribute(
            kind,
            quote!(crate = agent),
            quote!(pub fn log(clock: Option<Arc<Clock>>) -> #output { todo!() }),
        );
        assert!(
            !out.to_string().contains("compile_error"),
            "{kind:?}: {out}"
        );
        assert!(!names_agent_core(&out), "{kind:?}: {out}");
        assert!(
            out.to_string()
                .contains("agent :: __private_v0_1 :: assert_"),
            "{kind:?}: {out}"
        );
    }
}

#[test]
fn a_modifier_above_moves_below_without_naming_the_crate() {
    let moved = modifier_attribute(
        Modifier::Primary,
        TokenStream::new(),
        quote!(
            #[agent::bean(crate = agent)]
            pub fn log() -> Arc<Log> {
                todo!()
            }
        ),
    );
    assert!(!names_agent_core(&moved), "{moved}");
    let item: agent_compose::attr::item::FactoryFn = syn::parse2(moved).unwrap();
    let out = bean::expand(BeanKind::Bean, quote!(crate = agent), {
        let attrs = item.attrs.iter().skip(1);
        let (vis, sig, body) = (&item.vis, &item.sig, &item.body);
        quote!(#(#attrs)* #vis #sig #body)
    });
    assert!(!out.to_string().contains("compile_error"), "{out}");
    assert!(!names_agent_core(&out), "{out}");
}

#[test]
fn compose_and_bean_set_chains_end_in_the_renamed_crate() {
    let app = compose(quote!(crate = agent; pub struct App { beans: [a, b] }));
    assert!(!names_agent_core(&app), "{app}");
    assert!(
        app.to_string()
            .contains("{ agent :: __private_v0_1 :: compose_finish }"),
        "{app}"
    );
    let set = bean_set(quote!(crate = agent; pub tools = [a, b];));
    assert!(!names_agent_core(&set), "{set}");
    assert!(
        set.to_string()
            .contains("{ agent :: __private_v0_1 :: compose_finish }"),
        "{set}"
    );
}

#[test]
fn the_generated_application_reaches_the_renamed_crate() {
    let analysis = bean::analyze(
        BeanKind::Bean,
        quote!(),
        quote!(
            pub fn log() -> std::sync::Arc<String> {
                todo!()
            }
        ),
    )
    .ok()
    .unwrap();
    let fields = analysis.descriptor.fields();
    let input = finisher_input(
        quote!({ path = { log } #fields }),
        quote!(crate = agent; pub struct App),
    );
    let out = finish(input, "app");
    assert!(!out.to_string().contains("compile_error"), "{out}");
    assert!(!names_agent_core(&out), "{out}");
    assert!(
        out.to_string()
            .contains("agent :: __private_v0_1 :: Builder"),
        "{out}"
    );
    // Without the line, the default absolute path.
    let input = finisher_input(quote!({ path = { log } #fields }), quote!(pub struct App));
    assert!(
        finish(input, "app")
            .to_string()
            .contains(":: agent_core :: __private_v0_1 :: Builder")
    );
}

#[test]
fn a_string_is_not_a_crate_path() {
    for out in [
        agent_compose::bean_attribute(
            BeanKind::Bean,
            quote!(crate = "agent"),
            quote!(
                pub fn log() -> Arc<Log> {
                    todo!()
                }
            ),
        ),
        compose(quote!(crate = "agent"; pub struct App { beans: [] })),
        bean_set(quote!(crate = "agent"; pub tools = [a];)),
    ] {
        let out = out.to_string();
        assert!(
            out.contains("[invalid-syntax] `crate` takes the path of agent-core"),
            "{out}"
        );
    }
}

#[test]
fn crate_is_given_once() {
    let out = agent_compose::bean_attribute(
        BeanKind::Bean,
        quote!(crate = agent, crate = agent),
        quote!(
            pub fn log() -> Arc<Log> {
                todo!()
            }
        ),
    )
    .to_string();
    assert!(
        out.contains("[duplicate-attribute] `crate` is given more than once"),
        "{out}"
    );
}
