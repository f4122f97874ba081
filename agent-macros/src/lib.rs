//! Procedural macro entry points for `agent-core`. Each one forwards to `agent-compose`,
//! where the logic lives and is unit-tested. Depend on `agent-core`, which re-exports these;
//! the three crates are one release, pinned to each other's exact version.
#![forbid(unsafe_code)]

use agent_compose::{BeanKind, Modifier};
use proc_macro::TokenStream;

macro_rules! bean_attributes {
    ($($(#[$doc:meta])* $name:ident => $kind:ident;)*) => {$(
        $(#[$doc])*
        #[proc_macro_attribute]
        pub fn $name(args: TokenStream, item: TokenStream) -> TokenStream {
            agent_compose::bean_attribute(BeanKind::$kind, args.into(), item.into()).into()
        }
    )*};
}

macro_rules! modifier_attributes {
    ($($(#[$doc:meta])* $name:ident => $modifier:ident;)*) => {$(
        $(#[$doc])*
        #[proc_macro_attribute]
        pub fn $name(args: TokenStream, item: TokenStream) -> TokenStream {
            agent_compose::modifier_attribute(Modifier::$modifier, args.into(), item.into()).into()
        }
    )*};
}

bean_attributes! {
    /// Declares a bean factory. See `agent_core::bean`.
    ///
    /// Where agent-core is a renamed dependency (`agent = { package = "agent-core" }`),
    /// `crate = agent` says the path to reach it by: `#[agent::bean(crate = agent)]`.
    bean => Bean;
    /// Declares a tool: a typed tool (`effect`, `replay`, `capabilities` and an `#[args]`
    /// parameter, checked at compile time) or a tool factory. See `agent_core::tool`. Takes
    /// `crate = path` like `bean`.
    tool => Tool;
    /// Declares a stage factory. See `agent_core::stage`. Takes `crate = path` like `bean`.
    stage => Stage;
    /// Declares a model provider factory. See `agent_core::model_provider`. Takes
    /// `crate = path` like `bean`.
    model_provider => ModelProvider;
}

modifier_attributes! {
    /// Marks a bean primary. See `agent_core::primary`.
    primary => Primary;
    /// Marks a bean as a fallback. See `agent_core::fallback`.
    fallback => Fallback;
    /// Adds a qualifier to a bean. See `agent_core::qualifier`.
    qualifier => Qualifier;
    /// Sets a bean's collection order. See `agent_core::order`.
    order => Order;
}

/// Defines reusable groups of factories. See `agent_core::bean_set`.
///
/// Where agent-core is a renamed dependency, a first line `crate = agent;` says the path to
/// reach it by: `agent::bean_set! { crate = agent; pub tools = [read, write]; }`.
#[proc_macro]
pub fn bean_set(input: TokenStream) -> TokenStream {
    agent_compose::bean_set(input.into()).into()
}

/// Generates an application graph. See `agent_core::compose`.
///
/// Where agent-core is a renamed dependency, a first line `crate = agent;` says the path to
/// reach it by: `agent::compose! { crate = agent; pub struct App { beans: [..] } }`.
#[proc_macro]
pub fn compose(input: TokenStream) -> TokenStream {
    agent_compose::compose(input.into()).into()
}

#[doc(hidden)]
#[proc_macro]
pub fn compose_finish(input: TokenStream) -> TokenStream {
    agent_compose::compose_finish(input.into()).into()
}
