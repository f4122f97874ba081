//! Descriptor chains with bounded recursion depth and linear cost.
//!
//! A chain visits a queue of paths that always ends in the finisher, `compose_finish!`. Each
//! path's descriptor macro appends its descriptor to the accumulator and invokes the next
//! path; the finisher receives every descriptor at once. A link is invoked as
//!
//! ```text
//! path! { { path } [ { next } ... { ::agent_core::__private_v0_1::compose_finish } ] [acc] { header } }
//! ```
//!
//! Each link wraps the accumulator it received, as one token tree, into the one it passes on:
//! `[ [acc] {descriptor} ]`. `macro_rules!` matches and copies a token tree without walking
//! into it, so a link costs the size of its own descriptors however many came before it, and
//! the finisher flattens the nesting once. (Re-emitting `$($acc)*` instead made every link
//! copy every earlier descriptor: quadratic in the chain's length.) Ending every queue in the
//! finisher gives each descriptor macro a single arm, so a descriptor is written once.
//!
//! Every link is one level of macro recursion, and rustc stops at 128 by default. So long
//! lists are cut into chunks of [`CHUNK`]: each chunk's chain ends by defining a *relay*
//! macro that appends that chunk's descriptors like any descriptor macro, and one *gather*
//! chain, placed beside the chunks (so it starts at depth one), runs through the relay macros
//! in order. rustc defers the gather until the relay macros exist. Depth is about
//! `CHUNK + entries / CHUNK`, under 128 for up to ~3900 entries; a bean set counts as one
//! entry (it carries its members' descriptors).
//!
//! The header travels unchanged to the finisher and says what to build:
//! `{ crate = path; attrs vis struct App }` for an application (the `crate` line only when
//! written), `{ @relay name }` for a relay macro, and `{ @set export [entries] }` for a bean
//! set. The finisher is reached through agent-core's versioned hidden module, named by the
//! crate path of the `compose!` or `bean_set!` that started the chain.

use crate::naming::Name;
use crate::runtime::CratePath;
use proc_macro2::{Ident, Punct, Spacing, Span, TokenStream};
use quote::quote;

/// Entries per chunk.
pub const CHUNK: usize = 64;

/// The chain over `entries` (each a path) ending in `header`'s finisher, reached through
/// `krate`. `unique` names the relay macros (`__agent_core_relay_<unique>_<k>`); it must be
/// unique among chains of one module.
pub fn run(
    entries: &[TokenStream],
    header: &TokenStream,
    unique: &Name,
    krate: &CratePath,
) -> TokenStream {
    let finisher = finisher(krate);
    if entries.len() <= CHUNK {
        return link(entries, header, &finisher);
    }
    // Relay names carry the call site's hygiene, so the definitions (made deep inside the
    // chunk chains) and the gather's invocations resolve to each other.
    let names: Vec<TokenStream> = (0..entries.len().div_ceil(CHUNK))
        .map(|k| {
            let name = Name::new("__agent_core_relay_")
                .then(unique)
                .fixed("_")
                .number(k)
                .call_site();
            quote!(#name)
        })
        .collect();
    let chunks = entries
        .chunks(CHUNK)
        .zip(&names)
        .map(|(chunk, name)| link(chunk, &quote!({ @relay #name }), &finisher));
    let gather = link(&names, header, &finisher);
    quote! {
        #(#chunks)*
        #gather
    }
}

/// `<krate>::__private_vX_Y::compose_finish`, the last path of every queue.
fn finisher(krate: &CratePath) -> TokenStream {
    let private = krate.private();
    quote!(#private::compose_finish)
}

/// The first link of one chain.
fn link(entries: &[TokenStream], header: &TokenStream, finisher: &TokenStream) -> TokenStream {
    match entries.split_first() {
        None => quote!(#finisher! { { #finisher } [] [] #header }),
        Some((first, rest)) => {
            quote!(#first ! { { #first } [ #({ #rest })* { #finisher } ] [] #header })
        }
    }
}

/// The relay macro holding one chunk's descriptors (`descriptors` already in brace groups).
pub fn relay_macro(name: &Ident, descriptors: &TokenStream) -> TokenStream {
    let arm = append_arm(descriptors);
    quote! {
        macro_rules! #name { #arm }
    }
}

/// A descriptor macro (for a factory or a bean set): appends `descriptors` (which may refer
/// to `$($me)*`, the path the chain reached it by) and continues the chain.
pub fn descriptor_macro(export: &Ident, descriptors: &TokenStream) -> TokenStream {
    let arm = append_arm(descriptors);
    quote! {
        #[doc(hidden)]
        #[macro_export]
        macro_rules! #export { #arm }
    }
}

/// `$` as a token. `quote!` has no rule for a literal `$` and lexes it from text at every
/// occurrence, which made the one rule below a tenth of a bean attribute's expansion time.
fn dollar() -> Punct {
    Punct::new('$', Spacing::Alone)
}

/// `$($me)*` inside a descriptor macro: the path by which the chain reached it.
pub fn me() -> TokenStream {
    let d = dollar();
    quote!(#d(#d me)*)
}

/// The one rule of every link: append `descriptors` around the accumulator and invoke the
/// next path of the queue (the last one is the finisher).
fn append_arm(descriptors: &TokenStream) -> TokenStream {
    let d = dollar();
    quote! {
        ({ #d(#d me:tt)* } [ { #d(#d next:tt)* } #d(#d rest:tt)* ] #d acc:tt #d header:tt) => {
            #d(#d next)* ! { { #d(#d next)* } [ #d(#d rest)* ] [ #d acc #descriptors ] #d header }
        };
    }
}

/// The finisher's view of a chain's end: `{ finisher } [] [acc] { header }`, with the
/// descriptor groups of the nested accumulator in chain order.
pub struct Finished {
    /// Every descriptor group (`{ path = { .. } fields }`), in chain order.
    pub descriptors: Vec<TokenStream>,
    /// The header's contents.
    pub header: TokenStream,
}

/// Reads what the last link passed to the finisher; never panics on malformed input.
pub fn read_finished(input: TokenStream) -> syn::Result<Finished> {
    use proc_macro2::{Delimiter, TokenTree};
    let mut trees = input.into_iter();
    let mut group = |delimiter: Delimiter, what: &str| match trees.next() {
        Some(TokenTree::Group(g)) if g.delimiter() == delimiter => Ok(g),
        Some(other) => Err(syn::Error::new(other.span(), format!("expected {what}"))),
        None => Err(syn::Error::new(
            Span::call_site(),
            format!("expected {what}"),
        )),
    };
    group(Delimiter::Brace, "the finisher's path")?;
    let queue = group(Delimiter::Bracket, "the end of the chain's queue")?;
    if let Some(extra) = queue.stream().into_iter().next() {
        return Err(syn::Error::new(extra.span(), "the chain ended early"));
    }
    let acc = group(Delimiter::Bracket, "the accumulated descriptors")?;
    let header = group(Delimiter::Brace, "the chain header")?;
    if let Some(extra) = trees.next() {
        return Err(syn::Error::new(
            extra.span(),
            "unexpected tokens after the chain header",
        ));
    }
    // Each level is `[ [older] {descriptor}* ]`; walk down without recursion.
    let mut levels: Vec<Vec<TokenStream>> = Vec::new();
    let mut current = Some(acc.stream());
    while let Some(stream) = current.take() {
        let mut own = Vec::new();
        for (index, tree) in stream.into_iter().enumerate() {
            match tree {
                TokenTree::Group(g) if index == 0 && g.delimiter() == Delimiter::Bracket => {
                    current = Some(g.stream());
                }
                TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                    own.push(TokenTree::Group(g).into());
                }
                other => {
                    return Err(syn::Error::new(other.span(), "expected a descriptor"));
                }
            }
        }
        levels.push(own);
    }
    Ok(Finished {
        descriptors: levels.into_iter().rev().flatten().collect(),
        header: header.stream(),
    })
}

/// What a finisher receives for `descriptors` (brace groups) and `header`, as the chain
/// would pass them; for tests and benchmarks that call [`crate::finish::finish`] directly.
pub fn finisher_input(descriptors: TokenStream, header: TokenStream) -> TokenStream {
    let finisher = finisher(&CratePath::default());
    quote!({ #finisher } [] [ #descriptors ] { #header })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::format_ident;

    fn paths(n: usize) -> Vec<TokenStream> {
        (0..n)
            .map(|i| {
                let id = format_ident!("f{}", i);
                quote!(m::#id)
            })
            .collect()
    }

    #[test]
    fn short_lists_are_one_chain_ending_in_the_finisher() {
        let out = run(
            &paths(3),
            &quote!({ struct App }),
            &Name::new("app"),
            &CratePath::default(),
        )
        .to_string();
        assert_eq!(
            out,
            "m :: f0 ! { { m :: f0 } [{ m :: f1 } { m :: f2 } { :: agent_core :: __private_v0_1 :: compose_finish }] [] { struct App } }"
        );
    }

    #[test]
    fn long_lists_are_chunked_into_relays_and_gathered() {
        let out = run(
            &paths(CHUNK * 2 + 1),
            &quote!({ struct App }),
            &Name::new("app"),
            &CratePath::default(),
        )
        .to_string();
        assert_eq!(out.matches("@ relay").count(), 3, "{out}");
        assert!(out.ends_with("__agent_core_relay_app_0 ! { { __agent_core_relay_app_0 } [{ __agent_core_relay_app_1 } { __agent_core_relay_app_2 } { :: agent_core :: __private_v0_1 :: compose_finish }] [] { struct App } }"), "{out}");
    }

    #[test]
    fn empty_lists_finish_directly() {
        let out = run(
            &[],
            &quote!({ struct App }),
            &Name::new("app"),
            &CratePath::default(),
        )
        .to_string();
        assert_eq!(
            out,
            ":: agent_core :: __private_v0_1 :: compose_finish ! { { :: agent_core :: __private_v0_1 :: compose_finish } [] [] { struct App } }"
        );
    }

    #[test]
    fn a_descriptor_macro_has_one_rule_that_nests_the_accumulator() {
        let out = descriptor_macro(&format_ident!("d"), &quote!({ path = { $($me)* } x }));
        let out = out.to_string();
        assert_eq!(out.matches("=>").count(), 1, "{out}");
        assert!(
            out.contains("[$ acc { path = { $ ($ me) * } x }] $ header"),
            "{out}"
        );
    }

    #[test]
    fn the_finisher_flattens_nested_levels_in_chain_order() {
        // What three links leave: the first appended {a}, the second {b} {c}, the third {d}.
        let input = quote!({ f } [] [ [ [ [] {a} ] {b} {c} ] {d} ] { struct App });
        let finished = read_finished(input).unwrap();
        let order: Vec<String> = finished.descriptors.iter().map(|d| d.to_string()).collect();
        assert_eq!(order, ["{ a }", "{ b }", "{ c }", "{ d }"]);
        assert_eq!(finished.header.to_string(), "struct App");

        let flat = read_finished(finisher_input(quote!({a} {b}), quote!(struct App))).unwrap();
        assert_eq!(flat.descriptors.len(), 2);
    }

    #[test]
    fn the_finisher_rejects_malformed_ends() {
        for input in [
            quote!(),
            quote!({ f } [{ g }] [] { struct App }),
            quote!({ f } [] [x] { struct App }),
            quote!({ f } [] [ {a} [] ] { struct App }),
            quote!({ f } [] [] { struct App } extra),
            quote!({ f } [] [] (struct App)),
        ] {
            assert!(read_finished(input.clone()).is_err(), "{input}");
        }
    }
}
