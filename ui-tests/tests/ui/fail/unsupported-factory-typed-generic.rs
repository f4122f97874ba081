use agent_core::tool;

/// Echoes.
#[tool(effect = read_only, replay = safe)]
pub fn echo<T: Default>() -> String {
    String::new()
}

fn main() {}
