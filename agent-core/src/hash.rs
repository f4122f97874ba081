//! The one hashing convention for identities: SHA-256 over fields, each prefixed by its
//! length as an 8-byte big-endian integer, so no two field lists hash alike by accident.

use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256 of length-prefixed `fields`.
pub(crate) fn fields_hex<'a>(fields: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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
