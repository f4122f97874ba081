//! The framework's examples and the guide's code.
//!
//! The programs are this package's examples (run one with
//! `cargo run -p examples --example first_agent`):
//!
//! - `first_agent`: a model provider of your own, a stage, two typed tools, `compose!` with
//!   the starter and a run with its events printed;
//! - `choosing`: fallback, primary, a qualifier, ordered decorators and a typed test override;
//! - `mcp_tools`: tools from an MCP server in your own agent;
//! - `daemon_client`: a program that talks to the daemon through `agent-client`;
//! - `guard_and_snapshot`: a guard that asks before mutating tools, and a run suspended,
//!   snapshotted and resumed.
//!
//! The library itself holds nothing: its doc tests compile and run every Rust block of
//! `docs/getting-started.md`.
#![forbid(unsafe_code)]

/// The guide, from `cargo new` to a running agent: each Rust block is a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../docs/getting-started.md")]
struct GettingStarted;

#[cfg(test)]
mod tests {
    const GUIDE: &str = include_str!("../../docs/getting-started.md");
    const MANIFEST: &str = include_str!("../Cargo.toml");
    const CI: &str = include_str!("../../.ci/run");

    /// The user-facing examples: every `[[example]]` but the MCP test server they start.
    fn examples() -> Vec<&'static str> {
        MANIFEST
            .split("[[example]]")
            .skip(1)
            .filter_map(|section| {
                section
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("name = "))
            })
            .map(|name| name.trim_matches('"'))
            .filter(|name| *name != "mcp_test_server")
            .collect()
    }

    #[test]
    fn every_example_is_in_the_guide_and_run_by_ci() {
        let examples = examples();
        assert_eq!(examples.len(), 5, "{examples:?}");
        for name in examples {
            assert!(
                GUIDE.contains(&format!("| `{name}` |")),
                "the guide's table lacks {name}"
            );
            let run = format!("cargo run --locked -p examples --example {name}\n");
            assert!(CI.contains(&run), ".ci/run does not run {name}");
        }
    }

    /// The guide's `Cargo.toml` block names every crate its Rust blocks use.
    #[test]
    fn the_guides_dependencies_cover_its_code() {
        let toml = GUIDE
            .split("```toml")
            .nth(1)
            .and_then(|rest| rest.split("```").next());
        let toml = toml.expect("the guide has a toml block");
        let rust: String = GUIDE
            .split("```rust")
            .skip(1)
            .filter_map(|b| b.split("```").next())
            .collect();
        let crates = [
            ("agent_core", "agent-core"),
            ("tokio", "tokio"),
            ("serde", "serde"),
            ("schemars", "schemars"),
            ("serde_json", "serde_json"),
        ];
        for (krate, package) in crates {
            assert!(
                rust.contains(&format!("{krate}::")),
                "the guide's code does not use {krate}"
            );
            let dependency = format!("\n{package} = ");
            assert!(
                toml.contains(&dependency),
                "the guide's Cargo.toml lacks {package}"
            );
        }
    }
}
