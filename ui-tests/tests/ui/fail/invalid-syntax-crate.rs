use std::sync::Arc;

pub struct Log;

#[agent_core::bean(crate = "agent_core")]
pub fn log() -> Arc<Log> {
    Arc::new(Log)
}

agent_core::compose! {
    crate = "agent_core";
    pub struct App { beans: [log] }
}

fn main() {}
