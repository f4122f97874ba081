//! A type written two ways still wires: `Arc<dyn Tool>` beside
//! `Arc<dyn agent_core::tool::Tool>` (also from another crate), `Arc<Config>` beside
//! `Arc<config::Config>`; two types of one name are told apart by their written paths, and a
//! qualifier picks between them where the tokens cannot.
#![deny(warnings)]

use agent_core::tool::{Definition, Effect, ReplaySafety, Tool};
use agent_core::{bean, compose, qualifier, tool};
use fixtures::tools::EchoTool;
use std::sync::Arc;

mod config {
    /// The configuration.
    pub struct Config(pub &'static str);
}
use config::Config;

mod a {
    /// One `Limits`.
    pub struct Limits(pub u8);
}

mod b {
    /// Another `Limits`, a different type of the same name.
    pub struct Limits(pub u8);
}

/// Written with its path.
#[bean]
pub fn settings() -> Arc<config::Config> {
    Arc::new(Config("set"))
}

/// Written in full.
#[tool]
pub fn grep_tool() -> Arc<dyn agent_core::tool::Tool> {
    let definition = Definition::builder("grep", "Searches the workspace.")
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .build()
        .unwrap();
    EchoTool::shared(definition)
}

/// `a::Limits`.
#[bean(name = "small")]
pub fn a_limits() -> Arc<a::Limits> {
    Arc::new(a::Limits(1))
}

/// `b::Limits`.
#[bean(name = "large")]
pub fn b_limits() -> Arc<b::Limits> {
    Arc::new(b::Limits(200))
}

/// What the consumer received.
pub struct Seen {
    pub config: &'static str,
    pub tools: Vec<String>,
    pub small: u8,
    pub large: u8,
    pub chosen: u8,
}

/// Asks for each type written the other way.
#[bean]
pub fn seen(
    config: Arc<Config>,
    tools: Vec<Arc<dyn Tool>>,
    small: Arc<a::Limits>,
    large: Arc<b::Limits>,
    #[qualifier("large")] chosen: Arc<b::Limits>,
) -> Arc<Seen> {
    Arc::new(Seen {
        config: config.0,
        tools: tools.iter().map(|t| t.definition().name().to_owned()).collect(),
        small: small.0,
        large: large.0,
        chosen: chosen.0,
    })
}

compose! {
    /// Both ways of writing, local and from the fixtures crate.
    pub struct App {
        beans: [
            settings, grep_tool, fixtures::tools::coding_tools, fixtures::log::cleanup_log,
            a_limits, b_limits, seen,
        ],
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let app = App::build().await.unwrap();
        let seen = &app.components().seen;
        assert_eq!(seen.config, "set");
        assert_eq!(seen.tools, ["grep", "read", "write"]);
        assert_eq!((seen.small, seen.large, seen.chosen), (1, 200, 200));
        app.stop().await.unwrap();
    });
}
