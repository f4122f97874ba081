use agent_core::tool;

/// Reads something.
#[tool(effect = read_only, replay = safe)]
pub fn read() -> Result<String, std::io::Error> {
    Ok(String::new())
}

fn main() {}
