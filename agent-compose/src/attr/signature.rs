//! Reading a factory function's signature: its form, the bean type it produces and the
//! dependencies its parameters ask for.

use crate::diag::{Code, Errors};
use crate::key::{self, ParamShape};
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, LitStr, Pat, ReturnType, Signature, Type};

pub use crate::bean::Form;

/// One dependency of a factory.
#[derive(Clone)]
pub struct Param {
    /// The parameter's name, when its pattern is a plain identifier.
    pub name: Option<Ident>,
    /// The full written type.
    pub ty: Type,
    /// Single, optional, list or map.
    pub shape: ParamShape,
    /// The bean type asked for (`T` of `Vec<T>` and so on).
    pub bean_ty: Type,
    /// `#[qualifier("x")]` values on the parameter.
    pub qualifiers: Vec<LitStr>,
}

/// What the signature says.
pub struct FactorySig {
    /// `async fn`.
    pub is_async: bool,
    /// The return form.
    pub form: Form,
    /// The bean's own value type.
    pub value: Type,
    /// Every parameter, in order.
    pub params: Vec<Param>,
}

/// Reads `sig`, reporting unsupported shapes. Parameter qualifiers come from `qualifiers`,
/// one list per parameter, already stripped from the function by the caller.
pub fn analyze(
    sig: &Signature,
    qualifiers: Vec<Vec<LitStr>>,
    errors: &mut Errors,
) -> Option<FactorySig> {
    let before = errors.is_empty();
    let unsupported = |errors: &mut Errors, span, what: &str| {
        errors.at(
            Code::UnsupportedFactory,
            span,
            format!("factory `{}` {what}; factories are plain, non-generic functions outside `impl` blocks", sig.ident),
        );
    };
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        unsupported(errors, sig.generics.span(), "is generic");
    }
    if let Some(variadic) = &sig.variadic {
        unsupported(errors, variadic.span(), "is variadic");
    }
    if let Some(abi) = &sig.abi {
        unsupported(errors, abi.span(), "declares an ABI");
    }
    if let syn::Safety::Unsafe(token) = &sig.safety {
        unsupported(errors, token.span(), "is `unsafe`");
    }
    let mut params = Vec::new();
    for (arg, qualifiers) in sig
        .inputs
        .iter()
        .zip(qualifiers.into_iter().chain(std::iter::repeat(Vec::new())))
    {
        match arg {
            FnArg::Receiver(r) => unsupported(errors, r.span(), "is a method (takes `self`)"),
            FnArg::Typed(pt) => {
                if let Some(span) = unnameable(&pt.ty) {
                    let pattern = &pt.pat;
                    errors.at(
                        Code::UnsupportedFactory,
                        span,
                        format!(
                            "parameter `{}` of factory `{}` must be an owned, nameable type (beans are shared by `Clone`, e.g. `Arc<T>`); references, `impl Trait`, `_` and `Self` are not supported",
                            quote::quote!(#pattern),
                            sig.ident
                        ),
                    );
                    continue;
                }
                let name = match &*pt.pat {
                    Pat::Ident(pi) if pi.subpat.is_none() => Some(pi.ident.clone()),
                    _ => None,
                };
                let (shape, bean_ty) = key::shape_of(&pt.ty);
                params.push(Param {
                    name,
                    ty: (*pt.ty).clone(),
                    shape,
                    bean_ty,
                    qualifiers,
                });
            }
        }
    }
    let output = match &sig.output {
        ReturnType::Type(_, ty) => (**ty).clone(),
        ReturnType::Default => {
            errors.at(
                Code::UnsupportedFactory,
                sig.ident.span(),
                format!(
                    "factory `{}` returns nothing; return the bean as `T`, `Result<T, E>`, `Managed<T>` or `Result<Managed<T>, E>`",
                    sig.ident
                ),
            );
            return None;
        }
    };
    if let Some(span) = unnameable(&output) {
        errors.at(
            Code::UnsupportedFactory,
            span,
            "the returned bean type must be nameable: `impl Trait`, `_`, references and `Self` are not supported",
        );
        return None;
    }
    let (form, value) = form_of(&output);
    if is_unit(&value) {
        errors.at(
            Code::WrongOutput,
            value.span(),
            "a factory must produce a value; `()` is not a bean",
        );
    } else if let (shape @ (ParamShape::List | ParamShape::Map | ParamShape::Optional), _) =
        key::shape_of(&value)
    {
        errors.at(
            Code::WrongOutput,
            value.span(),
            format!(
                "a bean must not be a `{}` itself, because parameters of that shape are injected as collections; wrap it in a newtype",
                match shape {
                    ParamShape::List => "Vec<_>",
                    ParamShape::Map => "BTreeMap<String, _>",
                    _ => "Option<_>",
                }
            ),
        );
    }
    if before && !errors.is_empty() {
        return None;
    }
    Some(FactorySig {
        is_async: sig.asyncness.is_some(),
        form,
        value,
        params,
    })
}

/// Splits a return type into its form and bean type, by the written names `Result` and
/// `Managed` (a one-argument `Result` alias such as `anyhow::Result<T>` counts too).
pub fn form_of(output: &Type) -> (Form, Type) {
    let single_arg = |ty: &Type, name: &str, max_args: usize| -> Option<Type> {
        let seg = key::last_segment(ty)?;
        let args = key::type_args(seg);
        (seg.ident == name && (1..=max_args).contains(&args.len())).then(|| args[0].clone())
    };
    if let Some(inner) = single_arg(output, "Result", 2) {
        if let Some(value) = single_arg(&inner, "Managed", 1) {
            return (Form::ResultManaged, value);
        }
        return (Form::Result, inner);
    }
    if let Some(value) = single_arg(output, "Managed", 1) {
        return (Form::Managed, value);
    }
    (Form::Plain, output.clone())
}

fn is_unit(ty: &Type) -> bool {
    matches!(ty, Type::Tuple(t) if t.elems.is_empty())
}

/// The span of the first part of `ty` that generated code could not name at another site.
fn unnameable(ty: &Type) -> Option<proc_macro2::Span> {
    struct Finder(Option<proc_macro2::Span>);
    impl<'ast> syn::visit::Visit<'ast> for Finder {
        fn visit_type(&mut self, ty: &'ast Type) {
            if self.0.is_some() {
                return;
            }
            match ty {
                Type::Reference(r) if !matches!(&r.lifetime, Some(l) if l.ident == "static") => {
                    self.0 = Some(r.span());
                }
                Type::ImplTrait(t) => self.0 = Some(t.span()),
                Type::Infer(t) => self.0 = Some(t.span()),
                _ => syn::visit::visit_type(self, ty),
            }
        }
        fn visit_path(&mut self, path: &'ast syn::Path) {
            if path.segments.first().is_some_and(|s| s.ident == "Self") {
                self.0 = Some(path.span());
            }
            syn::visit::visit_path(self, path);
        }
    }
    let mut finder = Finder(None);
    syn::visit::Visit::visit_type(&mut finder, ty);
    finder.0
}

/// Tokens of a type, for descriptors.
pub fn tokens(ty: &Type) -> TokenStream {
    ty.to_token_stream()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(s: &str) -> (Option<FactorySig>, Vec<String>) {
        let item: syn::ItemFn = syn::parse_str(s).unwrap();
        let mut errors = Errors::default();
        let out = analyze(&item.sig, Vec::new(), &mut errors);
        let messages = errors
            .into_result()
            .err()
            .map(|e| e.into_iter().map(|e| e.to_string()).collect())
            .unwrap_or_default();
        (out, messages)
    }

    #[test]
    fn recognises_the_four_forms() {
        let cases = [
            ("fn f() -> Arc<Log> {}", Form::Plain, "Arc<Log>"),
            ("fn f() -> Result<Arc<Log>, E> {}", Form::Result, "Arc<Log>"),
            ("fn f() -> anyhow::Result<Log> {}", Form::Result, "Log"),
            ("fn f() -> Managed<Log> {}", Form::Managed, "Log"),
            (
                "async fn f() -> Result<agent_core::compose::Managed<Log>, E> {}",
                Form::ResultManaged,
                "Log",
            ),
        ];
        for (src, form, value) in cases {
            let (out, errors) = sig(src);
            let out = out.unwrap_or_else(|| panic!("{src}: {errors:?}"));
            assert_eq!(out.form, form, "{src}");
            assert_eq!(key::of(&out.value), value, "{src}");
        }
    }

    #[test]
    fn rejects_unsupported_shapes() {
        let cases = [
            (
                "fn f<T>() -> T {}",
                "[unsupported-factory] factory `f` is generic",
            ),
            (
                "fn f(&self) -> u8 {}",
                "[unsupported-factory] factory `f` is a method",
            ),
            (
                "fn f() {}",
                "[unsupported-factory] factory `f` returns nothing",
            ),
            (
                "fn f(x: &Log) -> u8 {}",
                "[unsupported-factory] parameter `x` of factory `f` must be",
            ),
            (
                "fn f() -> impl Tool {}",
                "[unsupported-factory] the returned bean type",
            ),
            (
                "fn f() -> Vec<u8> {}",
                "[wrong-output] a bean must not be a `Vec<_>`",
            ),
            (
                "fn f() -> Result<Option<u8>, E> {}",
                "[wrong-output] a bean must not be a `Option<_>`",
            ),
            (
                "fn f() -> () {}",
                "[wrong-output] a factory must produce a value",
            ),
        ];
        for (src, expected) in cases {
            let (out, errors) = sig(src);
            assert!(out.is_none(), "{src}");
            assert!(errors[0].starts_with(expected), "{src}: {errors:?}");
        }
    }

    #[test]
    fn reads_parameters() {
        let (out, _) =
            sig("fn f(log: Arc<Log>, tools: Vec<Arc<dyn Tool>>, (a, b): (u8, u8)) -> u8 {}");
        let params = out.unwrap().params;
        assert_eq!(params[0].name.as_ref().unwrap(), "log");
        assert_eq!(params[1].shape, ParamShape::List);
        assert_eq!(key::of(&params[1].bean_ty), "Arc<dyn Tool>");
        assert!(params[2].name.is_none());
    }
}
