//! Type keys: how the resolver groups beans and dependencies before rustc checks them.
//!
//! A key is the type's tokens, printed compactly after a few purely syntactic rewrites:
//! a leading `::`, `crate::` or `self::` is dropped, and the standard library's own paths to
//! `Arc`, `Box`, `Rc`, `Vec`, `String`, `Option`, `Result`, `BTreeMap`, `HashMap` and friends
//! become the bare name. Anything else is kept as written. Keys that differ only in how much
//! of their paths is written are grouped by the resolver ([`compatible`], through the
//! [`tail`] index); two groups that name one type (a `type` alias) are caught by the
//! generated coherence check (see `codegen::coherence`).

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit_mut::VisitMut;
use syn::{GenericArgument, PathArguments, Type};

/// Prints tokens compactly and deterministically, e.g. `Arc<dyn Stage<String, String>>`.
pub fn render(tokens: &TokenStream) -> String {
    let mut out = String::new();
    render_into(tokens.clone(), &mut out);
    out
}

fn render_into(tokens: TokenStream, out: &mut String) {
    let mut previous_word = false;
    for tt in tokens {
        match tt {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{ ", " }"),
                    Delimiter::None => ("", ""),
                };
                if previous_word && g.delimiter() == Delimiter::Brace {
                    out.push(' ');
                }
                out.push_str(open);
                render_into(g.stream(), out);
                out.push_str(close);
                previous_word = g.delimiter() == Delimiter::None;
            }
            TokenTree::Ident(i) => {
                if previous_word {
                    out.push(' ');
                }
                out.push_str(&i.to_string());
                previous_word = true;
            }
            TokenTree::Literal(l) => {
                if previous_word {
                    out.push(' ');
                }
                out.push_str(&l.to_string());
                previous_word = true;
            }
            TokenTree::Punct(p) => {
                let c = p.as_char();
                match c {
                    ',' | ';' => {
                        out.push(c);
                        out.push(' ');
                    }
                    '+' | '=' => {
                        if !out.ends_with(' ') {
                            out.push(' ');
                        }
                        out.push(c);
                        out.push(' ');
                    }
                    '\'' => {
                        if previous_word {
                            out.push(' ');
                        }
                        out.push(c);
                    }
                    _ => out.push(c),
                }
                previous_word = false;
            }
        }
    }
}

/// A key with every path reduced to its last segment: `Arc<dyn agent_core::tool::Tool>`
/// becomes `Arc<dyn Tool>`. Keys that differ only in how their paths are written share it.
pub fn tail(key: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let mut chars = key.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            word.clear();
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            out.push_str(&word);
            word.clear();
            out.push(c);
        }
    }
    out.push_str(&word);
    out
}

/// One piece of a key: a path (its segments) or any other character.
#[derive(PartialEq)]
enum Piece<'k> {
    Path(Vec<&'k str>),
    Other(char),
}

fn pieces(key: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut segments: Vec<&str> = Vec::new();
    let mut start: Option<usize> = None;
    let bytes = key.as_bytes();
    let mut i = 0;
    while i < key.len() {
        let c = key[i..].chars().next().expect("in bounds");
        if c.is_alphanumeric() || c == '_' {
            start.get_or_insert(i);
            i += c.len_utf8();
            continue;
        }
        if let Some(s) = start.take() {
            segments.push(&key[s..i]);
        }
        if c == ':' && bytes.get(i + 1) == Some(&b':') && !segments.is_empty() {
            i += 2;
            continue;
        }
        if !segments.is_empty() {
            out.push(Piece::Path(std::mem::take(&mut segments)));
        }
        out.push(Piece::Other(c));
        i += c.len_utf8();
    }
    if let Some(s) = start {
        segments.push(&key[s..]);
    }
    if !segments.is_empty() {
        out.push(Piece::Path(segments));
    }
    out
}

/// Whether two keys may name one type: the same structure, and every path of one is a
/// trailing part of the corresponding path of the other (`Config` and `config::Config`,
/// `Arc<dyn Tool>` and `Arc<dyn agent_core::tool::Tool>`). `a::Config` and `b::Config` are
/// not: their written paths tell them apart. This is a guess from tokens; rustc checks every
/// binding made on it (see `docs/architecture.md`, "Type identity").
pub fn compatible(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (a, b) = (pieces(a), pieces(b));
    a.len() == b.len()
        && a.iter().zip(&b).all(|pair| match pair {
            (Piece::Path(x), Piece::Path(y)) => {
                let (short, long) = if x.len() <= y.len() { (x, y) } else { (y, x) };
                long.ends_with(short)
            }
            (x, y) => x == y,
        })
}

/// The normalized key of a type.
pub fn of(ty: &Type) -> String {
    let mut ty = ty.clone();
    Normalize.visit_type_mut(&mut ty);
    render(&ty.to_token_stream())
}

const STD_ROOTS: [&str; 3] = ["std", "alloc", "core"];
const STD_TYPES: [(&str, &str); 14] = [
    ("sync", "Arc"),
    ("boxed", "Box"),
    ("rc", "Rc"),
    ("vec", "Vec"),
    ("string", "String"),
    ("option", "Option"),
    ("result", "Result"),
    ("collections", "BTreeMap"),
    ("collections", "BTreeSet"),
    ("collections", "HashMap"),
    ("collections", "HashSet"),
    ("collections", "VecDeque"),
    ("cell", "RefCell"),
    ("sync", "Mutex"),
];

struct Normalize;

impl VisitMut for Normalize {
    fn visit_type_mut(&mut self, ty: &mut Type) {
        // `(T)` and invisible groups print differently from `T` but are the same type.
        loop {
            match ty {
                Type::Paren(p) => *ty = (*p.elem).clone(),
                Type::Group(g) => *ty = (*g.elem).clone(),
                _ => break,
            }
        }
        syn::visit_mut::visit_type_mut(self, ty);
    }

    fn visit_path_mut(&mut self, path: &mut syn::Path) {
        path.leading_colon = None;
        while path.segments.len() > 1 {
            let first = path.segments[0].ident.to_string();
            if first == "crate" || first == "self" {
                path.segments = path.segments.iter().skip(1).cloned().collect();
            } else {
                break;
            }
        }
        if path.segments.len() == 3 {
            let names: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let is_std = STD_ROOTS.contains(&names[0].as_str())
                && STD_TYPES
                    .iter()
                    .any(|(module, ty)| names[1] == *module && names[2] == *ty);
            let plain_modules =
                path.segments[0].arguments.is_none() && path.segments[1].arguments.is_none();
            if is_std && plain_modules {
                path.segments = path.segments.iter().skip(2).cloned().collect();
            }
        }
        syn::visit_mut::visit_path_mut(self, path);
    }
}

/// How a parameter is injected, decided from its written type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamShape {
    /// Exactly one bean.
    Single,
    /// `Option<T>`: zero or one bean.
    Optional,
    /// `Vec<T>`: every matching bean, ordered.
    List,
    /// `BTreeMap<String, T>`: every matching bean keyed by canonical name.
    Map,
}

impl ParamShape {
    /// The word used in descriptors.
    pub fn as_str(&self) -> &'static str {
        match self {
            ParamShape::Single => "single",
            ParamShape::Optional => "optional",
            ParamShape::List => "list",
            ParamShape::Map => "map",
        }
    }

    /// Parses the word used in descriptors.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "single" => ParamShape::Single,
            "optional" => ParamShape::Optional,
            "list" => ParamShape::List,
            "map" => ParamShape::Map,
            _ => return None,
        })
    }
}

/// Splits a parameter type into its injection shape and the bean type it asks for.
pub fn shape_of(ty: &Type) -> (ParamShape, Type) {
    let single = || (ParamShape::Single, ty.clone());
    let Type::Path(tp) = strip_groups(ty) else {
        return single();
    };
    if tp.qself.is_some() {
        return single();
    }
    let Some(last) = tp.path.segments.last() else {
        return single();
    };
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return single();
    };
    let types: Vec<&Type> = args
        .args
        .iter()
        .filter_map(|a| match a {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        })
        .collect();
    if types.len() != args.args.len() {
        return single();
    }
    match (last.ident.to_string().as_str(), types.as_slice()) {
        ("Option", [inner]) => (ParamShape::Optional, (*inner).clone()),
        ("Vec", [inner]) => (ParamShape::List, (*inner).clone()),
        ("BTreeMap", [key, inner]) if of(key) == "String" => (ParamShape::Map, (*inner).clone()),
        _ => single(),
    }
}

fn strip_groups(ty: &Type) -> &Type {
    match ty {
        Type::Paren(p) => strip_groups(&p.elem),
        Type::Group(g) => strip_groups(&g.elem),
        other => other,
    }
}

/// The last path segment of a type, when it is a plain path (used to recognise
/// `Result`, `Managed` and `Arc` by name).
pub fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match strip_groups(ty) {
        Type::Path(tp) if tp.qself.is_none() => tp.path.segments.last(),
        _ => None,
    }
}

/// The type arguments of a path segment, if it has only type arguments.
pub fn type_args(segment: &syn::PathSegment) -> Vec<&Type> {
    match &segment.arguments {
        PathArguments::AngleBracketed(args) => args
            .args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_written_two_ways_are_compatible_and_distinct_paths_are_not() {
        for (a, b) in [
            ("Arc<dyn Tool>", "Arc<dyn agent_core::tool::Tool>"),
            ("Arc<Config>", "Arc<config::Config>"),
            ("Arc<config::Config>", "Arc<app::config::Config>"),
            ("BTreeMap<String, Arc<x::Y>>", "BTreeMap<String, Arc<Y>>"),
            (
                "Arc<dyn Stage<String, String>>",
                "Arc<dyn stage::Stage<String, String>>",
            ),
        ] {
            assert!(compatible(a, b), "{a} ~ {b}");
            assert!(compatible(b, a), "{b} ~ {a}");
            assert_eq!(tail(a), tail(b));
        }
        for (a, b) in [
            ("Arc<a::Config>", "Arc<b::Config>"),
            ("Arc<Config>", "Arc<Settings>"),
            ("Arc<Config>", "Box<Config>"),
            (
                "Arc<dyn Stage<String, u8>>",
                "Arc<dyn Stage<String, String>>",
            ),
            ("Arc<x::a::Config>", "Arc<y::a::Config>"),
        ] {
            assert!(!compatible(a, b), "{a} !~ {b}");
        }
    }

    fn key(s: &str) -> String {
        of(&syn::parse_str(s).unwrap())
    }

    #[test]
    fn keys_ignore_whitespace_and_root_prefixes() {
        assert_eq!(key("Arc < dyn  Tool >"), "Arc<dyn Tool>");
        assert_eq!(key("::std::sync::Arc<dyn Tool>"), "Arc<dyn Tool>");
        assert_eq!(
            key("alloc::sync::Arc<dyn crate::tool::Tool>"),
            "Arc<dyn tool::Tool>"
        );
        assert_eq!(key("self::Config"), "Config");
        assert_eq!(key("(Config)"), "Config");
        assert_eq!(
            key("Arc<dyn Stage<String, std::string::String> + Send>"),
            "Arc<dyn Stage<String, String> + Send>"
        );
        assert_eq!(key("&'static str"), "&'static str");
    }

    #[test]
    fn keys_keep_distinct_paths_apart() {
        assert_ne!(key("a::Config"), key("b::Config"));
        assert_ne!(key("Arc<dyn Tool>"), key("Arc<dyn agent_core::tool::Tool>"));
    }

    #[test]
    fn shapes() {
        let shape = |s: &str| {
            let (shape, inner) = shape_of(&syn::parse_str(s).unwrap());
            (shape, of(&inner))
        };
        assert_eq!(
            shape("Vec<Arc<dyn Tool>>"),
            (ParamShape::List, "Arc<dyn Tool>".into())
        );
        assert_eq!(shape("std::vec::Vec<u8>"), (ParamShape::List, "u8".into()));
        assert_eq!(shape("Option<Log>"), (ParamShape::Optional, "Log".into()));
        assert_eq!(
            shape("BTreeMap<std::string::String, Arc<dyn Tool>>"),
            (ParamShape::Map, "Arc<dyn Tool>".into())
        );
        assert_eq!(
            shape("BTreeMap<u8, Log>"),
            (ParamShape::Single, "BTreeMap<u8, Log>".into())
        );
        assert_eq!(
            shape("HashMap<String, Log>"),
            (ParamShape::Single, "HashMap<String, Log>".into())
        );
        assert_eq!(shape("Arc<Log>"), (ParamShape::Single, "Arc<Log>".into()));
    }
}
