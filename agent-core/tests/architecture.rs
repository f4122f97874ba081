//! Architecture rules that the type system cannot express.

use std::fs;
use std::path::Path;

/// Kernel modules never depend on the composition runtime: the kernel executes graphs that
/// `compose!` built and must stay usable without it.
#[test]
fn kernel_modules_do_not_import_compose() {
    fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in fs::read_dir(dir).expect("readable directory") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut checked = 0;
    for path in files {
        let relative = path
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        if matches!(relative.as_str(), "lib.rs" | "compose.rs" | "private.rs") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable");
        for forbidden in ["crate::compose", "crate::__private", "agent_macros"] {
            assert!(!text.contains(forbidden), "{relative} uses {forbidden}");
        }
        checked += 1;
    }
    assert!(
        checked >= 8,
        "expected every kernel module to be checked, found {checked}"
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
