//! The finisher: the last link of every chain. It receives every descriptor at once and,
//! by the chain header, either writes a relay or bean-set macro that passes the
//! descriptors on, or parses them, resolves the graph ([`crate::graph`]), plans construction
//! ([`crate::plan`]) and generates the application ([`crate::codegen`]), or the stub after
//! an error. It drives every phase, so it sits above them all, beside the crate root.

use crate::codegen;
use crate::diag;
use crate::graph;
use crate::plan;
use crate::transport::{chain, compose, descriptor, set};
use proc_macro2::TokenStream;
use syn::parse::{ParseStream, Parser};

/// What the last link of a chain builds.
enum Finish {
    /// The application.
    App(compose::Header),
    /// A relay macro of a chunked chain.
    Relay(syn::Ident),
    /// A bean set's descriptor macro, with the set's entries as written.
    Set(syn::Ident, Vec<syn::Path>),
}

impl syn::parse::Parse for Finish {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(syn::Token![@]) {
            input.parse::<syn::Token![@]>()?;
            let kind: syn::Ident = input.parse()?;
            let name: syn::Ident = input.parse()?;
            if kind == "relay" {
                return Ok(Finish::Relay(name));
            }
            if kind == "set" {
                let entries;
                syn::bracketed!(entries in input);
                let mut paths = Vec::new();
                while !entries.is_empty() {
                    let group;
                    syn::braced!(group in entries);
                    paths.push(group.call(syn::Path::parse_mod_style)?);
                }
                return Ok(Finish::Set(name, paths));
            }
            return Err(syn::Error::new(kind.span(), "unknown chain finisher"));
        }
        Ok(Finish::App(input.parse()?))
    }
}

/// Runs the finisher on `input` for a build of `current_crate`, the crate whose tokens keep
/// their spans (see [`graph::resolve`]).
pub fn finish(input: TokenStream, current_crate: &str) -> TokenStream {
    let parsed = chain::read_finished(input).and_then(|finished| {
        crate::nesting::check(&finished.header, crate::nesting::Body::Scan)?;
        let finish = Parser::parse2(
            |input: ParseStream<'_>| {
                let finish: Finish = input.parse()?;
                if !input.is_empty() {
                    return Err(input.error("unexpected tokens after the chain header"));
                }
                Ok(finish)
            },
            finished.header,
        )?;
        Ok((finished.descriptors, finish))
    });
    let (descriptors, finish) = match parsed {
        Ok(v) => v,
        Err(e) => return diag::syntax(e).to_compile_error(),
    };
    let header = match finish {
        Finish::App(header) => header,
        Finish::Relay(name) => {
            return match forward(descriptors, |path| path.clone()) {
                Ok(descriptors) => chain::relay_macro(&name, &descriptors),
                Err(e) => diag::syntax(e).to_compile_error(),
            };
        }
        Finish::Set(export, entries) => {
            let members = set::MemberPaths::new(&entries);
            return match forward(descriptors, |path| members.of(path)) {
                Ok(descriptors) => chain::descriptor_macro(&export, &descriptors),
                Err(e) => diag::syntax(e).to_compile_error(),
            };
        }
    };
    let beans = match descriptors
        .into_iter()
        .map(syn::parse2::<descriptor::Descriptor>)
        .collect::<syn::Result<Vec<_>>>()
    {
        Ok(beans) => beans,
        Err(e) => return diag::syntax(e).to_compile_error(),
    };
    if beans.iter().any(|b| b.poisoned) {
        // The attribute already reported the mistake; stay quiet and keep names resolvable.
        return codegen::stub(&header, &beans);
    }
    match graph::resolve(&beans, current_crate) {
        Ok(resolution) => {
            let plan = plan::ConstructionPlan::new(&beans, &resolution);
            codegen::generate(&header, &beans, &resolution, &plan, current_crate)
        }
        Err(err) => {
            let errors = err.to_compile_error();
            let stub = codegen::stub(&header, &beans);
            quote::quote!(#errors #stub)
        }
    }
}

/// Re-emits descriptors as `{ path = { <path> } fields }` groups, the fields as written.
fn forward(
    descriptors: Vec<TokenStream>,
    path: impl Fn(&TokenStream) -> TokenStream,
) -> syn::Result<TokenStream> {
    let mut out = TokenStream::new();
    for descriptor in descriptors {
        let forwarded = syn::parse2::<descriptor::Forwarded>(descriptor)?;
        let path = path(&forwarded.path);
        let fields = forwarded.fields;
        out.extend(quote::quote!({ path = { #path } #fields }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    /// What `bean_set! { pub tools = [read]; }` hands its finisher, with `fields` after the
    /// member's path.
    fn set_input(fields: TokenStream) -> TokenStream {
        chain::finisher_input(
            quote!({ path = { read } #fields }),
            quote!(@set __export [ { read } ]),
        )
    }

    #[test]
    fn a_set_passes_its_members_fields_on_as_written() {
        // Fields only `compose!` reads: a set re-paths the member and copies the rest.
        let fields = quote!(agent_core_descriptor_v2 kind = tool fn = read unknown_field = [1 2]);
        let out = finish(set_input(fields), "app").to_string();
        assert!(
            out.contains(
                "{ path = { $ ($ me) * :: read } agent_core_descriptor_v2 kind = tool fn = read unknown_field = [1 2] }"
            ),
            "{out}"
        );
        assert!(!out.contains("compile_error"), "{out}");
    }

    #[test]
    fn a_set_still_rejects_another_versions_descriptor() {
        let out = finish(
            set_input(quote!(agent_core_descriptor_v1 kind = bean)),
            "app",
        );
        let out = out.to_string();
        assert!(out.contains("compile_error"), "{out}");
        assert!(out.contains("incompatible version"), "{out}");
    }

    #[test]
    fn the_application_still_parses_every_field() {
        let input = chain::finisher_input(
            quote!({ path = { read } agent_core_descriptor_v2 kind = tool fn = read unknown_field = 1 }),
            quote!(pub struct App),
        );
        let out = finish(input, "app").to_string();
        assert!(out.contains("compile_error"), "{out}");
    }
}
