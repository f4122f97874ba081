//! Model-visible message text: bounded echoes of what the model gave, and path-free reasons
//! for I/O failures, so no message ever shows the absolute root.

use std::io;

/// Longest piece of a model-given path or pattern echoed in a message, in bytes.
const MAX_ECHO_BYTES: usize = 200;

/// A quoted, escaped and bounded form of model-given text, for messages.
pub(super) fn echo(text: &str) -> String {
    if text.len() <= MAX_ECHO_BYTES {
        format!("{text:?}")
    } else {
        format!("{:?}…", &text[..char_floor(text, MAX_ECHO_BYTES)])
    }
}

/// The largest char boundary of `text` at or below `index`.
pub(super) fn char_floor(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// A short, path-free reason for an I/O failure.
pub(super) fn short_reason(error: &io::Error) -> &'static str {
    use io::ErrorKind as Kind;
    match error.kind() {
        Kind::NotFound => "not found",
        Kind::PermissionDenied => "permission denied",
        Kind::AlreadyExists => "already exists",
        Kind::NotADirectory => "not a directory",
        Kind::IsADirectory => "is a directory",
        Kind::DirectoryNotEmpty => "directory not empty",
        Kind::ReadOnlyFilesystem => "read-only file system",
        Kind::StorageFull => "no space left on device",
        Kind::QuotaExceeded => "disk quota exceeded",
        Kind::FileTooLarge => "file too large",
        Kind::InvalidFilename => "invalid file name",
        Kind::ResourceBusy => "resource busy",
        Kind::Interrupted => "interrupted",
        Kind::TimedOut => "timed out",
        _ => "I/O error",
    }
}

/// A problem text for an I/O failure on the model-given `path`.
pub(super) fn io_problem(path: &str, error: &io::Error) -> String {
    format!("{}: {}", echo(path), short_reason(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_are_quoted_and_cut_on_a_char_boundary() {
        assert_eq!(echo("a\"b"), r#""a\"b""#);
        let long = "é".repeat(MAX_ECHO_BYTES);
        let shown = echo(&long);
        assert!(shown.ends_with('…'), "{shown}");
        assert!(shown.len() <= MAX_ECHO_BYTES + "\"\"…".len(), "{shown}");
        assert_eq!(char_floor("é", 1), 0);
    }

    #[test]
    fn io_problems_name_the_given_path_and_a_short_reason() {
        let error = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(io_problem("src/x.rs", &error), r#""src/x.rs": not found"#);
    }
}
