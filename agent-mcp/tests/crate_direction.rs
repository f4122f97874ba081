//! The kernel crates never depend on the MCP crate or on rmcp, and the library takes only
//! rmcp's client and child-process features, at a pinned version.

use std::path::Path;

fn manifest(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn kernel_crates_do_not_depend_on_mcp() {
    for path in [
        "agent-core/Cargo.toml",
        "agent-macros/Cargo.toml",
        "agent-compose/Cargo.toml",
    ] {
        let text = manifest(path);
        for forbidden in ["agent-mcp", "agent_mcp", "rmcp"] {
            assert!(
                !text
                    .lines()
                    .any(|l| !l.trim_start().starts_with('#') && l.contains(forbidden)),
                "{path} mentions {forbidden}"
            );
        }
    }
}

#[test]
fn the_library_takes_only_the_client_features_of_a_pinned_rmcp() {
    let text = manifest("agent-mcp/Cargo.toml");
    let dependencies = text.split("[dev-dependencies]").next().unwrap();
    let rmcp: Vec<&str> = dependencies
        .lines()
        .filter(|l| l.starts_with("rmcp"))
        .collect();
    assert_eq!(rmcp.len(), 1, "{rmcp:?}");
    let line = rmcp[0];
    assert!(line.contains("version = \"=3.11.0\""), "{line}");
    assert!(line.contains("default-features = false"), "{line}");
    assert!(
        line.contains("features = [\"client\", \"transport-child-process\"]"),
        "{line}"
    );
}
