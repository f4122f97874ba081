//! The one hashing convention for identities: SHA-256 over fields, each prefixed by its
//! length as an 8-byte big-endian integer, so no two field lists hash alike by accident.

use sha2::{Digest, Sha256};

/// A SHA-256 digest as 64 lowercase hex digits, kept inline (no allocation).
#[derive(Clone, Copy)]
pub(crate) struct HexDigest([u8; 64]);

impl HexDigest {
    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// Lowercase hex SHA-256 of length-prefixed `fields`.
pub(crate) fn fields_digest<'a>(fields: impl IntoIterator<Item = &'a [u8]>) -> HexDigest {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field);
    }
    let mut hex = [0u8; 64];
    for (i, byte) in hasher.finalize().iter().enumerate() {
        hex[2 * i] = DIGITS[usize::from(byte >> 4)];
        hex[2 * i + 1] = DIGITS[usize::from(byte & 0x0f)];
    }
    HexDigest(hex)
}

/// [`fields_digest`] as an owned string.
pub(crate) fn fields_hex<'a>(fields: impl IntoIterator<Item = &'a [u8]>) -> String {
    fields_digest(fields).as_str().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_prefixes_separate_fields() {
        let ab_c = fields_hex([b"ab".as_slice(), b"c".as_slice()]);
        let a_bc = fields_hex([b"a".as_slice(), b"bc".as_slice()]);
        assert_ne!(ab_c, a_bc);
        assert_eq!(ab_c.len(), 64);
        assert!(
            ab_c.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }

    #[test]
    fn empty_input_is_sha256_of_nothing() {
        assert_eq!(
            fields_hex(std::iter::empty()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
