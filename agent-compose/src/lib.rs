//! The composition compiler behind `agent-core`'s attributes and `compose!`.
//!
//! **Not a public API.** This crate is an implementation detail of `agent-macros`, which
//! depends on it with an exact version pin; every item may change in any release. Depend on
//! `agent-core` instead. The modules are `pub` only so that tests and benchmarks can reach
//! them (this crate's own, and `ui-tests`, which checks the identity grammar and the typed-tool
//! rules against the kernel's); they are hidden from the documentation.
//!
//! This is a plain library over `proc-macro2`, `syn` and `quote`, so every phase is
//! unit-testable without a compiler session: `agent-macros` only forwards token streams here.
//! The folders are the pipeline, in order:
//!
//! | phase | module | what it does |
//! | --- | --- | --- |
//! | parse | [`attr`] | reads a bean attribute, its modifiers and the factory's signature, and writes the descriptor |
//! | transport | [`transport`] | carries descriptors through `macro_rules!` chains from `compose!` and `bean_set!` to the finisher |
//! | resolve | [`graph`] | applies the selection rules, finds cycles and orders construction |
//! | plan | [`plan`] | cuts construction into batches and decides which collections are shared |
//! | generate | [`codegen`] | writes the application, its construction, manifest and coherence check, or the stub |
//! | finish | [`finish`] | the last link of a chain: runs resolve, plan and generate |
//!
//! A phase imports only the phases before it. The descriptor ([`transport::descriptor`]) and
//! the chain ([`transport::chain`]) are the format the parser writes, so they sit below
//! [`attr`] although they live in `transport/` (`agent-core/tests/architecture.rs` checks
//! this order).
//!
//! Support modules used by every phase: [`diag`] (stable codes, error accumulation),
//! [`bean`] (a factory's kind and return form), [`ident`] (the identity grammar), [`naming`] (every generated identifier), [`nesting`] (the depth guard run before parsing), [`key`] (type keys), [`location`] (source locations as
//! text) and [`runtime`] (the versioned path generated code reaches agent-core by, and
//! `crate = path`).
//!
//! Every error carries a stable code ([`diag::Code`]) and the span of the smallest user token
//! at fault; errors are collected, never short-circuited. No input makes this crate panic or
//! overflow the stack: every recursive parse runs behind the depth guard ([`nesting`]), and
//! the attribute path is one-way (a typed tool is rewritten, then analyzed; nothing expands
//! twice). `tests/robustness.rs` checks both on generated input, the typed-tool grammar
//! included.
#![forbid(unsafe_code)]

#[doc(hidden)]
pub mod attr;
#[doc(hidden)]
pub mod bean;
#[doc(hidden)]
pub mod codegen;
#[doc(hidden)]
pub mod diag;
#[doc(hidden)]
pub mod finish;
#[doc(hidden)]
pub mod graph;
#[doc(hidden)]
pub mod ident;
#[doc(hidden)]
pub mod key;
#[doc(hidden)]
pub mod location;
#[doc(hidden)]
pub mod naming;
#[doc(hidden)]
pub mod nesting;
#[doc(hidden)]
pub mod plan;
#[doc(hidden)]
pub mod runtime;
#[doc(hidden)]
pub mod transport;

use proc_macro2::TokenStream;

pub use attr::{BeanKind, Modifier};

/// `#[bean]`, `#[tool]`, `#[stage]`, `#[model_provider]`.
pub fn bean_attribute(kind: BeanKind, args: TokenStream, item: TokenStream) -> TokenStream {
    attr::expand::expand(kind, args, item)
}

/// `#[primary]`, `#[fallback]`, `#[qualifier("x")]`, `#[order(n)]` written above the bean
/// attribute.
pub fn modifier_attribute(modifier: Modifier, args: TokenStream, item: TokenStream) -> TokenStream {
    attr::expand::expand_modifier(modifier, args, item)
}

/// `bean_set! { ... }`.
pub fn bean_set(input: TokenStream) -> TokenStream {
    transport::set::expand(input)
}

/// `compose! { ... }`.
pub fn compose(input: TokenStream) -> TokenStream {
    transport::compose::expand(input)
}

/// The last link of a chain (see [`transport::chain`]): resolves and generates.
pub fn compose_finish(input: TokenStream) -> TokenStream {
    let current_crate = std::env::var("CARGO_CRATE_NAME").unwrap_or_default();
    finish::finish(input, &current_crate)
}

/// Helpers for this crate's own tests and benchmarks. Not API: hidden, and changed freely.
#[doc(hidden)]
pub mod __testing {
    pub use crate::finish::finish;
    pub use crate::graph::error_codes;
    pub use crate::transport::chain::finisher_input;
}
