//! The descriptor: the token record a bean attribute leaves for `compose!`.
//!
//! A descriptor travels inside a `macro_rules!` body, so it is plain tokens. Literals and
//! identifiers keep the spans of the user's code (within one crate), which is what lets
//! `compose!` point diagnostics at a parameter in another module. The format is private to
//! this crate and versioned by the `agent_core_descriptor_v1` tag; parsing is strict and
//! never panics on malformed input.

use crate::attr::BeanKind;
use crate::factory::Form;
use crate::key::ParamShape;
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::parse::{Parse, ParseStream};
use syn::{Ident, LitBool, LitInt, LitStr, Token};

/// The tag that starts every descriptor.
pub const TAG: &str = "agent_core_descriptor_v1";

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

    /// The emitted fields, without the leading `path = { ... }` that the chain adds.
    pub fn fields(&self) -> TokenStream {
        let kind = Ident::new(self.kind.as_str(), Span::call_site());
        let fn_ident = &self.fn_ident;
        let name = &self.name;
        let aliases = &self.aliases;
        let qualifiers = &self.qualifiers;
        let primary = LitBool::new(self.primary, Span::call_site());
        let fallback = LitBool::new(self.fallback, Span::call_site());
        let order_abs = LitInt::new(&self.order.unsigned_abs().to_string(), Span::call_site());
        let order = if self.order < 0 {
            quote!(- #order_abs)
        } else {
            quote!(#order_abs)
        };
        let is_async = LitBool::new(self.is_async, Span::call_site());
        let form = Ident::new(self.form.as_str(), Span::call_site());
        let output = &self.output;
        let key = LitStr::new(&self.key, Span::call_site());
        let params = self.params.iter().map(|p| {
            let name = match &p.name {
                Some(n) => n.to_token_stream(),
                None => quote!(_),
            };
            let shape = Ident::new(p.shape.as_str(), Span::call_site());
            let key = LitStr::new(&p.key, Span::call_site());
            let ty = &p.ty;
            let bean_ty = &p.bean_ty;
            let qualifiers = &p.qualifiers;
            quote!({ name = #name shape = #shape key = #key ty = { #ty } bean_ty = { #bean_ty } qualifiers = [#(#qualifiers),*] })
        });
        let location = LitStr::new(&self.location, Span::call_site());
        let krate = LitStr::new(&self.krate, Span::call_site());
        let poisoned = LitBool::new(self.poisoned, Span::call_site());
        let tag = Ident::new(TAG, Span::call_site());
        quote! {
            #tag
            kind = #kind
            fn = #fn_ident
            name = #name
            aliases = [#(#aliases),*]
            qualifiers = [#(#qualifiers),*]
            primary = #primary
            fallback = #fallback
            order = #order
            async = #is_async
            form = #form
            output = { #output }
            key = #key
            params = [#(#params)*]
            location = #location
            crate = #krate
            poisoned = #poisoned
        }
    }
}

/// Reads `word =`, where `word` may be a keyword.
fn field(input: ParseStream<'_>, word: &str) -> syn::Result<()> {
    let found: TokenStream = {
        let tt: proc_macro2::TokenTree = input.parse()?;
        tt.into_token_stream()
    };
    if found.to_string() != word {
        return Err(syn::Error::new_spanned(
            found,
            format!("expected descriptor field `{word}`"),
        ));
    }
    input.parse::<Token![=]>()?;
    Ok(())
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

fn str_list(input: ParseStream<'_>) -> syn::Result<Vec<LitStr>> {
    let content;
    syn::bracketed!(content in input);
    let list = content.parse_terminated(<LitStr as Parse>::parse, Token![,])?;
    Ok(list.into_iter().collect())
}

fn bool_value(input: ParseStream<'_>) -> syn::Result<bool> {
    Ok(input.parse::<LitBool>()?.value)
}

fn str_value(input: ParseStream<'_>) -> syn::Result<String> {
    Ok(input.parse::<LitStr>()?.value())
}

impl Parse for ParamDesc {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let content;
        syn::braced!(content in input);
        let input = &content;
        field(input, "name")?;
        let name = if input.peek(Token![_]) {
            input.parse::<Token![_]>()?;
            None
        } else {
            Some(ident_value(input)?)
        };
        field(input, "shape")?;
        let shape_ident = ident_value(input)?;
        let shape = ParamShape::parse(&shape_ident.to_string())
            .ok_or_else(|| syn::Error::new(shape_ident.span(), "unknown parameter shape"))?;
        field(input, "key")?;
        let key = str_value(input)?;
        field(input, "ty")?;
        let ty = braced_tokens(input)?;
        syn::parse2::<syn::Type>(ty.clone())?;
        field(input, "bean_ty")?;
        let bean_ty = braced_tokens(input)?;
        syn::parse2::<syn::Type>(bean_ty.clone())?;
        field(input, "qualifiers")?;
        let qualifiers = str_list(input)?;
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after parameter descriptor"));
        }
        Ok(ParamDesc {
            name,
            shape,
            key,
            ty,
            bean_ty,
            qualifiers,
        })
    }
}

impl Parse for Descriptor {
    /// Parses `{ path = { ... } agent_core_descriptor_v1 ... }`.
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let content;
        syn::braced!(content in input);
        let input = &content;
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
        field(input, "kind")?;
        let kind_ident = ident_value(input)?;
        let kind = BeanKind::parse(&kind_ident.to_string())
            .ok_or_else(|| syn::Error::new(kind_ident.span(), "unknown bean kind"))?;
        field(input, "fn")?;
        let fn_ident = ident_value(input)?;
        field(input, "name")?;
        let name: LitStr = input.parse()?;
        field(input, "aliases")?;
        let aliases = str_list(input)?;
        field(input, "qualifiers")?;
        let qualifiers = str_list(input)?;
        field(input, "primary")?;
        let primary = bool_value(input)?;
        field(input, "fallback")?;
        let fallback = bool_value(input)?;
        field(input, "order")?;
        let negative = input.parse::<Option<Token![-]>>()?.is_some();
        let magnitude: i64 = input.parse::<LitInt>()?.base10_parse()?;
        let order = if negative { -magnitude } else { magnitude };
        field(input, "async")?;
        let is_async = bool_value(input)?;
        field(input, "form")?;
        let form_ident = ident_value(input)?;
        let form = Form::parse(&form_ident.to_string())
            .ok_or_else(|| syn::Error::new(form_ident.span(), "unknown factory form"))?;
        field(input, "output")?;
        let output = braced_tokens(input)?;
        syn::parse2::<syn::Type>(output.clone())?;
        field(input, "key")?;
        let key = str_value(input)?;
        field(input, "params")?;
        let params_content;
        syn::bracketed!(params_content in input);
        let mut params = Vec::new();
        while !params_content.is_empty() {
            params.push(params_content.parse()?);
        }
        field(input, "location")?;
        let location = str_value(input)?;
        field(input, "crate")?;
        let krate = str_value(input)?;
        field(input, "poisoned")?;
        let poisoned = bool_value(input)?;
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
