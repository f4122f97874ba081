//! What a server says went wrong: error bodies (`{"error": {"message", "type", "code"}}`,
//! the shape both OpenAI and Anthropic use), scrubbed of the key and cut short.

use agent_core::model::ModelProblem;
use serde_json::Value;

use super::config::ApiKey;

/// Most bytes of an error body read to find its message.
const MAX_ERROR_BODY_BYTES: usize = 64 << 10;
/// Most characters of a server's error message repeated in a problem.
const MAX_SERVER_MESSAGE_CHARS: usize = 200;

/// What an error body says: its message (scrubbed, cut) and its `type`/`code` values.
#[derive(Default)]
pub(crate) struct ErrorBody {
    pub(crate) message: Option<String>,
    kinds: Vec<String>,
}

impl ErrorBody {
    /// Reads at most [`MAX_ERROR_BODY_BYTES`] of `response`; anything that is not such a
    /// JSON body (an HTML error page, say) says nothing.
    pub(crate) async fn read(mut response: reqwest::Response, key: &ApiKey) -> Self {
        let mut bytes = Vec::new();
        while bytes.len() < MAX_ERROR_BODY_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
        drop(response);
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(value) => Self::from_value(value.get("error").unwrap_or(&value), key),
            Err(_) => ErrorBody::default(),
        }
    }

    /// The `error` member of a body or of a stream event.
    pub(crate) fn from_value(error: &Value, key: &ApiKey) -> Self {
        let message = match error {
            Value::String(message) => Some(message.as_str()),
            _ => error.get("message").and_then(Value::as_str),
        };
        let kinds = ["type", "code"]
            .iter()
            .filter_map(|field| error.get(field).and_then(Value::as_str))
            .map(str::to_owned)
            .collect();
        ErrorBody {
            message: message
                .map(|message| server_message(message, key))
                .filter(|message| !message.is_empty()),
            kinds,
        }
    }

    /// Whether the body's `type` or `code` is `kind`.
    pub(crate) fn is(&self, kind: &str) -> bool {
        self.kinds.iter().any(|k| k == kind)
    }

    /// `HTTP {code}`, followed by the server's message when it sent one.
    pub(crate) fn describe(&self, status: u16) -> String {
        match &self.message {
            Some(detail) => format!("HTTP {status}: {detail}"),
            None => format!("HTTP {status}"),
        }
    }
}

/// A server's message: key scrubbed, trimmed, cut to [`MAX_SERVER_MESSAGE_CHARS`].
fn server_message(message: &str, key: &ApiKey) -> String {
    let scrubbed = key.scrub(message);
    let trimmed = scrubbed.trim();
    match trimmed.char_indices().nth(MAX_SERVER_MESSAGE_CHARS) {
        Some((end, _)) => format!("{}…", &trimmed[..end]),
        None => trimmed.to_owned(),
    }
}

/// The stream broke before the response finished.
pub(crate) fn stream_problem(message: &str) -> ModelProblem {
    ModelProblem::new("provider_stream", message).retryable(true)
}

/// A non-2xx response: its status and what its body says, or, for a `401`, the problem
/// itself (the server's words are never repeated then: they often quote part of the key).
pub(super) async fn read_failure(
    response: reqwest::Response,
    key: &ApiKey,
) -> Result<(u16, ErrorBody), ModelProblem> {
    let status = response.status().as_u16();
    if status == 401 {
        return Err(ModelProblem::new(
            "auth",
            "HTTP 401: the server rejected the API key",
        ));
    }
    Ok((status, ErrorBody::read(response, key).await))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_messages_are_scrubbed_and_cut() {
        let key = ApiKey::for_tests("sk-123");
        assert_eq!(server_message(" bad sk-123 ", &key), "bad <redacted>");
        let long = "ü".repeat(300);
        let cut = server_message(&long, &key);
        assert_eq!(cut.chars().count(), MAX_SERVER_MESSAGE_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
