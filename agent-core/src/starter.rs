//! The starter: replaceable beans for the plumbing every application would otherwise write
//! again. List the bean set [`beans`] in `compose!` beside a model provider and the tools,
//! and the graph has a tool plan, an interaction hub and an engine:
//!
//! ```
//! use std::sync::Arc;
//! use agent_core::agent::{AgentDefinition, Engine};
//! use agent_core::message::Message;
//! use agent_core::model::{ModelProvider, ScriptedProvider, StreamEvent, Usage};
//! use agent_core::tool::typed::Problem;
//! use agent_core::{compose, model_provider, tool};
//!
//! #[model_provider(name = "scripted")]
//! pub fn scripted() -> Arc<dyn ModelProvider> {
//!     Arc::new(ScriptedProvider::new(|_| vec![
//!         StreamEvent::TextDelta("Hello!".into()),
//!         StreamEvent::Completed { usage: Usage::new(1, 1) },
//!     ]))
//! }
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! pub struct Args { pub name: String }
//!
//! /// Greets someone by name.
//! #[tool(effect = read_only, replay = safe)]
//! pub fn greet(#[args] args: Args) -> Result<String, Problem> {
//!     Ok(format!("hello {}", args.name))
//! }
//!
//! compose! { pub struct App { beans: [scripted, greet, agent_core::starter::beans] } }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let app = App::build().await?;
//! let engine: Arc<Engine> = app.components().engine.clone();
//! let run = engine.start(&AgentDefinition::new("greeter", "scripted", 4)?, Message::user("hi")?).await?;
//! assert_eq!(run.wait().await?.answer, "Hello!");
//! app.stop().await?; // shuts the engine down, then closes the hub
//! # Ok(())
//! # }
//! ```
//!
//! Every bean here is `fallback`: declaring a bean of the same type replaces it (another
//! `Arc<dyn ToolPlanSource>`, such as a plan source of runtime tools; another `Arc<Engine>`;
//! another `Arc<EngineSettings>` for the engine's identity, run ids, clock and options).
//! A replacement needs a name of its own (`"my-engine"`): bean names are unique in a graph.
//! The starter is a bean set, not a function, so that each piece stays a bean the
//! application can see in its manifest, inject elsewhere and override in tests.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::agent::{Engine, EngineBuilder, EngineError, EngineIdentity, EngineOptions, IdSource};
use crate::bean;
use crate::compose::Managed;
use crate::event::{Clock, Observer};
use crate::interaction::PendingHub;
use crate::model::ModelProvider;
use crate::stage::{
    Dispatcher, DispatcherError, PipelineError, StaticToolPlanSource, ToolDispatchDecorator,
    ToolDispatchGuard, ToolDispatcher, ToolPlanSource, compose_pipeline,
};
use crate::tool::Tool;

/// Why the starter's tool plan could not be assembled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanAssemblyError {
    /// A tool bean's name differs from its definition's name.
    #[error(transparent)]
    Dispatcher(#[from] DispatcherError),
    /// The guards, decorators and dispatcher could not be composed into one pipeline.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
}

/// What the starter's engine takes beyond its beans: identity, run ids, clock and options.
/// The default is the engine builder's defaults; replace the `engine-settings` bean to
/// change them.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::agent::{EngineIdentity, EngineOptions};
/// use agent_core::starter::EngineSettings;
///
/// #[agent_core::bean(name = "my-engine-settings")]
/// pub fn settings() -> Result<Arc<EngineSettings>, agent_core::agent::IdentityError> {
///     // With `compose!`: `EngineIdentity::new(App::compiled_identities())?`.
///     let identity = EngineIdentity::new(["model_provider:scripted@0a1b"])?.with_compatibility("demo/1")?;
///     Ok(Arc::new(EngineSettings::new().identity(identity).options(EngineOptions::default())))
/// }
/// # fn main() {}
/// ```
#[derive(Clone, Default)]
#[must_use = "settings do nothing until the engine is built with them"]
pub struct EngineSettings {
    identity: Option<EngineIdentity>,
    ids: Option<Arc<dyn IdSource>>,
    clock: Option<Arc<dyn Clock>>,
    options: Option<EngineOptions>,
}

impl fmt::Debug for EngineSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineSettings")
            .field("identity", &self.identity.is_some())
            .field("ids", &self.ids.is_some())
            .field("clock", &self.clock.is_some())
            .field("options", &self.options)
            .finish()
    }
}

impl EngineSettings {
    /// The builder's defaults.
    pub fn new() -> Self {
        EngineSettings::default()
    }

    /// What the application states about its code (see [`EngineBuilder::identity`]).
    pub fn identity(mut self, identity: EngineIdentity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Where run ids come from (see [`EngineBuilder::ids`]).
    pub fn ids(mut self, ids: Arc<dyn IdSource>) -> Self {
        self.ids = Some(ids);
        self
    }

    /// The clock that stamps events (see [`EngineBuilder::clock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The engine's options (see [`EngineBuilder::options`]).
    pub fn options(mut self, options: EngineOptions) -> Self {
        self.options = Some(options);
        self
    }

    /// Applies these settings to a builder, leaving what they do not set as it was; a host
    /// that builds a second engine (another broker, say) reuses them this way.
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::Arc;
    /// # use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
    /// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    /// use agent_core::agent::{Engine, EngineIdentity};
    /// use agent_core::starter::EngineSettings;
    /// # let provider = Arc::new(ScriptedProvider::new(|_| vec![StreamEvent::Completed { usage: Usage::new(1, 1) }]));
    /// # let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
    /// let identity = EngineIdentity::new(["tool:greet@0a1b"])?.with_compatibility("demo/1")?;
    /// let settings = EngineSettings::new().identity(identity.clone());
    /// let engine = settings.apply(Engine::builder(provider, tools)).build()?;
    /// assert_eq!(engine.identity(), &identity);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn apply(&self, builder: EngineBuilder) -> EngineBuilder {
        let builder = match &self.identity {
            Some(identity) => builder.identity(identity.clone()),
            None => builder,
        };
        let builder = match &self.ids {
            Some(ids) => builder.ids(ids.clone()),
            None => builder,
        };
        let builder = match &self.clock {
            Some(clock) => builder.clock(clock.clone()),
            None => builder,
        };
        match self.options {
            Some(options) => builder.options(options),
            None => builder,
        }
    }
}

/// The engine's settings: the builder's defaults unless the application declares its own
/// `Arc<EngineSettings>` bean.
#[bean(crate = crate, name = "engine-settings", fallback)]
pub fn engine_settings() -> Arc<EngineSettings> {
    Arc::new(EngineSettings::new())
}

/// Where the runs' questions wait for an answer (the engine's interaction broker); stopping
/// the application closes it, which declines what is still pending.
#[bean(crate = crate, name = "pending-hub", fallback)]
pub fn pending_hub() -> Managed<Arc<PendingHub>> {
    let hub = Arc::new(PendingHub::new());
    let closing = hub.clone();
    Managed::new(hub).with_cleanup(move || async move {
        closing.close();
        Ok(())
    })
}

/// Every tool bean by name, behind every guard and decorator bean (each list in its
/// `order`), frozen into one static plan.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::model::{ModelProvider, ScriptedProvider};
/// use agent_core::stage::{DispatchError, GuardRequest, Next, ToolDispatchGuard};
/// use agent_core::tool::{BoxFuture, ToolResult};
///
/// /// Lets every call through.
/// pub struct Open;
/// impl ToolDispatchGuard for Open {
///     fn guard<'a>(&'a self, _: GuardRequest<'a>, next: Next<'a>) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
///         next.run()
///     }
/// }
///
/// #[agent_core::bean(name = "open")]
/// pub fn open() -> Arc<dyn ToolDispatchGuard> { Arc::new(Open) }
///
/// #[agent_core::model_provider(name = "silent")]
/// pub fn silent() -> Arc<dyn ModelProvider> { Arc::new(ScriptedProvider::new(|_| Vec::new())) }
///
/// agent_core::compose! { pub struct App { beans: [silent, open, agent_core::starter::beans] } }
///
/// # fn main() {
/// let guards = &App::manifest().selection("agent-tool-plan", "guards").unwrap().chosen;
/// assert_eq!(guards, &["open"]);
/// # }
/// ```
#[bean(crate = crate, name = "agent-tool-plan", fallback)]
pub fn agent_tool_plan(
    tools: BTreeMap<String, Arc<dyn Tool>>,
    guards: Vec<Arc<dyn ToolDispatchGuard>>,
    decorators: Vec<Arc<dyn ToolDispatchDecorator>>,
) -> Result<Arc<dyn ToolPlanSource>, PlanAssemblyError> {
    let base: Arc<dyn ToolDispatcher> = Arc::new(Dispatcher::new(tools)?);
    let pipeline = compose_pipeline(base, guards, decorators)?;
    Ok(Arc::new(StaticToolPlanSource::new(pipeline)?))
}

/// The engine over the provider, the plan, the hub as its broker and every observer bean,
/// with the settings applied. Stopping the application shuts it down (cancelling its runs)
/// before the cleanups of the beans it depends on run.
#[bean(crate = crate, name = "engine", fallback)]
pub fn agent_engine(
    provider: Arc<dyn ModelProvider>,
    plans: Arc<dyn ToolPlanSource>,
    hub: Arc<PendingHub>,
    observers: Vec<Arc<dyn Observer>>,
    engine_settings: Arc<EngineSettings>,
) -> Result<Managed<Arc<Engine>>, EngineError> {
    let builder = observers.into_iter().fold(
        engine_settings.apply(Engine::builder(provider, plans).broker(hub)),
        |builder, observer| builder.observer(observer),
    );
    let engine = Arc::new(builder.build()?);
    let stopping = engine.clone();
    Ok(Managed::new(engine).with_cleanup(move || async move {
        stopping.shutdown().await;
        Ok(())
    }))
}

crate::bean_set! {
    crate = crate;
    /// The starter's beans, each replaceable: `engine-settings`, `pending-hub`,
    /// `agent-tool-plan` and `engine` (built in that order, stopped in reverse).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agent_core::model::{ModelProvider, ScriptedProvider};
    ///
    /// #[agent_core::model_provider(name = "silent")]
    /// pub fn silent() -> Arc<dyn ModelProvider> { Arc::new(ScriptedProvider::new(|_| Vec::new())) }
    ///
    /// agent_core::compose! { pub struct App { beans: [silent, agent_core::starter::beans] } }
    ///
    /// # fn main() {
    /// let m = App::manifest();
    /// for name in ["engine-settings", "pending-hub", "agent-tool-plan", "engine"] {
    ///     assert!(m.bean(name).unwrap().fallback, "{name} is replaceable");
    /// }
    /// assert_eq!(m.order.last(), Some(&"engine"));
    /// # }
    /// ```
    pub beans = [engine_settings, pending_hub, agent_tool_plan, agent_engine];
}
