//! Small string helpers shared by the kernel, and the one shape of its short identifiers.

use std::fmt;
use std::io::Write as _;
use std::sync::Arc;

/// Formats into a shared string with one allocation when it fits a small stack buffer.
pub(crate) fn format_arc(args: fmt::Arguments<'_>) -> Arc<str> {
    let mut buffer = [0u8; 160];
    let mut cursor = std::io::Cursor::new(&mut buffer[..]);
    if cursor.write_fmt(args).is_ok() {
        let len = usize::try_from(cursor.position()).unwrap_or(0);
        if let Ok(text) = std::str::from_utf8(&buffer[..len]) {
            return Arc::from(text);
        }
    }
    Arc::from(fmt::format(args))
}

/// Why a value is not a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenProblem {
    Empty,
    TooLong,
    Untrimmed,
}

impl TokenProblem {
    /// What is wrong, without the subject (`"must not be empty"`), for messages that name
    /// the field themselves.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            TokenProblem::Empty => "must not be empty",
            TokenProblem::TooLong => "is too long",
            TokenProblem::Untrimmed => "must not have surrounding whitespace",
        }
    }
}

/// The shape of every short identifier the kernel accepts (run ids, interaction ids and
/// kinds, agent and model names, operation ids): non-empty, at most `max` bytes, without
/// surrounding whitespace. Checked in this order, so the first problem is the one reported.
pub(crate) fn check_token(value: &str, max: usize) -> Result<(), TokenProblem> {
    if value.is_empty() {
        Err(TokenProblem::Empty)
    } else if value.len() > max {
        Err(TokenProblem::TooLong)
    } else if value.trim() != value {
        Err(TokenProblem::Untrimmed)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_non_empty_bounded_and_trimmed() {
        assert_eq!(check_token("a", 1), Ok(()));
        assert_eq!(check_token("", 1), Err(TokenProblem::Empty));
        assert_eq!(check_token("ab", 1), Err(TokenProblem::TooLong));
        assert_eq!(check_token(" a", 2), Err(TokenProblem::Untrimmed));
        assert_eq!(check_token("a\n", 2), Err(TokenProblem::Untrimmed));
    }

    #[test]
    fn format_arc_handles_long_text() {
        assert_eq!(&*format_arc(format_args!("{}-{}", "run", 7)), "run-7");
        let long = "x".repeat(500);
        assert_eq!(&*format_arc(format_args!("{long}")), long);
    }
}
