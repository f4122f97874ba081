//! Agent definitions are beans: `compose!` gathers every `AgentDefinition` bean into a
//! `Vec` for the bean that builds the daemon's [`DefinitionSet`], so the served set is
//! exactly the composed graph's definitions.

use agent_core::agent::{AgentDefinition, AgentDefinitionError};
use agent_core::bean;
use agent_daemon::definition::{DefinitionError, DefinitionSet};

/// The coding agent's definition.
#[bean(name = "coding-definition")]
pub fn coding_definition() -> Result<AgentDefinition, AgentDefinitionError> {
    AgentDefinition::new("coding", "scripted", 8)
}

/// A reviewer's definition.
#[bean(name = "review-definition")]
pub fn review_definition() -> Result<AgentDefinition, AgentDefinitionError> {
    AgentDefinition::new("review", "scripted", 2)
}

/// What the daemon serves: every definition bean of the graph, at the graph's revision.
#[bean(name = "served-definitions")]
pub fn served_definitions(agents: Vec<AgentDefinition>) -> Result<DefinitionSet, DefinitionError> {
    DefinitionSet::from_agents(agents, "graph-1")
}

agent_core::compose! {
    /// A daemon's graph of served definitions.
    pub struct Served {
        beans: [crate::coding_definition, crate::review_definition, crate::served_definitions],
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_served_set_is_gathered_from_the_composed_graph() {
    let app = Served::build().await.unwrap();
    let set = app.components().served_definitions.clone();
    assert_eq!(set.len(), 2);
    assert_eq!(
        set.resolve("coding", "graph-1")
            .unwrap()
            .agent()
            .max_turns(),
        8
    );
    assert_eq!(
        set.resolve("review", "graph-1")
            .unwrap()
            .agent()
            .max_turns(),
        2
    );
    assert!(set.resolve("review", "graph-2").is_err());
    app.stop().await.unwrap();
}
