use agent_core::{bean, bean_set, compose};
use std::sync::Arc;

pub struct Log;

#[bean]
pub fn log() -> Arc<Log> {
    Arc::new(Log)
}

bean_set! {
    pub basics = [log];
}

compose! {
    pub struct App { beans: [basics, log] }
}

fn main() {}
