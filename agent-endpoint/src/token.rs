//! The endpoint credential: 32 random bytes a daemon publishes in its protected endpoint
//! metadata and every client presents as `authorization: Bearer <token>`.
//!
//! It is distinct from the snapshot authority key. Every formatting path is redacted; the
//! text form is reachable only through [`EndpointToken::expose_text`] and
//! [`EndpointToken::authorization_value`].

use std::fmt;

use crate::base64url;

/// The token's size in bytes.
pub const TOKEN_BYTES: usize = 32;
/// The length of the token's canonical text: unpadded base64url of [`TOKEN_BYTES`].
pub const TOKEN_TEXT_LEN: usize = base64url::encoded_len(TOKEN_BYTES);
/// How many times generation draws fresh bytes before it gives up.
pub const GENERATION_ATTEMPTS: usize = 4;
/// The scheme prefix of the authorization value, with its one space.
pub const BEARER_PREFIX: &str = "Bearer ";

/// Why a token could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenError {
    /// The text is not exactly [`TOKEN_TEXT_LEN`] canonical base64url characters.
    NonCanonical,
    /// The bytes are all zero, which is never a credential.
    AllZero,
    /// The OS random source failed, or drew all-zero bytes [`GENERATION_ATTEMPTS`] times.
    Entropy,
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TokenError::NonCanonical => "endpoint token is not canonical unpadded base64url",
            TokenError::AllZero => "endpoint token is all zero",
            TokenError::Entropy => "endpoint token could not be generated",
        })
    }
}

impl std::error::Error for TokenError {}

/// A daemon's endpoint credential.
///
/// ```
/// use agent_endpoint::EndpointToken;
/// let token = EndpointToken::generate()?;
/// assert_eq!(format!("{token:?}"), "EndpointToken(<redacted>)");
/// let header = token.authorization_value();
/// assert!(token.verify_authorization(&header));
/// assert!(!token.verify_authorization(&header.to_lowercase()));
/// # Ok::<(), agent_endpoint::TokenError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct EndpointToken {
    bytes: [u8; TOKEN_BYTES],
}

impl EndpointToken {
    /// Draws a fresh token from the OS CSPRNG, retrying an all-zero draw.
    pub fn generate() -> Result<EndpointToken, TokenError> {
        for _ in 0..GENERATION_ATTEMPTS {
            let mut bytes = [0u8; TOKEN_BYTES];
            getrandom::fill(&mut bytes).map_err(|_| TokenError::Entropy)?;
            if let Ok(token) = EndpointToken::from_bytes(bytes) {
                return Ok(token);
            }
        }
        Err(TokenError::Entropy)
    }

    /// A token from its bytes; refuses all zero.
    pub fn from_bytes(bytes: [u8; TOKEN_BYTES]) -> Result<EndpointToken, TokenError> {
        if bytes.iter().all(|&b| b == 0) {
            return Err(TokenError::AllZero);
        }
        Ok(EndpointToken { bytes })
    }

    /// Parses the canonical text: exactly [`TOKEN_TEXT_LEN`] base64url characters, no
    /// padding, no whitespace, no other spelling of the same bytes.
    ///
    /// ```
    /// use agent_endpoint::{EndpointToken, TokenError};
    /// let text = "A".repeat(42) + "E";
    /// assert!(EndpointToken::parse(&text).is_ok());
    /// assert_eq!(EndpointToken::parse(&format!(" {text}")), Err(TokenError::NonCanonical));
    /// assert_eq!(EndpointToken::parse(&"A".repeat(43)), Err(TokenError::AllZero));
    /// ```
    pub fn parse(text: &str) -> Result<EndpointToken, TokenError> {
        let bytes = base64url::decode::<TOKEN_BYTES>(text).ok_or(TokenError::NonCanonical)?;
        EndpointToken::from_bytes(bytes)
    }

    /// The canonical text, for the endpoint metadata file only.
    pub fn expose_text(&self) -> String {
        base64url::encode(&self.bytes)
    }

    /// The `authorization` metadata value: `Bearer ` and the canonical text.
    pub fn authorization_value(&self) -> String {
        format!("{BEARER_PREFIX}{}", self.expose_text())
    }

    /// Whether `value` is exactly this token's authorization value. The bytes are compared
    /// in constant time; a malformed value is refused before any comparison.
    pub fn verify_authorization(&self, value: &str) -> bool {
        let Some(text) = value.strip_prefix(BEARER_PREFIX) else {
            return false;
        };
        let Ok(presented) = EndpointToken::parse(text) else {
            return false;
        };
        constant_time_eq(&presented.bytes, &self.bytes)
    }
}

fn constant_time_eq(a: &[u8; TOKEN_BYTES], b: &[u8; TOKEN_BYTES]) -> bool {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // black_box keeps the optimizer from turning the fold into an early exit.
    std::hint::black_box(difference) == 0
}

impl fmt::Debug for EndpointToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EndpointToken(<redacted>)")
    }
}

impl fmt::Display for EndpointToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_are_canonical_distinct_and_redacted() {
        let a = EndpointToken::generate().unwrap();
        let b = EndpointToken::generate().unwrap();
        assert_ne!(a, b);
        let text = a.expose_text();
        assert_eq!(text.len(), TOKEN_TEXT_LEN);
        assert_eq!(EndpointToken::parse(&text).unwrap(), a);
        for rendered in [format!("{a}"), format!("{a:?}"), format!("{a:#?}")] {
            assert!(!rendered.contains(&text), "{rendered}");
            assert!(rendered.contains("redacted"));
        }
    }

    #[test]
    fn parse_refuses_every_non_canonical_form() {
        let token = EndpointToken::generate().unwrap();
        let text = token.expose_text();
        for bad in [
            format!(" {text}"),
            format!("{text} "),
            format!("{text}\n"),
            format!("{text}="),
            text[..TOKEN_TEXT_LEN - 1].to_string(),
            format!("{text}A"),
            text.replace(['-', '_'], "+"),
        ] {
            if bad == text {
                continue;
            }
            assert_eq!(
                EndpointToken::parse(&bad),
                Err(TokenError::NonCanonical),
                "{bad:?}"
            );
        }
        assert_eq!(
            EndpointToken::from_bytes([0; TOKEN_BYTES]),
            Err(TokenError::AllZero)
        );
    }

    #[test]
    fn authorization_requires_the_exact_bearer_form() {
        let token = EndpointToken::generate().unwrap();
        let other = EndpointToken::generate().unwrap();
        let text = token.expose_text();
        assert!(token.verify_authorization(&format!("Bearer {text}")));
        for bad in [
            text.clone(),
            format!("bearer {text}"),
            format!("Bearer  {text}"),
            format!("Bearer {text} "),
            format!("Basic {text}"),
            other.authorization_value(),
            String::new(),
        ] {
            assert!(!token.verify_authorization(&bad), "{bad:?}");
        }
    }
}
