//! HTTP statuses as model problems, read with OpenAI's error bodies; never with the URL,
//! the headers or the key.

use agent_core::model::ModelProblem;
use reqwest::StatusCode;

use crate::http::config::ApiKey;
use crate::http::problems::{ErrorBody, unauthorized};

/// A non-2xx response as a typed problem.
pub(super) async fn status_problem(
    status: StatusCode,
    response: reqwest::Response,
    key: &ApiKey,
) -> ModelProblem {
    let code = status.as_u16();
    if code == 401 {
        return unauthorized();
    }
    let body = ErrorBody::read(response, key).await;
    let (kind, retryable) = match code {
        403 => ("auth", false),
        429 => ("rate_limited", !body.is("insufficient_quota")),
        500..=599 => ("server_error", true),
        _ => ("bad_request", false),
    };
    ModelProblem::new(kind, body.describe(code)).retryable(retryable)
}
