//! Source locations printed as text, because spans do not survive crate boundaries.

use proc_macro2::Span;

/// `file:line:column` of the start of `span` (1-based line and column).
///
/// Outside a compiler session (unit tests) the file is whatever proc-macro2 reports for
/// parsed strings; the format stays the same.
pub fn of(span: Span) -> String {
    let start = span.start();
    format!("{}:{}:{}", span.file(), start.line, start.column + 1)
}
