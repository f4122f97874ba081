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

/// Joins `parts` into a shared string with one allocation, without the formatting
/// machinery: the ids a run makes on its hot path (`run-<n>`, `<run>/model/<turn>`).
pub(crate) fn concat_arc(parts: &[&str]) -> Arc<str> {
    let mut buffer = [0u8; 160];
    let len: usize = parts.iter().map(|part| part.len()).sum();
    if len > buffer.len() {
        return Arc::from(parts.concat());
    }
    copy_parts(parts, &mut buffer);
    // A concatenation of `str`s is UTF-8; the check is the price of `forbid(unsafe_code)`.
    match std::str::from_utf8(&buffer[..len]) {
        Ok(text) => Arc::from(text),
        Err(_) => Arc::from(parts.concat()),
    }
}

/// The longest text [`ShortText`] keeps inline: a default run id (`run-` and up to 20
/// digits), `/model/` and a turn (up to 10 digits) fit.
pub(crate) const SHORT_TEXT_BYTES: usize = 46;

/// A string kept inline when it is short and shared otherwise: an id the kernel makes for
/// every turn (`<run>/model/<turn>`) then costs no allocation, while a long one (from a
/// custom id source) or one a caller already shares stays one reference count.
#[derive(Clone)]
pub(crate) enum ShortText {
    Inline {
        len: u8,
        bytes: [u8; SHORT_TEXT_BYTES],
    },
    Shared(Arc<str>),
}

impl ShortText {
    /// Joins `parts`, inline when they fit.
    pub(crate) fn join(parts: &[&str]) -> Self {
        let len: usize = parts.iter().map(|part| part.len()).sum();
        match u8::try_from(len) {
            Ok(short) if len <= SHORT_TEXT_BYTES => {
                let mut bytes = [0u8; SHORT_TEXT_BYTES];
                copy_parts(parts, &mut bytes);
                ShortText::Inline { len: short, bytes }
            }
            _ => ShortText::Shared(concat_arc(parts)),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // Only ever a concatenation of `str`s, so the check never fails; the check is
            // the price of `forbid(unsafe_code)`.
            ShortText::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            ShortText::Shared(text) => text,
        }
    }
}

impl From<Arc<str>> for ShortText {
    fn from(text: Arc<str>) -> Self {
        ShortText::Shared(text)
    }
}

impl PartialEq for ShortText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ShortText {}

impl fmt::Debug for ShortText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Copies `parts` one after the other to the start of `out`, which holds them all.
#[inline]
fn copy_parts(parts: &[&str], out: &mut [u8]) {
    let mut end = 0;
    for part in parts {
        out[end..end + part.len()].copy_from_slice(part.as_bytes());
        end += part.len();
    }
}

/// Whether two shared strings are equal, settled by their pointers when they share one
/// allocation (as the kernel's own copies of an id or fingerprint do).
pub(crate) fn same_text(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// The decimal digits of a number, on the stack.
pub(crate) struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl Decimal {
    pub(crate) fn new(mut value: u64) -> Self {
        let mut digits = [b'0'; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            // `value % 10` is below 10, so the cast keeps it whole.
            digits[start] = b'0' + (value % 10) as u8;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        Decimal { digits, start }
    }

    pub(crate) fn as_str(&self) -> &str {
        // ASCII digits only, so this never takes the fallback.
        std::str::from_utf8(&self.digits[self.start..]).unwrap_or("0")
    }
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
    fn decimals_and_concatenation_match_the_formatter() {
        for n in [0, 1, 9, 10, 42, 1_000, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(Decimal::new(n).as_str(), n.to_string());
        }
        assert_eq!(
            &*concat_arc(&["run", "-", Decimal::new(7).as_str()]),
            "run-7"
        );
        assert_eq!(&*concat_arc(&[]), "");
        assert_eq!(&*concat_arc(&["é", "-", "ü"]), "é-ü");
        let long = "é".repeat(100);
        assert_eq!(
            &*concat_arc(&[&long, "/model/", "3"]),
            format!("{long}/model/3")
        );
    }

    #[test]
    fn short_text_is_inline_up_to_its_bound_and_shared_past_it() {
        let fits = "r".repeat(SHORT_TEXT_BYTES - 2);
        let joined = ShortText::join(&[&fits, "/", "7"]);
        assert!(matches!(joined, ShortText::Inline { .. }));
        assert_eq!(joined.as_str(), format!("{fits}/7"));
        let past = ShortText::join(&[&fits, "/", "17"]);
        assert!(matches!(past, ShortText::Shared(_)));
        assert_eq!(past.as_str(), format!("{fits}/17"));
        assert_eq!(ShortText::join(&["é", "ü"]).as_str(), "éü");
        assert_eq!(ShortText::join(&[]).as_str(), "");
        let long = "x".repeat(300);
        assert_eq!(ShortText::join(&[&long]).as_str(), long);
        // Equality and debug output are the text's, however it is held.
        assert_eq!(
            ShortText::join(&["run-1/model/1"]),
            ShortText::from(Arc::<str>::from("run-1/model/1"))
        );
        assert_eq!(format!("{:?}", ShortText::join(&["a"])), "\"a\"");
    }

    #[test]
    fn format_arc_handles_long_text() {
        assert_eq!(&*format_arc(format_args!("{}-{}", "run", 7)), "run-7");
        let long = "x".repeat(500);
        assert_eq!(&*format_arc(format_args!("{long}")), long);
    }
}
