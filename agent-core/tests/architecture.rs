//! Architecture rules that the type system cannot express.

use std::fs;
use std::path::Path;

/// Kernel modules never depend on the composition runtime: the kernel executes graphs that
/// `compose!` built and must stay usable without it.
#[test]
fn kernel_modules_do_not_import_compose() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut checked = 0;
    for entry in fs::read_dir(&src).expect("src is readable") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if matches!(name.as_str(), "lib.rs" | "compose.rs" | "private.rs") || !name.ends_with(".rs")
        {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable");
        for forbidden in ["crate::compose", "crate::__private", "agent_macros"] {
            assert!(!text.contains(forbidden), "{name} uses {forbidden}");
        }
        checked += 1;
    }
    assert!(
        checked >= 4,
        "expected the kernel modules to be checked, found {checked}"
    );
}

/// Forbidden mechanisms: the graph is built by plain calls, never by registries.
#[test]
fn no_runtime_registries() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for manifest in [
        "Cargo.toml",
        "agent-core/Cargo.toml",
        "agent-macros/Cargo.toml",
        "agent-compose/Cargo.toml",
    ] {
        let text = fs::read_to_string(root.join(manifest)).expect("manifest is readable");
        for forbidden in ["inventory", "linkme", "ctor"] {
            assert!(
                !text.lines().any(|l| l.trim_start().starts_with(forbidden)),
                "{manifest} depends on {forbidden}"
            );
        }
    }
}
