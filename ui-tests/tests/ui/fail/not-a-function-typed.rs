use agent_core::tool;

// Each of these overflowed the compiler's stack before: the typed-tool path and the
// factory pipeline called each other for an item that is not a function.
#[tool(effect = read_only, replay = safe)]
pub struct Config;

#[tool(replay = safe)]
pub const F: u8 = 1;

fn main() {}
