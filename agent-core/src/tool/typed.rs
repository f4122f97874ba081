//! Runtime support for typed tools: one annotated function is a tool.
//!
//! `#[tool(effect = .., replay = .., capabilities = [..])]` on a function with an `#[args]`
//! parameter (see `docs/tool-authoring.md`) generates a factory whose [`Tool`](super::Tool)
//! decodes each call with [`decode`], runs the function and turns what it returned into a
//! result with [`IntoToolOutput`]. The definition is built once by [`definition`], from the
//! same effect, replay safety and capabilities the attribute checked at compile time, with
//! the argument type's schema from [`schema_for`].
//!
//! ```
//! use agent_core::tool::typed::{self, Problem};
//! use serde_json::json;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Args {
//!     /// The file to read.
//!     path: String,
//! }
//!
//! let schema = typed::schema_for::<Args>();
//! assert_eq!(schema["additionalProperties"], false);
//! assert_eq!(schema["required"], json!(["path"]));
//! let args: Args = typed::decode(&schema, &json!({ "path": "a.txt" })).unwrap();
//! assert_eq!(args.path, "a.txt");
//! let problem = typed::decode::<Args>(&schema, &json!({ "path": 3 })).err().unwrap();
//! assert_eq!(problem, "argument `path` must be a string, got a number");
//! # let _ = Problem::new("unused");
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::capability::{Capability, Effect, ReplaySafety};
use super::definition::{Definition, DefinitionError, json_kind};
use super::result::{Cancelled, ExecutionError, ToolResult};

/// Longest piece of model-given text (an argument name, a decode message) a problem repeats,
/// in bytes; longer pieces end with `…`.
pub const MAX_ECHO_BYTES: usize = 200;

/// The arguments of a typed tool that takes none: an empty object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}

/// A model-visible problem: the call was understood but cannot be done as asked (a missing
/// file, an empty pattern). The model reads the text and can react; write it without
/// secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem(String);

impl Problem {
    /// A problem with this text.
    pub fn new(text: impl Into<String>) -> Self {
        Problem(text.into())
    }

    /// The text the model reads.
    pub fn text(&self) -> &str {
        &self.0
    }
}

impl From<String> for Problem {
    fn from(text: String) -> Self {
        Problem(text)
    }
}

impl From<&str> for Problem {
    fn from(text: &str) -> Self {
        Problem(text.to_owned())
    }
}

/// Why a typed tool's call did not succeed, without the call id (the generated tool adds
/// it): a model-visible [`Problem`], or one of the [`ExecutionError`] kinds.
#[derive(Debug)]
pub enum Failure {
    /// A problem result the model reads.
    Problem(Problem),
    /// The call was cancelled before it had any effect.
    Cancelled,
    /// Nothing happened (or what happened is known), and retrying will not help.
    Definitive(Box<dyn std::error::Error + Send + Sync>),
    /// Nothing happened, and a retry may succeed.
    Retryable(Box<dyn std::error::Error + Send + Sync>),
    /// A side effect may or may not have happened; never retried automatically.
    Uncertain(Box<dyn std::error::Error + Send + Sync>),
}

impl From<Problem> for Failure {
    fn from(problem: Problem) -> Self {
        Failure::Problem(problem)
    }
}

impl IntoToolFailure for Failure {
    fn into_tool_failure(self, call_id: &str) -> Result<ToolResult, ExecutionError> {
        match self {
            Failure::Problem(problem) => Ok(ToolResult::problem(call_id, problem.0)),
            Failure::Cancelled => Err(ExecutionError::cancelled(call_id)),
            Failure::Definitive(cause) => Err(ExecutionError::definitive(call_id, cause)),
            Failure::Retryable(cause) => Err(ExecutionError::retryable(call_id, cause)),
            Failure::Uncertain(cause) => Err(ExecutionError::uncertain(call_id, cause)),
        }
    }
}

/// A serializable value returned as JSON content: `Ok(Json(value))`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Json<T>(pub T);

/// What a typed tool function may return: text (`String`, `&str`), JSON content
/// ([`Json`], [`Value`]), a [`Problem`], a whole [`ToolResult`], or a `Result` of those with
/// an error that is [`IntoToolFailure`]. The generated tool calls this with the call's id.
#[diagnostic::on_unimplemented(
    message = "[wrong-output] a typed tool returns text, `Json<T>`, a `serde_json::Value`, a `Problem`, a `ToolResult` or a `Result` of those, but this one returns `{Self}`",
    label = "not a tool output",
    note = "wrap a serializable value as `Json(value)`; an error type converts through `IntoToolFailure` (`Problem`, `Failure`, `ExecutionError`, `Cancelled`)"
)]
pub trait IntoToolOutput {
    /// The call's result, or its execution error.
    fn into_tool_output(self, call_id: &str) -> Result<ToolResult, ExecutionError>;
}

/// The error half of a typed tool's `Result`: a [`Problem`] (a problem result), an
/// [`ExecutionError`] (passed on as is) or [`Cancelled`] (a cancelled call).
#[diagnostic::on_unimplemented(
    message = "[wrong-output] a typed tool's error is a `Problem`, a `Failure`, an `ExecutionError` or `Cancelled`, but this one is `{Self}`",
    label = "not a tool failure",
    note = "map it first, e.g. `.map_err(|e| Problem::new(e.to_string()))`"
)]
pub trait IntoToolFailure {
    /// The problem result, or the execution error.
    fn into_tool_failure(self, call_id: &str) -> Result<ToolResult, ExecutionError>;
}

impl IntoToolOutput for String {
    fn into_tool_output(self, call_id: &str) -> Result<ToolResult, ExecutionError> {
        Ok(ToolResult::success(call_id, self))
    }
}

impl IntoToolOutput for &str {
    fn into_tool_output(self, call_id: &str) -> Result<ToolResult, ExecutionError> {
        Ok(ToolResult::success(call_id, self))
    }
}

impl IntoToolOutput for Value {
    fn into_tool_output(self, call_id: &str) -> Result<ToolResult, ExecutionError> {
        Ok(ToolResult::success(call_id, self.to_string()))
    }
}

impl<T: Serialize> IntoToolOutput for Json<T> {
    fn into_tool_output(self, call_id: &str) -> Result<ToolResult, ExecutionError> {
        match serde_json::to_string(&self.0) {
            Ok(text) => Ok(ToolResult::success(call_id, text)),
            // A value that cannot be serialized is the tool's bug, not the model's.
            Err(error) => Err(ExecutionError::definitive(call_id, error)),
        }
    }
}

impl IntoToolOutput for Problem {
    fn into_tool_output(self, call_id: &str) -> Result<ToolResult, ExecutionError> {
        Ok(ToolResult::problem(call_id, self.0))
    }
}

impl IntoToolOutput for ToolResult {
    fn into_tool_output(self, _call_id: &str) -> Result<ToolResult, ExecutionError> {
        Ok(self)
    }
}

impl<T: IntoToolOutput, E: IntoToolFailure> IntoToolOutput for Result<T, E> {
    fn into_tool_output(self, call_id: &str) -> Result<ToolResult, ExecutionError> {
        match self {
            Ok(value) => value.into_tool_output(call_id),
            Err(error) => error.into_tool_failure(call_id),
        }
    }
}

impl IntoToolFailure for Problem {
    fn into_tool_failure(self, call_id: &str) -> Result<ToolResult, ExecutionError> {
        Ok(ToolResult::problem(call_id, self.0))
    }
}

impl IntoToolFailure for ExecutionError {
    fn into_tool_failure(self, _call_id: &str) -> Result<ToolResult, ExecutionError> {
        Err(self)
    }
}

impl IntoToolFailure for Cancelled {
    fn into_tool_failure(self, call_id: &str) -> Result<ToolResult, ExecutionError> {
        Err(ExecutionError::cancelled(call_id))
    }
}

/// The schema of `A` as sent to the model, made acceptable to strict function-calling
/// modes: no `$schema` key, and every object schema states `additionalProperties: false`
/// (unless it says otherwise) and lists `required` (possibly empty). `required` is what
/// schemars derives from the serde attributes: a field with a default or of an `Option`
/// type is not required, exactly as serde does not require it.
pub fn schema_for<A: schemars::JsonSchema>() -> Value {
    let mut schema = Value::from(schemars::schema_for!(A));
    if let Value::Object(map) = &mut schema {
        map.remove("$schema");
    }
    strict(&mut schema);
    schema
}

/// Makes every object schema in `schema` strict, walking only the keywords that hold
/// subschemas (never a `properties` map itself, whose keys are field names).
fn strict(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    if map.get("type").is_some_and(|t| t == "object") || map.contains_key("properties") {
        map.entry("additionalProperties")
            .or_insert(Value::Bool(false));
        map.entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        map.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    for (keyword, value) in map.iter_mut() {
        match (keyword.as_str(), value) {
            ("properties" | "$defs" | "definitions", Value::Object(named)) => {
                named.values_mut().for_each(strict);
            }
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(list)) => {
                list.iter_mut().for_each(strict);
            }
            ("items" | "additionalProperties" | "not", sub) => strict(sub),
            _ => {}
        }
    }
}

/// Builds a typed tool's definition from the facts the attribute checked, with `A`'s
/// schema. The generated factory calls this once, when the bean is built.
pub fn definition<A: schemars::JsonSchema>(
    name: &str,
    description: &str,
    effect: Effect,
    replay_safety: ReplaySafety,
    capabilities: &[Capability],
) -> Result<Definition, DefinitionError> {
    Definition::builder(name, description)
        .input_schema(schema_for::<A>())
        .effect(effect)
        .replay_safety(replay_safety)
        .capabilities(capabilities.iter().copied())
        .build()
}

/// Decodes a call's arguments into `A`. `Err` is the problem text the model reads: it names
/// the argument (or the field path inside it) and what was expected, is bounded by
/// [`MAX_ECHO_BYTES`] per echoed piece, and never repeats the whole argument.
///
/// `null` counts as no arguments, and a top-level argument that is `null` counts as absent
/// (models often send `null` for an optional argument). The top level is checked against `schema` first, so an
/// unknown, missing or mistyped argument is named in the schema's own words; anything
/// deeper is left to serde, whose message is prefixed with the field path.
pub fn decode<A: DeserializeOwned>(schema: &Value, arguments: &Value) -> Result<A, String> {
    let object: Map<String, Value> = match arguments {
        Value::Null => Map::new(),
        Value::Object(object) => object
            .iter()
            .filter(|(_, value)| !value.is_null())
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
        other => {
            return Err(format!(
                "arguments must be a JSON object, got {}",
                json_kind(other)
            ));
        }
    };
    check_top_level(schema, &object)?;
    serde_path_to_error::deserialize(Value::Object(object)).map_err(|error| {
        let path = error.path().to_string();
        let message = echo_plain(&error.inner().to_string());
        if path == "." {
            format!("invalid arguments: {message}")
        } else {
            format!("argument `{}`: {message}", echo_plain(&path))
        }
    })
}

fn check_top_level(schema: &Value, object: &Map<String, Value>) -> Result<(), String> {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    if closed && let Some(unknown) = object.keys().find(|key| !properties.contains_key(*key)) {
        let expected: Vec<_> = properties.keys().map(|name| format!("`{name}`")).collect();
        let expected = if expected.is_empty() {
            String::from("no arguments")
        } else {
            expected.join(", ")
        };
        return Err(format!(
            "unknown argument {:?}; expected {expected}",
            echo_plain(unknown)
        ));
    }
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if object.get(name).is_none() {
            let what = properties
                .get(name)
                .and_then(declared_type)
                .map(|types| format!(" ({})", types.join(" or ")))
                .unwrap_or_default();
            return Err(format!("missing required argument `{name}`{what}"));
        }
    }
    for (name, value) in object {
        let Some(types) = properties.get(name).and_then(declared_type) else {
            continue;
        };
        let matches = properties[name]["type"]
            .as_str()
            .map(|t| vec![t])
            .or_else(|| {
                properties[name]["type"]
                    .as_array()
                    .map(|ts| ts.iter().filter_map(Value::as_str).collect())
            })
            .unwrap_or_default()
            .into_iter()
            .any(|t| has_type(value, t));
        if !matches {
            return Err(format!(
                "argument `{name}` must be {}, got {}",
                types.join(" or "),
                json_kind(value)
            ));
        }
    }
    Ok(())
}

/// The property's `type`, as the words of [`json_kind`] (`a string`, `an integer`).
fn declared_type(property: &Value) -> Option<Vec<&'static str>> {
    let words = |t: &str| match t {
        "string" => Some("a string"),
        "integer" => Some("an integer"),
        "number" => Some("a number"),
        "boolean" => Some("a boolean"),
        "array" => Some("an array"),
        "object" => Some("an object"),
        "null" => Some("null"),
        _ => None,
    };
    match property.get("type")? {
        Value::String(t) => Some(vec![words(t)?]),
        Value::Array(ts) => ts.iter().map(|t| words(t.as_str()?)).collect(),
        _ => None,
    }
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    }
}

/// `text` cut to [`MAX_ECHO_BYTES`] on a char boundary, with `…` when cut.
fn echo_plain(text: &str) -> String {
    if text.len() <= MAX_ECHO_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_ECHO_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema, PartialEq)]
    struct Inner {
        depth: u32,
    }

    #[derive(Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema, PartialEq)]
    struct Args {
        path: String,
        #[serde(default)]
        limit: Option<u32>,
        inner: Option<Inner>,
    }

    fn schema() -> Value {
        schema_for::<Args>()
    }

    #[test]
    fn schemas_are_strict_and_require_what_serde_requires() {
        let schema = schema();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], json!(["path"]));
        assert!(schema.get("$schema").is_none());
        let empty = schema_for::<NoArguments>();
        assert_eq!(empty["required"], json!([]));
        assert_eq!(empty["properties"], json!({}));
    }

    #[test]
    fn malformed_calls_are_problems_naming_the_argument() {
        let schema = schema();
        let problem = |arguments: Value| decode::<Args>(&schema, &arguments).unwrap_err();
        assert_eq!(
            problem(json!({})),
            "missing required argument `path` (a string)"
        );
        assert_eq!(
            problem(json!("x")),
            "arguments must be a JSON object, got a string"
        );
        assert!(problem(json!({"path": "a", "file": 1})).starts_with("unknown argument \"file\""));
        assert_eq!(
            problem(json!({"path": "a", "limit": "x"})),
            "argument `limit` must be an integer or null, got a string"
        );
        assert_eq!(
            problem(json!({"path": null})),
            "missing required argument `path` (a string)"
        );
        let absent: Args = decode(&schema, &json!({"path": "a", "limit": null})).unwrap();
        assert_eq!(absent.limit, None);
        let nested = problem(json!({"path": "a", "inner": {"depth": -1}}));
        assert!(nested.starts_with("argument `inner.depth`: "), "{nested}");
        let parsed: Args = decode(&schema, &json!({"path": "a"})).unwrap();
        assert_eq!(parsed.limit, None);
    }

    #[test]
    fn echoes_are_bounded_at_the_limit() {
        let at = "a".repeat(MAX_ECHO_BYTES);
        assert_eq!(echo_plain(&at), at);
        let past = "é".repeat(MAX_ECHO_BYTES);
        let shown = echo_plain(&past);
        assert!(shown.ends_with('…') && shown.len() <= MAX_ECHO_BYTES + '…'.len_utf8());
        let schema = schema();
        let long_key = "k".repeat(10 * MAX_ECHO_BYTES);
        let text = decode::<Args>(&schema, &json!({ long_key: 1, "path": "a" })).unwrap_err();
        assert!(text.len() < 3 * MAX_ECHO_BYTES, "{text}");
    }

    #[test]
    fn outputs_convert_without_wrapping() {
        let ok = |r: Result<ToolResult, ExecutionError>| r.unwrap();
        assert_eq!(ok(String::from("hi").into_tool_output("c")).content(), "hi");
        assert_eq!(
            ok(Json(json!({"a": 1})).into_tool_output("c")).content(),
            r#"{"a":1}"#
        );
        let failed: Result<String, Problem> = Err(Problem::new("no"));
        assert!(ok(failed.into_tool_output("c")).is_problem());
        let cancelled: Result<&str, Cancelled> = Err(Cancelled);
        assert!(cancelled.into_tool_output("c").unwrap_err().is_cancelled());
    }
}
