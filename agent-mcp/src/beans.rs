//! The composition beans: list [`mcp`] in `compose!` and the MCP plan source replaces the
//! application's static plan source (mark that one `fallback`):
//!
//! ```rust,ignore
//! agent_core::compose! {
//!     pub struct App { beans: [my_tools, my_guards, my_static_plan, agent_mcp::beans::mcp, engine] }
//! }
//! ```
//!
//! The configuration is the bean `mcp-config` (empty by default, so the plan is the
//! compiled tools only); an application overrides it (`Override::value`) with the file the
//! user gave. The compiled tools, guards and decorators are the same beans the static plan
//! takes, so the dispatcher pipeline (the approval guard included) applies to MCP tools
//! exactly as to compiled ones.

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_core::bean;
use agent_core::compose::Managed;
use agent_core::stage::{ToolDispatchDecorator, ToolDispatchGuard, ToolPlanSource};
use agent_core::tool::Tool;

use crate::config::McpConfig;
use crate::error::McpError;
use crate::host::{HostOptions, McpToolPlanSource};

/// The servers to start: none unless the application overrides this bean.
#[bean(name = "mcp-config", fallback)]
pub fn mcp_config() -> Arc<McpConfig> {
    Arc::new(McpConfig::empty())
}

/// The MCP plan source itself (for `agent tools` and health); stopping the application
/// shuts its servers down.
#[bean(name = "mcp-source")]
pub async fn mcp_source(
    mcp_config: Arc<McpConfig>,
    tools: BTreeMap<String, Arc<dyn Tool>>,
    guards: Vec<Arc<dyn ToolDispatchGuard>>,
    decorators: Vec<Arc<dyn ToolDispatchDecorator>>,
) -> Result<Managed<Arc<McpToolPlanSource>>, McpError> {
    let source = Arc::new(
        McpToolPlanSource::start(
            &mcp_config,
            tools,
            guards,
            decorators,
            HostOptions::default(),
        )
        .await?,
    );
    let stopping = source.clone();
    Ok(Managed::new(source).with_cleanup(move || async move {
        stopping.shutdown().await;
        Ok(())
    }))
}

/// The application's plan source: the MCP one.
#[bean(name = "mcp-tool-plan")]
pub fn mcp_tool_plan(mcp_source: Arc<McpToolPlanSource>) -> Arc<dyn ToolPlanSource> {
    mcp_source
}

agent_core::bean_set! {
    /// The MCP plan source with its configuration: one line in `compose!`.
    pub mcp = [mcp_config, mcp_source, mcp_tool_plan];
}
