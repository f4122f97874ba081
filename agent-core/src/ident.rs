//! The identity grammar for names that leave the process: tool names today,
//! other registered names later.
//!
//! The grammar is deliberately narrow (lowercase ASCII, single separators, no
//! trailing separator) so that a name compares byte-for-byte, needs no
//! escaping in logs, paths or configuration keys, and can be mapped
//! mechanically onto a provider's stricter naming rules.

/// Longest accepted identity, in bytes (equal to characters, as it is ASCII).
pub(crate) const MAX_IDENTITY_BYTES: usize = 128;

/// Why a string is not a valid identity. Indices are byte offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum IdentityError {
    /// The string is empty.
    #[error("must not be empty")]
    Empty,
    /// The string is longer than [`MAX_IDENTITY_BYTES`].
    #[error("is {len} bytes long; at most {MAX_IDENTITY_BYTES} are allowed")]
    TooLong {
        /// Actual length in bytes.
        len: usize,
    },
    /// The first character is not `a-z`.
    #[error("must start with a lowercase ASCII letter (a-z), found {ch:?}")]
    InvalidStart {
        /// The offending first character.
        ch: char,
    },
    /// A character outside `a-z 0-9 . - _`.
    #[error(
        "invalid character {ch:?} at byte {index}; only a-z, 0-9, '.', '-' and '_' are allowed"
    )]
    InvalidChar {
        /// Byte offset of the character.
        index: usize,
        /// The offending character.
        ch: char,
    },
    /// A separator directly follows another separator.
    #[error("separator at byte {index} directly follows another separator")]
    RepeatedSeparator {
        /// Byte offset of the second separator.
        index: usize,
    },
    /// The last character is a separator.
    #[error("must not end with a separator ('.', '-' or '_')")]
    TrailingSeparator,
}

/// Checks `value` against the identity grammar, reporting the first problem
/// found scanning left to right (after the empty and length checks).
pub(crate) fn validate_identity(value: &str) -> Result<(), IdentityError> {
    let mut chars = value.char_indices();
    let Some((_, first)) = chars.next() else {
        return Err(IdentityError::Empty);
    };
    if value.len() > MAX_IDENTITY_BYTES {
        return Err(IdentityError::TooLong { len: value.len() });
    }
    if !first.is_ascii_lowercase() {
        return Err(IdentityError::InvalidStart { ch: first });
    }
    // The first character is a letter, so a separator can never lead.
    let mut previous_was_separator = false;
    for (index, ch) in chars {
        let separator = matches!(ch, '.' | '-' | '_');
        if !(separator || ch.is_ascii_lowercase() || ch.is_ascii_digit()) {
            return Err(IdentityError::InvalidChar { index, ch });
        }
        if separator && previous_was_separator {
            return Err(IdentityError::RepeatedSeparator { index });
        }
        previous_was_separator = separator;
    }
    if previous_was_separator {
        return Err(IdentityError::TrailingSeparator);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_valid_identities() {
        for valid in [
            "a",
            "z9",
            "files.read",
            "web-search",
            "snake_case_name",
            "a.b-c_d.e",
            "v2.tool-1_x",
            &"a".repeat(MAX_IDENTITY_BYTES),
        ] {
            assert_eq!(validate_identity(valid), Ok(()), "{valid:?}");
        }
    }

    #[test]
    fn rejects_empty() {
        assert_eq!(validate_identity(""), Err(IdentityError::Empty));
    }

    #[test]
    fn rejects_too_long() {
        let long = "a".repeat(MAX_IDENTITY_BYTES + 1);
        assert_eq!(
            validate_identity(&long),
            Err(IdentityError::TooLong {
                len: MAX_IDENTITY_BYTES + 1
            })
        );
        // Length is in bytes: 65 two-byte characters exceed the limit.
        let wide = "é".repeat(65);
        assert_eq!(
            validate_identity(&wide),
            Err(IdentityError::TooLong { len: 130 })
        );
    }

    #[test]
    fn rejects_invalid_start() {
        for (input, ch) in [
            ("A", 'A'),
            ("1a", '1'),
            (".a", '.'),
            ("-a", '-'),
            ("_a", '_'),
            ("éa", 'é'),
            (" a", ' '),
        ] {
            assert_eq!(
                validate_identity(input),
                Err(IdentityError::InvalidStart { ch }),
                "{input:?}"
            );
        }
    }

    #[test]
    fn rejects_invalid_char() {
        for (input, index, ch) in [
            ("aB", 1, 'B'),
            ("a b", 1, ' '),
            ("a/b", 1, '/'),
            ("ab:c", 2, ':'),
            ("aé", 1, 'é'),
            ("aéb!", 1, 'é'),
            ("a\n", 1, '\n'),
        ] {
            assert_eq!(
                validate_identity(input),
                Err(IdentityError::InvalidChar { index, ch }),
                "{input:?}"
            );
        }
    }

    #[test]
    fn rejects_repeated_separator() {
        for (input, index) in [
            ("a..b", 2),
            ("a-_b", 2),
            ("ab_.c", 3),
            ("a.-", 2),
            ("a__", 2),
        ] {
            assert_eq!(
                validate_identity(input),
                Err(IdentityError::RepeatedSeparator { index }),
                "{input:?}"
            );
        }
    }

    #[test]
    fn rejects_trailing_separator() {
        for input in ["a.", "a-", "a_", "ab.c_"] {
            assert_eq!(
                validate_identity(input),
                Err(IdentityError::TrailingSeparator),
                "{input:?}"
            );
        }
    }

    #[test]
    fn messages_name_the_problem() {
        let message = IdentityError::InvalidChar { index: 3, ch: '/' }.to_string();
        assert!(
            message.contains("'/'") && message.contains("byte 3"),
            "{message}"
        );
        let message = IdentityError::TooLong { len: 200 }.to_string();
        assert!(
            message.contains("200") && message.contains("128"),
            "{message}"
        );
    }

    fn is_separator(byte: u8) -> bool {
        matches!(byte, b'.' | b'-' | b'_')
    }

    /// The grammar restated as a conjunction of independent byte-level rules,
    /// sharing no code with the scanner under test.
    fn reference(value: &str) -> bool {
        let bytes = value.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= MAX_IDENTITY_BYTES
            && bytes[0].is_ascii_lowercase()
            && bytes
                .iter()
                .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || is_separator(b))
            && !bytes
                .windows(2)
                .any(|pair| is_separator(pair[0]) && is_separator(pair[1]))
            && !is_separator(bytes[bytes.len() - 1])
    }

    fn candidates() -> impl Strategy<Value = String> {
        prop_oneof![
            // Mostly the legal alphabet, so valid names and near misses are common.
            "[a-z][a-z0-9._-]{0,16}",
            "[a-zA-Z0-9._ /-]{0,12}",
            // Straddles the length limit.
            "[a-z][a-z0-9]{124,130}",
            // Anything at all, including non-ASCII.
            any::<String>(),
        ]
    }

    proptest! {
        #[test]
        fn agrees_with_reference(value in candidates()) {
            let result = validate_identity(&value);
            prop_assert_eq!(result.is_ok(), reference(&value), "{:?} -> {:?}", value, result);
            // Reported positions must point at a real character boundary of the input.
            if let Err(IdentityError::InvalidChar { index, ch } ) = result {
                prop_assert_eq!(value[index..].chars().next(), Some(ch));
            }
            if let Err(IdentityError::RepeatedSeparator { index }) = result {
                prop_assert!(is_separator(value.as_bytes()[index]));
                prop_assert!(is_separator(value.as_bytes()[index - 1]));
            }
        }
    }
}
