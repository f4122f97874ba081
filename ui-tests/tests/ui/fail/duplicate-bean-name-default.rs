use agent_core::{bean, compose};
use std::sync::Arc;

pub struct Disk;
pub struct Memory;

mod disk {
    use super::*;

    #[bean]
    pub fn store() -> Arc<Disk> {
        Arc::new(Disk)
    }
}

mod memory {
    use super::*;

    #[bean]
    pub fn store() -> Arc<Memory> {
        Arc::new(Memory)
    }
}

compose! {
    pub struct App { beans: [disk::store, memory::store] }
}

fn main() {}
