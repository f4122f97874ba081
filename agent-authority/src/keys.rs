//! Scope ids, secret keys, the length-prefixed encoding and the HMAC helpers.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// Bytes in a scope id.
pub const SCOPE_ID_BYTES: usize = 32;
/// Bytes in a secret key (root key or per-run snapshot key).
pub const KEY_BYTES: usize = 32;
/// Bytes in an HMAC-SHA256 tag.
pub const MAC_BYTES: usize = 32;
/// Bytes in a SHA-256 digest.
pub const DIGEST_BYTES: usize = 32;

/// Domain of the per-run snapshot key derivation (docs/snapshot-authority.md, "The store").
pub(crate) const RUN_KEY_DOMAIN: &str = "spice.agent.run-authority-run-key/v1";

/// The public identity of one authority: which store signed an envelope. Not a secret; it
/// formats as lowercase hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScopeId([u8; SCOPE_ID_BYTES]);

impl ScopeId {
    /// A scope id from its bytes.
    pub const fn from_bytes(bytes: [u8; SCOPE_ID_BYTES]) -> Self {
        ScopeId(bytes)
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8; SCOPE_ID_BYTES] {
        &self.0
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        hex_encode(&self.0)
    }
}

impl fmt::Debug for ScopeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScopeId({})", self.to_hex())
    }
}

/// A 32-byte HMAC key. It never formats its bytes (`Debug` prints a fixed placeholder) and
/// is overwritten with zeros when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey([u8; KEY_BYTES]);

impl SecretKey {
    /// A key from its bytes.
    pub fn from_bytes(bytes: [u8; KEY_BYTES]) -> Self {
        SecretKey(bytes)
    }

    /// HMAC-SHA256 of `fields`, each length-prefixed.
    pub(crate) fn mac_lp(&self, fields: &[&[u8]]) -> [u8; MAC_BYTES] {
        let mut mac = self.hmac();
        for field in fields {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field);
        }
        mac.finalize().into_bytes().into()
    }

    /// Checks `tag` against HMAC-SHA256 of the length-prefixed `fields` in constant time.
    pub(crate) fn verify_lp(&self, fields: &[&[u8]], tag: &[u8]) -> bool {
        let mut mac = self.hmac();
        for field in fields {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field);
        }
        mac.verify_slice(tag).is_ok()
    }

    /// HMAC-SHA256 of `bytes` as they are.
    pub(crate) fn mac_raw(&self, bytes: &[u8]) -> [u8; MAC_BYTES] {
        let mut mac = self.hmac();
        mac.update(bytes);
        mac.finalize().into_bytes().into()
    }

    /// Checks `tag` against HMAC-SHA256 of `bytes` in constant time.
    pub(crate) fn verify_raw(&self, bytes: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.hmac();
        mac.update(bytes);
        mac.verify_slice(tag).is_ok()
    }

    fn hmac(&self) -> HmacSha256 {
        // HMAC accepts keys of every length, so this cannot fail for 32 bytes.
        match <HmacSha256 as KeyInit>::new_from_slice(&self.0) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC takes any key length"),
        }
    }

    /// The per-run snapshot key: HMAC(root, lp(domain, scope, run id, u64be(generation))).
    pub(crate) fn derive_run_key(
        &self,
        scope: &ScopeId,
        run_id: &str,
        run_generation: u64,
    ) -> SecretKey {
        SecretKey(self.mac_lp(&[
            RUN_KEY_DOMAIN.as_bytes(),
            scope.as_bytes(),
            run_id.as_bytes(),
            &run_generation.to_be_bytes(),
        ]))
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.0 = [0; KEY_BYTES];
        // Keeps the overwrite from being optimised away as a dead store.
        std::hint::black_box(&mut self.0);
    }
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; DIGEST_BYTES] {
    Sha256::digest(bytes).into()
}

/// Equality whose time depends only on the lengths, not on where the bytes differ.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

pub(crate) fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)] as char);
        out.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
    out
}

/// Decodes exactly `N` bytes of **lowercase** hex: uppercase is refused so that one value has
/// one spelling (a flipped case bit must not leave an envelope valid).
pub(crate) fn hex_decode<const N: usize>(text: &str) -> Option<[u8; N]> {
    let text = text.as_bytes();
    if text.len() != N * 2 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in text.chunks_exact(2).enumerate() {
        out[i] = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

/// `N` random bytes from the OS.
pub(crate) fn random<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut out = [0u8; N];
    getrandom::fill(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_uppercase_and_wrong_lengths() {
        let bytes = [0x00, 0x7f, 0xab, 0xff];
        assert_eq!(hex_encode(&bytes), "007fabff");
        assert_eq!(hex_decode::<4>("007fabff"), Some(bytes));
        assert_eq!(hex_decode::<4>("007FABFF"), None);
        assert_eq!(hex_decode::<4>("007fab"), None);
        assert_eq!(hex_decode::<4>("007fabff00"), None);
        assert_eq!(hex_decode::<1>("g0"), None);
    }

    #[test]
    fn constant_time_equality_is_equality() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
    }

    #[test]
    fn keys_never_format_their_bytes() {
        let key = SecretKey::from_bytes([0xab; KEY_BYTES]);
        let shown = format!("{key:?} {key:#?}");
        assert!(!shown.contains("ab"), "{shown}");
        assert!(!shown.contains("171"), "{shown}");
    }

    #[test]
    fn run_keys_differ_by_generation_run_and_scope() {
        let root = SecretKey::from_bytes([7; KEY_BYTES]);
        let scope = ScopeId::from_bytes([1; SCOPE_ID_BYTES]);
        let other = ScopeId::from_bytes([2; SCOPE_ID_BYTES]);
        let one = root.derive_run_key(&scope, "run-1", 1);
        assert_ne!(one, root.derive_run_key(&scope, "run-1", 2));
        assert_ne!(one, root.derive_run_key(&scope, "run-2", 1));
        assert_ne!(one, root.derive_run_key(&other, "run-1", 1));
        assert_eq!(one, root.derive_run_key(&scope, "run-1", 1));
    }
}
