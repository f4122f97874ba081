//! Generated identifiers: the one place this crate makes an [`Ident`].
//!
//! A name is built from typed parts ([`Name`]), never by pasting strings into `Ident::new`
//! or `format_ident!`: a user's identifier may be raw (`r#type`), and `r#` pasted into the
//! middle of a longer name is not an identifier, which made `Ident::new` panic. Here a user
//! identifier contributes its name without `r#`, a user's free-form word (a crate name)
//! contributes only identifier characters, and [`Name::hashed`] appends a digest of every
//! part, for names that must stay distinct however the parts read. Every part is made of
//! identifier characters and every name starts with a fixed part or a user identifier, so a
//! built name is always a valid, non-keyword identifier.
//!
//! Where a user's own identifier is emitted again, it is the original token (or, rebuilt
//! from text, a raw one where the text is a keyword: [`user`]), so `r#type` stays `r#type`.

use proc_macro2::{Ident, Span};

/// A generated identifier under construction; [`Name::ident`] finishes it.
#[derive(Clone, Debug)]
pub struct Name {
    text: String,
    /// Every part, separated by NUL, for [`Name::hashed`].
    parts: Vec<u8>,
}

impl Name {
    /// A name starting with `fixed`, which is ours: ASCII letters, digits and `_`, not
    /// starting with a digit.
    pub fn new(fixed: &'static str) -> Self {
        debug_assert!(is_fixed(fixed), "{fixed}");
        let mut name = Name {
            text: String::new(),
            parts: Vec::new(),
        };
        name.push(fixed);
        name
    }

    /// A name starting with a user's identifier (without `r#`).
    pub fn from_user(ident: &Ident) -> Self {
        let mut name = Name {
            text: String::new(),
            parts: Vec::new(),
        };
        name.push(&unraw(ident));
        name
    }

    /// A name starting with a word given as text (see [`Name::word`]); `_` goes first when
    /// the word is empty or starts with a digit.
    pub fn from_word(word: &str) -> Self {
        let start = Name {
            text: String::new(),
            parts: Vec::new(),
        };
        let name = start.word(word);
        match name.text.bytes().next() {
            Some(b) if !b.is_ascii_digit() => name,
            _ => Name {
                text: format!("_{}", name.text),
                parts: name.parts,
            },
        }
    }

    fn push(&mut self, part: &str) {
        self.text.push_str(part);
        self.parts.extend_from_slice(part.as_bytes());
        self.parts.push(0);
    }

    /// Appends a fixed part of ours (ASCII letters, digits and `_`).
    pub fn fixed(mut self, fixed: &'static str) -> Self {
        debug_assert!(
            fixed
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        );
        self.push(fixed);
        self
    }

    /// Appends a user's identifier, without `r#`.
    pub fn user(mut self, ident: &Ident) -> Self {
        self.push(&unraw(ident));
        self
    }

    /// Appends a word given as text (a crate name, a bean name): `r#` is dropped and every
    /// character that is not an ASCII letter, digit or `_` becomes `_`.
    pub fn word(mut self, word: &str) -> Self {
        let word: String = word
            .strip_prefix("r#")
            .unwrap_or(word)
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        self.push(&word);
        self
    }

    /// Appends every part of `other`.
    pub fn then(mut self, other: &Name) -> Self {
        self.text.push_str(&other.text);
        self.parts.extend_from_slice(&other.parts);
        self
    }

    /// Appends a number.
    pub fn number(mut self, n: usize) -> Self {
        self.push(&n.to_string());
        self
    }

    /// Appends `_` and a 64-bit digest of every part so far and of `salt` (which does not
    /// appear in the name), so two names differ whenever their parts do.
    pub fn hashed(mut self, salt: &[&str]) -> Self {
        // FNV-1a: tiny, stable across builds and platforms.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let salted = salt.iter().flat_map(|s| s.bytes().chain([0]));
        for byte in self.parts.iter().copied().chain(salted) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        let digest = format!("_{hash:016x}");
        self.text.push_str(&digest);
        self
    }

    /// The identifier, at `span`.
    pub fn ident(self, span: Span) -> Ident {
        Ident::new(&self.text, span)
    }

    /// The identifier, at the call site.
    pub fn call_site(self) -> Ident {
        self.ident(Span::call_site())
    }
}

/// A fixed identifier of ours, such as `agent_core` or `Single`, at the call site.
pub fn fixed(fixed: &'static str) -> Ident {
    Name::new(fixed).call_site()
}

/// An identifier's name without `r#`.
pub fn unraw(ident: &Ident) -> String {
    let text = ident.to_string();
    match text.strip_prefix("r#") {
        Some(bare) => bare.to_owned(),
        None => text,
    }
}

/// A user identifier rebuilt from text written by [`Ident`]'s `Display` (which may carry
/// `r#`), or from a name that is a keyword: raw where it must be, at `span`.
/// Text that is no identifier at all becomes `bean`, so this never panics.
pub fn user(text: &str, span: Span) -> Ident {
    let bare = text.strip_prefix("r#").unwrap_or(text);
    let valid = bare
        .chars()
        .next()
        .is_some_and(|c| !c.is_ascii() || c.is_ascii_alphabetic() || c == '_')
        && bare
            .chars()
            .all(|c| !c.is_ascii() || c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Ident::new("bean", span);
    }
    // These four are identifiers that can never be raw.
    let never_raw = matches!(bare, "self" | "super" | "crate" | "Self" | "_");
    if !never_raw && (text.starts_with("r#") || crate::ident::is_keyword(bare)) {
        Ident::new_raw(bare, span)
    } else {
        Ident::new(bare, span)
    }
}

fn is_fixed(s: &str) -> bool {
    s.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::format_ident;

    fn raw(s: &str) -> Ident {
        Ident::new_raw(s, Span::call_site())
    }

    #[test]
    fn raw_parts_lose_their_prefix() {
        let name = Name::new("__agent_core_relay_")
            .fixed("set_")
            .user(&raw("type"))
            .fixed("_")
            .number(3)
            .call_site();
        assert_eq!(name, "__agent_core_relay_set_type_3");
        assert_eq!(
            Name::from_user(&raw("App")).fixed("Components").call_site(),
            "AppComponents"
        );
        assert_eq!(
            Name::new("__bean_").word("r#match").call_site(),
            "__bean_match"
        );
        assert_eq!(Name::new("x_").word("a-b.c é").call_site(), "x_a_b_c__");
        assert_eq!(Name::from_word("Bean").call_site(), "Bean");
        assert_eq!(Name::from_word("1a").call_site(), "_1a");
        assert_eq!(Name::from_word("").call_site(), "_");
    }

    #[test]
    fn hashed_names_differ_whenever_the_parts_do() {
        let a = Name::new("__agent_core_")
            .word("ab")
            .word("c")
            .hashed(&["x"]);
        let b = Name::new("__agent_core_")
            .word("a")
            .word("bc")
            .hashed(&["x"]);
        let c = Name::new("__agent_core_")
            .word("ab")
            .word("c")
            .hashed(&["y"]);
        let (a, b, c) = (a.call_site(), b.call_site(), c.call_site());
        assert_eq!(a.to_string().len(), "__agent_core_abc_".len() + 16);
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn user_identifiers_are_raw_where_they_must_be() {
        assert_eq!(user("r#type", Span::call_site()).to_string(), "r#type");
        assert_eq!(user("type", Span::call_site()).to_string(), "r#type");
        assert_eq!(user("r#App", Span::call_site()).to_string(), "r#App");
        assert_eq!(user("read", Span::call_site()).to_string(), "read");
        assert_eq!(user("self_", Span::call_site()).to_string(), "self_");
        assert_eq!(user("Read Tool", Span::call_site()).to_string(), "bean");
        assert_eq!(unraw(&raw("match")), "match");
        assert_eq!(unraw(&format_ident!("read")), "read");
    }

    /// The rule of this module, kept: no other file of `src/` makes an identifier itself.
    #[test]
    fn no_other_module_builds_identifiers() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut stack = vec![src];
        let mut offenders = Vec::new();
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.file_name().is_some_and(|n| n == "naming.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                // Unit tests may build identifiers for their inputs.
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                for needle in ["Ident::new", "format_ident!", "Ident::new_raw"] {
                    if code.contains(needle) {
                        offenders.push(format!("{}: {needle}", path.display()));
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "{offenders:#?}");
    }
}
