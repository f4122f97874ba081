//! `compose!`: parses the application header and the list of factories and sets, then starts
//! the descriptor chain that ends in the finisher ([`crate::finish`]).

use crate::diag;
use crate::runtime::CratePath;
use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Ident, Path, Token, Visibility};

/// `crate = path; #[attrs] vis struct Name` of the generated application (the `crate` line
/// only when the user wrote one). It travels unchanged through the chain to the finisher.
pub struct Header {
    /// How generated code names agent-core.
    pub krate: CratePath,
    /// Outer attributes (docs) for the application struct.
    pub attrs: Vec<Attribute>,
    /// Visibility of every generated item.
    pub vis: Visibility,
    /// The application type's name.
    pub name: Ident,
}

impl Parse for Header {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let krate = CratePath::parse_line(input)?;
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        input.parse::<Token![struct]>()?;
        let name = input.parse()?;
        Ok(Header {
            krate,
            attrs,
            vis,
            name,
        })
    }
}

impl quote::ToTokens for Header {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Header {
            krate,
            attrs,
            vis,
            name,
        } = self;
        let krate = krate.header_tokens();
        tokens.extend(quote!(#krate #(#attrs)* #vis struct #name));
    }
}

struct Input {
    header: Header,
    entries: Vec<Path>,
}

impl Parse for Input {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let header: Header = input.parse()?;
        let body;
        syn::braced!(body in input);
        let key: Ident = body.parse()?;
        if key != "beans" {
            return Err(syn::Error::new(key.span(), "expected `beans: [...]`"));
        }
        body.parse::<Token![:]>()?;
        let list;
        syn::bracketed!(list in body);
        let entries: Punctuated<Path, Token![,]> =
            list.parse_terminated(Path::parse_mod_style, Token![,])?;
        body.parse::<Option<Token![,]>>()?;
        if !body.is_empty() {
            return Err(body.error("unexpected tokens after `beans: [...]`"));
        }
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the application struct"));
        }
        Ok(Input {
            header,
            entries: entries.into_iter().collect(),
        })
    }
}

/// Expands `compose! { crate = path; vis struct App { beans: [...] } }` (the `crate` line
/// optional) into the first link of the chain.
pub fn expand(input: TokenStream) -> TokenStream {
    if let Err(e) = crate::nesting::check(&input, crate::nesting::Body::Scan) {
        return e.to_compile_error();
    }
    let Input { header, entries } = match syn::parse2::<Input>(input) {
        Ok(i) => i,
        // A coded error (a bad `crate = ...`) already says what to write.
        Err(e) if e.to_string().starts_with('[') => return e.to_compile_error(),
        Err(e) => {
            let e = diag::syntax(syn::Error::new(
                e.span(),
                format!(
                    "{e}; write `compose! {{ pub struct App {{ beans: [factory, module::bean_set] }} }}`"
                ),
            ));
            return e.to_compile_error();
        }
    };
    let entries: Vec<TokenStream> = entries.iter().map(|p| quote!(#p)).collect();
    let unique = crate::naming::Name::new("app_").user(&header.name);
    crate::transport::chain::run(&entries, &quote!({ #header }), &unique, &header.krate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_the_chain_with_the_first_entry() {
        let out = expand(quote!(pub struct App { beans: [a::x, y,] })).to_string();
        assert!(
            out.starts_with("a :: x ! { { a :: x } [{ y } { :: agent_core :: __private_v0_1 :: compose_finish }] [] {"),
            "{out}"
        );
    }

    #[test]
    fn empty_graph_finishes_directly() {
        let out = expand(quote!(struct App { beans: [] })).to_string();
        assert!(out.contains("compose_finish"), "{out}");
    }

    #[test]
    fn malformed_input_is_a_coded_error() {
        for input in [
            quote!(),
            quote!(pub struct),
            quote!(
                struct App {
                    tools: [a],
                }
            ),
            quote!(struct App { beans: [1] }),
        ] {
            let out = expand(input.clone()).to_string();
            assert!(out.contains("[invalid-syntax]"), "{input}: {out}");
        }
    }
}
