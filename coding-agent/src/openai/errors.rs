//! HTTP statuses as model problems, read with OpenAI's error bodies; never with the URL,
//! the headers or the key.

use agent_core::model::ModelProblem;

use crate::http::problems::ErrorBody;

/// A non-2xx status other than 401, with its error body, as a typed problem.
pub(super) fn status_problem(code: u16, body: ErrorBody) -> ModelProblem {
    // OpenAI says `model_not_found` (with the model's name in its message), on a 404 or,
    // from some compatible servers, a 400.
    if matches!(code, 400 | 404) && body.is("model_not_found") {
        return ModelProblem::new("unknown_model", body.describe(code));
    }
    let (kind, retryable) = match code {
        403 => ("auth", false),
        429 => ("rate_limited", !body.is("insufficient_quota")),
        500..=599 => ("server_error", true),
        _ => ("bad_request", false),
    };
    ModelProblem::new(kind, body.describe(code)).retryable(retryable)
}
