//! The graph's model provider: the one the [`ModelSettings`] choose among the compiled
//! providers, with the session's system prompt.
//!
//! [`model_settings`] is the settings bean (the offline default; the CLI overrides it with
//! what [`crate::settings::load`] resolved, the way `--workspace` overrides the workspace
//! root), and [`model_provider`] the engine's provider, built from it. [`build_provider`]
//! is the single place that maps a [`ProviderKind`] to a provider.

use std::sync::Arc;

use agent_core::bean;
use agent_core::model::ModelProvider;
use agent_core::tool::Definition;
use agent_mcp::McpToolPlanSource;

use crate::anthropic::{AnthropicConfig, AnthropicProvider};
use crate::approval::ApprovalMode;
use crate::offline::offline_provider;
use crate::openai::{OpenAiConfig, OpenAiProvider};
use crate::prompt::system_prompt;
use crate::settings::{ModelSettings, ProviderKind};
use crate::workspace::WorkspaceRoot;

/// Why the chosen provider could not be built. Never includes a key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderSetupError {
    /// The key variable the settings name is unset or empty.
    #[error("the {provider} provider needs an API key: set {variable}")]
    MissingKey {
        /// The provider.
        provider: ProviderKind,
        /// The variable.
        variable: String,
    },
    /// The chosen provider refused its configuration (the error names the variable).
    #[error("the {provider} provider: {error}")]
    Config {
        /// The provider.
        provider: ProviderKind,
        /// Why.
        error: crate::openai::ConfigError,
    },
}

/// The model settings: the offline model unless the application overrides this bean.
#[bean(name = "model-settings")]
pub fn model_settings() -> Arc<ModelSettings> {
    Arc::new(ModelSettings::default())
}

/// The engine's provider: the one the settings choose, told the system prompt of this
/// workspace, its tools as the plan has them when the graph is built (MCP servers'
/// included) and the approval mode.
#[agent_core::model_provider(name = "model-provider")]
pub fn model_provider(
    model_settings: Arc<ModelSettings>,
    workspace_root: Arc<WorkspaceRoot>,
    approval_mode: Arc<ApprovalMode>,
    mcp_source: Arc<McpToolPlanSource>,
) -> Result<Arc<dyn ModelProvider>, ProviderSetupError> {
    if model_settings.provider == ProviderKind::Offline {
        return Ok(offline_provider());
    }
    // A plan that is not leasable yet has no tools to describe; the model still sees the
    // tools of each request.
    let tools: Vec<Definition> = mcp_source
        .current_tools()
        .map(|tools| tools.iter().map(|t| t.definition.clone()).collect())
        .unwrap_or_default();
    let prompt = system_prompt(
        model_settings.system_prompt.as_deref(),
        workspace_root.path(),
        &tools,
        *approval_mode,
    );
    build_provider(&model_settings, prompt, |name| std::env::var(name).ok())
}

/// The provider `settings` choose, with `prompt` as its system message; `lookup` reads the
/// key variable the settings name.
pub fn build_provider(
    settings: &ModelSettings,
    prompt: String,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn ModelProvider>, ProviderSetupError> {
    let key = || {
        let variable = settings
            .api_key_env
            .clone()
            .or_else(|| settings.provider.key_var().map(str::to_owned))
            .unwrap_or_default();
        lookup(&variable)
            .filter(|key| !key.trim().is_empty())
            .ok_or(ProviderSetupError::MissingKey {
                provider: settings.provider,
                variable,
            })
    };
    let provider = settings.provider;
    let config_error = |error| ProviderSetupError::Config { provider, error };
    match provider {
        ProviderKind::Offline => Ok(offline_provider()),
        ProviderKind::OpenAi => {
            let config = OpenAiConfig::new(
                settings
                    .base_url
                    .as_deref()
                    .unwrap_or(crate::openai::DEFAULT_BASE_URL),
                key()?,
                settings.model_name(),
            )
            .map_err(config_error)?
            .with_system_prompt(prompt);
            Ok(Arc::new(OpenAiProvider::new(config).map_err(config_error)?))
        }
        ProviderKind::Anthropic => {
            let config = AnthropicConfig::new(
                settings
                    .base_url
                    .as_deref()
                    .unwrap_or(crate::anthropic::DEFAULT_BASE_URL),
                key()?,
                settings.model_name(),
            )
            .map_err(config_error)?
            .with_system_prompt(prompt);
            Ok(Arc::new(
                AnthropicProvider::new(config).map_err(config_error)?,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_key_names_the_variable_for_each_provider() {
        let settings = ModelSettings {
            provider: ProviderKind::OpenAi,
            api_key_env: Some("MY_KEY".to_owned()),
            ..ModelSettings::default()
        };
        let error = build_provider(&settings, String::new(), |_| None)
            .err()
            .expect("no key");
        assert_eq!(
            error.to_string(),
            "the openai provider needs an API key: set MY_KEY"
        );
        assert!(
            build_provider(&settings, String::new(), |name| (name == "MY_KEY")
                .then(|| "k".to_owned()))
            .is_ok()
        );
        let anthropic = ModelSettings {
            provider: ProviderKind::Anthropic,
            ..ModelSettings::default()
        };
        let error = build_provider(&anthropic, String::new(), |_| None)
            .err()
            .expect("no key");
        assert_eq!(
            error.to_string(),
            "the anthropic provider needs an API key: set ANTHROPIC_API_KEY"
        );
        assert!(build_provider(&anthropic, String::new(), |_| Some("k".to_owned())).is_ok());
    }
}
