//! The configuration: the `mcpServers` object the common MCP hosts use (`command`, `args`,
//! `env`, `cwd`), plus our own optional fields per server: `trusted`, `sha256`,
//! `capabilities`, `overrides` and the timeouts. Every rejection is a [`ConfigError`] that
//! names the server and the field, never the rejected value (an `env` value may be a secret).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_core::tool::{Capability, Effect, ReplaySafety};
use serde_json::{Map, Value};

use crate::naming::normalize_segment;

/// Most servers in one configuration.
pub const MAX_SERVERS: usize = 64;
/// Most arguments of one server command.
pub const MAX_ARGS: usize = 256;
/// Most `env` entries of one server.
pub const MAX_ENV: usize = 256;
/// Longest argument, `env` value, command or path, in bytes.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Most operator overrides of one server.
pub const MAX_OVERRIDES: usize = 1024;
/// Largest configuration file, in bytes.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;
/// Longest accepted timeout, in milliseconds (24 h).
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

/// Default time for a server to start and answer `initialize` and the first `tools/list`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time for one `tools/call`.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Default time for one `tools/list` refresh.
pub const DEFAULT_LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time a server gets to exit after its stdin closes, before its group is killed.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// The environment variables a server inherits from the agent when they are set; every
/// other variable is cleared, and the server's `env` is added on top.
pub const ENV_ALLOW_LIST: &[&str] = &[
    "HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ",
    "USER",
];

/// Why a configuration was rejected: the server (when the problem is inside one), the field
/// (a JSON path below the server, such as `overrides.create_entities.effect`) and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("MCP configuration {path}: {reason}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// The text is not JSON, or the top level is not an object with `mcpServers`.
    #[error("MCP configuration: {reason}")]
    Syntax {
        /// What is wrong.
        reason: String,
    },
    /// An object has the same key twice, anywhere in the file. JSON leaves the meaning
    /// open and a generic parser keeps the last one, so `"trusted": false, "trusted": true`
    /// would trust the server: the whole file is refused instead.
    #[error("MCP configuration: key `{path}` is repeated: first at {first}, again at {second}")]
    DuplicateKey {
        /// The key, as a dotted path from the top (`mcpServers.memory.trusted`).
        path: String,
        /// Where it first appears (its opening quote).
        first: TextPosition,
        /// Where it appears again.
        second: TextPosition,
    },
    /// A field of one server is invalid.
    #[error("MCP server `{server}`, field `{field}`: {problem}")]
    Field {
        /// The server's key in `mcpServers`.
        server: String,
        /// The field, as a dotted path below the server.
        field: String,
        /// The rule it breaks.
        problem: String,
    },
}

/// A place in the configuration text: a 1-based line and a 1-based column, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TextPosition {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
}

impl std::fmt::Display for TextPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

fn field(server: &str, field: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        server: server.to_owned(),
        field: field.into(),
        problem: problem.into(),
    }
}

/// A relaxation (or tightening) an operator pinned for one tool: it applies only while the
/// server's tool has exactly `fingerprint` (see [`crate::mapping::server_tool_fingerprint`]),
/// so a changed tool falls back to its hints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOverride {
    /// The server's fingerprint of the tool this override was written for (64 hex digits).
    pub fingerprint: String,
    /// The effect to use.
    pub effect: Effect,
    /// The replay safety to use.
    pub replay: ReplaySafety,
    /// The capabilities to use, replacing the mapped ones.
    pub capabilities: Vec<Capability>,
}

/// The timeouts of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Launch, `initialize` and the first `tools/list`.
    pub startup: Duration,
    /// One `tools/call`.
    pub call: Duration,
    /// One `tools/list` refresh after `tools/list_changed`.
    pub list: Duration,
    /// The wait for exit after stdin closes, before the process group is killed.
    pub shutdown: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            startup: DEFAULT_STARTUP_TIMEOUT,
            call: DEFAULT_CALL_TIMEOUT,
            list: DEFAULT_LIST_TIMEOUT,
            shutdown: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }
}

/// One server: how to launch it and how far to trust it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The key in `mcpServers`, as written.
    pub key: String,
    /// The namespace of its tools: the key normalized into the tool-name grammar.
    pub namespace: String,
    /// The command: a path, or a name looked up in the allow-listed `PATH`.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to the allow-listed environment, sorted by name.
    pub env: BTreeMap<String, String>,
    /// The working directory (default: the agent's).
    pub cwd: Option<PathBuf>,
    /// Whether the server's annotations may relax a tool (default false: they only tighten).
    pub trusted: bool,
    /// The SHA-256 of the resolved executable, 64 lowercase hex digits, verified before launch.
    pub sha256: Option<String>,
    /// Capabilities every tool of the server gets, because MCP cannot say what the process
    /// itself may touch (a filesystem server launched on a directory: `filesystem.read`, ...).
    pub capabilities: Vec<Capability>,
    /// Operator overrides by server tool name.
    pub overrides: BTreeMap<String, ToolOverride>,
    /// Timeouts.
    pub timeouts: Timeouts,
}

/// A parsed configuration: the servers sorted by key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpConfig {
    servers: Vec<ServerConfig>,
}

impl McpConfig {
    /// No servers: the compiled tools only.
    pub fn empty() -> Self {
        McpConfig::default()
    }

    /// The servers, sorted by key (disabled ones are left out).
    pub fn servers(&self) -> &[ServerConfig] {
        &self.servers
    }

    /// A configuration of these servers (their namespaces must be unique).
    pub fn from_servers(mut servers: Vec<ServerConfig>) -> Result<Self, ConfigError> {
        servers.sort_by(|a, b| a.key.cmp(&b.key));
        check_namespaces(&servers)?;
        if servers.len() > MAX_SERVERS {
            return Err(ConfigError::Syntax {
                reason: format!("at most {MAX_SERVERS} servers are allowed"),
            });
        }
        Ok(McpConfig { servers })
    }

    /// Reads and parses a file; a relative `cwd` is resolved against the file's folder.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let unreadable = |reason: String| ConfigError::Unreadable {
            path: path.to_owned(),
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| unreadable(e.to_string()))?;
        if meta.len() > MAX_CONFIG_BYTES as u64 {
            return Err(unreadable(format!(
                "is {} bytes; at most {MAX_CONFIG_BYTES} are allowed",
                meta.len()
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::parse_with_base(&text, Some(base))
    }

    /// Parses the JSON text of a configuration. A key repeated in one object is refused
    /// with both of its positions.
    ///
    /// ```
    /// use agent_mcp::{ConfigError, McpConfig};
    ///
    /// let config = McpConfig::parse(r#"{"mcpServers": {"memory": {"command": "npx"}}}"#).unwrap();
    /// assert_eq!(config.servers()[0].namespace, "memory");
    ///
    /// let repeated = r#"{"mcpServers": {"m": {"command": "x", "trusted": false, "trusted": true}}}"#;
    /// let Err(ConfigError::DuplicateKey { path, first, second }) = McpConfig::parse(repeated) else {
    ///     panic!("a repeated key is refused");
    /// };
    /// assert_eq!((path.as_str(), first.column, second.column), ("mcpServers.m.trusted", 39, 57));
    /// ```
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        Self::parse_with_base(text, None)
    }

    fn parse_with_base(text: &str, base: Option<&Path>) -> Result<Self, ConfigError> {
        if text.len() > MAX_CONFIG_BYTES {
            return Err(ConfigError::Syntax {
                reason: format!("at most {MAX_CONFIG_BYTES} bytes are allowed"),
            });
        }
        let root: Value = serde_json::from_str(text).map_err(|e| ConfigError::Syntax {
            reason: format!("not JSON: {e}"),
        })?;
        // The text is valid JSON (and nested at most serde_json's 128 levels) from here on.
        if let Some(duplicate) = find_duplicate_key(text) {
            return Err(duplicate);
        }
        let Some(servers) = root.get("mcpServers") else {
            return Err(ConfigError::Syntax {
                reason: "the top level must be an object with `mcpServers`".to_owned(),
            });
        };
        let Value::Object(servers) = servers else {
            return Err(ConfigError::Syntax {
                reason: "`mcpServers` must be an object".to_owned(),
            });
        };
        if servers.len() > MAX_SERVERS {
            return Err(ConfigError::Syntax {
                reason: format!(
                    "`mcpServers` has {} servers; at most {MAX_SERVERS} are allowed",
                    servers.len()
                ),
            });
        }
        let mut parsed = Vec::new();
        for (key, value) in servers {
            if let Some(server) = parse_server(key, value, base)? {
                parsed.push(server);
            }
        }
        Self::from_servers(parsed)
    }
}

fn check_namespaces(servers: &[ServerConfig]) -> Result<(), ConfigError> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for server in servers {
        if let Some(other) = seen.insert(&server.namespace, &server.key) {
            return Err(field(
                &server.key,
                "(key)",
                format!(
                    "its tool namespace `{}` is also the namespace of server `{other}`",
                    server.namespace
                ),
            ));
        }
    }
    Ok(())
}

const KNOWN_FIELDS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "disabled",
    "trusted",
    "sha256",
    "capabilities",
    "overrides",
    "startupTimeoutMs",
    "callTimeoutMs",
    "listTimeoutMs",
    "shutdownTimeoutMs",
];

fn parse_server(
    key: &str,
    value: &Value,
    base: Option<&Path>,
) -> Result<Option<ServerConfig>, ConfigError> {
    let Value::Object(object) = value else {
        return Err(field(key, "(server)", "must be an object"));
    };
    for name in object.keys() {
        if name == "url" {
            return Err(field(
                key,
                "url",
                "only stdio servers (`command`) are supported",
            ));
        }
        if !KNOWN_FIELDS.contains(&name.as_str()) {
            return Err(field(key, name.clone(), "unknown field"));
        }
    }
    if let Some(kind) = object.get("type")
        && kind.as_str() != Some("stdio")
    {
        return Err(field(key, "type", "only `stdio` is supported"));
    }
    if bool_field(key, object, "disabled")?.unwrap_or(false) {
        return Ok(None);
    }
    let namespace = normalize_segment(key)
        .ok_or_else(|| field(key, "(key)", "has no letter or digit to name its tools by"))?;
    let command = string_field(key, object, "command")?
        .ok_or_else(|| field(key, "command", "is required"))?;
    if command.is_empty() {
        return Err(field(key, "command", "must not be empty"));
    }
    let args = match object.get("args") {
        None => Vec::new(),
        Some(Value::Array(items)) => {
            if items.len() > MAX_ARGS {
                return Err(field(
                    key,
                    "args",
                    format!("at most {MAX_ARGS} arguments are allowed"),
                ));
            }
            items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::String(s) => {
                        check_value(key, &format!("args.{i}"), s).map(|()| s.clone())
                    }
                    _ => Err(field(key, format!("args.{i}"), "must be a string")),
                })
                .collect::<Result<_, _>>()?
        }
        Some(_) => return Err(field(key, "args", "must be an array of strings")),
    };
    let env = match object.get("env") {
        None => BTreeMap::new(),
        Some(Value::Object(vars)) => {
            if vars.len() > MAX_ENV {
                return Err(field(
                    key,
                    "env",
                    format!("at most {MAX_ENV} variables are allowed"),
                ));
            }
            let mut env = BTreeMap::new();
            for (name, value) in vars {
                let path = format!("env.{name}");
                if name.is_empty() || name.contains(['=', '\0']) {
                    return Err(field(
                        key,
                        path,
                        "a variable name must be non-empty without `=` or NUL",
                    ));
                }
                let Value::String(value) = value else {
                    return Err(field(key, path, "must be a string"));
                };
                check_value(key, &path, value)?;
                env.insert(name.clone(), value.clone());
            }
            env
        }
        Some(_) => return Err(field(key, "env", "must be an object of strings")),
    };
    let cwd = string_field(key, object, "cwd")?.map(|cwd| {
        let cwd = PathBuf::from(cwd);
        match base {
            Some(base) if cwd.is_relative() => base.join(cwd),
            _ => cwd,
        }
    });
    let sha256 = string_field(key, object, "sha256")?;
    if let Some(digest) = &sha256
        && !is_sha256_hex(digest)
    {
        return Err(field(
            key,
            "sha256",
            "must be 64 lowercase hex digits, not all zero",
        ));
    }
    let capabilities = capability_list(key, "capabilities", object.get("capabilities"))?;
    let overrides = match object.get("overrides") {
        None => BTreeMap::new(),
        Some(Value::Object(tools)) => {
            if tools.len() > MAX_OVERRIDES {
                return Err(field(
                    key,
                    "overrides",
                    format!("at most {MAX_OVERRIDES} overrides are allowed"),
                ));
            }
            let mut overrides = BTreeMap::new();
            for (tool, value) in tools {
                overrides.insert(tool.clone(), parse_override(key, tool, value)?);
            }
            overrides
        }
        Some(_) => {
            return Err(field(
                key,
                "overrides",
                "must be an object keyed by tool name",
            ));
        }
    };
    let defaults = Timeouts::default();
    let timeouts = Timeouts {
        startup: timeout_field(key, object, "startupTimeoutMs")?.unwrap_or(defaults.startup),
        call: timeout_field(key, object, "callTimeoutMs")?.unwrap_or(defaults.call),
        list: timeout_field(key, object, "listTimeoutMs")?.unwrap_or(defaults.list),
        shutdown: timeout_field(key, object, "shutdownTimeoutMs")?.unwrap_or(defaults.shutdown),
    };
    Ok(Some(ServerConfig {
        key: key.to_owned(),
        namespace,
        command,
        args,
        env,
        cwd,
        trusted: bool_field(key, object, "trusted")?.unwrap_or(false),
        sha256,
        capabilities,
        overrides,
        timeouts,
    }))
}

fn parse_override(key: &str, tool: &str, value: &Value) -> Result<ToolOverride, ConfigError> {
    let at = |name: &str| format!("overrides.{tool}.{name}");
    let Value::Object(object) = value else {
        return Err(field(key, format!("overrides.{tool}"), "must be an object"));
    };
    for name in object.keys() {
        if !["fingerprint", "effect", "replay", "capabilities"].contains(&name.as_str()) {
            return Err(field(key, at(name), "unknown field"));
        }
    }
    let text = |name: &str| -> Result<&str, ConfigError> {
        object
            .get(name)
            .ok_or_else(|| field(key, at(name), "is required"))?
            .as_str()
            .ok_or_else(|| field(key, at(name), "must be a string"))
    };
    let fingerprint = text("fingerprint")?;
    if !is_sha256_hex(fingerprint) {
        return Err(field(
            key,
            at("fingerprint"),
            "must be 64 lowercase hex digits (see `agent tools --json`)",
        ));
    }
    let effect: Effect = text("effect")?
        .parse()
        .map_err(|e: agent_core::tool::ParseError| field(key, at("effect"), e.to_string()))?;
    let replay: ReplaySafety = text("replay")?
        .parse()
        .map_err(|e: agent_core::tool::ParseError| field(key, at("replay"), e.to_string()))?;
    let capabilities = capability_list(key, &at("capabilities"), object.get("capabilities"))?;
    // The kernel's own rules, checked here so the error names the override.
    let probe = agent_core::tool::Definition::builder("probe", "probe")
        .effect(effect)
        .replay_safety(replay)
        .capabilities(capabilities.iter().copied())
        .build();
    if let Err(error) = probe {
        return Err(field(
            key,
            format!("overrides.{tool}"),
            error.to_string().replace("tool `probe`: ", ""),
        ));
    }
    Ok(ToolOverride {
        fingerprint: fingerprint.to_owned(),
        effect,
        replay,
        capabilities,
    })
}

fn capability_list(
    key: &str,
    path: &str,
    value: Option<&Value>,
) -> Result<Vec<Capability>, ConfigError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = value else {
        return Err(field(key, path, "must be an array of capability names"));
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let capability: Capability = item
            .as_str()
            .ok_or_else(|| field(key, format!("{path}.{i}"), "must be a string"))?
            .parse()
            .map_err(|e: agent_core::tool::ParseError| {
                field(key, format!("{path}.{i}"), e.to_string())
            })?;
        if out.contains(&capability) {
            return Err(field(key, format!("{path}.{i}"), "is listed twice"));
        }
        out.push(capability);
    }
    out.sort();
    Ok(out)
}

fn check_value(key: &str, path: &str, value: &str) -> Result<(), ConfigError> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(field(
            key,
            path,
            format!("at most {MAX_VALUE_BYTES} bytes are allowed"),
        ));
    }
    if value.contains('\0') {
        return Err(field(key, path, "must not contain NUL"));
    }
    Ok(())
}

fn string_field(
    key: &str,
    object: &Map<String, Value>,
    name: &str,
) -> Result<Option<String>, ConfigError> {
    match object.get(name) {
        None => Ok(None),
        Some(Value::String(s)) => {
            check_value(key, name, s)?;
            Ok(Some(s.clone()))
        }
        Some(_) => Err(field(key, name, "must be a string")),
    }
}

fn bool_field(
    key: &str,
    object: &Map<String, Value>,
    name: &str,
) -> Result<Option<bool>, ConfigError> {
    match object.get(name) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(field(key, name, "must be true or false")),
    }
}

fn timeout_field(
    key: &str,
    object: &Map<String, Value>,
    name: &str,
) -> Result<Option<Duration>, ConfigError> {
    match object.get(name) {
        None => Ok(None),
        Some(value) => match value.as_u64() {
            Some(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Ok(Some(Duration::from_millis(ms))),
            _ => Err(field(
                key,
                name,
                format!("must be a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS}"),
            )),
        },
    }
}

/// One open object or array while scanning for duplicate keys.
enum Frame {
    Object {
        /// Each key seen so far, with where it was.
        keys: HashMap<String, TextPosition>,
        /// The key whose value comes next (or is being read).
        current: Option<String>,
        expect_key: bool,
    },
    Array {
        index: usize,
    },
}

/// The first key repeated in one object of `text` (which must be valid JSON), with both
/// positions. Keys are compared decoded, so `"\u0074rusted"` repeats `"trusted"`.
fn find_duplicate_key(text: &str) -> Option<ConfigError> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut chars = text.char_indices();
    let mut position = TextPosition { line: 1, column: 0 };
    let advance = |position: &mut TextPosition, c: char| {
        if c == '\n' {
            position.line += 1;
            position.column = 0;
        } else {
            position.column += 1;
        }
    };
    while let Some((start, c)) = chars.next() {
        advance(&mut position, c);
        match c {
            '{' => stack.push(Frame::Object {
                keys: HashMap::new(),
                current: None,
                expect_key: true,
            }),
            '[' => stack.push(Frame::Array { index: 0 }),
            '}' | ']' => {
                stack.pop();
            }
            ',' => match stack.last_mut() {
                Some(Frame::Object { expect_key, .. }) => *expect_key = true,
                Some(Frame::Array { index }) => *index += 1,
                None => {}
            },
            ':' => {
                if let Some(Frame::Object { expect_key, .. }) = stack.last_mut() {
                    *expect_key = false;
                }
            }
            '"' => {
                let at = position;
                let mut end = text.len();
                let mut escaped = false;
                for (i, c) in chars.by_ref() {
                    advance(&mut position, c);
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        end = i + 1;
                        break;
                    }
                }
                let Some((
                    Frame::Object {
                        keys,
                        current,
                        expect_key: true,
                    },
                    parents,
                )) = stack.split_last_mut()
                else {
                    continue;
                };
                let raw = &text[start..end];
                let key = serde_json::from_str::<String>(raw).unwrap_or_else(|_| raw.to_owned());
                if let Some(&first) = keys.get(&key) {
                    let mut path: Vec<String> = parents
                        .iter()
                        .map(|frame| match frame {
                            Frame::Object { current, .. } => current.clone().unwrap_or_default(),
                            Frame::Array { index } => index.to_string(),
                        })
                        .collect();
                    path.push(key);
                    return Some(ConfigError::DuplicateKey {
                        path: path.join("."),
                        first,
                        second: at,
                    });
                }
                keys.insert(key.clone(), at);
                *current = Some(key);
            }
            _ => {}
        }
    }
    None
}

/// Whether `value` is 64 lowercase hex digits, not all zero.
pub(crate) fn is_sha256_hex(value: &str) -> bool {
    value.len() == 64
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && value.bytes().any(|b| b != b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> (String, String) {
        match McpConfig::parse(text).unwrap_err() {
            ConfigError::Field { server, field, .. } => (server, field),
            other => panic!("not a field error: {other}"),
        }
    }

    #[test]
    fn a_common_host_entry_parses_with_defaults() {
        let config = McpConfig::parse(
            r#"{"mcpServers":{"Memory":{"command":"npx","args":["-y","x"],"env":{"A":"1"}}}}"#,
        )
        .unwrap();
        let server = &config.servers()[0];
        assert_eq!(
            (server.key.as_str(), server.namespace.as_str()),
            ("Memory", "memory")
        );
        assert!(!server.trusted);
        assert_eq!(server.timeouts, Timeouts::default());
        assert_eq!(server.env.get("A").map(String::as_str), Some("1"));
    }

    #[test]
    fn errors_name_the_server_and_the_field() {
        let cases = [
            (r#"{"mcpServers":{"a":{}}}"#, "command"),
            (
                r#"{"mcpServers":{"a":{"command":"x","trusted":"yes"}}}"#,
                "trusted",
            ),
            (
                r#"{"mcpServers":{"a":{"command":"x","sha256":"00"}}}"#,
                "sha256",
            ),
            (
                r#"{"mcpServers":{"a":{"command":"x","args":[1]}}}"#,
                "args.0",
            ),
            (
                r#"{"mcpServers":{"a":{"command":"x","env":{"K":1}}}}"#,
                "env.K",
            ),
            (
                r#"{"mcpServers":{"a":{"command":"x","callTimeoutMs":0}}}"#,
                "callTimeoutMs",
            ),
            (
                r#"{"mcpServers":{"a":{"command":"x","trsted":true}}}"#,
                "trsted",
            ),
            (r#"{"mcpServers":{"a":{"url":"http://x"}}}"#, "url"),
            (
                r#"{"mcpServers":{"a":{"command":"x","capabilities":["net"]}}}"#,
                "capabilities.0",
            ),
            (
                r#"{"mcpServers":{"a":{"command":"x","overrides":{"t":{"fingerprint":"11","effect":"read_only","replay":"safe"}}}}}"#,
                "overrides.t.fingerprint",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(error(text), ("a".to_owned(), expected.to_owned()), "{text}");
        }
    }

    #[test]
    fn an_override_must_satisfy_the_kernel_rules() {
        let fp = "1".repeat(64);
        let text = format!(
            r#"{{"mcpServers":{{"a":{{"command":"x","overrides":{{"t":{{"fingerprint":"{fp}","effect":"read_only","replay":"unsafe"}}}}}}}}}}"#
        );
        assert_eq!(error(&text), ("a".to_owned(), "overrides.t".to_owned()));
    }

    #[test]
    fn timeouts_are_bounded() {
        let at =
            |ms: u64| format!(r#"{{"mcpServers":{{"a":{{"command":"x","callTimeoutMs":{ms}}}}}}}"#);
        assert!(McpConfig::parse(&at(MAX_TIMEOUT_MS)).is_ok());
        assert_eq!(error(&at(MAX_TIMEOUT_MS + 1)).1, "callTimeoutMs");
    }

    #[test]
    fn lists_and_values_are_bounded() {
        let with = |body: String| format!(r#"{{"mcpServers":{{"a":{{"command":"x",{body}}}}}}}"#);
        let args = |n: usize| with(format!(r#""args":[{}]"#, vec![r#""a""#; n].join(",")));
        assert!(McpConfig::parse(&args(MAX_ARGS)).is_ok());
        assert_eq!(error(&args(MAX_ARGS + 1)).1, "args");
        let env = |n: usize| {
            let vars: Vec<String> = (0..n).map(|i| format!(r#""V{i}":"1""#)).collect();
            with(format!(r#""env":{{{}}}"#, vars.join(",")))
        };
        assert!(McpConfig::parse(&env(MAX_ENV)).is_ok());
        assert_eq!(error(&env(MAX_ENV + 1)).1, "env");
        let value = |n: usize| with(format!(r#""args":["{}"]"#, "v".repeat(n)));
        assert!(McpConfig::parse(&value(MAX_VALUE_BYTES)).is_ok());
        assert_eq!(error(&value(MAX_VALUE_BYTES + 1)).1, "args.0");
        let fp = "1".repeat(64);
        let overrides = |n: usize| {
            let tools: Vec<String> = (0..n)
                .map(|i| {
                    format!(
                        r#""t{i}":{{"fingerprint":"{fp}","effect":"mutating","replay":"unsafe"}}"#
                    )
                })
                .collect();
            with(format!(r#""overrides":{{{}}}"#, tools.join(",")))
        };
        assert!(McpConfig::parse(&overrides(MAX_OVERRIDES)).is_ok());
        assert_eq!(error(&overrides(MAX_OVERRIDES + 1)).1, "overrides");
        let padded = |n: usize| {
            let text = r#"{"mcpServers":{}}"#;
            format!("{text}{}", " ".repeat(n - text.len()))
        };
        assert!(McpConfig::parse(&padded(MAX_CONFIG_BYTES)).is_ok());
        assert!(matches!(
            McpConfig::parse(&padded(MAX_CONFIG_BYTES + 1)),
            Err(ConfigError::Syntax { .. })
        ));
    }

    #[test]
    fn server_count_is_bounded() {
        let servers = |n: usize| {
            let body: Vec<String> = (0..n)
                .map(|i| format!(r#""s{i}":{{"command":"x"}}"#))
                .collect();
            format!(r#"{{"mcpServers":{{{}}}}}"#, body.join(","))
        };
        assert_eq!(
            McpConfig::parse(&servers(MAX_SERVERS))
                .unwrap()
                .servers()
                .len(),
            MAX_SERVERS
        );
        assert!(matches!(
            McpConfig::parse(&servers(MAX_SERVERS + 1)),
            Err(ConfigError::Syntax { .. })
        ));
    }

    #[test]
    fn namespaces_must_stay_unique_after_normalization() {
        let (server, field) =
            error(r#"{"mcpServers":{"My-Server":{"command":"x"},"my-server":{"command":"y"}}}"#);
        assert_eq!(field, "(key)");
        assert!(server == "my-server" || server == "My-Server");
    }

    /// The path and both positions of the duplicate `text` is refused for.
    fn duplicate(text: &str) -> (String, String, String) {
        match McpConfig::parse(text) {
            Err(ConfigError::DuplicateKey {
                path,
                first,
                second,
            }) => (path, first.to_string(), second.to_string()),
            other => panic!("not a duplicate-key error: {other:?}"),
        }
    }

    #[test]
    fn a_repeated_server_name_is_refused_with_both_positions() {
        let text =
            "{\"mcpServers\": {\n  \"f\": {\"command\": \"a\"},\n  \"f\": {\"command\": \"b\"}\n}}";
        assert_eq!(
            duplicate(text),
            (
                "mcpServers.f".to_owned(),
                "2:3".to_owned(),
                "3:3".to_owned()
            )
        );
        let message = McpConfig::parse(text).unwrap_err().to_string();
        assert!(
            message.contains("mcpServers.f") && message.contains("2:3") && message.contains("3:3"),
            "{message}"
        );
    }

    #[test]
    fn a_repeated_trusted_never_trusts_the_server() {
        let text = r#"{"mcpServers":{"m":{"command":"x","trusted":false,"trusted":true}}}"#;
        assert_eq!(
            duplicate(text),
            (
                "mcpServers.m.trusted".to_owned(),
                "1:35".to_owned(),
                "1:51".to_owned()
            )
        );
        // An escaped spelling of the same key is the same key.
        let text = r#"{"mcpServers":{"m":{"command":"x","trusted":false,"\u0074rusted":true}}}"#;
        assert_eq!(duplicate(text).0, "mcpServers.m.trusted");
    }

    #[test]
    fn a_repeated_key_is_refused_at_any_depth() {
        let cases = [
            (
                r#"{"mcpServers":{"m":{"command":"x","env":{"A":"1","B":"2","A":"3"}}}}"#,
                "mcpServers.m.env.A",
            ),
            (
                r#"{"mcpServers":{"m":{"command":"x","args":["a",{"k":1,"k":2}]}}}"#,
                "mcpServers.m.args.1.k",
            ),
            (
                r#"{"mcpServers":{"m":{"command":"x","overrides":{"t":{"effect":"read_only","effect":"mutating"}}}}}"#,
                "mcpServers.m.overrides.t.effect",
            ),
            (
                r#"{"mcpServers":{},"other":[{"a":{"b":1,"b":2}}]}"#,
                "other.0.a.b",
            ),
            (
                r#"{"mcpServers":{},"mcpServers":{"m":{"command":"x"}}}"#,
                "mcpServers",
            ),
        ];
        for (text, path) in cases {
            assert_eq!(duplicate(text).0, path, "{text}");
        }
    }

    #[test]
    fn equal_keys_in_different_objects_and_keys_in_strings_are_not_duplicates() {
        let text = r#"{"mcpServers":{"a":{"command":"x","env":{"command":"{\"command\":1,"}},"b":{"command":"x"}}}"#;
        assert_eq!(McpConfig::parse(text).unwrap().servers().len(), 2);
        // Positions count characters, not bytes.
        let text = "{\"mcpServers\":{\"é\":{\"command\":\"x\"},\"é\":{}}}";
        assert_eq!(duplicate(text).2, "1:36");
    }

    #[test]
    fn disabled_servers_are_left_out() {
        let config =
            McpConfig::parse(r#"{"mcpServers":{"a":{"command":"x","disabled":true}}}"#).unwrap();
        assert!(config.servers().is_empty());
    }
}
