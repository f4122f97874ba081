//! The protocol's token rule and JSON value checks (docs/protocol.md, "Tokens").

use serde::de::IgnoredAny;

/// A token of at most `max` bytes: non-empty, unchanged by trimming Unicode
/// whitespace, and free of NUL, CR, LF and TAB. `&str` is valid UTF-8 by
/// construction (prost refuses invalid UTF-8 while decoding).
pub fn is_token(value: &str, max: usize) -> bool {
    !value.is_empty()
        && value.len() <= max
        && value.trim() == value
        && !value
            .bytes()
            .any(|b| matches!(b, b'\0' | b'\r' | b'\n' | b'\t'))
}

/// A non-empty, well-formed JSON document of at most `max` bytes.
pub fn is_json(value: &[u8], max: usize) -> bool {
    !value.is_empty() && value.len() <= max && serde_json::from_slice::<IgnoredAny>(value).is_ok()
}

/// Empty, or a JSON document of at most `max` bytes (event payloads).
pub fn is_optional_json(value: &[u8], max: usize) -> bool {
    value.is_empty() || is_json(value, max)
}
