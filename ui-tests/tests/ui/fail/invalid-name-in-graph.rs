use agent_core::{bean, compose};
use std::sync::Arc;

pub struct Log;

#[bean(name = "Log")]
pub fn log() -> Arc<Log> {
    Arc::new(Log)
}

compose! {
    pub struct App { beans: [log] }
}

fn main() {
    let _ = |app: App| app.components().log.clone();
}
