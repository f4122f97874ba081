//! Unpadded base64url (RFC 4648 section 5) for the fixed-size values of the endpoint: the
//! 32-byte token and the 16-byte instance id. Decoding is canonical: the decoded bytes must
//! encode back to exactly the input, so one value has one spelling.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The length of the unpadded encoding of `bytes` bytes.
///
/// ```
/// assert_eq!(agent_endpoint::base64url::encoded_len(32), 43);
/// assert_eq!(agent_endpoint::base64url::encoded_len(16), 22);
/// ```
pub const fn encoded_len(bytes: usize) -> usize {
    (bytes * 8).div_ceil(6)
}

/// Encodes `bytes` without padding.
///
/// ```
/// assert_eq!(agent_endpoint::base64url::encode(b"\xfb\xff"), "-_8");
/// ```
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(encoded_len(bytes.len()));
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        let digits = chunk.len() + 1;
        for i in 0..digits {
            let index = (n >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(ALPHABET[index as usize]));
        }
    }
    out
}

/// Decodes exactly `N` bytes from their canonical unpadded encoding; `None` for a wrong
/// length, a character outside the alphabet, padding, or non-zero trailing bits.
///
/// ```
/// use agent_endpoint::base64url::{decode, encode};
/// let bytes = [7u8; 16];
/// assert_eq!(decode::<16>(&encode(&bytes)), Some(bytes));
/// assert_eq!(decode::<16>("AAAAAAAAAAAAAAAAAAAAAB"), None); // trailing bits set
/// ```
pub fn decode<const N: usize>(text: &str) -> Option<[u8; N]> {
    let input = text.as_bytes();
    if input.len() != encoded_len(N) {
        return None;
    }
    let mut out = [0u8; N];
    let mut written = 0;
    for chunk in input.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(value(c)?) << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let take = chunk.len() - 1;
        out[written..written + take].copy_from_slice(&bytes[..take]);
        // Bits below the last whole byte must be zero, or two spellings would decode alike.
        if take < 3 && bytes[take] != 0 {
            return None;
        }
        written += take;
    }
    Some(out)
}

fn value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_length_and_byte() {
        for len in 0..40 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let text = encode(&bytes);
            assert_eq!(text.len(), encoded_len(len));
        }
        for byte in 0..=255u8 {
            let bytes = [byte; 16];
            assert_eq!(decode::<16>(&encode(&bytes)), Some(bytes));
            let bytes = [byte; 32];
            assert_eq!(decode::<32>(&encode(&bytes)), Some(bytes));
        }
    }

    #[test]
    fn known_vectors_match_rfc_4648() {
        // RFC 4648 section 10, base64 vectors without padding (same alphabet for these).
        for (input, expected) in [
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
        ] {
            assert_eq!(encode(input.as_bytes()), expected);
        }
        assert_eq!(encode(&[0xfb, 0xff, 0xbf]), "-_-_");
    }

    #[test]
    fn refuses_non_canonical_spellings() {
        let good = encode(&[0u8; 32]);
        assert!(decode::<32>(&good).is_some());
        assert_eq!(decode::<32>(&good[..42]), None);
        assert_eq!(decode::<32>(&format!("{good}A")), None);
        assert_eq!(decode::<32>(&format!("{}=", &good[..42])), None);
        assert_eq!(decode::<32>(&good.replace('A', "+")), None);
        let mut trailing = good.into_bytes();
        trailing[42] = b'B'; // the last character carries 2 unused bits
        assert_eq!(decode::<32>(std::str::from_utf8(&trailing).unwrap()), None);
    }
}
