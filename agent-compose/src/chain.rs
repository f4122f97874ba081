//! Descriptor chains with bounded recursion depth.
//!
//! A chain visits a list of paths: each path's descriptor macro appends its descriptor and
//! invokes the next one, and the last hands everything to `compose_finish!`. Every link is one
//! level of macro recursion, and rustc stops at 128 by default. So long lists are cut into
//! chunks of [`CHUNK`]: each chunk's chain ends by defining a *stage* macro that holds that
//! chunk's descriptors, and one *gather* invocation, placed beside the chunks (so it starts at
//! depth one), runs through the stage macros in order. rustc defers the gather until the
//! stage macros exist. Depth is about `CHUNK + entries / CHUNK`, under 128 for up to ~3900
//! entries; a bean set counts as one entry (it carries its members' descriptors).
//!
//! The header travels unchanged to the finishing macro and says what to build:
//! `{ attrs vis struct App }` for an application, `{ @stage name }` for a stage, and
//! `{ @set export [entries] }` for a bean set.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

/// Entries per chunk.
pub const CHUNK: usize = 64;

/// The chain over `entries` (each a path) ending in `header`'s finisher. `unique` names the
/// stage macros; it must be unique among chains of one module.
pub fn run(entries: &[TokenStream], header: &TokenStream, unique: &str) -> TokenStream {
    if entries.len() <= CHUNK {
        return link(entries, header);
    }
    // Stage names carry the call site's hygiene, so the definitions (made deep inside the
    // chunk chains) and the gather's invocations resolve to each other.
    let names: Vec<Ident> = (0..entries.len().div_ceil(CHUNK))
        .map(|k| {
            format_ident!(
                "__agent_core_stage_{}_{}",
                unique,
                k,
                span = Span::call_site()
            )
        })
        .collect();
    let chunks = entries
        .chunks(CHUNK)
        .zip(&names)
        .map(|(chunk, name)| link(chunk, &quote!({ @stage #name })));
    let Some((first, rest)) = names.split_first() else {
        return link(entries, header);
    };
    quote! {
        #(#chunks)*
        #first! { [] [ #(#rest)* ] #header }
    }
}

/// The first link of one chain.
fn link(entries: &[TokenStream], header: &TokenStream) -> TokenStream {
    match entries.split_first() {
        None => quote!(::agent_core::__private::compose_finish! { [] #header }),
        Some((first, rest)) => {
            let rest = rest.iter().map(|p| quote!({ #p }));
            quote!(#first ! { { #first } [ #(#rest)* ] [] #header })
        }
    }
}

/// The stage macro holding one chunk's descriptors (`descriptors` already in brace groups).
pub fn stage(name: &Ident, descriptors: &TokenStream) -> TokenStream {
    quote! {
        macro_rules! #name {
            ([ $($acc:tt)* ] [ $next:ident $($rest:ident)* ] $($header:tt)*) => {
                $next! { [ $($acc)* #descriptors ] [ $($rest)* ] $($header)* }
            };
            ([ $($acc:tt)* ] [ ] $($header:tt)*) => {
                ::agent_core::__private::compose_finish! { [ $($acc)* #descriptors ] $($header)* }
            };
        }
    }
}

/// A descriptor macro (for a factory or a bean set): appends `descriptors` (which may refer
/// to `$($me)*`, the path the chain reached it by) and continues the chain.
pub fn descriptor_macro(export: &Ident, descriptors: &TokenStream) -> TokenStream {
    quote! {
        #[doc(hidden)]
        #[macro_export]
        macro_rules! #export {
            ({ $($me:tt)* } [ { $($next:tt)* } $($rest:tt)* ] [ $($acc:tt)* ] $($header:tt)*) => {
                $($next)* ! {
                    { $($next)* } [ $($rest)* ] [ $($acc)* #descriptors ] $($header)*
                }
            };
            ({ $($me:tt)* } [ ] [ $($acc:tt)* ] $($header:tt)*) => {
                ::agent_core::__private::compose_finish! {
                    [ $($acc)* #descriptors ] $($header)*
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(n: usize) -> Vec<TokenStream> {
        (0..n)
            .map(|i| {
                let id = format_ident!("f{}", i);
                quote!(m::#id)
            })
            .collect()
    }

    #[test]
    fn short_lists_are_one_chain() {
        let out = run(&paths(3), &quote!({ struct App }), "app").to_string();
        assert!(
            out.starts_with(
                "m :: f0 ! { { m :: f0 } [{ m :: f1 } { m :: f2 }] [] { struct App } }"
            ),
            "{out}"
        );
        assert!(!out.contains("__agent_core_stage"), "{out}");
    }

    #[test]
    fn long_lists_are_chunked_and_gathered() {
        let out = run(&paths(CHUNK * 2 + 1), &quote!({ struct App }), "app").to_string();
        assert_eq!(out.matches("@ stage").count(), 3, "{out}");
        assert!(out.ends_with("__agent_core_stage_app_0 ! { [] [__agent_core_stage_app_1 __agent_core_stage_app_2] { struct App } }"), "{out}");
    }

    #[test]
    fn empty_lists_finish_directly() {
        let out = run(&[], &quote!({ struct App }), "app").to_string();
        assert!(out.contains("compose_finish"), "{out}");
    }
}
