//! Typed tools: `#[tool(effect = .., replay = .., capabilities = [..])]` on a function whose
//! parameters are injected dependencies, at most one `#[args]` value and at most one call
//! context (`#[context]`, or a parameter of type `ToolContext<'_>`).
//!
//! The attribute checks the safety metadata here, with the rules of agent-core's
//! `DefinitionBuilder::build` (`agent-core/src/tool/definition.rs`; the capability table is
//! compared with agent-core's by `ui-tests/tests/identity.rs`), then rewrites the item into
//! two functions ([`rewrite`]); [`super::expand`] hands the second to the factory pipeline:
//!
//! * the user's function under a hidden name, its parameter attributes removed;
//! * a factory under the user's name taking only the dependencies, which builds the
//!   definition from the same checked facts (`agent_core::tool::typed::definition`) and a
//!   tool that decodes each call, calls the hidden function and converts its output.
//!
//! A typed tool's bean type is `Arc<dyn agent_core::tool::Tool>` written in full (it must
//! resolve wherever the attribute is used), and its key is `Arc<dyn Tool>`, the key every
//! hand-written tool factory and tool collection uses; rustc checks the typed binding, so a
//! consumer whose `Tool` is another trait fails to compile rather than wire silently.

use crate::attr::item::FactoryFn;
use crate::diag::{Code, Errors};
use crate::key;
use crate::naming::{self, Name};
use crate::nesting::{self, Body};
use crate::runtime::CratePath;
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, LitStr, Pat, Type};

/// Every capability agent-core declares: its string, its `Capability` variant, and whether
/// a read-only tool may declare it (`Capability::allowed_for_read_only`).
pub const CAPABILITIES: [(&str, &str, bool); 7] = [
    ("environment.read", "EnvironmentRead", true),
    ("environment.write", "EnvironmentWrite", false),
    ("filesystem.read", "FilesystemRead", true),
    ("filesystem.write", "FilesystemWrite", false),
    ("network.access", "NetworkAccess", false),
    ("process.execute", "ProcessExecute", false),
    ("secrets.read", "SecretsRead", true),
];

/// The arguments that make `#[tool]` typed.
const TYPED_ARGUMENTS: [&str; 3] = ["effect", "replay", "capabilities"];

/// Whether `#[tool(args)]` on `item` is a typed tool: the arguments state safety metadata,
/// or a parameter is marked `#[args]`.
pub fn is_typed(args: &TokenStream, item: &TokenStream) -> bool {
    let in_args = args.clone().into_iter().any(|tt| {
        matches!(&tt, TokenTree::Ident(i) if TYPED_ARGUMENTS.contains(&i.to_string().as_str()))
    });
    in_args || has_args_param(item)
}

fn has_args_param(item: &TokenStream) -> bool {
    // The parameters are the first parenthesized group after `fn <name>`.
    let mut seen_fn = false;
    for tt in item.clone() {
        match &tt {
            TokenTree::Ident(i) if i == "fn" => seen_fn = true,
            TokenTree::Group(g)
                if seen_fn && g.delimiter() == proc_macro2::Delimiter::Parenthesis =>
            {
                let tokens: Vec<TokenTree> = g.stream().into_iter().collect();
                return tokens.windows(2).any(|w| {
                    matches!(&w[0], TokenTree::Punct(p) if p.as_char() == '#')
                        && matches!(&w[1], TokenTree::Group(a) if a.delimiter() == proc_macro2::Delimiter::Bracket
                            && a.stream().to_string() == "args")
                });
            }
            _ => {}
        }
    }
    false
}

/// The safety facts the attribute states.
#[derive(Default)]
struct Facts {
    effect: Option<(String, Span)>,
    replay: Option<(String, Span)>,
    /// (variant, string, span)
    capabilities: Vec<(&'static str, String, Span)>,
    name: Option<LitStr>,
    krate: CratePath,
    /// An effect or replay value was unreadable (and reported): the rules are not checked.
    unreadable: bool,
}

/// What a parameter of the typed function is.
enum Role {
    Dependency(syn::Ident),
    Args,
    Context,
}

/// A typed tool rewritten into plain items: what [`super::expand`] emits beside the factory,
/// and the factory it runs through the factory pipeline.
pub struct Rewritten {
    /// The user's function under its hidden name.
    pub hidden_fn: TokenStream,
    /// The generated factory, under the user's name.
    pub factory: TokenStream,
    /// The arguments left for the factory pipeline (`name`, `aliases`, `crate`, ...).
    pub factory_args: TokenStream,
    /// The mistakes in the safety metadata and the parameters.
    pub errors: Errors,
}

/// Rewrites a typed tool. This only rewrites tokens: it never expands anything, so the
/// attribute path stays one-way (`expand` calls this, never the reverse). `Err` hands the
/// input back untouched when it cannot be rewritten (nested too deeply to parse, or not a
/// complete function); the factory pipeline then reports why.
pub fn rewrite(
    args: TokenStream,
    item: TokenStream,
) -> Result<Rewritten, (TokenStream, TokenStream)> {
    if nesting::check(&args, Body::Scan)
        .and_then(|()| nesting::check(&item, Body::Skip))
        .is_err()
    {
        return Err((args, item));
    }
    let function: FactoryFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => return Err((args, item)),
    };
    let mut errors = Errors::default();
    let (facts, rest) = split_args(args, &mut errors);
    check_facts(&facts, function.sig.ident.span(), &mut errors);
    let description = description(&function.attrs);
    if description.trim().is_empty() {
        errors.at(
            Code::MissingDescription,
            function.sig.ident.span(),
            "a typed tool's doc comment is its description for the model, and this one has none: write `/// What the tool does.` above it",
        );
    }

    let fn_ident = function.sig.ident.clone();
    if !function.sig.generics.params.is_empty() || function.sig.generics.where_clause.is_some() {
        errors.at(
            Code::UnsupportedFactory,
            function.sig.generics.span(),
            format!(
                "typed tool `{fn_ident}` is generic; a tool is one plain, non-generic function"
            ),
        );
    }
    let hidden = Name::new("__agent_core_typed_").user(&fn_ident).call_site();
    let mut hidden_sig = function.sig.clone();
    hidden_sig.ident = hidden.clone();
    let mut roles = Vec::new();
    let mut factory_params = Vec::new();
    let mut fields = Vec::new();
    let mut args_ty: Option<Type> = None;
    for (index, input) in hidden_sig.inputs.iter_mut().enumerate() {
        let FnArg::Typed(param) = input else {
            errors.at(
                Code::UnsupportedFactory,
                input.span(),
                "a typed tool is a free function; `self` has no bean to come from",
            );
            continue;
        };
        let marked = |name: &str| param.attrs.iter().any(|a| a.path().is_ident(name));
        let is_context = marked("context")
            || key::last_segment(&param.ty).is_some_and(|s| s.ident == "ToolContext");
        if marked("args") {
            if args_ty.is_some() {
                errors.at(
                    Code::UnsupportedFactory,
                    param.span(),
                    "a typed tool takes one `#[args]` value; gather the arguments into one type",
                );
            }
            args_ty = Some((*param.ty).clone());
            roles.push(Role::Args);
        } else if is_context {
            roles.push(Role::Context);
        } else {
            let field = match &*param.pat {
                Pat::Ident(p) if p.subpat.is_none() => p.ident.clone(),
                _ => Name::new("__agent_core_dep").number(index).call_site(),
            };
            let attrs: Vec<&Attribute> = param
                .attrs
                .iter()
                .filter(|a| !a.path().is_ident("context"))
                .collect();
            let ty = &param.ty;
            factory_params.push(quote!(#(#attrs)* #field: #ty));
            fields.push((field.clone(), (*param.ty).clone()));
            roles.push(Role::Dependency(field));
        }
        param.attrs.clear();
    }

    let root = facts.krate.root();
    let tool = quote!(#root::tool);
    let typed = quote!(#root::tool::typed);
    let args_ty = args_ty
        .map(|ty| quote!(#ty))
        .unwrap_or_else(|| quote!(#typed::NoArguments));
    let this = naming::fixed("__agent_core_tool");
    let call = naming::fixed("__agent_core_call");
    let ctx = naming::fixed("__agent_core_ctx");
    let decoded = naming::fixed("__agent_core_args");
    let definition = naming::fixed("__agent_core_definition");
    let strukt = naming::fixed("__AgentCoreTypedTool");
    let call_args = roles.iter().map(|role| match role {
        Role::Dependency(field) => quote!(::core::clone::Clone::clone(&#this.#field)),
        Role::Args => quote!(#decoded),
        Role::Context => quote!(#ctx),
    });
    let awaited = if function.sig.asyncness.is_some() {
        quote!(.await)
    } else {
        TokenStream::new()
    };
    let field_decls = fields.iter().map(|(f, ty)| quote!(#f: #ty));
    let field_names = fields.iter().map(|(f, _)| f);
    let name = facts
        .name
        .clone()
        .unwrap_or_else(|| LitStr::new(&naming::unraw(&fn_ident), fn_ident.span()));
    let body = if errors.is_empty() {
        let effect = variant(
            &facts.effect,
            &[("read_only", "ReadOnly"), ("mutating", "Mutating")],
        );
        let replay = variant(
            &facts.replay,
            &[
                ("safe", "Safe"),
                ("idempotent", "Idempotent"),
                ("unsafe", "Unsafe"),
            ],
        );
        let capabilities = facts.capabilities.iter().map(|(v, _, span)| {
            let v = naming::user(v, *span);
            quote!(#tool::Capability::#v)
        });
        let output_span = match &function.sig.output {
            syn::ReturnType::Default => fn_ident.span(),
            syn::ReturnType::Type(_, ty) => ty.span(),
        };
        let convert = quote_spanned! {output_span=>
            #typed::IntoToolOutput::into_tool_output(__agent_core_output, #call.id())
        };
        quote! {{
            struct #strukt {
                #definition: #tool::Definition,
                #(#field_decls,)*
            }
            impl #tool::Tool for #strukt {
                fn definition(&self) -> &#tool::Definition {
                    &self.#definition
                }
                fn execute<'a>(
                    &'a self,
                    #call: #tool::Call,
                    #ctx: #tool::ToolContext<'a>,
                ) -> #tool::BoxFuture<'a, ::core::result::Result<#tool::ToolResult, #tool::ExecutionError>> {
                    let #this = self;
                    ::std::boxed::Box::pin(async move {
                        // A call cancelled before it starts has no effect to report.
                        if #ctx.is_cancelled() {
                            return ::core::result::Result::Err(#tool::ExecutionError::cancelled(#call.id()));
                        }
                        let #decoded: #args_ty = match #typed::decode(#this.#definition.input_schema(), #call.arguments()) {
                            ::core::result::Result::Ok(value) => value,
                            ::core::result::Result::Err(problem) => {
                                return ::core::result::Result::Ok(#tool::ToolResult::problem(#call.id(), problem));
                            }
                        };
                        let __agent_core_output = #hidden(#(#call_args),*) #awaited;
                        #convert
                    })
                }
            }
            let #definition = #typed::definition::<#args_ty>(
                #name,
                #description,
                #tool::Effect::#effect,
                #tool::ReplaySafety::#replay,
                &[#(#capabilities),*],
            )?;
            ::core::result::Result::Ok(::std::sync::Arc::new(#strukt {
                #definition,
                #(#field_names,)*
            }))
        }}
    } else {
        // Never runs: the errors above stop the build.
        quote!({ ::core::panic!() })
    };
    let attrs = &function.attrs;
    let vis = &function.vis;
    let factory = quote! {
        #(#attrs)*
        #vis fn #fn_ident(#(#factory_params),*)
            -> ::core::result::Result<::std::sync::Arc<dyn #tool::Tool>, #tool::DefinitionError>
        #body
    };
    let hidden_body = &function.body;
    // Conditions and lint levels apply to both functions; everything else (docs, modifiers)
    // belongs to the factory.
    let shared_attrs = function.attrs.iter().filter(|a| {
        ["cfg", "cfg_attr", "allow", "expect", "warn", "deny"]
            .iter()
            .any(|name| a.path().is_ident(name))
    });
    let hidden_fn = quote! {
        #(#shared_attrs)*
        #[doc(hidden)]
        #[allow(clippy::too_many_arguments)]
        #hidden_sig #hidden_body
    };
    Ok(Rewritten {
        hidden_fn,
        factory,
        factory_args: rest,
        errors,
    })
}

/// The key every tool factory is found by: a typed tool's bean type is written in full,
/// but it is keyed like a hand-written tool factory.
pub fn tool_key() -> Type {
    syn::parse_quote!(Arc<dyn Tool>)
}

fn variant(fact: &Option<(String, Span)>, table: &[(&str, &'static str)]) -> syn::Ident {
    let (value, span) = fact.as_ref().expect("checked");
    let name = table
        .iter()
        .find(|(s, _)| s == value)
        .map(|(_, v)| *v)
        .expect("checked");
    naming::user(name, *span)
}

/// Splits the typed-tool arguments from the factory arguments (`name`, `aliases`,
/// `qualifiers`, `crate`, ...), which are passed on; `name` and `crate` are read by both.
fn split_args(args: TokenStream, errors: &mut Errors) -> (Facts, TokenStream) {
    let mut facts = Facts::default();
    let mut rest = TokenStream::new();
    let mut chunks: Vec<Vec<TokenTree>> = vec![Vec::new()];
    for tt in args {
        match &tt {
            TokenTree::Punct(p) if p.as_char() == ',' => chunks.push(Vec::new()),
            _ => chunks.last_mut().expect("one chunk").push(tt),
        }
    }
    for chunk in chunks.into_iter().filter(|c| !c.is_empty()) {
        let head = match &chunk[0] {
            TokenTree::Ident(i) => i.to_string(),
            _ => String::new(),
        };
        let value: TokenStream = chunk.iter().skip(2).cloned().collect();
        let has_eq = matches!(chunk.get(1), Some(TokenTree::Punct(p)) if p.as_char() == '=');
        let head_span = chunk[0].span();
        match head.as_str() {
            "effect" | "replay" if has_eq => {
                let slot = if head == "effect" {
                    &mut facts.effect
                } else {
                    &mut facts.replay
                };
                let allowed: &[&str] = if head == "effect" {
                    &["read_only", "mutating"]
                } else {
                    &["safe", "idempotent", "unsafe"]
                };
                let word = match value.clone().into_iter().collect::<Vec<_>>().as_slice() {
                    [TokenTree::Ident(i)] => Some((i.to_string(), i.span())),
                    [TokenTree::Literal(l)] => syn::parse2::<LitStr>(l.to_token_stream_())
                        .ok()
                        .map(|s| (s.value(), s.span())),
                    _ => None,
                };
                match word {
                    Some((word, span)) if allowed.contains(&word.as_str()) => {
                        if slot.is_some() {
                            errors.at(
                                Code::DuplicateAttribute,
                                head_span,
                                format!("`{head}` is given twice"),
                            );
                        }
                        *slot = Some((word, span));
                    }
                    _ => {
                        facts.unreadable = true;
                        errors.at(
                            Code::InvalidSyntax,
                            value.span(),
                            format!(
                                "`{head}` takes one of {}",
                                allowed
                                    .iter()
                                    .map(|a| format!("`{a}`"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        );
                    }
                }
            }
            "capabilities" if has_eq => {
                let list = syn::parse2::<syn::ExprArray>(value.clone());
                let Ok(list) = list else {
                    errors.at(
                        Code::InvalidSyntax,
                        value.span(),
                        "`capabilities` takes a list of strings, e.g. `capabilities = [\"filesystem.read\"]`",
                    );
                    continue;
                };
                for element in list.elems {
                    let syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(lit),
                        ..
                    }) = element
                    else {
                        errors.at(
                            Code::InvalidSyntax,
                            element.span(),
                            "a capability is a string such as `\"filesystem.read\"`",
                        );
                        continue;
                    };
                    let text = lit.value();
                    match CAPABILITIES.iter().find(|(s, _, _)| *s == text) {
                        None => errors.at(
                            Code::UnknownCapability,
                            lit.span(),
                            format!(
                                "unknown capability {text:?}; the capabilities are {}",
                                CAPABILITIES
                                    .iter()
                                    .map(|(s, _, _)| format!("`{s}`"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        ),
                        Some(_) if facts.capabilities.iter().any(|(_, s, _)| *s == text) => errors
                            .at(
                                Code::DuplicateAttribute,
                                lit.span(),
                                format!("capability `{text}` is declared twice"),
                            ),
                        Some((_, variant, _)) => {
                            facts.capabilities.push((variant, text, lit.span()))
                        }
                    }
                }
            }
            _ => {
                if head == "name" && has_eq {
                    facts.name = syn::parse2::<LitStr>(value.clone()).ok();
                }
                if head == "crate"
                    && has_eq
                    && let Ok(path) = syn::parse2::<syn::Path>(value.clone())
                {
                    facts.krate = CratePath::written(path);
                }
                if !rest.is_empty() {
                    rest.extend(quote!(,));
                }
                rest.extend(chunk);
            }
        }
    }
    (facts, rest)
}

trait LiteralTokens {
    fn to_token_stream_(&self) -> TokenStream;
}

impl LiteralTokens for proc_macro2::Literal {
    fn to_token_stream_(&self) -> TokenStream {
        TokenStream::from(TokenTree::Literal(self.clone()))
    }
}

/// The compile errors the attribute reports for these facts (values as written: `read_only`,
/// `safe`, `"filesystem.read"`), as text; empty when `DefinitionBuilder::build` accepts
/// them. `ui-tests/tests/identity.rs` compares it with agent-core on every combination.
pub fn safety_errors(effect: &str, replay: &str, capabilities: &[&str]) -> Vec<String> {
    let capabilities = capabilities
        .iter()
        .map(|c| format!("{c:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let args: TokenStream =
        format!("effect = {effect}, replay = {replay}, capabilities = [{capabilities}]")
            .parse()
            .unwrap_or_default();
    let mut errors = Errors::default();
    let (facts, _) = split_args(args, &mut errors);
    check_facts(&facts, Span::call_site(), &mut errors);
    match errors.into_result() {
        Ok(()) => Vec::new(),
        Err(all) => all.into_iter().map(|e| e.to_string()).collect(),
    }
}

/// The rules of `DefinitionBuilder::build` about effect, replay safety and capabilities.
fn check_facts(facts: &Facts, missing_span: Span, errors: &mut Errors) {
    if facts.unreadable {
        return;
    }
    let (Some((effect, _)), Some((replay, replay_span))) = (&facts.effect, &facts.replay) else {
        let missing: Vec<&str> = [
            ("effect", facts.effect.is_none()),
            ("replay", facts.replay.is_none()),
        ]
        .iter()
        .filter(|(_, m)| *m)
        .map(|(w, _)| *w)
        .collect();
        errors.at(
            Code::MissingToolSafety,
            missing_span,
            format!(
                "a typed tool states its safety, and this one lacks {}: add {}",
                missing
                    .iter()
                    .map(|w| format!("`{w}`"))
                    .collect::<Vec<_>>()
                    .join(" and "),
                missing
                    .iter()
                    .map(|w| if *w == "effect" {
                        "`effect = read_only` or `effect = mutating`"
                    } else {
                        "`replay = safe`, `replay = idempotent` or `replay = unsafe`"
                    })
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        );
        return;
    };
    match (effect.as_str(), replay.as_str()) {
        ("read_only", "safe") | ("mutating", "idempotent" | "unsafe") => {}
        ("read_only", other) => errors.at(
            Code::ReadOnlyReplay,
            *replay_span,
            format!("a read-only tool only observes, so running it again is always safe: write `replay = safe`, not `replay = {other}` (or `effect = mutating` if it changes something)"),
        ),
        _ => errors.at(
            Code::MutatingReplay,
            *replay_span,
            "a mutating tool changes something, so running it again is not free of effects: write `replay = idempotent` or `replay = unsafe`, not `replay = safe`",
        ),
    }
    if effect == "read_only" {
        for (_, text, span) in &facts.capabilities {
            let allowed = CAPABILITIES.iter().any(|(s, _, ro)| s == text && *ro);
            if !allowed {
                errors.at(
                    Code::ReadOnlyCapability,
                    *span,
                    format!("a read-only tool cannot declare `{text}`, which changes the world or sends data out of it: write `effect = mutating` (with `replay = idempotent` or `unsafe`) or drop the capability"),
                );
            }
        }
    }
}

/// The doc comment as one description: lines trimmed, a paragraph's lines joined by a
/// space, paragraphs by a blank line.
fn description(attrs: &[Attribute]) -> String {
    let mut paragraphs: Vec<String> = vec![String::new()];
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        let syn::Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) = &nv.value
        else {
            continue;
        };
        let text = s.value();
        // `///` alone is an empty string, which has no lines but ends a paragraph.
        let lines: Vec<&str> = if text.trim().is_empty() {
            vec![""]
        } else {
            text.lines().collect()
        };
        for line in lines {
            let line = line.trim();
            let current = paragraphs.last_mut().expect("one paragraph");
            if line.is_empty() {
                if !current.is_empty() {
                    paragraphs.push(String::new());
                }
            } else {
                if !current.is_empty() {
                    current.push(' ');
                }
                current.push_str(line);
            }
        }
    }
    paragraphs.retain(|p| !p.is_empty());
    paragraphs.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_form_is_detected_by_facts_or_an_args_parameter() {
        assert!(is_typed(
            &quote!(effect = read_only),
            &quote!(
                fn f() {}
            )
        ));
        assert!(is_typed(
            &quote!(),
            &quote!(
                fn f(#[args] a: A) {}
            )
        ));
        assert!(!is_typed(
            &quote!(name = "x"),
            &quote!(
                fn f(a: Arc<A>) -> Arc<dyn Tool> {}
            )
        ));
    }

    #[test]
    fn descriptions_join_lines_and_keep_paragraphs() {
        let f: FactoryFn = syn::parse2(quote! {
            /// Read a file.
            ///   Binary files are refused.
            ///
            /// Paths are relative.
            fn f() {}
        })
        .unwrap();
        assert_eq!(
            description(&f.attrs),
            "Read a file. Binary files are refused.\n\nPaths are relative."
        );
    }

    fn errors_of(args: TokenStream) -> Vec<String> {
        let mut errors = Errors::default();
        let (facts, _) = split_args(args, &mut errors);
        check_facts(&facts, Span::call_site(), &mut errors);
        errors
            .to_compile_errors()
            .to_string()
            .split("compile_error")
            .skip(1)
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_contradiction_has_its_code() {
        let cases = [
            (
                quote!(effect = read_only, replay = idempotent),
                "[read-only-replay]",
            ),
            (
                quote!(effect = read_only, replay = unsafe),
                "[read-only-replay]",
            ),
            (
                quote!(effect = mutating, replay = safe),
                "[mutating-replay]",
            ),
            (
                quote!(
                    effect = read_only,
                    replay = safe,
                    capabilities = ["filesystem.write"]
                ),
                "[read-only-capability]",
            ),
            (
                quote!(
                    effect = read_only,
                    replay = safe,
                    capabilities = ["disk.read"]
                ),
                "[unknown-capability]",
            ),
            (quote!(replay = safe), "[missing-tool-safety]"),
            (quote!(effect = mutating), "[missing-tool-safety]"),
            (
                quote!(effect = mutating, replay = unsafe, capabilities = ["network.access", "network.access"]),
                "[duplicate-attribute]",
            ),
            (quote!(effect = sideways, replay = safe), "[invalid-syntax]"),
        ];
        for (args, code) in cases {
            let errors = errors_of(args.clone());
            assert!(
                errors.iter().any(|e| e.contains(code)),
                "{args}: {errors:?}"
            );
        }
        for ok in [
            quote!(
                effect = read_only,
                replay = safe,
                capabilities = ["filesystem.read", "secrets.read", "environment.read"]
            ),
            quote!(
                effect = mutating,
                replay = idempotent,
                capabilities = ["filesystem.write", "process.execute"]
            ),
            quote!(effect = mutating, replay = unsafe),
        ] {
            assert!(errors_of(ok.clone()).is_empty(), "{ok}");
        }
    }
}
