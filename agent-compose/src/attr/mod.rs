//! Phase 1, parse: a bean attribute (`#[bean]`, `#[tool]`, `#[stage]`, `#[model_provider]`)
//! reads its arguments and modifiers ([`args`]) and the factory's signature ([`signature`]),
//! validates them, and writes the items and the descriptor that `compose!` reads
//! ([`expand`]); a typed tool (one function is a tool) is rewritten into a factory first
//! ([`typed`]).

pub mod args;
pub mod expand;
pub mod item;
pub mod signature;
pub mod typed;

pub use args::{BeanKind, Modifier};
