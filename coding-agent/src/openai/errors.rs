//! Failures as model problems: a failed send, a non-2xx status with its OpenAI-style error
//! body, and a broken stream; never with the URL, the headers or the key.

use agent_core::model::{ModelProblem, ProviderError};
use reqwest::StatusCode;
use serde_json::Value;

use super::config::ApiKey;

/// Most bytes of an error body read to find its message.
const MAX_ERROR_BODY_BYTES: usize = 64 << 10;
/// Most characters of a server's error message repeated in a problem.
const MAX_SERVER_MESSAGE_CHARS: usize = 200;

/// A failed `send`: never the error's own text, which names the full URL.
pub(super) fn send_problem(error: &reqwest::Error, host: &str) -> ProviderError {
    if error.is_builder() {
        return ModelProblem::new("bad_request", "the HTTP request could not be built").into();
    }
    let cause = io_cause(error).map_or_else(String::new, |kind| format!(" ({kind})"));
    let message = if error.is_timeout() {
        format!("the model server at {host} did not answer in time{cause}")
    } else if error.is_connect() {
        format!("could not connect to the model server at {host}{cause}")
    } else {
        format!("the request to the model server at {host} failed{cause}")
    };
    ModelProblem::new("unavailable", message)
        .retryable(true)
        .into()
}

/// The kind of the innermost I/O error behind `error`, if any (a fixed phrase such as
/// "connection refused", never text that could echo the URL).
fn io_cause(error: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut kind = None;
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            kind = Some(io.kind());
        }
        current = error.source();
    }
    kind
}

/// A non-2xx response as a typed problem.
pub(super) async fn status_problem(
    status: StatusCode,
    response: reqwest::Response,
    key: &ApiKey,
) -> ModelProblem {
    let code = status.as_u16();
    if code == 401 {
        // The body of a 401 often quotes (part of) the key: never repeat it.
        return ModelProblem::new("auth", "HTTP 401: the server rejected the API key");
    }
    let body = ErrorBody::read(response, key).await;
    let (kind, retryable) = match code {
        403 => ("auth", false),
        429 => ("rate_limited", !body.is("insufficient_quota")),
        500..=599 => ("server_error", true),
        _ => ("bad_request", false),
    };
    let message = match body.message {
        Some(detail) => format!("HTTP {code}: {detail}"),
        None => format!("HTTP {code}"),
    };
    ModelProblem::new(kind, message).retryable(retryable)
}

/// What an OpenAI-style error body (`{"error": {"message", "type", "code"}}`) says.
#[derive(Default)]
pub(super) struct ErrorBody {
    pub(super) message: Option<String>,
    kinds: Vec<String>,
}

impl ErrorBody {
    /// Reads at most [`MAX_ERROR_BODY_BYTES`] of `response`; anything that is not such a
    /// JSON body (an HTML error page, say) says nothing.
    async fn read(mut response: reqwest::Response, key: &ApiKey) -> Self {
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

    pub(super) fn from_value(error: &Value, key: &ApiKey) -> Self {
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

    fn is(&self, kind: &str) -> bool {
        self.kinds.iter().any(|k| k == kind)
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

pub(super) fn stream_problem(message: &str) -> ModelProblem {
    ModelProblem::new("provider_stream", message).retryable(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn server_messages_are_scrubbed_and_cut() {
        let key = ApiKey(Arc::from("sk-123"));
        assert_eq!(server_message(" bad sk-123 ", &key), "bad <redacted>");
        let long = "ü".repeat(300);
        let cut = server_message(&long, &key);
        assert_eq!(cut.chars().count(), MAX_SERVER_MESSAGE_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
