//! The starter bean set: a provider, tools and the starter make a runnable graph, and an
//! application bean of a starter bean's type replaces it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agent_core::agent::{AgentDefinition, Engine, EngineError, EngineIdentity, IdentityError};
use agent_core::compose::Managed;
use agent_core::message::Message;
use agent_core::model::{ModelProvider, ScriptedProvider, StreamEvent, Usage};
use agent_core::stage::{Dispatcher, StaticToolPlanSource, ToolPlanSource};
use agent_core::starter::EngineSettings;
use agent_core::tool::typed::Problem;
use agent_core::{bean, compose, model_provider, tool};

/// Every wait of these tests.
const WAIT: Duration = Duration::from_secs(10);

/// Answers `done` to everything.
#[model_provider(name = "scripted")]
pub fn scripted() -> Arc<dyn ModelProvider> {
    Arc::new(ScriptedProvider::new(|_| {
        vec![
            StreamEvent::TextDelta("done".into()),
            StreamEvent::Completed {
                usage: Usage::new(1, 1),
            },
        ]
    }))
}

/// What `greet` takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Args {
    /// Who to greet.
    pub name: String,
}

/// Greets someone.
#[tool(effect = read_only, replay = safe)]
pub fn greet(#[args] args: Args) -> Result<String, Problem> {
    Ok(format!("hello {}", args.name))
}

compose! {
/// A provider, a tool and the starter.
pub struct Plain { beans: [scripted, greet, agent_core::starter::beans] } }

#[tokio::test]
async fn the_starter_alone_makes_a_runnable_graph() {
    let m = Plain::manifest();
    assert_eq!(
        m.selection("engine", "plans").unwrap().chosen,
        ["agent-tool-plan"]
    );
    assert_eq!(
        m.selection("engine", "hub").unwrap().chosen,
        ["pending-hub"]
    );
    assert_eq!(
        m.selection("agent-tool-plan", "tools").unwrap().chosen,
        ["greet"]
    );
    assert_eq!(
        m.selection("engine", "engine_settings").unwrap().chosen,
        ["engine-settings"]
    );

    let app = Plain::build().await.unwrap();
    let engine = app.components().engine.clone();
    let run = engine
        .start(
            &AgentDefinition::new("a", "scripted", 2).unwrap(),
            Message::user("hi").unwrap(),
        )
        .await
        .unwrap();
    let output = tokio::time::timeout(WAIT, run.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(output.answer, "done");
    // The default settings state no identity.
    assert!(engine.identity().compatibility().is_none());
    tokio::time::timeout(WAIT, app.stop())
        .await
        .unwrap()
        .unwrap();
    let again = engine
        .start(
            &AgentDefinition::new("a", "scripted", 2).unwrap(),
            Message::user("hi").unwrap(),
        )
        .await;
    assert!(
        again.is_err(),
        "stopping the application shut the engine down"
    );
}

/// The application's own plan: no tools at all, whatever tool beans exist.
#[bean(name = "my-plan")]
pub fn my_plan() -> Result<Arc<dyn ToolPlanSource>, agent_core::stage::DispatcherError> {
    Ok(Arc::new(StaticToolPlanSource::from_dispatcher(
        Dispatcher::new(BTreeMap::new())?,
    )))
}

/// The application's own settings: a compatibility identity.
#[bean(name = "my-settings")]
pub fn my_settings() -> Result<Arc<EngineSettings>, IdentityError> {
    let identity = EngineIdentity::new(Replaced::compiled_identities())?
        .with_compatibility("starter-test/1")?;
    Ok(Arc::new(EngineSettings::new().identity(identity)))
}

compose! {
/// The starter with a plan and settings of the application's own.
pub struct Replaced { beans: [scripted, greet, my_plan, my_settings, agent_core::starter::beans] } }

#[tokio::test]
async fn an_application_bean_replaces_the_starters() {
    let m = Replaced::manifest();
    assert_eq!(m.selection("engine", "plans").unwrap().chosen, ["my-plan"]);
    assert_eq!(
        m.selection("engine", "engine_settings").unwrap().chosen,
        ["my-settings"]
    );

    let app = Replaced::build().await.unwrap();
    let engine = app.components().engine.clone();
    assert_eq!(engine.identity().compatibility(), Some("starter-test/1"));
    let run = engine
        .start(
            &AgentDefinition::new("a", "scripted", 2).unwrap(),
            Message::user("hi").unwrap(),
        )
        .await
        .unwrap();
    tokio::time::timeout(WAIT, run.wait())
        .await
        .unwrap()
        .unwrap();
    tokio::time::timeout(WAIT, app.stop())
        .await
        .unwrap()
        .unwrap();
}

/// The application's own engine, with no broker: it replaces the starter's.
#[bean(name = "my-engine")]
pub fn my_engine(
    provider: Arc<dyn ModelProvider>,
    plans: Arc<dyn ToolPlanSource>,
) -> Result<Managed<Arc<Engine>>, EngineError> {
    Ok(Managed::new(Arc::new(
        Engine::builder(provider, plans).build()?,
    )))
}

/// Something that runs agents: it asks for an engine.
pub struct Runner(pub Arc<Engine>);

/// The runner over whichever engine is selected.
#[bean]
pub fn runner(engine: Arc<Engine>) -> Arc<Runner> {
    Arc::new(Runner(engine))
}

compose! {
/// The starter with an engine of the application's own.
pub struct OwnEngine { beans: [scripted, greet, my_engine, runner, agent_core::starter::beans] } }

#[tokio::test]
async fn an_application_engine_replaces_the_starters() {
    let m = OwnEngine::manifest();
    assert!(m.bean("engine").unwrap().fallback);
    assert_eq!(
        m.selection("runner", "engine").unwrap().chosen,
        ["my-engine"]
    );
    let app = OwnEngine::build().await.unwrap();
    assert!(Arc::ptr_eq(
        &app.components().runner.0,
        &app.components().my_engine
    ));
    tokio::time::timeout(WAIT, app.stop())
        .await
        .unwrap()
        .unwrap();
}
