//! Parsing of the bean attributes (`#[bean]`, `#[tool]`, `#[stage]`, `#[model_provider]`)
//! and of the modifiers that may stand beside them (`#[primary]`, `#[fallback]`,
//! `#[qualifier("x")]`, `#[order(n)]`).

use crate::diag::{self, Code, Errors};
use crate::ident;
use crate::location;
use crate::runtime::CratePath;
use proc_macro2::{Span, TokenStream};
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Attribute, LitInt, LitStr, Token};

/// The largest `order` magnitude accepted: orders lie within `-MAX_ORDER..=MAX_ORDER`.
pub const MAX_ORDER: i64 = 1_000_000;

pub use crate::bean::BeanKind;

/// A modifier attribute that may stand beside a bean attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modifier {
    /// `#[primary]`
    Primary,
    /// `#[fallback]`
    Fallback,
    /// `#[qualifier("x")]`
    Qualifier,
    /// `#[order(n)]`
    Order,
}

impl Modifier {
    /// Every modifier.
    pub const ALL: [Modifier; 4] = [
        Modifier::Primary,
        Modifier::Fallback,
        Modifier::Qualifier,
        Modifier::Order,
    ];

    /// The attribute name.
    pub fn as_str(self) -> &'static str {
        match self {
            Modifier::Primary => "primary",
            Modifier::Fallback => "fallback",
            Modifier::Qualifier => "qualifier",
            Modifier::Order => "order",
        }
    }

    /// Parses an attribute name.
    pub fn parse(s: &str) -> Option<Self> {
        Modifier::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// The selection metadata of one bean, each value with the span of the token that said it.
#[derive(Clone, Default)]
pub struct BeanMeta {
    /// Explicit canonical name.
    pub name: Option<LitStr>,
    /// Aliases, in the order written.
    pub aliases: Vec<LitStr>,
    /// Qualifiers, in the order written.
    pub qualifiers: Vec<LitStr>,
    /// Where `primary` was said.
    pub primary: Option<Span>,
    /// Where `fallback` was said.
    pub fallback: Option<Span>,
    /// The order and where it was said.
    pub order: Option<(i64, Span)>,
    /// `crate = path`, for a renamed agent-core dependency, and where it was said.
    pub krate: Option<(CratePath, Span)>,
}

/// The name of an attribute path, by its last segment.
pub fn attr_name(attr: &Attribute) -> Option<String> {
    attr.path().segments.last().map(|s| s.ident.to_string())
}

/// Parses the arguments of a bean attribute into `meta`.
pub fn parse_bean_args(args: TokenStream, meta: &mut BeanMeta, errors: &mut Errors) {
    let parser = syn::meta::parser(|m| {
        let Some(key) = m.path.get_ident().map(ToString::to_string) else {
            return Err(diag::error(
                Code::InvalidSyntax,
                m.path.span(),
                unknown_argument(),
            ));
        };
        let span = m.path.span();
        match key.as_str() {
            "name" => {
                let lit: LitStr = m.value()?.parse()?;
                set_once(&mut meta.name, lit, span, LitStr::span, "name", errors);
            }
            "crate" => {
                let path = CratePath::parse_value(m.value()?)?;
                set_once(
                    &mut meta.krate,
                    (path, span),
                    span,
                    |k| k.1,
                    "crate",
                    errors,
                );
            }
            "aliases" => {
                let list = parse_str_list(m.value()?)?;
                meta.aliases.extend(list);
            }
            "qualifiers" => {
                let list = parse_str_list(m.value()?)?;
                meta.qualifiers.extend(list);
            }
            "primary" => flag(&mut meta.primary, span, "primary", errors),
            "fallback" => flag(&mut meta.fallback, span, "fallback", errors),
            "order" => {
                let value = parse_order(m.value()?)?;
                set_once(&mut meta.order, value, span, |o| o.1, "order", errors);
            }
            _ => return Err(diag::error(Code::InvalidSyntax, span, unknown_argument())),
        }
        Ok(())
    });
    if let Err(e) = parser.parse2(args) {
        errors.push(diag::syntax(e));
    }
}

fn unknown_argument() -> &'static str {
    "unknown argument; expected `name = \"...\"`, `aliases = [...]`, `qualifiers = [...]`, `primary`, `fallback`, `order = N` or `crate = path`"
}

/// Applies a modifier attribute written on the factory.
pub fn apply_modifier(
    modifier: Modifier,
    attr: &Attribute,
    meta: &mut BeanMeta,
    errors: &mut Errors,
) {
    let span = attr.path().span();
    match modifier {
        Modifier::Primary | Modifier::Fallback => {
            if !matches!(attr.meta, syn::Meta::Path(_)) {
                errors.at(
                    Code::InvalidSyntax,
                    attr.meta.span(),
                    format!("`#[{}]` takes no arguments", modifier.as_str()),
                );
            }
            let (slot, label) = if modifier == Modifier::Primary {
                (&mut meta.primary, "primary")
            } else {
                (&mut meta.fallback, "fallback")
            };
            flag(slot, span, label, errors);
        }
        Modifier::Qualifier => match parse_qualifier_attr(attr) {
            Ok(lit) => meta.qualifiers.push(lit),
            Err(e) => errors.push(e),
        },
        Modifier::Order => match attr.parse_args_with(parse_order) {
            Ok(value) => set_once(&mut meta.order, value, span, |o| o.1, "order", errors),
            Err(e) => errors.push(diag::syntax(e)),
        },
    }
}

/// Parses `#[qualifier("x")]`.
pub fn parse_qualifier_attr(attr: &Attribute) -> syn::Result<LitStr> {
    attr.parse_args_with(|input: ParseStream<'_>| {
        let lit: LitStr = input.parse()?;
        if !input.is_empty() {
            return Err(input.error("`#[qualifier]` takes exactly one string literal"));
        }
        Ok(lit)
    })
    .map_err(|e| {
        diag::syntax(syn::Error::new(
            e.span(),
            format!("{e}; write `#[qualifier(\"name\")]`"),
        ))
    })
}

fn parse_str_list(input: ParseStream<'_>) -> syn::Result<Vec<LitStr>> {
    let content;
    syn::bracketed!(content in input);
    let items = content.parse_terminated(<LitStr as syn::parse::Parse>::parse, Token![,])?;
    Ok(items.into_iter().collect())
}

fn parse_order(input: ParseStream<'_>) -> syn::Result<(i64, Span)> {
    let negative: Option<Token![-]> = input.parse()?;
    let lit: LitInt = input.parse()?;
    let span = lit.span();
    let magnitude: i64 = lit
        .base10_parse()
        .map_err(|_| diag::error(Code::InvalidSyntax, span, "`order` must be an integer"))?;
    let value = if negative.is_some() {
        -magnitude
    } else {
        magnitude
    };
    if !(-MAX_ORDER..=MAX_ORDER).contains(&value) {
        return Err(diag::error(
            Code::InvalidSyntax,
            span,
            format!("`order` is {value}; it must lie within -{MAX_ORDER}..={MAX_ORDER}"),
        ));
    }
    Ok((value, span))
}

/// Records the flag `label` said at `span`; a repetition is reported there (the second
/// site), with a note naming the first.
fn flag(slot: &mut Option<Span>, span: Span, label: &str, errors: &mut Errors) {
    set_once(slot, span, span, |first| *first, label, errors);
}

/// Records `value`, said at `span`; a repetition is reported there (the second site), with
/// a note naming where `first_span` says the first value was given.
fn set_once<T>(
    slot: &mut Option<T>,
    value: T,
    span: Span,
    first_span: impl Fn(&T) -> Span,
    label: &str,
    errors: &mut Errors,
) {
    if let Some(first) = slot {
        errors.at(
            Code::DuplicateAttribute,
            span,
            repeated(&format!("`{label}`"), first_span(first)),
        );
    } else {
        *slot = Some(value);
    }
}

/// "`what` is given more than once", with a note naming where it was first given.
pub fn repeated(what: &str, first: Span) -> String {
    format!(
        "{what} is given more than once\nnote: first given at {}",
        location::of(first)
    )
}

/// Validates names, aliases and qualifiers, and the primary/fallback combination.
/// `default_name` is the function's name, spanned by `default_span` (its identifier).
pub fn validate(meta: &BeanMeta, default_name: &str, default_span: Span, errors: &mut Errors) {
    let name = meta
        .name
        .as_ref()
        .map_or_else(|| default_name.to_owned(), LitStr::value);
    if let Some(lit) = &meta.name {
        check_identity(lit, "bean name", errors);
    } else if let Err(why) = ident::check(default_name) {
        // Default names come from the function's name; rustc already vetted its characters,
        // so only length or uppercase letters can fail here.
        errors.at(
            Code::InvalidName,
            default_span,
            format!("the default bean name `{default_name}` (the function's name) {why}; give one with `name = \"...\"`"),
        );
    }
    let mut seen_aliases = std::collections::BTreeMap::new();
    for alias in &meta.aliases {
        check_identity(alias, "alias", errors);
        let value = alias.value();
        if value == name {
            errors.at(
                Code::InvalidName,
                alias.span(),
                format!("alias `{value}` repeats the bean's own name"),
            );
        } else if let Some(&first) = seen_aliases.get(&value) {
            errors.at(
                Code::DuplicateAttribute,
                alias.span(),
                repeated(&format!("alias `{value}`"), first),
            );
        } else {
            seen_aliases.insert(value, alias.span());
        }
    }
    check_qualifiers(&meta.qualifiers, errors);
    if let (Some(primary), Some(fallback)) = (meta.primary, meta.fallback) {
        errors.at(
            Code::ConflictingSelection,
            fallback,
            format!(
                "bean `{name}` is both `primary` (at {}) and `fallback`; a primary wins selection and a fallback yields to any other bean, so keep one",
                location::of(primary)
            ),
        );
    }
}

/// Validates a qualifier list (bean or parameter).
pub fn check_qualifiers(qualifiers: &[LitStr], errors: &mut Errors) {
    let mut seen = std::collections::BTreeMap::new();
    for q in qualifiers {
        check_identity(q, "qualifier", errors);
        if let Some(&first) = seen.get(&q.value()) {
            errors.at(
                Code::DuplicateAttribute,
                q.span(),
                repeated(&format!("qualifier `{}`", q.value()), first),
            );
        } else {
            seen.insert(q.value(), q.span());
        }
    }
}

fn check_identity(lit: &LitStr, what: &str, errors: &mut Errors) {
    if let Err(why) = ident::check(&lit.value()) {
        errors.at(
            Code::InvalidName,
            lit.span(),
            format!("{what} `{}` {why} (grammar: `[a-z][a-z0-9._-]*`, at most 128 bytes, no repeated or trailing separator)", lit.value()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn parse(args: TokenStream) -> (BeanMeta, Vec<String>) {
        let mut meta = BeanMeta::default();
        let mut errors = Errors::default();
        parse_bean_args(args, &mut meta, &mut errors);
        validate(&meta, "factory", Span::call_site(), &mut errors);
        let messages = errors
            .into_result()
            .err()
            .map(|e| e.into_iter().map(|e| e.to_string()).collect())
            .unwrap_or_default();
        (meta, messages)
    }

    #[test]
    fn parses_every_argument() {
        let (meta, errors) = parse(quote!(
            name = "read",
            aliases = ["inspect"],
            qualifiers = ["coding", "fs"],
            primary,
            order = -10
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(meta.name.unwrap().value(), "read");
        assert_eq!(meta.aliases.len(), 1);
        assert_eq!(meta.qualifiers.len(), 2);
        assert!(meta.primary.is_some());
        assert_eq!(meta.order.unwrap().0, -10);
    }

    #[test]
    fn reports_every_mistake_with_its_code() {
        let (_, errors) = parse(quote!(
            name = "Bad Name",
            order = 1,
            order = 2,
            primary,
            fallback,
            aliases = ["factory", "x", "x"]
        ));
        let codes: Vec<&str> = errors
            .iter()
            .map(|e| e.split(']').next().unwrap())
            .collect();
        assert_eq!(
            codes,
            [
                "[duplicate-attribute",
                "[invalid-name",
                "[duplicate-attribute",
                "[conflicting-selection"
            ],
            "{errors:#?}"
        );
    }

    #[test]
    fn an_alias_may_not_repeat_the_name() {
        let (_, errors) = parse(quote!(aliases = ["factory"]));
        assert_eq!(
            errors,
            ["[invalid-name] alias `factory` repeats the bean's own name"]
        );
    }

    #[test]
    fn rejects_unknown_and_out_of_range() {
        let (_, errors) = parse(quote!(colour = "red"));
        assert!(
            errors[0].starts_with("[invalid-syntax] unknown argument"),
            "{errors:?}"
        );
        let (_, errors) = parse(quote!(order = 1000001));
        assert!(errors[0].contains("must lie within"), "{errors:?}");
        let (_, errors) = parse(quote!(name = 5));
        assert!(errors[0].starts_with("[invalid-syntax]"), "{errors:?}");
    }
}
