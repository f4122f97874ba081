//! Where the server is, how to authenticate and what to tell the model first: the
//! environment variables and their validation.

use std::fmt;

use crate::http::config::{Settings, Vars, settings_methods};

pub use crate::http::ConfigError;

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

const VARS: Vars =
    Vars::new([BASE_URL_VAR, API_KEY_VAR, MODEL_VAR]).defaults(DEFAULT_BASE_URL, DEFAULT_MODEL);

/// Where and how to reach an OpenAI-compatible server, and the system prompt sent first.
/// `Debug` prints the key as `<redacted>`.
///
/// ```
/// use coding_agent::openai::OpenAiConfig;
///
/// let config = OpenAiConfig::from_vars(|name| match name {
///     "OPENAI_API_KEY" => Some("sk-secret".to_owned()),
///     _ => None,
/// })?
/// .with_system_prompt("You are a coding agent.");
/// assert_eq!(config.base_url(), "https://api.openai.com/v1");
/// assert_eq!(config.model(), "gpt-4o-mini");
/// assert_eq!(config.system_prompt(), Some("You are a coding agent."));
/// assert!(!format!("{config:?}").contains("sk-secret"));
/// # Ok::<(), coding_agent::openai::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct OpenAiConfig {
    settings: Settings,
}

impl OpenAiConfig {
    /// The same configuration with `prompt` sent as the first message of every request
    /// (`{"role": "system"}`), before the conversation's own messages. An empty prompt
    /// sends nothing.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.settings.set_system_prompt(prompt.into());
        self
    }

    settings_methods!();

    fn from_settings(settings: Settings) -> Self {
        OpenAiConfig { settings }
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("OpenAiConfig");
        self.settings.debug_fields(&mut f);
        f.finish()
    }
}
