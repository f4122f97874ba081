use agent_core::bean;
use std::sync::Arc;

pub struct Log;

#[bean(name = "log", colour = "red")]
pub fn log() -> Arc<Log> {
    Arc::new(Log)
}

fn main() {}
