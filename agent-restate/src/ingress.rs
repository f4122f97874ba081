//! Calls into the cluster through its ingress, from outside any invocation's journal: the
//! worker's record writes during an execution, and every client call.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// How long one HTTP request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a call keeps retrying an unreachable or failing cluster (an engine restart
/// takes about a second here) before it reports [`IngressError::Unavailable`].
pub const RETRY_BUDGET: Duration = Duration::from_secs(60);
/// The first pause between retries; it doubles up to [`MAX_RETRY_PAUSE`].
pub const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause between retries.
pub const MAX_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Why an ingress call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IngressError {
    /// The handler refused the request (a terminal error): retrying cannot help.
    #[error("refused ({status}): {message}")]
    Refused {
        /// The HTTP status the handler chose (400 bad input, 404 unknown, 409 conflict).
        status: u16,
        /// The handler's message.
        message: String,
    },
    /// The cluster did not answer within [`RETRY_BUDGET`].
    #[error("the cluster is unavailable: {0}")]
    Unavailable(String),
    /// The answer was not what the handler returns.
    #[error("the cluster answered something unexpected: {0}")]
    Malformed(String),
}

impl IngressError {
    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            IngressError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// The ingress of one cluster.
///
/// ```no_run
/// use agent_restate::ingress::{Ingress, Target};
/// use agent_restate::record::RunState;
///
/// # async fn run() -> Result<(), agent_restate::ingress::IngressError> {
/// let ingress = Ingress::new("http://127.0.0.1:8080")?;
/// let state: RunState = ingress
///     .call(&Target::keyed("RunRecord", "run-1", "state"), &(), None)
///     .await?;
/// println!("last event {}, ended: {:?}", state.last_sequence, state.ended);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Ingress {
    base: String,
    http: reqwest::Client,
}

impl Ingress {
    /// The ingress at `base` (`http://host:8080`).
    pub fn new(base: &str) -> Result<Ingress, IngressError> {
        let http = http_client(base, REQUEST_TIMEOUT).map_err(IngressError::Unavailable)?;
        Ok(Ingress {
            base: base.trim_end_matches('/').to_owned(),
            http,
        })
    }

    /// The base address.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Calls `service/[key/]handler` with `body` and waits for its answer, retrying while
    /// the cluster is unreachable. With `idempotency`, the cluster runs a retried request
    /// once and answers every retry with the first answer.
    pub async fn call<Req, Res>(
        &self,
        target: &Target<'_>,
        body: &Req,
        idempotency: Option<&str>,
    ) -> Result<Res, IngressError>
    where
        Req: Serialize + ?Sized,
        Res: DeserializeOwned,
    {
        let url = target.url(&self.base, false);
        decode(&self.post(&url, body, idempotency, RETRY_BUDGET).await?)
    }

    /// Sends `service/[key/]handler` without waiting for it to run.
    pub async fn send<Req>(
        &self,
        target: &Target<'_>,
        body: &Req,
        idempotency: Option<&str>,
    ) -> Result<(), IngressError>
    where
        Req: Serialize + ?Sized,
    {
        let url = target.url(&self.base, true);
        self.post(&url, body, idempotency, RETRY_BUDGET)
            .await
            .map(drop)
    }

    /// [`call`](Self::call) once, without retrying: for a poll that asks again anyway.
    pub async fn call_once<Req, Res>(
        &self,
        target: &Target<'_>,
        body: &Req,
    ) -> Result<Res, IngressError>
    where
        Req: Serialize + ?Sized,
        Res: DeserializeOwned,
    {
        let url = target.url(&self.base, false);
        decode(&self.post(&url, body, None, Duration::ZERO).await?)
    }

    /// Whether the ingress answers its health check now.
    pub async fn healthy(&self) -> bool {
        let url = format!("{}/restate/health", self.base);
        matches!(self.http.get(url).send().await, Ok(r) if r.status().is_success())
    }

    async fn post<Req>(
        &self,
        url: &str,
        body: &Req,
        idempotency: Option<&str>,
        budget: Duration,
    ) -> Result<Vec<u8>, IngressError>
    where
        Req: Serialize + ?Sized,
    {
        let payload =
            serde_json::to_vec(body).map_err(|e| IngressError::Malformed(e.to_string()))?;
        let deadline = tokio::time::Instant::now() + budget;
        let mut pause = FIRST_RETRY_PAUSE;
        loop {
            let mut request = self.http.post(url);
            // A handler without input (`()`) takes an empty body.
            if payload != b"null" {
                request = request
                    .header("content-type", "application/json")
                    .body(payload.clone());
            }
            if let Some(key) = idempotency {
                request = request.header("idempotency-key", key);
            }
            let failure = match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let bytes = response.bytes().await.map(|b| b.to_vec());
                    match (status, bytes) {
                        (200..=299, Ok(bytes)) => return Ok(bytes),
                        // 4xx is the handler's (or the ingress's) final word.
                        (400..=499, Ok(bytes)) => {
                            return Err(IngressError::Refused {
                                status,
                                message: error_message(&bytes),
                            });
                        }
                        (_, Ok(bytes)) => format!("status {status}: {}", error_message(&bytes)),
                        (_, Err(e)) => e.to_string(),
                    }
                }
                Err(e) => e.to_string(),
            };
            if tokio::time::Instant::now() + pause > deadline {
                return Err(IngressError::Unavailable(failure));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_RETRY_PAUSE);
        }
    }
}

/// A handler's answer; an empty body (a handler that returns `()`) is `null`.
fn decode<Res: DeserializeOwned>(bytes: &[u8]) -> Result<Res, IngressError> {
    let bytes = if bytes.is_empty() { b"null" } else { bytes };
    serde_json::from_slice(bytes).map_err(|e| IngressError::Malformed(e.to_string()))
}

/// An HTTP client for the cluster at `base`: HTTPS verified against the platform's roots
/// (rustls with the `ring` provider, as the coding agent's providers use), no proxy for a
/// loopback address.
pub(crate) fn http_client(base: &str, timeout: Duration) -> Result<reqwest::Client, String> {
    let crypto = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(crypto)
        .with_safe_default_protocol_versions()
        .and_then(|builder| {
            use rustls_platform_verifier::BuilderVerifierExt as _;
            builder.with_platform_verifier()
        })
        .map_err(|e| e.to_string())?
        .with_no_client_auth();
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .timeout(timeout);
    let host = base.split("://").nth(1).unwrap_or(base);
    if host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]") {
        builder = builder.no_proxy();
    }
    builder.build().map_err(|e| e.to_string())
}

/// The message of an ingress error body (`{"message": ...}`), or its text.
fn error_message(bytes: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Body {
        message: String,
    }
    match serde_json::from_slice::<Body>(bytes) {
        Ok(body) => body.message,
        Err(_) => String::from_utf8_lossy(bytes).chars().take(512).collect(),
    }
}

/// A handler of a service, virtual object or workflow.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    service: &'a str,
    key: Option<&'a str>,
    handler: &'a str,
}

impl<'a> Target<'a> {
    /// A handler of a stateless service.
    pub fn service(service: &'a str, handler: &'a str) -> Self {
        Target {
            service,
            key: None,
            handler,
        }
    }

    /// A handler of the virtual object or workflow `key`.
    pub fn keyed(service: &'a str, key: &'a str, handler: &'a str) -> Self {
        Target {
            service,
            key: Some(key),
            handler,
        }
    }

    fn url(&self, base: &str, send: bool) -> String {
        let mut url = format!("{base}/{}/", self.service);
        if let Some(key) = self.key {
            url.push_str(&encode_segment(key));
            url.push('/');
        }
        url.push_str(self.handler);
        if send {
            url.push_str("/send");
        }
        url
    }
}

/// `key` as one URL path segment.
fn encode_segment(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_one_escaped_segment() {
        let target = Target::keyed("AgentRun", "run a/b", "run");
        assert_eq!(
            target.url("http://h:1", true),
            "http://h:1/AgentRun/run%20a%2Fb/run/send"
        );
        assert_eq!(
            Target::service("Runs", "start").url("http://h:1", false),
            "http://h:1/Runs/start"
        );
    }

    #[test]
    fn an_empty_answer_is_null() {
        assert_eq!(decode::<()>(b""), Ok(()));
        assert_eq!(decode::<u64>(b"7"), Ok(7));
        assert!(matches!(
            decode::<u64>(b"x"),
            Err(IngressError::Malformed(_))
        ));
    }

    #[test]
    fn error_bodies_give_their_message() {
        assert_eq!(error_message(br#"{"message":"no","code":409}"#), "no");
        assert_eq!(error_message(b"plain"), "plain");
    }
}
