use agent_core::bean;
use std::sync::Arc;

pub struct Clock;

#[bean(name = "clock", aliases = ["time", "clock"])]
pub fn system_clock() -> Arc<Clock> {
    Arc::new(Clock)
}

fn main() {}
