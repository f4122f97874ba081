//! The composition beans: list [`logging`] in `compose!` and give the engine the
//! application's observers and the plan its decorators:
//!
//! ```rust,ignore
//! #[bean(name = "engine")]
//! fn engine(provider: Arc<dyn ModelProvider>, plans: Arc<dyn ToolPlanSource>,
//!           observers: Vec<Arc<dyn Observer>>) -> Result<Engine, EngineError> { /* ... */ }
//!
//! agent_core::compose! {
//!     pub struct App { beans: [my_tools, my_plan, agent_logging::beans::logging, engine] }
//! }
//! ```
//!
//! The configuration is the bean `log-config` (the defaults unless the application
//! overrides it). The engine depends on the observer, so stopping the application shuts
//! the engine down before the logger's cleanup closes the mailbox (docs/logging.md, "Mailbox accounting").

use std::sync::Arc;
use std::time::Duration;

use agent_core::bean;
use agent_core::compose::Managed;
use agent_core::event::Observer;
use agent_core::stage::ToolDispatchDecorator;

use crate::config::Config;
use crate::processor::{EventLogger, StartError};
use crate::spans::DispatchSpans;

/// How long stopping the application waits for the log drain.
pub const CLOSE_DEADLINE: Duration = Duration::from_secs(2);

/// The projection's configuration: the defaults unless the application overrides it.
#[bean(name = "log-config", fallback)]
pub fn log_config() -> Arc<Config> {
    Arc::new(Config::default())
}

/// The logger; stopping the application closes its mailbox and waits up to
/// [`CLOSE_DEADLINE`] for the drain.
#[bean(name = "event-logger")]
pub fn event_logger(log_config: Arc<Config>) -> Result<Managed<Arc<EventLogger>>, StartError> {
    let logger = Arc::new(EventLogger::start((*log_config).clone())?);
    let closing = logger.clone();
    Ok(Managed::new(logger).with_cleanup(move || async move {
        closing.close(CLOSE_DEADLINE).await?;
        Ok(())
    }))
}

/// The logger as an engine observer.
#[bean(name = "event-log-observer")]
pub fn event_log_observer(event_logger: Arc<EventLogger>) -> Arc<dyn Observer> {
    event_logger
}

/// The `agent.dispatch` spans, as a tool-dispatch decorator.
#[bean(name = "dispatch-spans")]
pub fn dispatch_spans(event_logger: Arc<EventLogger>) -> Arc<dyn ToolDispatchDecorator> {
    Arc::new(DispatchSpans::new(event_logger.pseudonyms().clone()))
}

agent_core::bean_set! {
    /// The log projection with its configuration, observer and dispatch spans: one line in
    /// `compose!`.
    pub logging = [log_config, event_logger, event_log_observer, dispatch_spans];
}
