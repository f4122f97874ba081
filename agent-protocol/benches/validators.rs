//! Validator benchmarks (written below).
fn main() {}
