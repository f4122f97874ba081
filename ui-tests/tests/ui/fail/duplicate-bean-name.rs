use agent_core::{bean, compose};
use std::sync::Arc;

pub struct Disk;
pub struct Memory;

#[bean(name = "store")]
pub fn disk() -> Arc<Disk> {
    Arc::new(Disk)
}

#[bean(name = "store")]
pub fn memory() -> Arc<Memory> {
    Arc::new(Memory)
}

compose! {
    pub struct App { beans: [disk, memory] }
}

fn main() {}
