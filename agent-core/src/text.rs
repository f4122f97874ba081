//! Small string helpers shared by the kernel.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_arc_handles_long_text() {
        assert_eq!(&*format_arc(format_args!("{}-{}", "run", 7)), "run-7");
        let long = "x".repeat(500);
        assert_eq!(&*format_arc(format_args!("{long}")), long);
    }
}
