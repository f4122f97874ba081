//! Where the server is, how to authenticate, what to tell the model and how long it may
//! answer: the environment variables and their validation.

use std::fmt;
use std::num::NonZeroU32;

use crate::http::config::{Settings, Vars, settings_methods};

pub use crate::http::ConfigError;

/// The variable naming the server's root (the part before `/v1/messages`).
pub const BASE_URL_VAR: &str = "ANTHROPIC_BASE_URL";
/// The variable holding the API key.
pub const API_KEY_VAR: &str = "ANTHROPIC_API_KEY";
/// The variable naming the default model.
pub const MODEL_VAR: &str = "ANTHROPIC_MODEL";
/// The root used when [`BASE_URL_VAR`] is unset.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The model used when [`MODEL_VAR`] is unset.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// The `max_tokens` each request sends unless [`AnthropicConfig::with_max_tokens`] says
/// otherwise (the API requires one).
pub const DEFAULT_MAX_TOKENS: NonZeroU32 = NonZeroU32::new(4096).expect("4096 is not zero");

const VARS: Vars =
    Vars::new([BASE_URL_VAR, API_KEY_VAR, MODEL_VAR]).defaults(DEFAULT_BASE_URL, DEFAULT_MODEL);

/// Where and how to reach the Anthropic Messages API, the system prompt and the most
/// tokens an answer may take. `Debug` prints the key as `<redacted>`.
///
/// ```
/// use std::num::NonZeroU32;
/// use coding_agent::anthropic::AnthropicConfig;
///
/// let config = AnthropicConfig::from_vars(|name| match name {
///     "ANTHROPIC_API_KEY" => Some("sk-ant-secret".to_owned()),
///     _ => None,
/// })?
/// .with_system_prompt("You are a coding agent.")
/// .with_max_tokens(NonZeroU32::new(8192).unwrap());
/// assert_eq!(config.base_url(), "https://api.anthropic.com");
/// assert_eq!(config.model(), "claude-sonnet-4-5");
/// assert_eq!(config.max_tokens().get(), 8192);
/// assert!(!format!("{config:?}").contains("sk-ant-secret"));
/// # Ok::<(), coding_agent::anthropic::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct AnthropicConfig {
    settings: Settings,
    max_tokens: NonZeroU32,
}

impl AnthropicConfig {
    /// The same configuration with `prompt` sent as the request's top-level `system`,
    /// ahead of any system messages of the conversation. An empty prompt sends nothing.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.settings.set_system_prompt(prompt.into());
        self
    }

    /// The same configuration with `max_tokens` sent in every request.
    pub fn with_max_tokens(mut self, max_tokens: NonZeroU32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// The most tokens an answer may take.
    pub fn max_tokens(&self) -> NonZeroU32 {
        self.max_tokens
    }

    settings_methods!();

    fn from_settings(settings: Settings) -> Self {
        AnthropicConfig {
            settings,
            max_tokens: DEFAULT_MAX_TOKENS,
        }
    }
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("AnthropicConfig");
        self.settings.debug_fields(&mut f);
        f.field("max_tokens", &self.max_tokens).finish()
    }
}
