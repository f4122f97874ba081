//! agent-core under another name: every attribute, `bean_set!` and `compose!` take
//! `crate = agent`, and the generated code reaches agent-core through `agent`.
//!
//! A crate that renames the dependency in Cargo.toml
//! (`agent = { package = "agent-core", .. }`) sees exactly this name; `extern crate ... as`
//! stands in for that here, because Cargo refuses one package under two names in one
//! manifest. The expansions' `crate = agent` paths are checked token by token in
//! `agent-compose`'s `renamed_crate` test.
#![deny(warnings)]

extern crate agent_core as agent;

use agent::tool::Tool;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A shared value.
pub struct Clock(pub u64);

#[agent::bean(crate = agent)]
pub fn clock() -> Arc<Clock> {
    Arc::new(Clock(7))
}

#[agent::primary]
#[agent::bean(crate = agent, name = "fast-clock")]
pub fn fast_clock() -> Arc<Clock> {
    Arc::new(Clock(1))
}

#[agent::tool(crate = agent)]
#[agent::order(1)]
pub fn read() -> Arc<dyn Tool> {
    unimplemented!("never built in this fixture")
}

#[agent::bean(crate = agent)]
pub fn report(clock: Arc<Clock>, tools: BTreeMap<String, Arc<dyn Tool>>) -> Arc<String> {
    Arc::new(format!("{} {}", clock.0, tools.len()))
}

agent::bean_set! {
    crate = agent;
    /// Both clocks.
    pub clocks = [clock, fast_clock];
}

agent::compose! {
    crate = agent;
    /// The application, composed through the renamed crate.
    pub struct App { beans: [clocks, read, report] }
}

fn main() {
    let manifest = App::manifest();
    assert_eq!(manifest.order, ["clock", "fast-clock", "read", "report"]);
    assert_eq!(manifest.beans[2].kind, agent::compose::BeanKind::Tool);
    assert_eq!(manifest.beans[0].kind, agent::compose::BeanKind::Bean);
}
