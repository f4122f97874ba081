use agent_core::{bean, compose};

#[derive(Clone)]
pub struct Disk;
#[derive(Clone)]
pub struct Memory;

mod disk {
    use super::*;

    #[bean]
    pub fn store() -> Disk {
        Disk
    }
}

mod memory {
    use super::*;

    #[bean]
    pub fn store() -> Memory {
        Memory
    }
}

compose! {
    pub struct App { beans: [disk::store, memory::store] }
}

fn main() {}
