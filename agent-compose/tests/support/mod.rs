//! Builders for descriptors, shared by the integration tests.
#![allow(dead_code)]

use agent_compose::BeanKind;
use agent_compose::attr::signature::Form;
use agent_compose::key::{self, ParamShape};
use agent_compose::transport::descriptor::{Descriptor, ParamDesc};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Ident, LitStr};

pub(crate) fn lit(s: &str) -> LitStr {
    LitStr::new(s, Span::call_site())
}

/// A bean `name` of type `ty`, listed as `path`.
pub(crate) fn bean(name: &str, ty: &str) -> Descriptor {
    let ty: syn::Type = syn::parse_str(ty).expect("type");
    let fn_name = name.replace(['-', '.'], "_");
    Descriptor {
        path: syn::parse_str::<TokenStream>(&format!("m::{fn_name}")).expect("path"),
        kind: BeanKind::Bean,
        fn_ident: Ident::new(&fn_name, Span::call_site()),
        name: lit(name),
        aliases: Vec::new(),
        qualifiers: Vec::new(),
        primary: false,
        fallback: false,
        order: 0,
        is_async: false,
        form: Form::Plain,
        output: quote!(#ty),
        key: key::of(&ty),
        keyed: None,
        params: Vec::new(),
        location: format!("src/{fn_name}.rs:1:1"),
        krate: "app".into(),
        poisoned: false,
    }
}

pub(crate) trait BeanExt {
    fn primary(self) -> Self;
    fn fallback(self) -> Self;
    fn order(self, order: i64) -> Self;
    fn alias(self, alias: &str) -> Self;
    fn qualifier(self, q: &str) -> Self;
    fn fn_name(self, name: &str) -> Self;
    fn param(self, name: &str, ty: &str) -> Self;
    fn qualified_param(self, name: &str, ty: &str, qualifiers: &[&str]) -> Self;
}

impl BeanExt for Descriptor {
    fn primary(mut self) -> Self {
        self.primary = true;
        self
    }
    fn fallback(mut self) -> Self {
        self.fallback = true;
        self
    }
    fn order(mut self, order: i64) -> Self {
        self.order = order;
        self
    }
    fn alias(mut self, alias: &str) -> Self {
        self.aliases.push(lit(alias));
        self
    }
    fn qualifier(mut self, q: &str) -> Self {
        self.qualifiers.push(lit(q));
        self
    }
    fn fn_name(mut self, name: &str) -> Self {
        self.fn_ident = Ident::new(name, Span::call_site());
        self.location = format!("src/{name}.rs:1:1");
        self
    }
    fn param(self, name: &str, ty: &str) -> Self {
        self.qualified_param(name, ty, &[])
    }
    fn qualified_param(mut self, name: &str, ty: &str, qualifiers: &[&str]) -> Self {
        let ty: syn::Type = syn::parse_str(ty).expect("type");
        let (shape, bean_ty) = key::shape_of(&ty);
        self.params.push(ParamDesc {
            name: Some(Ident::new(name, Span::call_site())),
            shape,
            key: key::of(&bean_ty),
            ty: quote!(#ty),
            bean_ty: quote!(#bean_ty),
            qualifiers: qualifiers.iter().map(|q| lit(q)).collect(),
        });
        self
    }
}

pub(crate) fn shape(d: &Descriptor, param: usize) -> ParamShape {
    d.params[param].shape.clone()
}
