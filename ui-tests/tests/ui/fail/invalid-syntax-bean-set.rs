use agent_core::{bean, bean_set};
use std::sync::Arc;

pub struct Log;

#[bean]
pub fn log() -> Arc<Log> {
    Arc::new(Log)
}

bean_set! {
    pub basics = log;
}

fn main() {}
