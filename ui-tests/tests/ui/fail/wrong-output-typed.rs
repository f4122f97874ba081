use agent_core::tool;

/// Counts something.
#[tool(effect = read_only, replay = safe)]
pub fn count() -> u32 {
    3
}

fn main() {}
