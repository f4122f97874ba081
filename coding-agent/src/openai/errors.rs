//! HTTP statuses as model problems, read with OpenAI's error bodies; never with the URL,
//! the headers or the key.

use agent_core::model::ModelProblem;

use crate::http::problems::ErrorBody;

/// A non-2xx status other than 401, with its error body, as a typed problem.
pub(super) fn status_problem(code: u16, body: ErrorBody) -> ModelProblem {
    let (kind, retryable) = match code {
        403 => ("auth", false),
        429 => ("rate_limited", !body.is("insufficient_quota")),
        500..=599 => ("server_error", true),
        _ => ("bad_request", false),
    };
    ModelProblem::new(kind, body.describe(code)).retryable(retryable)
}
