//! Phase 1, parse: a bean attribute (`#[bean]`, `#[tool]`, `#[stage]`, `#[model_provider]`)
//! reads its arguments and modifiers ([`args`]) and the factory's signature ([`signature`]),
//! validates them, and writes the items and the descriptor that `compose!` reads
//! ([`expand`]).

pub mod args;
pub mod expand;
pub mod signature;

pub use args::{BeanKind, Modifier};
