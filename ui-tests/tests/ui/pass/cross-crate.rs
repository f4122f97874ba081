//! Factories and bean sets from another crate compose with local beans.
#![deny(warnings)]

use agent_core::tool::{Definition, Effect, ReplaySafety, Tool};
use agent_core::{bean, compose, tool};
use fixtures::log::CleanupLog;
use fixtures::tools::EchoTool;
use std::collections::BTreeMap;
use std::sync::Arc;

#[tool(name = "grep", order = 30)]
pub fn grep_tool() -> Arc<dyn Tool> {
    let definition = Definition::builder("grep", "Searches the workspace.")
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .build()
        .unwrap();
    EchoTool::shared(definition)
}

/// What the local consumer received.
pub struct Toolbox {
    pub names: Vec<String>,
    pub ordered: Vec<String>,
    pub log: Arc<CleanupLog>,
}

#[bean]
pub fn toolbox(
    tools: BTreeMap<String, Arc<dyn Tool>>,
    ordered: Vec<Arc<dyn Tool>>,
    log: Arc<CleanupLog>,
) -> Arc<Toolbox> {
    Arc::new(Toolbox {
        names: tools.into_keys().collect(),
        ordered: ordered
            .iter()
            .map(|t| t.definition().name().to_owned())
            .collect(),
        log,
    })
}

compose! {
    /// Two foreign entries (a set and a factory) and two local ones.
    pub struct App {
        beans: [fixtures::tools::coding_tools, fixtures::log::cleanup_log, grep_tool, toolbox],
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let app = App::build().await.unwrap();
        let c = app.components();
        assert_eq!(c.toolbox.names, ["grep", "read", "write"]);
        assert_eq!(c.toolbox.ordered, ["read", "write", "grep"]);
        assert!(Arc::ptr_eq(&c.cleanup, &c.toolbox.log));
        assert_eq!(c.read.definition().name(), "read");
        // Absolute when `fixtures` is built from outside its workspace (as trybuild does).
        let write = App::manifest().bean("write").unwrap();
        assert!(
            write.location.contains("fixtures/src/tools.rs:"),
            "{}",
            write.location
        );
        assert_eq!(
            App::manifest()
                .selection("write", "upstream")
                .unwrap()
                .chosen,
            ["read"]
        );
        let log = c.cleanup.clone();
        app.stop().await.unwrap();
        assert_eq!(log.entries(), ["write", "read"]);
    });
}
