//! The descriptor: the token record a bean attribute leaves for `compose!`.
//!
//! A descriptor travels inside a `macro_rules!` body, so it is plain tokens. Literals and
//! identifiers keep the spans of the user's code (within one crate), which is what lets
//! `compose!` point diagnostics at a parameter in another module. The format is private to
//! this crate and versioned by the `agent_core_descriptor_v2` tag; parsing is strict and
//! never panics on malformed input.
//!
//! Every descriptor is re-read by each `compose!` that uses it, so it is kept small: fields
//! at their default are left out (in a fixed order, so parsing stays strict), and whatever
//! follows from a written type is recomputed here instead of travelling: a parameter's
//! shape, the bean type it asks for, and every key.

use crate::bean::{BeanKind, Form};
use crate::key::ParamShape;
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::parse::{Parse, ParseStream};
use syn::{Ident, LitInt, LitStr, Token};

/// The tag that starts every descriptor.
pub const TAG: &str = "agent_core_descriptor_v2";

/// One bean as `compose!` sees it.
#[derive(Clone, Debug)]
pub struct Descriptor {
    /// The path `compose!` used to reach the factory (empty inside the attribute).
    pub path: TokenStream,
    /// Which attribute made it.
    pub kind: BeanKind,
    /// The factory function's name.
    pub fn_ident: Ident,
    /// Canonical name (the literal the user wrote, or one spanned at the function name).
    pub name: LitStr,
    /// Aliases.
    pub aliases: Vec<LitStr>,
    /// Qualifiers.
    pub qualifiers: Vec<LitStr>,
    /// `primary`.
    pub primary: bool,
    /// `fallback`.
    pub fallback: bool,
    /// Order for collections.
    pub order: i64,
    /// `async fn`.
    pub is_async: bool,
    /// Return form.
    pub form: Form,
    /// The bean type as written (for messages, spans and the manifest).
    pub output: TokenStream,
    /// The normalized key of the bean type.
    pub key: String,
    /// The type the key is taken from when it is not `output` (a typed tool's bean is
    /// written in full, but keyed as `Arc<dyn Tool>`, see `attr::typed`).
    pub keyed: Option<TokenStream>,
    /// Dependencies.
    pub params: Vec<ParamDesc>,
    /// `file:line:column` of the function name.
    pub location: String,
    /// The crate that defines the factory.
    pub krate: String,
    /// The attribute reported an error already; `compose!` stays quiet about this bean.
    pub poisoned: bool,
}

/// One dependency as `compose!` sees it.
#[derive(Clone, Debug)]
pub struct ParamDesc {
    /// The parameter's name, if its pattern is a plain identifier.
    pub name: Option<Ident>,
    /// Single, optional, list or map.
    pub shape: ParamShape,
    /// The normalized key of the requested bean type.
    pub key: String,
    /// The full parameter type as written.
    pub ty: TokenStream,
    /// The requested bean type as written (for messages).
    pub bean_ty: TokenStream,
    /// Qualifiers on the parameter.
    pub qualifiers: Vec<LitStr>,
}

impl Descriptor {
    /// The display label of the factory, e.g. `tools::read_tool`.
    pub fn label(&self) -> String {
        let path = crate::key::render(&self.path);
        if path.is_empty() {
            self.fn_ident.to_string()
        } else {
            path
        }
    }

    /// Whether `word` is this bean's name or one of its aliases.
    pub fn is_called(&self, word: &str) -> bool {
        self.name.value() == word || self.aliases.iter().any(|a| a.value() == word)
    }

    /// Whether a parameter qualifier selects this bean.
    pub fn matches_qualifier(&self, qualifier: &str) -> bool {
        self.is_called(qualifier) || self.qualifiers.iter().any(|q| q.value() == qualifier)
    }

    /// The canonical name a bean has when none is written: its function's name.
    fn default_name(fn_ident: &Ident) -> LitStr {
        let name = fn_ident.to_string();
        LitStr::new(name.trim_start_matches("r#"), fn_ident.span())
    }

    /// The emitted fields, without the leading `path = { ... }` that the chain adds.
    pub fn fields(&self) -> TokenStream {
        let tag = crate::naming::fixed(TAG);
        let kind = crate::naming::fixed(self.kind.as_str());
        let fn_ident = &self.fn_ident;
        let mut out = quote!(#tag kind = #kind fn = #fn_ident);
        if self.name.value() != Self::default_name(fn_ident).value() {
            let name = &self.name;
            out.extend(quote!(name = #name));
        }
        if !self.aliases.is_empty() {
            let aliases = &self.aliases;
            out.extend(quote!(aliases = [#(#aliases),*]));
        }
        if !self.qualifiers.is_empty() {
            let qualifiers = &self.qualifiers;
            out.extend(quote!(qualifiers = [#(#qualifiers),*]));
        }
        if self.primary {
            out.extend(quote!(primary));
        }
        if self.fallback {
            out.extend(quote!(fallback));
        }
        if self.order != 0 {
            let magnitude = LitInt::new(&self.order.unsigned_abs().to_string(), Span::call_site());
            let sign = (self.order < 0).then(|| quote!(-));
            out.extend(quote!(order = #sign #magnitude));
        }
        if self.is_async {
            out.extend(quote!(async));
        }
        if self.form != Form::Plain {
            let form = crate::naming::fixed(self.form.as_str());
            out.extend(quote!(form = #form));
        }
        // An unknown signature (the attribute reported it) has no output and no key.
        if !self.key.is_empty() {
            let output = &self.output;
            out.extend(quote!(output = { #output }));
            if let Some(keyed) = &self.keyed {
                out.extend(quote!(keyed = { #keyed }));
            }
        }
        if !self.params.is_empty() {
            let params = self.params.iter().map(|p| {
                let name = match &p.name {
                    Some(n) => n.to_token_stream(),
                    None => quote!(_),
                };
                let ty = &p.ty;
                let qualifiers = (!p.qualifiers.is_empty()).then(|| {
                    let qualifiers = &p.qualifiers;
                    quote!([#(#qualifiers),*])
                });
                quote!({ #name { #ty } #qualifiers })
            });
            out.extend(quote!(params = [#(#params)*]));
        }
        let location = LitStr::new(&self.location, Span::call_site());
        let krate = LitStr::new(&self.krate, Span::call_site());
        out.extend(quote!(location = #location crate = #krate));
        if self.poisoned {
            out.extend(quote!(poisoned));
        }
        out
    }
}

/// Whether the next token is the word `word` (which may be a keyword).
fn peek_word(input: ParseStream<'_>, word: &str) -> bool {
    input.cursor().token_tree().is_some_and(|(tt, _)| match tt {
        proc_macro2::TokenTree::Ident(i) => i == word,
        _ => false,
    })
}

/// Reads `word =`, where `word` may be a keyword.
fn field(input: ParseStream<'_>, word: &str) -> syn::Result<()> {
    flag(input, word)?;
    input.parse::<Token![=]>()?;
    Ok(())
}

/// Reads the word `word`, which may be a keyword.
fn flag(input: ParseStream<'_>, word: &str) -> syn::Result<()> {
    let tt: proc_macro2::TokenTree = input.parse()?;
    if tt.to_string() != word {
        return Err(syn::Error::new_spanned(
            tt,
            format!("expected descriptor field `{word}`"),
        ));
    }
    Ok(())
}

/// Reads `word =` and a value if the next token is `word`.
fn optional<T>(
    input: ParseStream<'_>,
    word: &str,
    value: impl FnOnce(ParseStream<'_>) -> syn::Result<T>,
) -> syn::Result<Option<T>> {
    if !peek_word(input, word) {
        return Ok(None);
    }
    field(input, word)?;
    value(input).map(Some)
}

/// Reads the presence flag `word`.
fn optional_flag(input: ParseStream<'_>, word: &str) -> syn::Result<bool> {
    if !peek_word(input, word) {
        return Ok(false);
    }
    flag(input, word)?;
    Ok(true)
}

fn ident_value(input: ParseStream<'_>) -> syn::Result<Ident> {
    let tt: proc_macro2::TokenTree = input.parse()?;
    match tt {
        proc_macro2::TokenTree::Ident(i) => Ok(i),
        other => Err(syn::Error::new_spanned(other, "expected an identifier")),
    }
}

fn braced_tokens(input: ParseStream<'_>) -> syn::Result<TokenStream> {
    let content;
    syn::braced!(content in input);
    content.parse()
}

fn braced_type(input: ParseStream<'_>) -> syn::Result<(TokenStream, syn::Type)> {
    let tokens = braced_tokens(input)?;
    // The attribute refused deeper types; a descriptor that has one was not written by it.
    crate::nesting::check(&tokens, crate::nesting::Body::Scan)?;
    let ty = syn::parse2::<syn::Type>(tokens.clone())?;
    Ok((tokens, ty))
}

fn str_list(input: ParseStream<'_>) -> syn::Result<Vec<LitStr>> {
    let content;
    syn::bracketed!(content in input);
    let list = content.parse_terminated(<LitStr as Parse>::parse, Token![,])?;
    Ok(list.into_iter().collect())
}

fn str_value(input: ParseStream<'_>) -> syn::Result<String> {
    Ok(input.parse::<LitStr>()?.value())
}

impl Parse for ParamDesc {
    /// Parses `{ name { type } ["qualifier", ...]? }`, where `name` may be `_`.
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let content;
        syn::braced!(content in input);
        let input = &content;
        let name = if input.peek(Token![_]) {
            input.parse::<Token![_]>()?;
            None
        } else {
            Some(ident_value(input)?)
        };
        let (ty, parsed) = braced_type(input)?;
        let qualifiers = if input.is_empty() {
            Vec::new()
        } else {
            str_list(input)?
        };
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after parameter descriptor"));
        }
        let (shape, bean_ty) = crate::key::shape_of(&parsed);
        Ok(ParamDesc {
            name,
            shape,
            key: crate::key::of(&bean_ty),
            ty,
            bean_ty: bean_ty.to_token_stream(),
            qualifiers,
        })
    }
}

/// Reads `path = { ... } agent_core_descriptor_v2`, the part every reader of a descriptor
/// checks: the path must be one and the version must be this one.
fn path_and_tag(input: ParseStream<'_>) -> syn::Result<(TokenStream, Ident)> {
    field(input, "path")?;
    let path = braced_tokens(input)?;
    syn::parse::Parser::parse2(syn::Path::parse_mod_style, path.clone()).map_err(|e| {
        syn::Error::new(e.span(), format!("a `compose!` entry must be a path: {e}"))
    })?;
    let tag = ident_value(input)?;
    if tag != TAG {
        return Err(syn::Error::new(
            tag.span(),
            "this descriptor was written by an incompatible version of agent-core; use one agent-core version in the whole build",
        ));
    }
    Ok((path, tag))
}

/// A descriptor that a relay or a bean set passes on: its path, which the set rewrites, and
/// its fields as written. Only the application's finisher parses the fields; doing it at
/// every set too cost as much as parsing them in `compose!`.
pub struct Forwarded {
    /// The tokens inside `path = { ... }`.
    pub path: TokenStream,
    /// Everything after the path, starting with the version tag, untouched.
    pub fields: TokenStream,
}

impl Parse for Forwarded {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let content;
        syn::braced!(content in input);
        let input = &content;
        let (path, tag) = path_and_tag(input)?;
        let rest: TokenStream = input.parse()?;
        Ok(Forwarded {
            path,
            fields: quote!(#tag #rest),
        })
    }
}

impl Parse for Descriptor {
    /// Parses `{ path = { ... } agent_core_descriptor_v2 ... }`.
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let content;
        syn::braced!(content in input);
        let input = &content;
        let (path, _tag) = path_and_tag(input)?;
        field(input, "kind")?;
        let kind_ident = ident_value(input)?;
        let kind = BeanKind::parse(&kind_ident.to_string())
            .ok_or_else(|| syn::Error::new(kind_ident.span(), "unknown bean kind"))?;
        field(input, "fn")?;
        let fn_ident = ident_value(input)?;
        let name = optional(input, "name", |input| input.parse::<LitStr>())?
            .unwrap_or_else(|| Self::default_name(&fn_ident));
        let aliases = optional(input, "aliases", str_list)?.unwrap_or_default();
        let qualifiers = optional(input, "qualifiers", str_list)?.unwrap_or_default();
        let primary = optional_flag(input, "primary")?;
        let fallback = optional_flag(input, "fallback")?;
        let order = optional(input, "order", |input| {
            let negative = input.parse::<Option<Token![-]>>()?.is_some();
            let magnitude: i64 = input.parse::<LitInt>()?.base10_parse()?;
            Ok(if negative { -magnitude } else { magnitude })
        })?
        .unwrap_or(0);
        let is_async = optional_flag(input, "async")?;
        let form = match optional(input, "form", ident_value)? {
            None => Form::Plain,
            Some(form_ident) => Form::parse(&form_ident.to_string())
                .ok_or_else(|| syn::Error::new(form_ident.span(), "unknown factory form"))?,
        };
        let (output, key) = match optional(input, "output", braced_type)? {
            Some((tokens, ty)) => (tokens, crate::key::of(&ty)),
            None => (quote!(()), String::new()),
        };
        let (key, keyed) = match optional(input, "keyed", braced_type)? {
            Some((tokens, ty)) => (crate::key::of(&ty), Some(tokens)),
            None => (key, None),
        };
        let params = optional(input, "params", |input| {
            let content;
            syn::bracketed!(content in input);
            let mut params = Vec::new();
            while !content.is_empty() {
                params.push(content.parse()?);
            }
            Ok(params)
        })?
        .unwrap_or_default();
        field(input, "location")?;
        let location = str_value(input)?;
        field(input, "crate")?;
        let krate = str_value(input)?;
        let poisoned = optional_flag(input, "poisoned")?;
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after descriptor"));
        }
        if !poisoned {
            // The attribute validated these; a descriptor that disagrees was not written by it.
            let all_names = std::iter::once(&name)
                .chain(&aliases)
                .chain(&qualifiers)
                .chain(params.iter().flat_map(|p: &ParamDesc| &p.qualifiers));
            for lit in all_names {
                crate::ident::check(&lit.value()).map_err(|why| {
                    syn::Error::new(
                        lit.span(),
                        format!("descriptor name `{}` {why}", lit.value()),
                    )
                })?;
            }
        }
        Ok(Descriptor {
            path,
            kind,
            fn_ident,
            name,
            aliases,
            qualifiers,
            primary,
            fallback,
            order,
            is_async,
            form,
            output,
            key,
            keyed,
            params,
            location,
            krate,
            poisoned,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> Descriptor {
        Descriptor {
            path: quote!(tools::read_tool),
            kind: BeanKind::Tool,
            fn_ident: Ident::new("read_tool", Span::call_site()),
            name: LitStr::new("read", Span::call_site()),
            aliases: vec![LitStr::new("inspect", Span::call_site())],
            qualifiers: vec![LitStr::new("coding", Span::call_site())],
            primary: false,
            fallback: true,
            order: -10,
            is_async: true,
            form: Form::ResultManaged,
            output: quote!(Arc<dyn Tool>),
            key: "Arc<dyn Tool>".into(),
            keyed: None,
            params: vec![ParamDesc {
                name: Some(Ident::new("log", Span::call_site())),
                shape: ParamShape::List,
                key: "Arc<Log>".into(),
                ty: quote!(Vec<Arc<Log>>),
                bean_ty: quote!(Arc<Log>),
                qualifiers: vec![LitStr::new("x", Span::call_site())],
            }],
            location: "src/tools.rs:3:8".into(),
            krate: "fixtures".into(),
            poisoned: false,
        }
    }

    #[test]
    fn round_trips() {
        let d = sample();
        let path = &d.path;
        let fields = d.fields();
        let parsed: Descriptor = syn::parse2(quote!({ path = { #path } #fields })).unwrap();
        assert_eq!(parsed.fields().to_string(), d.fields().to_string());
        assert_eq!(parsed.label(), "tools::read_tool");
        assert_eq!(parsed.order, -10);
        assert!(parsed.matches_qualifier("inspect") && parsed.matches_qualifier("coding"));
        assert!(!parsed.matches_qualifier("write"));
    }

    #[test]
    fn rejects_foreign_versions() {
        let err = syn::parse2::<Descriptor>(quote!({ path = { x } agent_core_descriptor_v0 }))
            .err()
            .unwrap();
        assert!(err.to_string().contains("incompatible version"));
    }
}
