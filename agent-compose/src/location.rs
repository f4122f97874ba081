//! Source locations printed as text, because spans do not survive crate boundaries.

use proc_macro2::Span;
use std::path::Path;

/// `file:line:column` of the start of `span` (1-based line and column).
///
/// rustc names files relative to the workspace for workspace members, but absolutely for
/// dependencies built elsewhere (crates.io, git, or a path outside the workspace). An
/// absolute path inside the crate being compiled is shortened to `<package>/<path in the
/// package>`, so manifests and messages do not depend on where a machine keeps its sources.
pub fn of(span: Span) -> String {
    let start = span.start();
    let file = portable(&span.file());
    format!("{file}:{}:{}", start.line, start.column + 1)
}

fn portable(file: &str) -> String {
    let (Ok(dir), Ok(package)) = (
        std::env::var("CARGO_MANIFEST_DIR"),
        std::env::var("CARGO_PKG_NAME"),
    ) else {
        return file.to_owned();
    };
    shorten(file, &dir, &package)
}

fn shorten(file: &str, manifest_dir: &str, package: &str) -> String {
    let path = Path::new(file);
    match path.strip_prefix(manifest_dir) {
        Ok(inside) if path.is_absolute() => {
            let inside: Vec<String> = inside
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            format!("{package}/{}", inside.join("/"))
        }
        _ => file.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_inside_the_package_are_shortened() {
        assert_eq!(
            shorten(
                "/home/u/.cargo/registry/src/x/tools-1.0/src/lib.rs",
                "/home/u/.cargo/registry/src/x/tools-1.0",
                "tools"
            ),
            "tools/src/lib.rs"
        );
        assert_eq!(
            shorten("fixtures/src/tools.rs", "/src/fixtures", "fixtures"),
            "fixtures/src/tools.rs"
        );
        assert_eq!(
            shorten("/elsewhere/a.rs", "/src/fixtures", "fixtures"),
            "/elsewhere/a.rs"
        );
    }
}
