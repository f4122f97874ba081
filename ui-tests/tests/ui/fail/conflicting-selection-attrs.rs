use agent_core::{bean, fallback, primary};
use std::sync::Arc;

pub struct Clock;

#[primary]
#[bean(name = "clock")]
#[fallback]
pub fn clock() -> Arc<Clock> {
    Arc::new(Clock)
}

fn main() {}
