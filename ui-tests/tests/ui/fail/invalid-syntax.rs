use agent_core::{bean, compose};
use std::sync::Arc;

pub struct Log;

#[bean]
pub fn log() -> Arc<Log> {
    Arc::new(Log)
}

compose! {
    pub struct App { factories: [log] }
}

fn main() {}
