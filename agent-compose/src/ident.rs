//! The identity grammar shared by bean names, aliases and qualifiers.
//!
//! `agent-core` enforces the same grammar at run time for tool names, in its own copy, since
//! the macro crate cannot depend on the kernel. `ui-tests/tests/identity.rs`, which depends
//! on both, runs one case table through both copies and fails if they disagree.

/// Maximum length of a name, alias or qualifier, in bytes.
pub const MAX_LEN: usize = 128;

/// Checks `value` against `[a-z][a-z0-9._-]*`, at most [`MAX_LEN`] bytes, with no two
/// separators in a row and no trailing separator. The error explains the first fault.
pub fn check(value: &str) -> Result<(), String> {
    let bytes = value.as_bytes();
    let Some(&first) = bytes.first() else {
        return Err("must not be empty".into());
    };
    if bytes.len() > MAX_LEN {
        return Err(format!(
            "is {} bytes long; at most {MAX_LEN} are allowed",
            bytes.len()
        ));
    }
    if !first.is_ascii_lowercase() {
        return Err("must start with a lowercase ASCII letter `a-z`".into());
    }
    let mut previous_was_separator = false;
    for (index, ch) in value.char_indices() {
        let separator = matches!(ch, '.' | '-' | '_');
        if !(ch.is_ascii_lowercase() || ch.is_ascii_digit() || separator) {
            return Err(format!(
                "contains `{}` at byte {index}; only `a-z`, `0-9`, `.`, `-` and `_` are allowed",
                ch.escape_debug()
            ));
        }
        if separator && previous_was_separator {
            return Err(format!("has two separators in a row at byte {index}"));
        }
        previous_was_separator = separator;
    }
    if previous_was_separator {
        return Err("must not end with a separator".into());
    }
    Ok(())
}

/// The Rust field name for a canonical bean name: `-` and `.` become `_`; keywords get a
/// raw prefix (or a trailing `_` where a raw identifier is not allowed).
pub fn field_name(name: &str) -> String {
    let base: String = name
        .chars()
        .map(|c| if c == '-' || c == '.' { '_' } else { c })
        .collect();
    match base.as_str() {
        "self" | "super" | "crate" | "extern" => format!("{base}_"),
        _ if is_keyword(&base) => format!("r#{base}"),
        _ => base,
    }
}

/// Whether `s` is a Rust keyword that a raw identifier can spell (`r#type`).
pub(crate) fn is_keyword(s: &str) -> bool {
    matches!(
        s,
        "as" | "break"
            | "const"
            | "continue"
            | "else"
            | "enum"
            | "false"
            | "fn"
            | "for"
            | "if"
            | "impl"
            | "in"
            | "let"
            | "loop"
            | "match"
            | "mod"
            | "move"
            | "mut"
            | "pub"
            | "ref"
            | "return"
            | "static"
            | "struct"
            | "trait"
            | "true"
            | "type"
            | "unsafe"
            | "use"
            | "where"
            | "while"
            | "async"
            | "await"
            | "dyn"
            | "abstract"
            | "become"
            | "box"
            | "do"
            | "final"
            | "macro"
            | "override"
            | "priv"
            | "typeof"
            | "unsized"
            | "virtual"
            | "yield"
            | "try"
            | "gen"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_examples() {
        for ok in [
            "read",
            "official.default",
            "fallback-only",
            "a",
            "a1_b2",
            "x.y-z_w",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        assert_eq!(check(&"a".repeat(MAX_LEN)), Ok(()));
    }

    #[test]
    fn rejects_each_rule() {
        let cases = [
            ("", "empty"),
            ("Read", "lowercase"),
            ("1a", "lowercase"),
            ("read tool", "contains ` `"),
            ("a..b", "two separators"),
            ("a-_b", "two separators"),
            ("a-", "end with a separator"),
            ("é", "lowercase"),
            ("aé", "contains `é`"),
        ];
        for (input, expected) in cases {
            let err = check(input).unwrap_err();
            assert!(err.contains(expected), "{input:?}: {err}");
        }
        assert!(
            check(&"a".repeat(MAX_LEN + 1))
                .unwrap_err()
                .contains("129 bytes")
        );
    }

    #[test]
    fn field_names_are_identifiers() {
        assert_eq!(field_name("fallback-only"), "fallback_only");
        assert_eq!(field_name("official.default"), "official_default");
        assert_eq!(field_name("type"), "r#type");
        assert_eq!(field_name("self"), "self_");
        assert_eq!(field_name("read"), "read");
    }
}
