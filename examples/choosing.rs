//! Choosing between implementations, all decided at compile time: a `fallback` that any
//! other bean of its type replaces, a `primary` among two providers, a `qualifier` that
//! asks for one by name, decorators applied in their `order`, and (in the test below) a
//! typed override of the model.
//!
//! ```sh
//! cargo run -p examples --example choosing
//! cargo test -p examples --example choosing
//! ```

use std::sync::{Arc, Mutex};

use agent_core::agent::AgentDefinition;
use agent_core::message::Message;
use agent_core::model::{
    EventStream, ModelProvider, ModelRequest, ProviderError, ScriptedStream, StreamEvent, Usage,
};
use agent_core::stage::{DispatchError, DispatchRequest, ToolDispatchDecorator, ToolDispatcher};
use agent_core::tool::typed::Problem;
use agent_core::tool::{BoxFuture, Call, Definition, ToolResult};
use agent_core::{bean, compose, model_provider, primary, qualifier, tool};

/// How answers are signed.
pub struct Style(pub &'static str);

/// The replaceable default: any other `Arc<Style>` bean wins.
#[bean(fallback)]
pub fn plain_style() -> Arc<Style> {
    Arc::new(Style("plain"))
}

/// The application's own style: it replaces the fallback.
#[bean]
pub fn formal_style() -> Arc<Style> {
    Arc::new(Style("formal"))
}

/// A provider that calls `sign` once, then answers `<name>: <what sign returned>`.
pub struct Named(pub &'static str);

impl ModelProvider for Named {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        let signed =
            request
                .messages()
                .iter()
                .flat_map(|m| m.parts())
                .find_map(|part| match part {
                    agent_core::message::Part::ToolResult(r) => Some(r.content.clone()),
                    _ => None,
                });
        let first = match signed {
            Some(text) => StreamEvent::TextDelta(format!("{}: {text}", self.0)),
            None => match Call::new("c1", "sign", serde_json::json!({})) {
                Ok(call) => StreamEvent::ToolCall(call),
                Err(e) => StreamEvent::TextDelta(e.to_string()),
            },
        };
        let events = [
            first,
            StreamEvent::Completed {
                usage: Usage::new(1, 1),
            },
        ];
        Box::pin(async move { Ok(Box::new(ScriptedStream::new(events)) as Box<dyn EventStream>) })
    }
}

/// A quick model.
#[model_provider(name = "quick")]
pub fn quick() -> Arc<dyn ModelProvider> {
    Arc::new(Named("quick"))
}

/// A careful model: `primary`, so a plain `Arc<dyn ModelProvider>` (the engine's) gets it.
#[model_provider(name = "careful")]
#[primary]
pub fn careful() -> Arc<dyn ModelProvider> {
    Arc::new(Named("careful"))
}

/// Something that always wants the quick model, whatever is primary.
pub struct Drafts(pub Arc<dyn ModelProvider>);

/// Asks for `quick` by name.
#[bean]
pub fn drafts(#[qualifier("quick")] model: Arc<dyn ModelProvider>) -> Arc<Drafts> {
    Arc::new(Drafts(model))
}

/// No arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}

/// Signs in the selected style.
#[tool(effect = read_only, replay = safe)]
pub fn sign(style: Arc<Style>, #[args] _args: NoArgs) -> Result<String, Problem> {
    Ok(format!("signed ({})", style.0))
}

/// Where the decorators record the order they ran in.
#[derive(Default)]
pub struct Trace(pub Mutex<Vec<&'static str>>);

/// The trace bean.
#[bean]
pub fn trace() -> Arc<Trace> {
    Arc::new(Trace::default())
}

/// Records its label, then dispatches to the layer it wraps.
struct Traced {
    label: &'static str,
    trace: Arc<Trace>,
    inner: Arc<dyn ToolDispatcher>,
}

impl ToolDispatcher for Traced {
    fn definitions(&self) -> &[Definition] {
        self.inner.definitions()
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        if let Ok(mut trace) = self.trace.0.lock() {
            trace.push(self.label);
        }
        self.inner.dispatch(request)
    }
}

/// A decorator that wraps the dispatcher in a [`Traced`] layer.
pub struct Tracing(&'static str, Arc<Trace>);

impl ToolDispatchDecorator for Tracing {
    fn wrap(&self, inner: Arc<dyn ToolDispatcher>) -> Option<Arc<dyn ToolDispatcher>> {
        Some(Arc::new(Traced {
            label: self.0,
            trace: self.1.clone(),
            inner,
        }))
    }
}

/// Ordered first (lowest `order`): the outermost layer, so it runs first.
#[bean(order = 1)]
pub fn outer(trace: Arc<Trace>) -> Arc<dyn ToolDispatchDecorator> {
    Arc::new(Tracing("outer", trace))
}

/// Ordered second: inside `outer`.
#[bean(order = 2)]
pub fn inner(trace: Arc<Trace>) -> Arc<dyn ToolDispatchDecorator> {
    Arc::new(Tracing("inner", trace))
}

compose! {
    /// Two styles, two models, one tool, two decorators and the starter.
    pub struct Choosing {
        beans: [
            plain_style, formal_style, quick, careful, drafts, sign, trace, outer, inner,
            agent_core::starter::beans,
        ],
    }
}

/// Runs one question on the engine and returns the answer.
async fn ask(app: &Choosing) -> Result<String, Box<dyn std::error::Error>> {
    let agent = AgentDefinition::new("chooser", "any", 4)?;
    let run = app
        .components()
        .engine
        .start(&agent, Message::user("sign this")?)
        .await?;
    let output = tokio::time::timeout(std::time::Duration::from_secs(10), run.wait()).await??;
    Ok(output.answer)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // What was chosen, and why, is in the manifest (also `Choosing::manifest().to_dot()`).
    let manifest = Choosing::manifest();
    for (consumer, parameter) in [
        ("sign", "style"),
        ("engine", "provider"),
        ("drafts", "model"),
        ("agent-tool-plan", "decorators"),
    ] {
        if let Some(selection) = manifest.selection(consumer, parameter) {
            println!("{consumer}.{parameter} <- {:?}", selection.chosen);
        }
    }

    let app = Choosing::build().await?;
    let answer = ask(&app).await?;
    println!("answer: {answer}");
    println!(
        "decorators ran: {:?}",
        app.components()
            .trace
            .0
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    );
    assert_eq!(answer, "careful: signed (formal)");
    app.stop().await?;
    Ok(())
}

#[test]
fn the_example_runs() {
    main().expect("the example runs");
}

/// A test replaces the primary model with its own through the generated, typed overrides:
/// a field per bean, checked by the compiler.
#[tokio::test]
async fn a_test_overrides_the_model() {
    use agent_core::compose::Override;

    let overrides = ChoosingOverrides {
        careful: Override::value(Arc::new(Named("test-double")) as Arc<dyn ModelProvider>),
        ..Default::default()
    };
    let app = Choosing::build_with(overrides)
        .await
        .expect("the app builds");
    assert_eq!(
        ask(&app).await.expect("the run completes"),
        "test-double: signed (formal)"
    );
    assert_eq!(
        *app.components().trace.0.lock().unwrap(),
        ["outer", "inner"]
    );
    app.stop().await.expect("the app stops");
}
