//! The factory item as the bean attributes read it: attributes, visibility and signature
//! parsed, the body kept as written. Both [`super::expand`] and [`super::typed`] read it, so it
//! sits below them and neither imports the other for it.

use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, Signature, Visibility};

/// A function item of which only the attributes, visibility and signature are parsed: the
/// body is kept as the tokens written. Parsing and re-printing a body is most of the work of
/// expanding an attribute that never looks at it, and a syntax error inside it is then
/// reported by rustc as such, not as "not a function".
pub struct FactoryFn {
    /// Outer attributes.
    pub attrs: Vec<Attribute>,
    /// Visibility.
    pub vis: Visibility,
    /// The signature.
    pub sig: Signature,
    /// The body, a brace-delimited group, untouched.
    pub body: proc_macro2::Group,
}

impl Parse for FactoryFn {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let sig = input.parse()?;
        let body: proc_macro2::Group = input.parse()?;
        if body.delimiter() != proc_macro2::Delimiter::Brace {
            return Err(syn::Error::new(body.span(), "expected a function body"));
        }
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the function"));
        }
        Ok(FactoryFn {
            attrs,
            vis,
            sig,
            body,
        })
    }
}

impl quote::ToTokens for FactoryFn {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let FactoryFn {
            attrs,
            vis,
            sig,
            body,
        } = self;
        tokens.extend(quote!(#(#attrs)* #vis #sig #body));
    }
}
