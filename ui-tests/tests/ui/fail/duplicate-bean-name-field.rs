use agent_core::{bean, compose};
use std::sync::Arc;

pub struct Disk;
pub struct Memory;

#[bean(name = "cache-store")]
pub fn disk() -> Arc<Disk> {
    Arc::new(Disk)
}

#[bean(name = "cache_store")]
pub fn memory() -> Arc<Memory> {
    Arc::new(Memory)
}

compose! {
    pub struct App { beans: [disk, memory] }
}

fn main() {}
