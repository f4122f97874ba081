//! Diagnostics: stable codes, spanned errors and an accumulator that reports every
//! independent mistake at once.

use proc_macro2::{Span, TokenStream};
use std::fmt;

/// The stable code at the start of every compile error this crate emits.
///
/// Codes are part of the public contract: `docs/errors.md` documents each one and
/// `ui-tests` proves each with a fixture. Never rename one; add a new one instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// Several candidates remain for a single dependency.
    AmbiguousDependency,
    /// No candidate exists for a single dependency.
    MissingDependency,
    /// Beans depend on each other in a loop.
    DependencyCycle,
    /// Two beans claim one name or alias, or one factory is listed twice.
    DuplicateBeanName,
    /// Two members of a named-map injection share a canonical name.
    DuplicateCollectionName,
    /// A bean is both primary and fallback.
    ConflictingSelection,
    /// A factory's output does not fit its attribute or the framework.
    WrongOutput,
    /// A name, alias or qualifier breaks the identity grammar.
    InvalidName,
    /// The annotated item is not a factory this framework can call.
    UnsupportedFactory,
    /// One piece of metadata is given twice.
    DuplicateAttribute,
    /// Macro input that does not follow the documented syntax.
    InvalidSyntax,
    /// Tokens nested deeper than `nesting::MAX_DEPTH`.
    NestingTooDeep,
    /// A typed tool does not state its effect or its replay safety.
    MissingToolSafety,
    /// A read-only typed tool states a replay safety other than `safe`.
    ReadOnlyReplay,
    /// A mutating typed tool states `replay = safe`.
    MutatingReplay,
    /// A read-only typed tool declares a capability that changes state.
    ReadOnlyCapability,
    /// A typed tool declares a capability agent-core does not know.
    UnknownCapability,
    /// A typed tool has no doc comment to describe it to the model.
    MissingDescription,
    /// A dependency's written type fits beans of two types that their paths tell apart.
    AmbiguousType,
    /// A bean attribute is on an item that is not a complete function.
    NotAFunction,
}

impl Code {
    /// Every code, in documentation order.
    pub const ALL: [Code; 20] = [
        Code::AmbiguousDependency,
        Code::MissingDependency,
        Code::DependencyCycle,
        Code::DuplicateBeanName,
        Code::DuplicateCollectionName,
        Code::ConflictingSelection,
        Code::WrongOutput,
        Code::InvalidName,
        Code::UnsupportedFactory,
        Code::DuplicateAttribute,
        Code::InvalidSyntax,
        Code::NestingTooDeep,
        Code::MissingToolSafety,
        Code::ReadOnlyReplay,
        Code::MutatingReplay,
        Code::ReadOnlyCapability,
        Code::UnknownCapability,
        Code::MissingDescription,
        Code::AmbiguousType,
        Code::NotAFunction,
    ];

    /// The code as printed between brackets.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::AmbiguousDependency => "ambiguous-dependency",
            Code::MissingDependency => "missing-dependency",
            Code::DependencyCycle => "dependency-cycle",
            Code::DuplicateBeanName => "duplicate-bean-name",
            Code::DuplicateCollectionName => "duplicate-collection-name",
            Code::ConflictingSelection => "conflicting-selection",
            Code::WrongOutput => "wrong-output",
            Code::InvalidName => "invalid-name",
            Code::UnsupportedFactory => "unsupported-factory",
            Code::DuplicateAttribute => "duplicate-attribute",
            Code::InvalidSyntax => "invalid-syntax",
            Code::NestingTooDeep => "nesting-too-deep",
            Code::MissingToolSafety => "missing-tool-safety",
            Code::ReadOnlyReplay => "read-only-replay",
            Code::MutatingReplay => "mutating-replay",
            Code::ReadOnlyCapability => "read-only-capability",
            Code::UnknownCapability => "unknown-capability",
            Code::MissingDescription => "missing-description",
            Code::AmbiguousType => "ambiguous-type",
            Code::NotAFunction => "not-a-function",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.as_str())
    }
}

/// Builds an error whose message starts with the code.
pub fn error(code: Code, span: Span, message: impl fmt::Display) -> syn::Error {
    syn::Error::new(span, format!("{code} {message}"))
}

/// Re-labels a parse error from `syn` with [`Code::InvalidSyntax`], keeping its span.
pub fn syntax(err: syn::Error) -> syn::Error {
    let mut out: Option<syn::Error> = None;
    for e in err {
        let msg = e.to_string();
        let relabeled = if msg.starts_with('[') {
            e
        } else {
            error(Code::InvalidSyntax, e.span(), msg)
        };
        match &mut out {
            Some(all) => all.combine(relabeled),
            None => out = Some(relabeled),
        }
    }
    out.unwrap_or_else(|| error(Code::InvalidSyntax, Span::call_site(), "malformed input"))
}

/// Collects independent errors so one expansion reports all of them together.
#[derive(Default)]
pub struct Errors {
    inner: Option<syn::Error>,
}

impl Errors {
    /// Records an error.
    pub fn push(&mut self, err: syn::Error) {
        match &mut self.inner {
            Some(all) => all.combine(err),
            None => self.inner = Some(err),
        }
    }

    /// Records a coded error at `span`.
    pub fn at(&mut self, code: Code, span: Span, message: impl fmt::Display) {
        self.push(error(code, span, message));
    }

    /// Records the error of a fallible step and returns its value, if any.
    pub fn take<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.push(e);
                None
            }
        }
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.inner.is_none()
    }

    /// The combined error, if any.
    pub fn into_result(self) -> syn::Result<()> {
        match self.inner {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The compile errors as tokens (empty when nothing was recorded).
    pub fn to_compile_errors(&self) -> TokenStream {
        self.inner
            .as_ref()
            .map(syn::Error::to_compile_error)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_listed_once_and_kebab_case() {
        let mut seen = std::collections::BTreeSet::new();
        for code in Code::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "{s} listed twice");
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "{s}");
            assert_eq!(code.to_string(), format!("[{s}]"));
        }
    }

    #[test]
    fn syntax_prefixes_uncoded_errors_only() {
        let plain = syn::Error::new(Span::call_site(), "expected `,`");
        assert_eq!(syntax(plain).to_string(), "[invalid-syntax] expected `,`");
        let coded = error(Code::InvalidName, Span::call_site(), "bad");
        assert_eq!(syntax(coded).to_string(), "[invalid-name] bad");
    }

    #[test]
    fn errors_accumulate() {
        let mut errors = Errors::default();
        assert!(errors.is_empty());
        errors.at(Code::InvalidName, Span::call_site(), "one");
        errors.at(Code::WrongOutput, Span::call_site(), "two");
        let all: Vec<String> = errors
            .into_result()
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(all, ["[invalid-name] one", "[wrong-output] two"]);
    }
}
