//! Typed tools: every parameter kind (dependency, qualified dependency, `#[args]`, the call
//! context by type and by `#[context]`), no arguments, sync and async functions, every
//! output the conversion accepts, and a typed tool composed beside a hand-written factory.
#![deny(warnings)]

use agent_core::compose;
use agent_core::tool::typed::{Failure, Json, Problem};
use agent_core::tool::{
    Call, Capability, Definition, DefinitionError, Effect, ExecutionError, NoopReporter,
    ReplaySafety, Tool, ToolContext,
};
use agent_core::{bean, qualifier, tool};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A greeting prefix, injected as a bean.
pub struct Prefix(pub &'static str);

/// The plain prefix.
#[bean]
pub fn prefix() -> Arc<Prefix> {
    Arc::new(Prefix("hello"))
}

/// The loud prefix.
#[bean(qualifiers = ["loud"])]
pub fn loud_prefix() -> Arc<Prefix> {
    Arc::new(Prefix("HELLO"))
}

/// The arguments of `greet`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct GreetArgs {
    /// Who to greet.
    pub name: String,
    /// How often.
    #[serde(default)]
    pub times: Option<u8>,
}

/// Greet someone by name.
#[tool(effect = read_only, replay = safe)]
pub async fn greet(
    prefix: Arc<Prefix>,
    #[args] args: GreetArgs,
    ctx: ToolContext<'_>,
) -> Result<String, Problem> {
    if ctx.is_cancelled() {
        return Err(Problem::new("cancelled"));
    }
    let times = usize::from(args.times.unwrap_or(1));
    Ok(vec![format!("{} {}", prefix.0, args.name); times].join("\n"))
}

/// Shout a greeting.
#[tool(name = "shout", effect = read_only, replay = safe, capabilities = ["environment.read"])]
pub fn shout_tool(
    #[qualifier("loud")] prefix: Arc<Prefix>,
    #[args] args: GreetArgs,
) -> Json<Value> {
    Json(json!({ "text": format!("{} {}", prefix.0, args.name) }))
}

/// Report the time of day; takes no arguments.
#[tool(effect = read_only, replay = safe, capabilities = ["environment.read", "secrets.read"])]
pub fn clock() -> &'static str {
    "noon"
}

/// Delete everything, which this fixture never allows.
#[tool(effect = mutating, replay = unsafe, capabilities = ["filesystem.write", "process.execute", "network.access", "environment.write"])]
pub async fn wipe(#[context] ctx: ToolContext<'_>) -> Result<String, Failure> {
    if ctx.is_cancelled() {
        return Err(Failure::Cancelled);
    }
    Err(Failure::Definitive("wiping is disabled".into()))
}

/// Rename a file (pretend): an idempotent mutation returning an `ExecutionError` type.
#[tool(effect = mutating, replay = idempotent, capabilities = ["filesystem.write"])]
pub fn rename(#[args] _args: GreetArgs) -> Result<Value, ExecutionError> {
    Ok(json!("renamed"))
}

/// The hand-written factory form keeps working beside typed tools.
#[tool]
pub fn manual() -> Result<Arc<dyn Tool>, DefinitionError> {
    let definition = Definition::builder("manual", "A hand-written tool.")
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .build()?;
    Ok(Arc::new(Manual(definition)))
}

/// The hand-written tool.
pub struct Manual(Definition);

impl Tool for Manual {
    fn definition(&self) -> &Definition {
        &self.0
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        _ctx: ToolContext<'a>,
    ) -> agent_core::BoxFuture<'a, Result<agent_core::tool::ToolResult, ExecutionError>> {
        Box::pin(async move { Ok(agent_core::tool::ToolResult::success(call.id(), "manual")) })
    }
}

/// Counts the tools it is given.
pub struct Toolbox(pub Vec<Arc<dyn Tool>>);

/// Every tool.
#[bean]
pub fn toolbox(tools: Vec<Arc<dyn Tool>>) -> Arc<Toolbox> {
    Arc::new(Toolbox(tools))
}

compose! {
    /// Typed tools beside a hand-written one.
    pub struct Tools {
        beans: [prefix, loud_prefix, greet, shout_tool, clock, wipe, rename, manual, toolbox],
    }
}

async fn call(tool: &Arc<dyn Tool>, arguments: Value) -> Result<(bool, String), ExecutionError> {
    let cancel = CancellationToken::new();
    let call = Call::new("c-1", tool.definition().name(), arguments).unwrap();
    let result = tool
        .execute(call, ToolContext::new(&NoopReporter, &cancel))
        .await?;
    Ok((result.is_problem(), result.content().to_owned()))
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let app = Tools::build().await.unwrap();
        let tools = &app.components().toolbox.0;
        assert_eq!(tools.len(), 6);
        let named = |name: &str| {
            tools
                .iter()
                .find(|t| t.definition().name() == name)
                .unwrap()
                .clone()
        };
        let greet = named("greet");
        assert_eq!(greet.definition().description(), "Greet someone by name.");
        assert_eq!(greet.definition().input_schema()["required"], json!(["name"]));
        assert_eq!(
            call(&greet, json!({ "name": "Ada", "times": 2 })).await.unwrap(),
            (false, String::from("hello Ada\nhello Ada"))
        );
        let (problem, text) = call(&greet, json!({ "name": 1 })).await.unwrap();
        assert!(problem && text == "argument `name` must be a string, got a number", "{text}");
        assert_eq!(
            call(&named("shout"), json!({ "name": "Ada" })).await.unwrap(),
            (false, String::from(r#"{"text":"HELLO Ada"}"#))
        );
        let clock = named("clock");
        assert_eq!(
            clock.definition().capabilities().iter().copied().collect::<Vec<_>>(),
            [Capability::EnvironmentRead, Capability::SecretsRead]
        );
        assert_eq!(call(&clock, Value::Null).await.unwrap().1, "noon");
        assert!(call(&clock, json!({ "x": 1 })).await.unwrap().0);
        let wipe = named("wipe");
        assert_eq!(wipe.definition().effect(), Effect::Mutating);
        assert_eq!(wipe.definition().replay_safety(), ReplaySafety::Unsafe);
        assert!(!call(&wipe, json!({})).await.unwrap_err().is_cancelled());
        assert_eq!(
            named("rename").definition().replay_safety(),
            ReplaySafety::Idempotent
        );
        assert_eq!(call(&named("rename"), json!({"name": "a"})).await.unwrap().1, r#""renamed""#);
        assert_eq!(call(&named("manual"), json!({})).await.unwrap().1, "manual");
        app.stop().await.unwrap();
    });
}
