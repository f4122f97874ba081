//! `bean_set!`: a named, reusable group of factories (and other sets).
//!
//! A set `tools` becomes a module `tools` that re-exports its members (so one path reaches
//! each member's function, types module and descriptor), plus a descriptor macro under the same
//! name that carries every member's descriptor. That macro is built by running a chain over
//! the members where the set is defined; each descriptor's path is rewritten to start with
//! whatever path `compose!` later reaches the set by. A set therefore costs one link of
//! recursion however many members it has, and works across modules and crates exactly like a
//! factory.

use crate::attr::expand;
use crate::diag::{self, Code, Errors};
use crate::location;
use crate::runtime::CratePath;
use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Ident, Path, Token, Visibility};

struct SetDef {
    attrs: Vec<Attribute>,
    vis: Visibility,
    name: Ident,
    members: Vec<Path>,
}

/// `crate = path;` (optional), then the sets.
struct Sets {
    krate: CratePath,
    sets: Vec<SetDef>,
}

impl Parse for Sets {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let krate = CratePath::parse_line(input)?;
        let mut sets = Vec::new();
        while !input.is_empty() {
            let attrs = input.call(Attribute::parse_outer)?;
            let vis: Visibility = input.parse()?;
            let name: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            let content;
            syn::bracketed!(content in input);
            let members: Punctuated<Path, Token![,]> =
                content.parse_terminated(Path::parse_mod_style, Token![,])?;
            input.parse::<Token![;]>()?;
            sets.push(SetDef {
                attrs,
                vis,
                name,
                members: members.into_iter().collect(),
            });
        }
        Ok(Sets { krate, sets })
    }
}

/// Expands `bean_set! { crate = path; vis name = [paths]; ... }` (the `crate` line
/// optional).
pub fn expand(input: TokenStream) -> TokenStream {
    let sets = match syn::parse2::<Sets>(input) {
        Ok(s) => s,
        // A coded error (a bad `crate = ...`) already says what to write.
        Err(e) if e.to_string().starts_with('[') => return e.to_compile_error(),
        Err(e) => {
            let e = diag::syntax(syn::Error::new(
                e.span(),
                format!("{e}; write `bean_set! {{ pub name = [factory_a, module::factory_b]; }}`"),
            ));
            return e.to_compile_error();
        }
    };
    let mut errors = Errors::default();
    let mut out = TokenStream::new();
    let mut seen = std::collections::BTreeMap::new();
    for set in sets.sets {
        if let Some(&first) = seen.get(&set.name.to_string()) {
            errors.at(
                Code::DuplicateBeanName,
                set.name.span(),
                format!(
                    "bean set `{}` is defined twice\nnote: first defined at {}",
                    set.name,
                    location::of(first)
                ),
            );
            continue;
        }
        seen.insert(set.name.to_string(), set.name.span());
        out.extend(expand_one(set, &sets.krate));
    }
    let errors = errors.to_compile_errors();
    quote!(#errors #out)
}

fn expand_one(set: SetDef, crate_path: &CratePath) -> TokenStream {
    let SetDef {
        attrs,
        vis,
        name,
        members,
    } = set;
    let inner_vis = member_visibility(&vis);
    let reexports = members.iter().map(|m| {
        let path = from_child_module(m);
        quote!(#[doc(no_inline)] #inner_vis use #path;)
    });
    let krate = std::env::var("CARGO_CRATE_NAME").unwrap_or_default();
    let export = expand::export_name("set", &krate, &name.to_string(), &location::of(name.span()));
    let entries: Vec<TokenStream> = members.iter().map(|m| quote!(#m)).collect();
    let header = quote!({ @set #export [ #({ #entries })* ] });
    let chain = crate::transport::chain::run(&entries, &header, &format!("set_{name}"), crate_path);
    quote! {
        #(#attrs)*
        #[allow(unused_imports, unreachable_pub)]
        #vis mod #name {
            #[allow(unused_imports)]
            use super::*;
            #(#reexports)*
        }

        #chain

        #[doc(hidden)]
        #[allow(unused_imports, unreachable_pub)]
        #vis use #export as #name;
    }
}

/// The path of a member descriptor as seen from `compose!`: `$($me)*` (the path that reached
/// the set) then the member's re-exported name, then whatever a nested set added below it.
pub fn member_path(path: &TokenStream, entries: &[Path]) -> TokenStream {
    let segments = |tokens: &TokenStream| -> Vec<String> {
        tokens
            .clone()
            .into_iter()
            .filter_map(|t| match t {
                proc_macro2::TokenTree::Ident(i) => Some(i.to_string()),
                _ => None,
            })
            .collect()
    };
    let written = segments(path);
    let entry = entries
        .iter()
        .map(|e| (e, segments(&quote!(#e))))
        .filter(|(_, segs)| written.starts_with(segs))
        .max_by_key(|(_, segs)| segs.len());
    let (last, below) = match entry {
        Some((e, segs)) => (
            e.segments.last().map(|s| s.ident.to_string()),
            written[segs.len()..].to_vec(),
        ),
        None => (written.last().cloned(), Vec::new()),
    };
    let names = last
        .into_iter()
        .chain(below)
        .map(|s| proc_macro2::Ident::new(&s, proc_macro2::Span::call_site()));
    let me = crate::transport::chain::me();
    quote!(#me #(:: #names)*)
}

/// Visibility of the re-exports inside the set module: wide enough for whoever can see the
/// set itself.
fn member_visibility(vis: &Visibility) -> TokenStream {
    match vis {
        Visibility::Public(_) => quote!(pub),
        Visibility::Inherited => quote!(pub(super)),
        _ => quote!(pub(crate)),
    }
}

/// Rewrites a member path so that it resolves one module deeper.
fn from_child_module(path: &Path) -> TokenStream {
    let first = path
        .segments
        .first()
        .map(|s| s.ident.to_string())
        .unwrap_or_default();
    if path.leading_colon.is_some() || first == "crate" {
        quote!(#path)
    } else if first == "self" {
        let rest = path.segments.iter().skip(1);
        quote!(super #(:: #rest)*)
    } else if first == "super" {
        quote!(super :: #path)
    } else if path.segments.len() == 1 {
        // A name defined in (or imported into) the parent module. It must be named through
        // `super::`, because re-exporting a binding that only exists through the private
        // glob import below would be a privacy error.
        quote!(super :: #path)
    } else {
        // `module::item` or `other_crate::item`: the first segment resolves through
        // `use super::*` or the extern prelude, and the item keeps its own visibility.
        quote!(#path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_member_paths() {
        let p = |s: &str| {
            from_child_module(&syn::parse_str(s).unwrap())
                .to_string()
                .replace(' ', "")
        };
        assert_eq!(p("read_tool"), "super::read_tool");
        assert_eq!(p("tools::read_tool"), "tools::read_tool");
        assert_eq!(p("self::read_tool"), "super::read_tool");
        assert_eq!(p("super::x::read_tool"), "super::super::x::read_tool");
        assert_eq!(p("crate::a::b"), "crate::a::b");
        assert_eq!(p("::ext::b"), "::ext::b");
    }

    #[test]
    fn member_paths_start_at_the_set() {
        let entries: Vec<Path> = vec![
            syn::parse_quote!(read),
            syn::parse_quote!(tools::write),
            syn::parse_quote!(inner),
        ];
        let p = |tokens: TokenStream| member_path(&tokens, &entries).to_string().replace(' ', "");
        assert_eq!(p(quote!(read)), "$($me)*::read");
        assert_eq!(p(quote!(tools::write)), "$($me)*::write");
        assert_eq!(p(quote!(inner::deep::x)), "$($me)*::inner::deep::x");
    }

    #[test]
    fn malformed_sets_are_coded_errors() {
        for input in [
            quote!(pub tools),
            quote!(pub tools = read;),
            quote!(= [a];),
            quote!(pub t = [a]; pub t = [b];),
        ] {
            let out = expand(input.clone()).to_string();
            assert!(out.contains("compile_error"), "{input}: {out}");
            assert!(
                out.contains("[invalid-syntax]") || out.contains("[duplicate-bean-name]"),
                "{out}"
            );
        }
    }
}
