//! Correlation pseudonyms: HMAC-SHA256 under the process-local key, truncated to 16 bytes.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::config::CorrelationKey;

type HmacSha256 = Hmac<Sha256>;

/// The domain of run pseudonyms.
pub const RUN_DOMAIN: &str = "run";

/// The domain of tool-call pseudonyms.
pub const CALL_DOMAIN: &str = "call";

/// The bytes of a pseudonym before hex encoding.
pub const PSEUDONYM_BYTES: usize = 16;

/// Derives the pseudonyms logs carry instead of run and call ids: the lowercase hex of the
/// first 16 bytes of `HMAC-SHA256(key, domain || 0x00 || value)`. Stable under one key,
/// unlinkable across keys.
///
/// ```
/// use agent_logging::{CorrelationKey, Pseudonyms};
///
/// let pseudonyms = Pseudonyms::new(CorrelationKey::new([1; 32])?);
/// let run = pseudonyms.run("run-1");
/// assert_eq!(run.len(), 32);
/// assert_eq!(run, pseudonyms.run("run-1"));
/// assert_ne!(pseudonyms.call("run-1", "c1"), pseudonyms.call("run-2", "c1"));
/// # Ok::<(), agent_logging::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Pseudonyms {
    key: CorrelationKey,
}

impl Pseudonyms {
    /// Pseudonyms under `key`.
    pub fn new(key: CorrelationKey) -> Self {
        Pseudonyms { key }
    }

    /// The pseudonym of run `run_id` (domain `run`).
    pub fn run(&self, run_id: &str) -> String {
        self.derive(RUN_DOMAIN, &[run_id.as_bytes()])
    }

    /// The pseudonym of call `call_id` in run `run_id` (domain `call`, value
    /// `run_id || 0x00 || call_id`).
    pub fn call(&self, run_id: &str, call_id: &str) -> String {
        self.derive(CALL_DOMAIN, &[run_id.as_bytes(), &[0], call_id.as_bytes()])
    }

    fn derive(&self, domain: &str, value: &[&[u8]]) -> String {
        let mut mac = match <HmacSha256 as KeyInit>::new_from_slice(self.key.bytes()) {
            Ok(mac) => mac,
            // HMAC takes keys of any length.
            Err(_) => unreachable!("HMAC accepts a 32-byte key"),
        };
        mac.update(domain.as_bytes());
        mac.update(&[0]);
        for part in value {
            mac.update(part);
        }
        let tag = mac.finalize().into_bytes();
        let mut hex = String::with_capacity(2 * PSEUDONYM_BYTES);
        for byte in &tag[..PSEUDONYM_BYTES] {
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
            hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
        }
        hex
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> CorrelationKey {
        CorrelationKey::new([byte; 32]).unwrap()
    }

    /// `TestPseudonymsAreStableWithinKeyAndIsolatedAcrossKeys`.
    #[test]
    fn pseudonyms_are_stable_within_a_key_and_isolated_across_keys() {
        let a = Pseudonyms::new(key(1));
        let b = Pseudonyms::new(key(2));
        assert_eq!(a.run("run-1"), a.run("run-1"));
        assert_ne!(a.run("run-1"), b.run("run-1"));
        assert_ne!(a.run("run-1"), a.run("run-2"));
        assert_eq!(a.call("run-1", "c"), a.call("run-1", "c"));
        assert_ne!(a.call("run-1", "c"), b.call("run-1", "c"));
        // The separator keeps ("ab", "c") and ("a", "bc") apart, and domains apart.
        assert_ne!(a.call("ab", "c"), a.call("a", "bc"));
        assert_ne!(a.run("x"), a.call("x", ""));
        for p in [a.run("run-1"), a.call("run-1", "c")] {
            assert_eq!(p.len(), 32);
            assert!(
                p.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')),
                "{p}"
            );
        }
    }

    #[test]
    fn pseudonym_matches_an_independent_hmac() {
        // HMAC-SHA256(key = 32 x 0x01, "run" 0x00 "run-1"), computed here with the same
        // primitive fed in one piece, so the framing (domain, NUL, value) is what is tested.
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&[1; 32]).unwrap();
        mac.update(b"run\0run-1");
        let full = mac.finalize().into_bytes();
        let expected: String = full[..16].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(Pseudonyms::new(key(1)).run("run-1"), expected);
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&[1; 32]).unwrap();
        mac.update(b"call\0run-1\0c1");
        let full = mac.finalize().into_bytes();
        let expected: String = full[..16].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(Pseudonyms::new(key(1)).call("run-1", "c1"), expected);
    }
}
