//! The HTTP client both providers post with: rustls with `ring` and the OS trust store, no
//! redirects (the key only ever goes to the configured host), bounded connect and read
//! times, and no proxy for loopback hosts.

use std::sync::Arc;
use std::time::Duration;

use agent_core::model::{EventStream, ModelProblem, ProviderError};
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use rustls_platform_verifier::BuilderVerifierExt;
use serde_json::Value;

use super::config::{ApiKey, ConfigError, Server};
use super::problems::{ErrorBody, read_failure};
use super::sse::Protocol;
use super::stream::SseStream;

/// How long connecting (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the server may stay silent, before the response head or between body chunks.
/// Generous, because reasoning models may think for minutes before their first token.
const READ_TIMEOUT: Duration = Duration::from_secs(600);

/// One endpoint of one server, and the client that posts to it. Cheap to share. Holds no
/// key: `Debug` shows the endpoint (which never carries credentials) and the client.
#[derive(Debug)]
pub(crate) struct Transport {
    client: reqwest::Client,
    endpoint: Url,
    host: String,
}

impl Transport {
    /// A client for `{base_url}/{path}` of `server`, with its own connection pool.
    pub(crate) fn new(server: &Server, path: &str) -> Result<Self, ConfigError> {
        Ok(Transport {
            client: http_client(server.is_loopback())?,
            endpoint: server.endpoint(path),
            host: server.host_label(),
        })
    }

    /// A JSON `POST` of `body` to the endpoint, asking for server-sent events; the
    /// provider adds its authentication headers.
    pub(crate) fn post(&self, body: &Value) -> Result<reqwest::RequestBuilder, ModelProblem> {
        let body = serde_json::to_vec(body)
            .map_err(|_| ModelProblem::new("bad_request", "the request could not be serialized"))?;
        Ok(self
            .client
            .post(self.endpoint.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body))
    }

    /// Sends `request` and streams its response's events through `protocol`. A failed send
    /// is an `unavailable` (or `bad_request`) problem naming only the host; a non-2xx status
    /// is what `failure` makes of it and the error body (a `401` never gets that far: its
    /// problem is fixed). Dropping the returned future aborts the request in flight.
    pub(crate) async fn open<P: Protocol + 'static>(
        &self,
        request: Result<reqwest::RequestBuilder, ModelProblem>,
        key: &ApiKey,
        failure: impl FnOnce(u16, ErrorBody) -> ModelProblem,
        protocol: P,
    ) -> Result<Box<dyn EventStream>, ProviderError> {
        let response = request?
            .send()
            .await
            .map_err(|error| send_problem(&error, &self.host))?;
        if !response.status().is_success() {
            let problem = match read_failure(response, key).await {
                Ok((status, body)) => failure(status, body),
                Err(problem) => problem,
            };
            return Err(problem.into());
        }
        Ok(Box::new(SseStream::new(response, protocol)))
    }
}

fn http_client(loopback: bool) -> Result<reqwest::Client, ConfigError> {
    let crypto = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(crypto)
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_platform_verifier())
        .map_err(|error| ConfigError::Client(error.to_string()))?
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!(
            "agent-kit-coding-agent/",
            env!("CARGO_PKG_VERSION")
        ));
    if loopback {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|_| ConfigError::Client("the HTTP client could not be built".to_owned()))
}

/// A failed `send`: never the error's own text, which names the full URL.
fn send_problem(error: &reqwest::Error, host: &str) -> ProviderError {
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
