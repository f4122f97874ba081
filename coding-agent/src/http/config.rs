//! What both HTTP providers are configured with: a validated server (base URL and API key),
//! the variables naming them, and the key that never shows up in any output.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use agent_core::model::MAX_MODEL_BYTES;
use reqwest::Url;
use reqwest::header::HeaderValue;

/// What replaces the API key wherever it would otherwise be shown.
pub(crate) const REDACTED: &str = "<redacted>";

/// Why a provider's configuration or provider could not be built. Never includes the API
/// key or the rejected base URL; names the environment variable the value is read from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The API key variable (named) is unset or empty.
    #[error("{0} is not set")]
    MissingApiKey(&'static str),
    /// The key cannot be sent in an HTTP header (control characters, surrounding space,
    /// non-ASCII).
    #[error("{0} contains characters that cannot be sent in an HTTP header")]
    InvalidApiKey(&'static str),
    /// The base URL is not an absolute `http`/`https` URL with a host, or carries
    /// `user:password@` credentials (put the key in its own variable).
    #[error("{0} must be an absolute http(s) URL with a host and no credentials")]
    InvalidBaseUrl(&'static str),
    /// The model name is untrimmed, empty or longer than 256 bytes.
    #[error("{0} must be trimmed and at most {MAX_MODEL_BYTES} bytes")]
    InvalidModel(&'static str),
    /// The HTTP client (TLS trust store, crypto provider) could not be set up.
    #[error("the HTTP client could not be set up: {0}")]
    Client(String),
}

/// The environment variables one provider is configured from, and their defaults.
pub(crate) struct Vars {
    pub(crate) base_url: &'static str,
    pub(crate) api_key: &'static str,
    pub(crate) model: &'static str,
    pub(crate) default_base_url: &'static str,
    pub(crate) default_model: &'static str,
}

impl Vars {
    /// The variables naming the base URL, the API key and the model, in that order.
    pub(crate) const fn new([base_url, api_key, model]: [&'static str; 3]) -> Self {
        Vars {
            base_url,
            api_key,
            model,
            default_base_url: "",
            default_model: "",
        }
    }

    /// The same variables, with the values used when the base URL or model is unset.
    pub(crate) const fn defaults(self, base_url: &'static str, model: &'static str) -> Self {
        Vars {
            default_base_url: base_url,
            default_model: model,
            ..self
        }
    }

    /// The base URL, key and model from `lookup` (empty values count as unset), defaults
    /// filled in, not yet validated.
    pub(crate) fn read(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(String, String, String), ConfigError> {
        let var = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let api_key = var(self.api_key).ok_or(ConfigError::MissingApiKey(self.api_key))?;
        let base_url = var(self.base_url).unwrap_or_else(|| self.default_base_url.to_owned());
        let model = var(self.model).unwrap_or_else(|| self.default_model.to_owned());
        Ok((base_url, api_key, model))
    }

    /// `model`, if it is a name a request may carry.
    pub(crate) fn model(&self, model: String) -> Result<String, ConfigError> {
        if model.is_empty() || model.trim() != model || model.len() > MAX_MODEL_BYTES {
            return Err(ConfigError::InvalidModel(self.model));
        }
        Ok(model)
    }
}

/// The API key: shared, and printed as `<redacted>` by `Debug`. Deliberately not `Display`.
#[derive(Clone)]
pub(crate) struct ApiKey(Arc<str>);

impl ApiKey {
    #[cfg(test)]
    pub(crate) fn for_tests(key: &str) -> Self {
        ApiKey(Arc::from(key))
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced.
    pub(crate) fn scrub(&self, text: &str) -> String {
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

/// A validated server: where it is, and the key it takes. `Debug` redacts the key.
#[derive(Clone)]
pub(crate) struct Server {
    base_url: Url,
    api_key: ApiKey,
}

impl Server {
    /// Validates `base_url` and `api_key` (errors name the variables of `vars`).
    pub(crate) fn new(base_url: &str, api_key: String, vars: &Vars) -> Result<Self, ConfigError> {
        if api_key.is_empty() {
            return Err(ConfigError::MissingApiKey(vars.api_key));
        }
        let printable = api_key.bytes().all(|b| b.is_ascii_graphic());
        if !printable || HeaderValue::from_str(&format!("Bearer {api_key}")).is_err() {
            return Err(ConfigError::InvalidApiKey(vars.api_key));
        }
        let invalid = || ConfigError::InvalidBaseUrl(vars.base_url);
        let base_url = Url::parse(base_url.trim()).map_err(|_| invalid())?;
        let acceptable = matches!(base_url.scheme(), "http" | "https")
            && base_url.host_str().is_some_and(|host| !host.is_empty())
            && base_url.username().is_empty()
            && base_url.password().is_none();
        if !acceptable {
            return Err(invalid());
        }
        Ok(Server {
            base_url,
            api_key: ApiKey(Arc::from(api_key)),
        })
    }

    /// The base URL without a trailing `/`.
    pub(crate) fn base_url(&self) -> &str {
        self.base_url.as_str().trim_end_matches('/')
    }

    /// The key, for the request's header and for scrubbing what the server says.
    pub(crate) fn api_key(&self) -> &ApiKey {
        &self.api_key
    }

    /// `{base_url}/{path}`, keeping any query string.
    pub(crate) fn endpoint(&self, path: &str) -> Url {
        let mut endpoint = self.base_url.clone();
        let path = format!("{}/{path}", endpoint.path().trim_end_matches('/'));
        endpoint.set_path(&path);
        endpoint.set_fragment(None);
        endpoint
    }

    /// Whether the host is this machine (then no proxy is used).
    pub(crate) fn is_loopback(&self) -> bool {
        let host = self.base_url.host_str().unwrap_or_default();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// `host[:port]`, for messages.
    pub(crate) fn host_label(&self) -> String {
        let host = self.base_url.host_str().unwrap_or_default();
        match self.base_url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        }
    }
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("base_url", &self.base_url())
            .field("api_key", &self.api_key)
            .finish()
    }
}

/// What both providers' configurations hold: the server, the default model a command line
/// offers, and the system prompt.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) server: Server,
    pub(crate) model: String,
    pub(crate) system_prompt: Option<Arc<str>>,
}

impl Settings {
    /// Validated settings, with no system prompt.
    pub(crate) fn new(
        base_url: &str,
        api_key: String,
        model: String,
        vars: &Vars,
    ) -> Result<Self, ConfigError> {
        Ok(Settings {
            server: Server::new(base_url, api_key, vars)?,
            model: vars.model(model)?,
            system_prompt: None,
        })
    }

    /// Sets the system prompt; an empty one is none.
    pub(crate) fn set_system_prompt(&mut self, prompt: String) {
        self.system_prompt = (!prompt.is_empty()).then(|| Arc::from(prompt));
    }

    /// The fields of a configuration's `Debug`: the key redacted, the prompt by its size.
    pub(crate) fn debug_fields(&self, f: &mut fmt::DebugStruct<'_, '_>) {
        f.field("server", &self.server)
            .field("model", &self.model)
            .field(
                "system_prompt_bytes",
                &self.system_prompt.as_ref().map_or(0, |p| p.len()),
            );
    }
}

/// The methods both configurations have, over their `settings` field: the constructor
/// (completed by the configuration's own `from_settings`), reading the environment (with
/// the provider's [`Vars`] named `VARS`) and the accessors.
macro_rules! settings_methods {
    () => {
        /// A validated configuration. `base_url` is the root the API's path is appended to
        /// (as in [`DEFAULT_BASE_URL`]); `model` is the default model a command line
        /// offers.
        pub fn new(
            base_url: &str,
            api_key: impl Into<String>,
            model: impl Into<String>,
        ) -> Result<Self, ConfigError> {
            let settings = Settings::new(base_url, api_key.into(), model.into(), &VARS)?;
            Ok(Self::from_settings(settings))
        }

        /// Reads the base URL, API key and model variables from the process environment
        /// (see the [module docs](super)).
        pub fn from_env() -> Result<Self, ConfigError> {
            Self::from_vars(|name| std::env::var(name).ok())
        }

        /// Like [`from_env`](Self::from_env), but looks variables up with `lookup`, so
        /// tests need not touch the process environment. Empty values count as unset.
        pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
            let (base_url, api_key, model) = VARS.read(lookup)?;
            Self::new(&base_url, api_key, model)
        }

        /// The base URL, without a trailing `/`.
        pub fn base_url(&self) -> &str {
            self.settings.server.base_url()
        }

        /// The default model offered to a command line; requests name their own.
        pub fn model(&self) -> &str {
            &self.settings.model
        }

        /// The system prompt, if any.
        pub fn system_prompt(&self) -> Option<&str> {
            self.settings.system_prompt.as_deref()
        }

        pub(super) fn server(&self) -> &crate::http::config::Server {
            &self.settings.server
        }

        pub(super) fn api_key(&self) -> &crate::http::config::ApiKey {
            self.settings.server.api_key()
        }
    };
}

pub(crate) use settings_methods;

#[cfg(test)]
mod tests {
    use super::*;

    const VARS: Vars = Vars {
        base_url: "BASE",
        api_key: "KEY",
        model: "MODEL",
        default_base_url: "https://example.com/v1",
        default_model: "m",
    };

    #[test]
    fn endpoints_keep_the_path_and_query() {
        let server = Server::new("http://[::1]:8080/api/v1/?v=2", "k".into(), &VARS).unwrap();
        assert_eq!(
            server.endpoint("chat/completions").as_str(),
            "http://[::1]:8080/api/v1/chat/completions?v=2"
        );
        assert!(server.is_loopback());
        assert_eq!(server.host_label(), "[::1]:8080");
        let remote = Server::new("https://api.example.com", "k".into(), &VARS).unwrap();
        assert!(!remote.is_loopback());
        assert_eq!(
            remote.endpoint("v1/messages").as_str(),
            "https://api.example.com/v1/messages"
        );
    }

    #[test]
    fn errors_name_the_variables() {
        let error = Server::new("ftp://x", "k".into(), &VARS).unwrap_err();
        assert_eq!(error, ConfigError::InvalidBaseUrl("BASE"));
        assert_eq!(
            VARS.read(|_| None).unwrap_err().to_string(),
            "KEY is not set"
        );
        assert_eq!(
            VARS.model(" m".into()).unwrap_err(),
            ConfigError::InvalidModel("MODEL")
        );
    }
}
