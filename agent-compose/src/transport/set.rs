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
use crate::naming::{self, Name};
use crate::runtime::CratePath;
use proc_macro2::TokenStream;
use quote::quote;
use std::collections::HashMap;
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
    if let Err(e) = crate::nesting::check(&input, crate::nesting::Body::Scan) {
        return e.to_compile_error();
    }
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
    let export = expand::export_name("set", &krate, &name, &location::of(name.span()));
    let entries: Vec<TokenStream> = members.iter().map(|m| quote!(#m)).collect();
    let header = quote!({ @set #export [ #({ #entries })* ] });
    let unique = Name::new("set_").user(&name);
    let chain = crate::transport::chain::run(&entries, &header, &unique, crate_path);
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

/// The entries of one set, indexed by their segments, for rewriting member descriptor paths
/// in time linear in the number of descriptors.
pub struct MemberPaths {
    /// Each entry's segment names (without `r#`, so `r#type` and `type` are one name), to
    /// the entry's last segment as written.
    by_segments: HashMap<Vec<String>, Ident>,
    /// The most segments any entry has.
    longest: usize,
}

impl MemberPaths {
    /// Indexes `entries`, the set's members as written.
    pub fn new(entries: &[Path]) -> Self {
        let mut by_segments = HashMap::with_capacity(entries.len());
        let mut longest = 0;
        for entry in entries {
            let segments: Vec<String> = entry
                .segments
                .iter()
                .map(|s| naming::unraw(&s.ident))
                .collect();
            let Some(last) = entry.segments.last() else {
                continue;
            };
            longest = longest.max(segments.len());
            // Two entries of one path name one member: either gives the same segments.
            by_segments
                .entry(segments)
                .or_insert_with(|| last.ident.clone());
        }
        MemberPaths {
            by_segments,
            longest,
        }
    }

    /// The path of a member descriptor as seen from `compose!`: `$($me)*` (the path that
    /// reached the set) then the member's re-exported name, then whatever a nested set added
    /// below it. Identifiers are the tokens as written, so a raw one stays raw.
    pub fn of(&self, path: &TokenStream) -> TokenStream {
        let written: Vec<Ident> = path
            .clone()
            .into_iter()
            .filter_map(|t| match t {
                proc_macro2::TokenTree::Ident(i) => Some(i),
                _ => None,
            })
            .collect();
        let keys: Vec<String> = written.iter().map(naming::unraw).collect();
        // The entry with the most segments that starts the written path.
        let entry = (1..=self.longest.min(keys.len()))
            .rev()
            .find_map(|len| self.by_segments.get(&keys[..len]).map(|last| (last, len)));
        let names: Vec<&Ident> = match entry {
            Some((last, len)) => std::iter::once(last).chain(&written[len..]).collect(),
            None => written.last().into_iter().collect(),
        };
        let me = crate::transport::chain::me();
        quote!(#me #(:: #names)*)
    }
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
        let members = MemberPaths::new(&entries);
        let p = |tokens: TokenStream| members.of(&tokens).to_string().replace(' ', "");
        assert_eq!(p(quote!(read)), "$($me)*::read");
        assert_eq!(p(quote!(tools::write)), "$($me)*::write");
        assert_eq!(p(quote!(inner::deep::x)), "$($me)*::inner::deep::x");
    }

    #[test]
    fn raw_members_keep_their_raw_names() {
        let entries: Vec<Path> = vec![syn::parse_quote!(r#type), syn::parse_quote!(m::r#match)];
        let members = MemberPaths::new(&entries);
        let p = |tokens: TokenStream| members.of(&tokens).to_string().replace(' ', "");
        assert_eq!(p(quote!(r#type)), "$($me)*::r#type");
        assert_eq!(p(quote!(m::r#match)), "$($me)*::r#match");
        assert_eq!(
            p(quote!(r#type::inner::r#fn)),
            "$($me)*::r#type::inner::r#fn"
        );
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
