//! Which model a run uses: the provider, the model name, the server, the variable holding
//! the key and the system prompt, resolved from the command line, the environment and the
//! user's config file.
//!
//! Every provider is compiled in (the graph is composed at compile time); these settings
//! only choose among them. [`resolve`] is a pure function over its [`Sources`], so the
//! order is tested without touching the process environment; [`load`] gathers the sources
//! of this process and calls it.
//!
//! # Order
//!
//! Highest first, each setting on its own:
//!
//! | setting | 1. flag | 2. environment | 3. `config.toml` | 4. default |
//! | --- | --- | --- | --- | --- |
//! | provider | `--provider` | `AGENT_PROVIDER` | `provider` | `offline` |
//! | model | `--model` | `AGENT_MODEL`, then `OPENAI_MODEL` / `ANTHROPIC_MODEL` | `[openai] model` / `[anthropic] model` | the provider's default |
//! | base URL | | `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` | `[openai] base_url` / `[anthropic] base_url` | the provider's public API |
//! | key variable | | | `[openai] api_key_env` / `[anthropic] api_key_env` | `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` |
//! | system prompt | `--system-prompt-file` | | `system_prompt` | the built-in text |
//!
//! A provider-specific variable or section applies only when that provider is chosen. An
//! empty variable counts as unset. The offline model names itself `offline` in requests and
//! ignores the model settings.
//!
//! A provider is never chosen implicitly: a key variable on its own (say `OPENAI_API_KEY`)
//! does not select its provider. The offline model then runs, and its notice names the key
//! it saw and the flag that would use it.
//!
//! # Errors
//!
//! An unknown provider name, an unknown key or a malformed value in the config file, an
//! unreadable file and a chosen real provider whose key variable is unset or empty are each
//! a [`SettingsError`] naming the flag, variable or file; the CLI reports it before anything
//! runs, with exit code 2.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::cli::args::ModelArgs;

/// The variable naming the provider.
pub const PROVIDER_VAR: &str = "AGENT_PROVIDER";
/// The variable naming the model.
pub const MODEL_VAR: &str = "AGENT_MODEL";
/// The variable naming the directory of `config.toml` (tests use it).
pub const CONFIG_DIR_VAR: &str = "AGENT_CONFIG_DIR";
/// The config file's name inside the config directory.
pub const CONFIG_FILE_NAME: &str = "config.toml";
/// The OpenAI-compatible provider's default model.
pub const OPENAI_DEFAULT_MODEL: &str = crate::openai::DEFAULT_MODEL;
/// The Anthropic provider's default model.
pub const ANTHROPIC_DEFAULT_MODEL: &str = crate::anthropic::DEFAULT_MODEL;

/// The compiled providers a run can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProviderKind {
    /// The offline demo model: no key, no network, reads only.
    #[default]
    Offline,
    /// Any server speaking OpenAI's chat completions API.
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
}

impl ProviderKind {
    /// The name flags, variables and the config file use.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Offline => "offline",
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    /// The provider named `name` (exactly, in lower case).
    pub fn from_name(name: &str) -> Option<Self> {
        [
            ProviderKind::Offline,
            ProviderKind::OpenAi,
            ProviderKind::Anthropic,
        ]
        .into_iter()
        .find(|kind| kind.name() == name)
    }

    /// The variable that usually holds this provider's key (none for offline).
    pub fn key_var(self) -> Option<&'static str> {
        match self {
            ProviderKind::Offline => None,
            ProviderKind::OpenAi => Some("OPENAI_API_KEY"),
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
        }
    }

    fn model_var(self) -> Option<&'static str> {
        match self {
            ProviderKind::Offline => None,
            ProviderKind::OpenAi => Some("OPENAI_MODEL"),
            ProviderKind::Anthropic => Some("ANTHROPIC_MODEL"),
        }
    }

    fn base_url_var(self) -> Option<&'static str> {
        match self {
            ProviderKind::Offline => None,
            ProviderKind::OpenAi => Some("OPENAI_BASE_URL"),
            ProviderKind::Anthropic => Some("ANTHROPIC_BASE_URL"),
        }
    }

    fn default_model(self) -> &'static str {
        match self {
            ProviderKind::Offline => crate::offline::OFFLINE_MODEL,
            ProviderKind::OpenAi => OPENAI_DEFAULT_MODEL,
            ProviderKind::Anthropic => ANTHROPIC_DEFAULT_MODEL,
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a setting came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Origin {
    /// A command-line flag, such as `--provider`.
    Flag(&'static str),
    /// An environment variable.
    Variable(String),
    /// The config file at this path.
    File(PathBuf),
    /// Nothing was configured.
    #[default]
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag(flag) => f.write_str(flag),
            Origin::Variable(name) => f.write_str(name),
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::Default => f.write_str("the default"),
        }
    }
}

/// The resolved model settings of a run; the graph's provider bean builds its provider from
/// them. Holds the NAME of the key variable, never the key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelSettings {
    /// The provider the run uses.
    pub provider: ProviderKind,
    /// Where [`provider`](Self::provider) came from.
    pub provider_origin: Origin,
    /// The model requests name (none for offline).
    pub model: Option<String>,
    /// The provider's API root (none: the provider's default).
    pub base_url: Option<String>,
    /// The name of the environment variable holding the key (none for offline).
    pub api_key_env: Option<String>,
    /// Replaces the built-in system prompt text (the workspace, tools and rules are still
    /// appended; see [`crate::prompt`]).
    pub system_prompt: Option<String>,
    /// Key variables that were set although their provider was not chosen, for the offline
    /// notice.
    pub unused_keys: Vec<&'static str>,
}

impl ModelSettings {
    /// The model each request names.
    pub fn model_name(&self) -> String {
        self.model
            .clone()
            .unwrap_or_else(|| self.provider.default_model().to_owned())
    }

    /// The one line the CLI prints on stderr when the offline model runs because nothing
    /// chose a provider; `None` when a provider was chosen (even `offline`, explicitly).
    pub fn offline_notice(&self) -> Option<String> {
        if self.provider != ProviderKind::Offline || self.provider_origin != Origin::Default {
            return None;
        }
        let mut notice = "agent: using the offline demo model (no provider configured); it only \
                          reads. Set --provider openai|anthropic and its key, or write \
                          ~/.config/agent/config.toml; see docs/coding-agent.md"
            .to_owned();
        for key in &self.unused_keys {
            let provider = [ProviderKind::OpenAi, ProviderKind::Anthropic]
                .into_iter()
                .find(|kind| kind.key_var() == Some(key))
                .map_or("?", ProviderKind::name);
            notice.push_str(&format!(
                " ({key} is set, but a key never chooses a provider: add --provider {provider})"
            ));
        }
        Some(notice)
    }
}

/// Why the settings could not be resolved; each names the flag, variable or file to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// A provider name that is not one of the compiled providers.
    #[error("unknown provider `{name}` in {origin} (expected offline, openai or anthropic)")]
    UnknownProvider {
        /// The name as given.
        name: String,
        /// The flag, variable or file that gave it.
        origin: Origin,
    },
    /// The config file is not valid: a syntax error, an unknown key, a wrong type.
    #[error("{}: {message}", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line.
        message: String,
    },
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A value that is empty or untrimmed.
    #[error("{what} in {origin} must be a non-empty, trimmed value")]
    BadValue {
        /// The setting.
        what: &'static str,
        /// Where it came from.
        origin: Origin,
    },
    /// The chosen provider's key variable is unset or empty.
    #[error(
        "the {provider} provider needs an API key: set {variable} (provider chosen by {origin})"
    )]
    MissingKey {
        /// The chosen provider.
        provider: ProviderKind,
        /// The variable that must hold the key.
        variable: String,
        /// Where the provider was chosen.
        origin: Origin,
    },
}

/// A file's path and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileText {
    /// Where it was read from (for messages).
    pub path: PathBuf,
    /// Its contents.
    pub text: String,
}

/// Everything [`resolve`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    /// `--provider`, `--model` and `--system-prompt-file` (its path, for messages).
    pub flags: &'a ModelArgs,
    /// The environment.
    pub env: &'a HashMap<String, String>,
    /// `config.toml`, if there is one.
    pub config_file: Option<&'a FileText>,
    /// The contents of `--system-prompt-file`, when given.
    pub prompt_file: Option<&'a FileText>,
}

/// `config.toml`: every key optional, unknown keys refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    provider: Option<String>,
    system_prompt: Option<String>,
    openai: Option<ProviderSection>,
    anthropic: Option<ProviderSection>,
}

/// One provider's table in `config.toml`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderSection {
    model: Option<String>,
    base_url: Option<String>,
    api_key_env: Option<String>,
}

/// The settings `sources` select (see the [module docs](self) for the order).
///
/// ```
/// use std::collections::HashMap;
/// use coding_agent::cli::args::ModelArgs;
/// use coding_agent::settings::{ProviderKind, Sources, resolve};
///
/// let env = HashMap::from([("OPENAI_API_KEY".to_owned(), "sk-x".to_owned())]);
/// let flags = ModelArgs { provider: Some("openai".into()), ..ModelArgs::default() };
/// let settings = resolve(Sources { flags: &flags, env: &env, config_file: None, prompt_file: None })?;
/// assert_eq!(settings.provider, ProviderKind::OpenAi);
/// assert_eq!(settings.model_name(), "gpt-4o-mini");
/// assert_eq!(settings.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
/// # Ok::<(), coding_agent::settings::SettingsError>(())
/// ```
pub fn resolve(sources: Sources<'_>) -> Result<ModelSettings, SettingsError> {
    let var = |name: &str| {
        sources
            .env
            .get(name)
            .filter(|value| !value.trim().is_empty())
            .cloned()
    };
    let file = match sources.config_file {
        Some(file) => {
            toml::from_str::<ConfigFile>(&file.text).map_err(|error| SettingsError::BadFile {
                path: file.path.clone(),
                message: toml_problem(&file.text, &error),
            })?
        }
        None => ConfigFile::default(),
    };
    let file_origin = || {
        sources
            .config_file
            .map_or(Origin::Default, |f| Origin::File(f.path.clone()))
    };

    let (name, provider_origin) = if let Some(name) = &sources.flags.provider {
        (Some(name.clone()), Origin::Flag("--provider"))
    } else if let Some(name) = var(PROVIDER_VAR) {
        (Some(name), Origin::Variable(PROVIDER_VAR.to_owned()))
    } else if let Some(name) = &file.provider {
        (Some(name.clone()), file_origin())
    } else {
        (None, Origin::Default)
    };
    let provider = match name {
        Some(name) => {
            ProviderKind::from_name(name.trim()).ok_or(SettingsError::UnknownProvider {
                name,
                origin: provider_origin.clone(),
            })?
        }
        None => ProviderKind::Offline,
    };

    let system_prompt = match (sources.prompt_file, &file.system_prompt) {
        (Some(prompt), _) => Some(non_empty(
            &prompt.text,
            "the system prompt",
            Origin::Flag("--system-prompt-file"),
        )?),
        (None, Some(text)) => Some(non_empty(text, "system_prompt", file_origin())?),
        (None, None) => None,
    };

    let mut settings = ModelSettings {
        provider,
        provider_origin: provider_origin.clone(),
        system_prompt,
        ..ModelSettings::default()
    };
    let (Some(key_var), Some(model_var), Some(base_url_var)) = (
        provider.key_var(),
        provider.model_var(),
        provider.base_url_var(),
    ) else {
        // Offline: no model, server or key; remember which keys were set for the notice.
        settings.unused_keys = [ProviderKind::OpenAi, ProviderKind::Anthropic]
            .into_iter()
            .filter_map(ProviderKind::key_var)
            .filter(|key| var(key).is_some())
            .collect();
        return Ok(settings);
    };
    let section = match provider {
        ProviderKind::OpenAi => file.openai.clone(),
        ProviderKind::Anthropic => file.anthropic.clone(),
        ProviderKind::Offline => None,
    }
    .unwrap_or_default();

    let model = if let Some(model) = &sources.flags.model {
        checked(model, "the model", Origin::Flag("--model"))?
    } else if let Some(model) = var(MODEL_VAR) {
        checked(&model, "the model", Origin::Variable(MODEL_VAR.to_owned()))?
    } else if let Some(model) = var(model_var) {
        checked(&model, "the model", Origin::Variable(model_var.to_owned()))?
    } else if let Some(model) = &section.model {
        checked(model, "model", file_origin())?
    } else {
        provider.default_model().to_owned()
    };
    settings.model = Some(model);
    settings.base_url = match (var(base_url_var), &section.base_url) {
        (Some(url), _) => Some(url.trim().to_owned()),
        (None, Some(url)) => Some(checked(url, "base_url", file_origin())?),
        (None, None) => None,
    };
    let api_key_env = match &section.api_key_env {
        Some(name) => checked(name, "api_key_env", file_origin())?,
        None => key_var.to_owned(),
    };
    if var(&api_key_env).is_none() {
        return Err(SettingsError::MissingKey {
            provider,
            variable: api_key_env,
            origin: provider_origin,
        });
    }
    settings.api_key_env = Some(api_key_env);
    Ok(settings)
}

/// A TOML error as one line, `line N: what` (toml's own rendering spans several lines).
fn toml_problem(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim().replace('\n', " ");
    match error.span() {
        Some(span) => {
            let line = text
                .get(..span.start)
                .map_or(0, |before| before.matches('\n').count())
                + 1;
            format!("line {line}: {message}")
        }
        None => message,
    }
}

/// `value` if it is non-empty and trimmed.
fn checked(value: &str, what: &'static str, origin: Origin) -> Result<String, SettingsError> {
    if value.is_empty() || value.trim() != value {
        return Err(SettingsError::BadValue { what, origin });
    }
    Ok(value.to_owned())
}

/// `text` unless it is blank.
fn non_empty(text: &str, what: &'static str, origin: Origin) -> Result<String, SettingsError> {
    if text.trim().is_empty() {
        return Err(SettingsError::BadValue { what, origin });
    }
    Ok(text.to_owned())
}

/// The directory of `config.toml`: `$AGENT_CONFIG_DIR`, else `$XDG_CONFIG_HOME/agent` (an
/// absolute one), else `$HOME/.config/agent`; none when none of them is set.
pub fn config_dir(env: &HashMap<String, String>) -> Option<PathBuf> {
    let var = |name: &str| env.get(name).filter(|value| !value.is_empty());
    if let Some(dir) = var(CONFIG_DIR_VAR) {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_CONFIG_HOME").map(PathBuf::from)
        && dir.is_absolute()
    {
        return Some(dir.join("agent"));
    }
    var("HOME").map(|home| Path::new(home).join(".config").join("agent"))
}

/// Reads `path`; `None` when it does not exist.
fn read_optional(path: &Path) -> Result<Option<FileText>, SettingsError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(FileText {
            path: path.to_owned(),
            text,
        })),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SettingsError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// The settings of this process: `flags`, the process environment (variables that are not
/// UTF-8 are skipped), the config file in [`config_dir`] and the `--system-prompt-file`.
pub fn load(flags: &ModelArgs) -> Result<ModelSettings, SettingsError> {
    let env: HashMap<String, String> = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .collect();
    let config_file = match config_dir(&env) {
        Some(dir) => read_optional(&dir.join(CONFIG_FILE_NAME))?,
        None => None,
    };
    let prompt_file = match &flags.system_prompt_file {
        Some(path) => Some(read_optional(path)?.ok_or_else(|| SettingsError::Read {
            path: path.clone(),
            source: std::io::ErrorKind::NotFound.into(),
        })?),
        None => None,
    };
    resolve(Sources {
        flags,
        env: &env,
        config_file: config_file.as_ref(),
        prompt_file: prompt_file.as_ref(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn file(text: &str) -> FileText {
        FileText {
            path: PathBuf::from("/home/u/.config/agent/config.toml"),
            text: text.to_owned(),
        }
    }

    fn flags(provider: Option<&str>, model: Option<&str>) -> ModelArgs {
        ModelArgs {
            provider: provider.map(str::to_owned),
            model: model.map(str::to_owned),
            system_prompt_file: None,
        }
    }

    fn resolve_with(
        flags: &ModelArgs,
        env: &HashMap<String, String>,
        config: Option<&FileText>,
    ) -> Result<ModelSettings, SettingsError> {
        resolve(Sources {
            flags,
            env,
            config_file: config,
            prompt_file: None,
        })
    }

    const FILE: &str = r#"
provider = "openai"
system_prompt = "Be brief."

[openai]
model = "file-model"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "MY_OPENAI_KEY"

[anthropic]
model = "file-claude"
"#;

    #[test]
    fn nothing_configured_is_the_offline_model_with_a_notice() {
        let settings = resolve_with(&flags(None, None), &env(&[]), None).unwrap();
        assert_eq!(settings.provider, ProviderKind::Offline);
        assert_eq!(settings.provider_origin, Origin::Default);
        assert_eq!(settings.model_name(), "offline");
        let notice = settings.offline_notice().expect("a notice");
        assert!(notice.contains("offline demo model"), "{notice}");
        assert!(notice.contains("--provider openai|anthropic"), "{notice}");
        assert!(!notice.contains("is set"), "{notice}");
    }

    #[test]
    fn a_key_alone_never_chooses_a_provider_but_the_notice_names_it() {
        let env = env(&[("OPENAI_API_KEY", "sk-x"), ("ANTHROPIC_API_KEY", "")]);
        let settings = resolve_with(&flags(None, None), &env, None).unwrap();
        assert_eq!(settings.provider, ProviderKind::Offline);
        assert_eq!(settings.unused_keys, ["OPENAI_API_KEY"]);
        let notice = settings.offline_notice().unwrap();
        assert!(
            notice.contains("OPENAI_API_KEY is set") && notice.contains("add --provider openai"),
            "{notice}"
        );
        assert!(!notice.contains("sk-x"), "{notice}");
    }

    #[test]
    fn an_explicit_offline_choice_prints_no_notice() {
        let settings = resolve_with(
            &flags(None, None),
            &env(&[("AGENT_PROVIDER", "offline")]),
            None,
        )
        .unwrap();
        assert_eq!(settings.provider, ProviderKind::Offline);
        assert_eq!(settings.offline_notice(), None);
    }

    #[test]
    fn the_file_alone_chooses_its_provider_model_server_and_key_variable() {
        let config = file(FILE);
        let settings = resolve_with(
            &flags(None, None),
            &env(&[("MY_OPENAI_KEY", "sk-file")]),
            Some(&config),
        )
        .unwrap();
        assert_eq!(settings.provider, ProviderKind::OpenAi);
        assert_eq!(settings.provider_origin, Origin::File(config.path.clone()));
        assert_eq!(settings.model.as_deref(), Some("file-model"));
        assert_eq!(settings.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(settings.api_key_env.as_deref(), Some("MY_OPENAI_KEY"));
        assert_eq!(settings.system_prompt.as_deref(), Some("Be brief."));
        assert_eq!(settings.offline_notice(), None);
    }

    #[test]
    fn the_environment_beats_the_file_and_flags_beat_both() {
        let config = file(FILE);
        let env = env(&[
            ("MY_OPENAI_KEY", "sk-file"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("OPENAI_MODEL", "env-openai-model"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:10/v1"),
        ]);
        let settings = resolve_with(&flags(None, None), &env, Some(&config)).unwrap();
        assert_eq!(settings.model.as_deref(), Some("env-openai-model"));
        assert_eq!(settings.base_url.as_deref(), Some("http://127.0.0.1:10/v1"));

        // AGENT_MODEL beats the provider's own variable.
        let mut with_agent_model = env.clone();
        with_agent_model.insert("AGENT_MODEL".into(), "agent-model".into());
        let settings = resolve_with(&flags(None, None), &with_agent_model, Some(&config)).unwrap();
        assert_eq!(settings.model.as_deref(), Some("agent-model"));

        // AGENT_PROVIDER beats the file; the anthropic section then applies, not openai's.
        let mut anthropic = env.clone();
        anthropic.insert("AGENT_PROVIDER".into(), "anthropic".into());
        let settings = resolve_with(&flags(None, None), &anthropic, Some(&config)).unwrap();
        assert_eq!(settings.provider, ProviderKind::Anthropic);
        assert_eq!(
            settings.provider_origin,
            Origin::Variable("AGENT_PROVIDER".into())
        );
        assert_eq!(settings.model.as_deref(), Some("file-claude"));
        assert_eq!(settings.base_url, None);
        assert_eq!(settings.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));

        // The flags beat both.
        let settings = resolve_with(
            &flags(Some("openai"), Some("flag-model")),
            &anthropic,
            Some(&config),
        )
        .unwrap();
        assert_eq!(settings.provider, ProviderKind::OpenAi);
        assert_eq!(settings.provider_origin, Origin::Flag("--provider"));
        assert_eq!(settings.model.as_deref(), Some("flag-model"));
    }

    #[test]
    fn a_prompt_file_replaces_the_files_system_prompt() {
        let config = file(FILE);
        let prompt = FileText {
            path: PathBuf::from("prompt.txt"),
            text: "From the flag.".to_owned(),
        };
        let flags = flags(None, None);
        let env = env(&[("MY_OPENAI_KEY", "k")]);
        let settings = resolve(Sources {
            flags: &flags,
            env: &env,
            config_file: Some(&config),
            prompt_file: Some(&prompt),
        })
        .unwrap();
        assert_eq!(settings.system_prompt.as_deref(), Some("From the flag."));
    }

    #[test]
    fn errors_name_the_flag_variable_or_file() {
        let no_env = env(&[]);
        let error = resolve_with(&flags(Some("gpt"), None), &no_env, None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown provider `gpt` in --provider (expected offline, openai or anthropic)"
        );
        let error =
            resolve_with(&flags(None, None), &env(&[("AGENT_PROVIDER", "x")]), None).unwrap_err();
        assert!(error.to_string().contains("in AGENT_PROVIDER"), "{error}");

        let error = resolve_with(&flags(Some("openai"), None), &no_env, None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the openai provider needs an API key: set OPENAI_API_KEY (provider chosen by --provider)"
        );
        let config = file(FILE);
        let error = resolve_with(&flags(None, None), &no_env, Some(&config)).unwrap_err();
        assert!(
            matches!(&error, SettingsError::MissingKey { variable, .. } if variable == "MY_OPENAI_KEY"),
            "{error}"
        );

        let unknown = file("provider = \"openai\"\nmodle = \"x\"\n");
        let error = resolve_with(&flags(None, None), &no_env, Some(&unknown)).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("/home/u/.config/agent/config.toml: line 2: unknown field `modle`"),
            "{message}"
        );
        let typed = file("[openai]\nmodel = 3\n");
        let error = resolve_with(&flags(None, None), &no_env, Some(&typed)).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("line 2: invalid type: integer `3`"),
            "{error}"
        );
        let nested = file("[openai]\nkey = \"sk\"\n");
        let error = resolve_with(&flags(None, None), &no_env, Some(&nested)).unwrap_err();
        assert!(error.to_string().contains("key"), "{error}");
        let bad_name = file("provider = \"gemini\"\n");
        let error = resolve_with(&flags(None, None), &no_env, Some(&bad_name)).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`gemini` in /home/u/.config/agent/config.toml"),
            "{error}"
        );
        let error = resolve_with(
            &flags(Some("openai"), Some(" padded")),
            &env(&[("OPENAI_API_KEY", "k")]),
            None,
        )
        .unwrap_err();
        assert!(error.to_string().contains("--model"), "{error}");
    }

    #[test]
    fn the_config_directory_follows_the_override_then_xdg_then_home() {
        assert_eq!(
            config_dir(&env(&[
                ("AGENT_CONFIG_DIR", "/t/cfg"),
                ("XDG_CONFIG_HOME", "/x"),
                ("HOME", "/h"),
            ])),
            Some(PathBuf::from("/t/cfg"))
        );
        assert_eq!(
            config_dir(&env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])),
            Some(PathBuf::from("/x/agent"))
        );
        assert_eq!(
            config_dir(&env(&[("XDG_CONFIG_HOME", "relative"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.config/agent"))
        );
        assert_eq!(config_dir(&env(&[])), None);
    }
}
