//! HTTP statuses and streamed `error` events as model problems, read with Anthropic's
//! error bodies (`{"type": "error", "error": {"type", "message"}}`); never with the URL,
//! the headers or the key.

use agent_core::model::ModelProblem;

use crate::http::problems::ErrorBody;

/// A non-2xx status other than 401, with its error body, of a request for `model` as a
/// typed problem.
pub(super) fn status_problem(code: u16, body: ErrorBody, model: &str) -> ModelProblem {
    if code == 404 && body.is("not_found_error") {
        // On `/v1/messages` the one thing that can be missing is the model.
        let message = format!(
            "HTTP 404: the server does not know the model `{model}` ({})",
            body.message.as_deref().unwrap_or("not_found_error")
        );
        return ModelProblem::new("unknown_model", message);
    }
    let (kind, retryable) = match code {
        403 => ("auth", false),
        404 => ("not_found", false),
        429 => ("rate_limited", true),
        529 => ("overloaded", true),
        500..=599 => ("server_error", true),
        _ => ("bad_request", false),
    };
    let mut message = body.describe(code);
    if kind == "not_found" {
        message.push_str(" (is the base URL the server's root, without `/v1`?)");
    }
    ModelProblem::new(kind, message).retryable(retryable)
}

/// A streamed `error` event's `error` object as the response's failure.
pub(super) fn event_problem(error: &ErrorBody) -> ModelProblem {
    let (kind, retryable) = if error.is("overloaded_error") {
        ("overloaded", true)
    } else if error.is("rate_limit_error") {
        ("rate_limited", true)
    } else if error.is("invalid_request_error") || error.is("request_too_large") {
        ("bad_request", false)
    } else if error.is("authentication_error") || error.is("permission_error") {
        ("auth", false)
    } else {
        // `api_error` and anything new: the server failed, a retry may succeed.
        ("server_error", true)
    };
    let message = error
        .message
        .clone()
        .unwrap_or_else(|| "the model server reported an error".to_owned());
    ModelProblem::new(kind, message).retryable(retryable)
}
