//! Phase 2, transport: descriptors travel from the bean attributes to `compose!` inside
//! tokens that rustc routes.
//!
//! - [`descriptor`]: the token record one bean attribute leaves, and its strict parser;
//! - [`compose`] and [`set`]: parse `compose!` and `bean_set!` input and start a chain;
//! - [`chain`]: the `macro_rules!` chains with bounded depth and linear cost.
//!
//! The last link, which hands the descriptors to resolution and code generation, is
//! [`crate::finish`]: it drives the later phases, so it lives above them, not here.

pub mod chain;
pub mod compose;
pub mod descriptor;
pub mod set;
