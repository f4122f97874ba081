//! The protocol's token rule (docs/protocol.md, "Tokens").

/// A token of at most `max` bytes: non-empty, unchanged by trimming Unicode
/// whitespace, and free of NUL, CR, LF and TAB. `&str` is valid UTF-8 by
/// construction.
pub(crate) fn is_token(value: &str, max: usize) -> bool {
    !value.is_empty()
        && value.len() <= max
        && value.trim() == value
        && !value
            .bytes()
            .any(|b| matches!(b, b'\0' | b'\r' | b'\n' | b'\t'))
}

/// `value` as an owned token, or `error`.
pub(crate) fn token(
    value: &str,
    max: usize,
    error: &'static str,
) -> Result<String, crate::ValueError> {
    if is_token(value, max) {
        Ok(value.to_owned())
    } else {
        Err(crate::ValueError::new(error))
    }
}
