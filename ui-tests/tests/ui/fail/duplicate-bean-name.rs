use agent_core::{bean, compose};

#[derive(Clone)]
pub struct Disk;
#[derive(Clone)]
pub struct Memory;

#[bean(name = "store")]
pub fn disk() -> Disk {
    Disk
}

#[bean(name = "store")]
pub fn memory() -> Memory {
    Memory
}

compose! {
    pub struct App { beans: [disk, memory] }
}

fn main() {}
