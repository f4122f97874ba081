//! Compile-fail and pass fixtures for the composition macros live in `tests/ui`; this
//! library is empty. Run them with `cargo test -p ui-tests`.
#![forbid(unsafe_code)]
