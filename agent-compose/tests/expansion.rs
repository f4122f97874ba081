//! Snapshots of what the macros generate for the composition proof in `fixtures/`,
//! pretty-printed. The descriptors are computed from the fixture's own source by the same
//! code the attributes run, then resolved and generated exactly as `compose!` would.

use agent_compose::__testing::finish;
use agent_compose::BeanKind;
use agent_compose::attr::expand as bean;
use agent_compose::transport::descriptor::Descriptor;
use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use std::collections::BTreeMap;
use std::path::Path;
use syn::parse::Parse;

const FIXTURE_MODULES: [&str; 6] = ["log", "providers", "stages", "tools", "proof", "dispatch"];

struct Fixture {
    /// Annotated factories by function name: (module, kind, args, item).
    factories: BTreeMap<String, (String, BeanKind, TokenStream, TokenStream)>,
    /// Bean sets by name: member function names.
    sets: BTreeMap<String, Vec<String>>,
}

fn read_fixture() -> Fixture {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/src");
    let mut fixture = Fixture {
        factories: BTreeMap::new(),
        sets: BTreeMap::new(),
    };
    for module in FIXTURE_MODULES {
        let text =
            std::fs::read_to_string(src.join(format!("{module}.rs"))).expect("fixture source");
        let file = syn::parse_file(&text).expect("fixture parses");
        for item in file.items {
            match item {
                syn::Item::Fn(mut f) => {
                    let Some(position) = f.attrs.iter().position(|a| {
                        a.path()
                            .segments
                            .last()
                            .and_then(|s| BeanKind::parse(&s.ident.to_string()))
                            .is_some()
                    }) else {
                        continue;
                    };
                    let attr = f.attrs.remove(position);
                    let kind =
                        BeanKind::parse(&attr.path().segments.last().unwrap().ident.to_string())
                            .unwrap();
                    let args = match &attr.meta {
                        syn::Meta::List(list) => list.tokens.clone(),
                        _ => TokenStream::new(),
                    };
                    fixture.factories.insert(
                        f.sig.ident.to_string(),
                        (module.to_owned(), kind, args, f.to_token_stream()),
                    );
                }
                syn::Item::Macro(m) if m.mac.path.segments.last().unwrap().ident == "bean_set" => {
                    let (name, members) = m
                        .mac
                        .parse_body_with(|input: syn::parse::ParseStream<'_>| {
                            input.call(syn::Attribute::parse_outer)?;
                            input.parse::<syn::Visibility>()?;
                            let name: syn::Ident = input.parse()?;
                            input.parse::<syn::Token![=]>()?;
                            let list;
                            syn::bracketed!(list in input);
                            let members =
                                list.parse_terminated(syn::Ident::parse, syn::Token![,])?;
                            input.parse::<syn::Token![;]>()?;
                            Ok((
                                name.to_string(),
                                members.iter().map(ToString::to_string).collect::<Vec<_>>(),
                            ))
                        })
                        .expect("bean_set! parses");
                    fixture.sets.insert(name, members);
                }
                _ => {}
            }
        }
    }
    fixture
}

/// The `compose!` list of `fixtures/src/app.rs`, flattened through bean sets the way the
/// descriptor chain does it.
fn descriptors(fixture: &Fixture) -> Vec<Descriptor> {
    let app = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/src/app.rs"),
    )
    .unwrap();
    let list = app
        .split("beans: [")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap();
    let mut out = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let last = entry.rsplit("::").next().unwrap();
        let members: Vec<(String, String)> = match fixture.sets.get(last) {
            Some(members) => members
                .iter()
                .map(|m| (format!("{entry}::{m}"), m.clone()))
                .collect(),
            None => vec![(entry.to_owned(), last.to_owned())],
        };
        for (path, function) in members {
            let (module, kind, args, item) = fixture
                .factories
                .get(&function)
                .unwrap_or_else(|| panic!("{function}"));
            let analysis = bean::analyze(*kind, args.clone(), item.clone())
                .unwrap_or_else(|_| panic!("{function}"));
            assert!(analysis.errors.is_empty(), "{function} has errors");
            let mut d = analysis.descriptor;
            d.path = syn::parse_str(&path).unwrap();
            // The crate name and the file name depend on where the test runs; pin them, and
            // keep the line and column that make each location unique.
            d.location = pin_file(&d.location, module);
            d.krate = "fixtures".into();
            out.push(d);
        }
    }
    out
}

/// `<parsed string N>:line:col` (the test's view) becomes `fixtures/src/module.rs:line:col`.
fn pin_file(location: &str, module: &str) -> String {
    let line_col = location.rsplitn(3, ':').take(2).collect::<Vec<_>>();
    format!("fixtures/src/{module}.rs:{}:{}", line_col[1], line_col[0])
}

fn pretty(tokens: TokenStream) -> String {
    let file: syn::File = syn::parse2(tokens).expect("generated code parses");
    prettyplease::unparse(&file)
}

fn expand_graph() -> String {
    let fixture = read_fixture();
    let beans = descriptors(&fixture);
    let items = beans.iter().map(|d| {
        let path = &d.path;
        let fields = d.fields();
        quote!({ path = { #path } #fields })
    });
    pretty(finish(
        agent_compose::__testing::finisher_input(
            quote!(#(#items)*),
            quote!(pub struct CompositionProof),
        ),
        "fixtures",
    ))
}

#[test]
fn composition_proof_expansion() {
    let first = expand_graph();
    assert!(
        !first.contains("compile_error"),
        "the proof graph resolves:\n{first}"
    );
    let second = expand_graph();
    assert_eq!(first, second, "expansion is deterministic");
    insta::assert_snapshot!("composition_proof", first);
}

#[test]
fn tool_attribute_expansion() {
    let fixture = read_fixture();
    let (module, kind, args, item) = fixture.factories.get("write_tool").unwrap();
    let expanded = bean::expand(*kind, args.clone(), item.clone());
    // Names derived from the location and crate vary by environment; normalize them.
    let text = pretty(expanded);
    let normalized = regex_free_normalize(&text);
    let start = normalized.find("<parsed string ").expect("a location");
    let end = start + normalized[start..].find('>').expect("closing bracket") + 1;
    let normalized = normalized.replace(
        &normalized[start..end],
        &format!("fixtures/src/{module}.rs"),
    );
    insta::assert_snapshot!("write_tool_attribute", normalized);
}

/// Replaces the hash in generated macro names, which depends on the crate and location.
fn regex_free_normalize(text: &str) -> String {
    let mut out = String::new();
    for word in text.split_inclusive(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if let Some(rest) = word.strip_prefix("__agent_core_bean_") {
            let tail: String = rest
                .chars()
                .skip_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push_str("__agent_core_bean_HASH");
            out.push_str(&tail);
        } else {
            out.push_str(word);
        }
    }
    out
}

#[test]
fn typed_tool_attribute_expansion() {
    let args = quote!(
        effect = read_only,
        replay = safe,
        capabilities = ["filesystem.read"]
    );
    let item = quote! {
        /// Read a UTF-8 text file of the workspace.
        pub async fn read_file(
            root: Arc<WorkspaceRoot>,
            #[qualifier("strict")] limits: Arc<Limits>,
            #[args] args: ReadArgs,
            ctx: ToolContext<'_>,
        ) -> Result<String, Failure> {
            read(&root, &limits, &args.path, &ctx).await
        }
    };
    let expanded = bean::expand(BeanKind::Tool, args, item);
    let text = regex_free_normalize(&pretty(expanded));
    assert!(!text.contains("compile_error"), "{text}");
    insta::assert_snapshot!("typed_tool_attribute", text);
}
