//! A typed tool's schema describes its argument type honestly: every value the type
//! serializes to validates against `typed::schema_for`, and `typed::decode` accepts it and
//! gives the value back.
//!
//! The validator below covers the subset of JSON Schema that schemars emits and fails
//! closed: a keyword it does not know panics, so a schema it cannot judge is never passed.

use agent_core::tool::typed::{self, decode, schema_for};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Keywords that never constrain a value.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "format",
    "$defs",
    "$schema",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Why `value` does not validate against `schema`, or `Ok`. `root` resolves `$ref`.
fn validate(root: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let map = match schema {
        Value::Bool(true) => return Ok(()),
        Value::Bool(false) => return Err(format!("{at}: schema `false`")),
        Value::Object(map) => map,
        other => panic!("{at}: not a schema: {other}"),
    };
    for (keyword, rule) in map {
        let fail = |why: String| Err(format!("{at}: {keyword}: {why}"));
        match keyword.as_str() {
            k if ANNOTATIONS.contains(&k) => {}
            "$ref" => {
                let name = rule
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .unwrap_or_else(|| panic!("{at}: unsupported $ref {rule}"));
                validate(root, &root["$defs"][name], value, at)?;
            }
            "type" => {
                let types: Vec<&str> = match rule {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
                    other => panic!("{at}: type {other}"),
                };
                if !types.iter().any(|t| is_type(value, t)) {
                    return fail(format!("{value} is not {types:?}"));
                }
            }
            "enum" => {
                if !rule.as_array().unwrap().contains(value) {
                    return fail(format!("{value} not listed"));
                }
            }
            "const" => {
                if rule != value {
                    return fail(format!("{value} != {rule}"));
                }
            }
            "minimum" | "maximum" => {
                if let Some(n) = value.as_f64() {
                    let bound = rule.as_f64().unwrap();
                    let ok = if keyword == "minimum" {
                        n >= bound
                    } else {
                        n <= bound
                    };
                    if !ok {
                        return fail(format!("{n}"));
                    }
                }
            }
            "minLength" | "maxLength" => {
                if let Some(s) = value.as_str() {
                    let n = s.chars().count() as u64;
                    let bound = rule.as_u64().unwrap();
                    let ok = if keyword == "minLength" {
                        n >= bound
                    } else {
                        n <= bound
                    };
                    if !ok {
                        return fail(format!("length {n}"));
                    }
                }
            }
            "minItems" | "maxItems" => {
                if let Some(items) = value.as_array() {
                    let n = items.len() as u64;
                    let bound = rule.as_u64().unwrap();
                    let ok = if keyword == "minItems" {
                        n >= bound
                    } else {
                        n <= bound
                    };
                    if !ok {
                        return fail(format!("{n} items"));
                    }
                }
            }
            "items" => {
                if let Some(items) = value.as_array() {
                    for (i, item) in items.iter().enumerate() {
                        validate(root, rule, item, &format!("{at}[{i}]"))?;
                    }
                }
            }
            "properties" => {
                if let Some(object) = value.as_object() {
                    for (name, sub) in rule.as_object().unwrap() {
                        if let Some(field) = object.get(name) {
                            validate(root, sub, field, &format!("{at}.{name}"))?;
                        }
                    }
                }
            }
            "required" => {
                if let Some(object) = value.as_object() {
                    for name in rule.as_array().unwrap() {
                        if !object.contains_key(name.as_str().unwrap()) {
                            return fail(format!("{name} missing"));
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(object) = value.as_object() {
                    let declared = map.get("properties").and_then(Value::as_object);
                    for (name, field) in object {
                        if declared.is_some_and(|d| d.contains_key(name)) {
                            continue;
                        }
                        validate(root, rule, field, &format!("{at}.{name}"))?;
                    }
                }
            }
            "anyOf" | "oneOf" => {
                let passing = rule
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|sub| validate(root, sub, value, at).is_ok())
                    .count();
                let ok = if keyword == "oneOf" {
                    passing == 1
                } else {
                    passing >= 1
                };
                if !ok {
                    return fail(format!("{passing} branches match {value}"));
                }
            }
            "allOf" => {
                for sub in rule.as_array().unwrap() {
                    validate(root, sub, value, at)?;
                }
            }
            other => panic!("{at}: the validator does not know `{other}`; teach it"),
        }
    }
    Ok(())
}

fn is_type(value: &Value, ty: &str) -> bool {
    match ty {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        other => panic!("unknown type {other}"),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Flat {
    /// A path.
    path: String,
    limit: Option<u32>,
    #[serde(default)]
    recursive: bool,
    tags: Vec<String>,
    depth: u8,
    offset: i64,
    ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Fast,
    Slow { by: u16 },
    Named(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Target {
    File {
        path: String,
    },
    Glob {
        pattern: String,
        hidden: Option<bool>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Nested {
    flat: Flat,
    modes: Vec<Mode>,
    target: Target,
    labels: BTreeMap<String, u64>,
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    note: Option<String>,
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z./_-]{0,12}",
        any::<String>().prop_map(|s| s.chars().take(16).collect()),
    ]
}

fn flat() -> impl Strategy<Value = Flat> {
    (
        text(),
        any::<Option<u32>>(),
        any::<bool>(),
        prop::collection::vec(text(), 0..4),
        any::<u8>(),
        any::<i64>(),
        -1.0e12f64..1.0e12,
    )
        .prop_map(
            |(path, limit, recursive, tags, depth, offset, ratio)| Flat {
                path,
                limit,
                recursive,
                tags,
                depth,
                offset,
                ratio,
            },
        )
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        Just(Mode::Fast),
        any::<u16>().prop_map(|by| Mode::Slow { by }),
        text().prop_map(Mode::Named),
    ]
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        text().prop_map(|path| Target::File { path }),
        (text(), any::<Option<bool>>())
            .prop_map(|(pattern, hidden)| Target::Glob { pattern, hidden }),
    ]
}

fn nested() -> impl Strategy<Value = Nested> {
    (
        flat(),
        prop::collection::vec(mode(), 0..4),
        target(),
        prop::collection::btree_map(text(), any::<u64>(), 0..3),
        prop::option::of(text()),
        prop::option::of(text()),
    )
        .prop_map(|(flat, modes, target, labels, kind, note)| Nested {
            flat,
            modes,
            target,
            labels,
            kind,
            note,
        })
}

/// The schema validates `value`'s serialization, and `decode` gives `value` back.
fn holds<T>(value: &T)
where
    T: Serialize + for<'de> Deserialize<'de> + schemars::JsonSchema + PartialEq + std::fmt::Debug,
{
    let schema = schema_for::<T>();
    let json = serde_json::to_value(value).unwrap();
    if let Err(why) = validate(&schema, &schema, &json, "$") {
        panic!("{json} fails its schema: {why}\nschema: {schema:#}");
    }
    let decoded: T = decode(&schema, &json).unwrap_or_else(|p| panic!("{json}: {p}"));
    assert_eq!(&decoded, value);
}

proptest! {
    #[test]
    fn flat_values_validate_and_decode(value in flat()) {
        holds(&value);
    }

    #[test]
    fn nested_values_validate_and_decode(value in nested()) {
        holds(&value);
    }
}

#[test]
fn the_validator_rejects_what_the_schema_forbids() {
    let schema = schema_for::<Flat>();
    let good = serde_json::to_value(Flat {
        path: "a".into(),
        limit: None,
        recursive: false,
        tags: vec![],
        depth: 1,
        offset: 0,
        ratio: 0.5,
    })
    .unwrap();
    assert!(validate(&schema, &schema, &good, "$").is_ok());
    let mut extra = good.as_object().unwrap().clone();
    extra.insert("unknown".into(), Value::Bool(true));
    assert!(validate(&schema, &schema, &Value::Object(extra), "$").is_err());
    let mut wide = good.as_object().unwrap().clone();
    wide.insert("depth".into(), Value::from(256));
    assert!(validate(&schema, &schema, &Value::Object(wide), "$").is_err());
    let mut missing: Map<String, Value> = good.as_object().unwrap().clone();
    missing.remove("path");
    assert!(validate(&schema, &schema, &Value::Object(missing), "$").is_err());
    let empty = schema_for::<typed::NoArguments>();
    assert!(validate(&empty, &empty, &serde_json::json!({}), "$").is_ok());
    assert!(validate(&empty, &empty, &serde_json::json!({"a": 1}), "$").is_err());
}
