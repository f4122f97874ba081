//! Where the server is and how to authenticate: the environment variables, their
//! validation, and the API key that never shows up in any output.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use agent_core::model::MAX_MODEL_BYTES;
use reqwest::Url;
use reqwest::header::HeaderValue;

/// The variable naming the API root.
pub const BASE_URL_VAR: &str = "OPENAI_BASE_URL";
/// The variable holding the API key.
pub const API_KEY_VAR: &str = "OPENAI_API_KEY";
/// The variable naming the default model.
pub const MODEL_VAR: &str = "OPENAI_MODEL";
/// The API root used when [`BASE_URL_VAR`] is unset.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used when [`MODEL_VAR`] is unset.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
/// What replaces the API key wherever it would otherwise be shown.
const REDACTED: &str = "<redacted>";

/// Why an [`OpenAiConfig`] or [`OpenAiProvider`](super::OpenAiProvider) could not be built. Never includes the API
/// key or the rejected base URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `OPENAI_API_KEY` is unset or empty.
    #[error("{API_KEY_VAR} is not set")]
    MissingApiKey,
    /// The key cannot be sent in an HTTP header (control characters, surrounding space,
    /// non-ASCII).
    #[error("{API_KEY_VAR} contains characters that cannot be sent in an HTTP header")]
    InvalidApiKey,
    /// The base URL is not an absolute `http`/`https` URL with a host, or carries
    /// `user:password@` credentials (put those in `OPENAI_API_KEY`).
    #[error("{BASE_URL_VAR} must be an absolute http(s) URL with a host and no credentials")]
    InvalidBaseUrl,
    /// The model name is untrimmed or longer than 256 bytes.
    #[error("{MODEL_VAR} must be trimmed and at most {MAX_MODEL_BYTES} bytes")]
    InvalidModel,
    /// The HTTP client (TLS trust store, crypto provider) could not be set up.
    #[error("the HTTP client could not be set up: {0}")]
    Client(String),
}

/// The API key: shared, and printed as `<redacted>` by `Debug`. Deliberately not `Display`.
#[derive(Clone)]
pub(super) struct ApiKey(pub(super) Arc<str>);

impl ApiKey {
    pub(super) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced.
    pub(super) fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&*self.0, REDACTED)
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Where and how to reach an OpenAI-compatible server. `Debug` prints the key as
/// `<redacted>`.
///
/// ```
/// use coding_agent::openai::OpenAiConfig;
///
/// let config = OpenAiConfig::from_vars(|name| match name {
///     "OPENAI_API_KEY" => Some("sk-secret".to_owned()),
///     _ => None,
/// })?;
/// assert_eq!(config.base_url(), "https://api.openai.com/v1");
/// assert_eq!(config.model(), "gpt-4o-mini");
/// assert!(!format!("{config:?}").contains("sk-secret"));
/// # Ok::<(), coding_agent::openai::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct OpenAiConfig {
    base_url: Url,
    api_key: ApiKey,
    model: String,
    system_prompt: Option<String>,
}

impl OpenAiConfig {
    /// A validated configuration. `base_url` is the API root (the part before
    /// `/chat/completions`); `model` is the default model a command line offers.
    pub fn new(
        base_url: &str,
        api_key: impl Into<String>,
        model: impl Into<String>,
    ) -> Result<Self, ConfigError> {
        let api_key = api_key.into();
        if api_key.is_empty() {
            return Err(ConfigError::MissingApiKey);
        }
        let printable = api_key.bytes().all(|b| b.is_ascii_graphic());
        if !printable || HeaderValue::from_str(&format!("Bearer {api_key}")).is_err() {
            return Err(ConfigError::InvalidApiKey);
        }
        let base_url = Url::parse(base_url.trim()).map_err(|_| ConfigError::InvalidBaseUrl)?;
        let acceptable = matches!(base_url.scheme(), "http" | "https")
            && base_url.host_str().is_some_and(|host| !host.is_empty())
            && base_url.username().is_empty()
            && base_url.password().is_none();
        if !acceptable {
            return Err(ConfigError::InvalidBaseUrl);
        }
        let model = model.into();
        if model.is_empty() || model.trim() != model || model.len() > MAX_MODEL_BYTES {
            return Err(ConfigError::InvalidModel);
        }
        Ok(OpenAiConfig {
            base_url,
            api_key: ApiKey(Arc::from(api_key)),
            model,
            system_prompt: None,
        })
    }

    /// Reads `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `OPENAI_MODEL` from the process
    /// environment (see the [module docs](super)).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`from_env`](Self::from_env), but looks variables up with `lookup`, so tests
    /// need not touch the process environment. Empty values count as unset.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let api_key = var(API_KEY_VAR).ok_or(ConfigError::MissingApiKey)?;
        let base_url = var(BASE_URL_VAR);
        let model = var(MODEL_VAR);
        Self::new(
            base_url.as_deref().unwrap_or(DEFAULT_BASE_URL),
            api_key,
            model.unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
        )
    }

    /// The API root, e.g. `https://api.openai.com/v1`.
    pub fn base_url(&self) -> &str {
        self.base_url.as_str().trim_end_matches('/')
    }

    /// The default model offered to a command line; requests name their own.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// This configuration with `prompt` sent as the first message of every request
    /// (`{"role": "system"}`), before the conversation's own messages.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// The system message every request starts with, if any.
    pub fn system_prompt(&self) -> Option<&str> {
        self.system_prompt.as_deref()
    }

    /// The key, for the `Authorization` header and for scrubbing what the server says.
    pub(super) fn api_key(&self) -> &ApiKey {
        &self.api_key
    }

    /// `{base_url}/chat/completions`, keeping any query string.
    pub(super) fn endpoint(&self) -> Url {
        let mut endpoint = self.base_url.clone();
        let path = format!("{}/chat/completions", endpoint.path().trim_end_matches('/'));
        endpoint.set_path(&path);
        endpoint.set_fragment(None);
        endpoint
    }

    /// Whether the host is this machine (then no proxy is used).
    pub(super) fn is_loopback(&self) -> bool {
        let host = self.base_url.host_str().unwrap_or_default();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// `host[:port]`, for messages.
    pub(super) fn host_label(&self) -> String {
        let host = self.base_url.host_str().unwrap_or_default();
        match self.base_url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url())
            .field("api_key", &self.api_key)
            .field("model", &self.model)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_keep_the_path_and_query() {
        let config = OpenAiConfig::new("http://[::1]:8080/api/v1/?v=2", "k", "m").unwrap();
        assert_eq!(
            config.endpoint().as_str(),
            "http://[::1]:8080/api/v1/chat/completions?v=2"
        );
        assert!(config.is_loopback());
        assert_eq!(config.host_label(), "[::1]:8080");
        let remote = OpenAiConfig::new(DEFAULT_BASE_URL, "k", "m").unwrap();
        assert!(!remote.is_loopback());
        assert_eq!(
            remote.endpoint().as_str(),
            "https://api.openai.com/v1/chat/completions"
        );
    }
}
