use agent_core::bean;
use std::sync::Arc;

pub struct Clock;

#[bean(name = "clock", primary, fallback)]
pub fn clock() -> Arc<Clock> {
    Arc::new(Clock)
}

fn main() {}
