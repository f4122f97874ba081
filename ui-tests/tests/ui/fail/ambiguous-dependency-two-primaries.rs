use agent_core::{bean, compose, primary};
use std::sync::Arc;

pub struct Clock;

#[bean(name = "system")]
#[primary]
pub fn system() -> Arc<Clock> {
    Arc::new(Clock)
}

#[bean(name = "manual")]
#[primary]
pub fn manual() -> Arc<Clock> {
    Arc::new(Clock)
}

#[bean]
pub fn scheduler(clock: Arc<Clock>) -> Arc<String> {
    let _ = clock;
    Arc::new(String::new())
}

compose! {
    pub struct App { beans: [system, manual, scheduler] }
}

fn main() {}
