//! Phase 2, transport: descriptors travel from the bean attributes to `compose!` inside
//! tokens that rustc routes.
//!
//! - [`descriptor`]: the token record one bean attribute leaves, and its strict parser;
//! - [`compose`] and [`set`]: parse `compose!` and `bean_set!` input and start a chain;
//! - [`chain`]: the `macro_rules!` chains with bounded depth and linear cost;
//! - [`finish`]: the last link, which hands the descriptors to resolution and code
//!   generation, or passes them on as a relay or bean-set macro.

pub mod chain;
pub mod compose;
pub mod descriptor;
pub mod finish;
pub mod set;
