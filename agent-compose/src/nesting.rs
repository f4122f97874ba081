//! The nesting guard: user tokens nested deeper than [`MAX_DEPTH`] are refused before `syn`
//! sees them.
//!
//! `syn` parses types, paths and attributes by recursion, one or more stack frames per level,
//! and proc macros run unoptimized in a `dev` build: a factory whose signature nests types a
//! few hundred levels deep (`Box<dyn Fn(Box<dyn Fn(..)>)>`, `Vec<Vec<..>>`) overflowed the
//! stack, which aborts rustc instead of reporting an error. The scan here is iterative (an
//! explicit stack of token iterators), so no input can make it overflow, and every entry
//! point runs it on the tokens it is about to parse.
//!
//! Depth counts every enclosing group (`()`, `[]`, `{}` and the invisible groups of macro
//! fragments) and every enclosing angle bracket: generics are not groups to the tokenizer, so
//! `<` opens a level and `>` closes one (not in `->` or `=>`, and not below the enclosing
//! group's level; `<=` opens none, and `;`, which cannot stand inside generics, closes every
//! `<` left open, as a comparison leaves it).

use crate::diag::{self, Code};
use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};

/// The deepest nesting accepted: a token may be enclosed by at most this many groups and
/// angle brackets together. Real signatures stay under ten; a `Vec<..>` 64 deep is still
/// accepted, and parsing 64 levels takes a small part of the stack even unoptimized.
pub const MAX_DEPTH: usize = 64;

/// Whether the last top-level token tree, a function's body, is scanned: `syn` never parses
/// a bean attribute's body (it is kept as one token tree), and a body's comparisons would
/// read as open angle brackets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// Scan every token.
    Scan,
    /// Skip the last top-level token tree when it is a brace group after a top-level `fn`.
    Skip,
}

/// The span of the first token nested deeper than [`MAX_DEPTH`], and its depth.
pub fn too_deep(tokens: &TokenStream, body: Body) -> Option<(Span, usize)> {
    let top: Vec<TokenTree> = tokens.clone().into_iter().collect();
    let skip_last = body == Body::Skip
        && matches!(top.last(), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace)
        && top
            .iter()
            .any(|t| matches!(t, TokenTree::Ident(i) if i == "fn"));
    let top_len = if skip_last { top.len() - 1 } else { top.len() };
    // One level per open group: its remaining tokens and the angle brackets open in it.
    struct Level {
        tokens: std::vec::IntoIter<TokenTree>,
        angles: usize,
        /// The previous token, when it was a joint `-`, `=` or `<`.
        joint: Option<char>,
    }
    let mut levels = vec![Level {
        tokens: top
            .into_iter()
            .take(top_len)
            .collect::<Vec<_>>()
            .into_iter(),
        angles: 0,
        joint: None,
    }];
    // Open groups (levels beyond the first) plus every level's open angle brackets.
    let mut depth = 0usize;
    while let Some(level) = levels.last_mut() {
        let Some(tree) = level.tokens.next() else {
            let closed = levels.pop().map_or(0, |l| l.angles);
            depth -= closed;
            if !levels.is_empty() {
                depth -= 1;
            }
            continue;
        };
        let joint = level.joint.take();
        match tree {
            TokenTree::Group(g) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some((g.span_open(), depth));
                }
                let tokens: Vec<TokenTree> = g.stream().into_iter().collect();
                levels.push(Level {
                    tokens: tokens.into_iter(),
                    angles: 0,
                    joint: None,
                });
            }
            TokenTree::Punct(p) => {
                let c = p.as_char();
                match c {
                    '<' => {
                        level.angles += 1;
                        depth += 1;
                        if depth > MAX_DEPTH {
                            return Some((p.span(), depth));
                        }
                    }
                    '=' if joint == Some('<') => {
                        // `<=` compares; the `<` opened nothing.
                        level.angles -= 1;
                        depth -= 1;
                    }
                    '>' if joint == Some('-') || joint == Some('=') => {}
                    '>' if level.angles > 0 => {
                        level.angles -= 1;
                        depth -= 1;
                    }
                    ';' => {
                        depth -= level.angles;
                        level.angles = 0;
                    }
                    _ => {}
                }
                if p.spacing() == proc_macro2::Spacing::Joint && matches!(c, '-' | '=' | '<') {
                    level.joint = Some(c);
                }
            }
            TokenTree::Ident(_) | TokenTree::Literal(_) => {}
        }
    }
    None
}

/// `Err([nesting-too-deep])` at the first token nested deeper than [`MAX_DEPTH`].
pub fn check(tokens: &TokenStream, body: Body) -> syn::Result<()> {
    match too_deep(tokens, body) {
        None => Ok(()),
        Some((span, depth)) => Err(diag::error(
            Code::NestingTooDeep,
            span,
            format!(
                "this is nested {depth} levels deep (parentheses, brackets, braces and angle brackets together), and at most {MAX_DEPTH} are supported\nhelp: name an inner part with a `type` alias, e.g. `type Inner = Vec<Vec<u8>>;`"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn depth_of(src: &str) -> Option<usize> {
        too_deep(&TokenStream::from_str(src).unwrap(), Body::Scan).map(|(_, d)| d)
    }

    fn nested(open: &str, close: &str, n: usize) -> String {
        format!("{}u8{}", open.repeat(n), close.repeat(n))
    }

    #[test]
    fn the_bound_is_accepted_and_one_past_it_refused() {
        for (open, close) in [("Vec<", ">"), ("(", ")"), ("[", "]"), ("{", "}")] {
            assert_eq!(depth_of(&nested(open, close, MAX_DEPTH)), None, "{open}");
            assert_eq!(
                depth_of(&nested(open, close, MAX_DEPTH + 1)),
                Some(MAX_DEPTH + 1),
                "{open}"
            );
        }
        // Groups and angle brackets add up: `Box<dyn Fn(..)>` is two levels.
        let half = MAX_DEPTH / 2;
        assert_eq!(depth_of(&nested("Box<dyn Fn(", ")>", half)), None);
        assert!(depth_of(&nested("Box<dyn Fn(", ")>", half + 1)).is_some());
    }

    #[test]
    fn closed_angles_and_arrows_do_not_add_up() {
        let siblings = "Vec<u8>, ".repeat(MAX_DEPTH * 2);
        assert_eq!(depth_of(&format!("fn f({siblings}) -> u8 {{}}")), None);
        let arrows = "fn(u8) -> u8, ".repeat(MAX_DEPTH * 2);
        assert_eq!(depth_of(&format!("({arrows})")), None);
        let shifts = "Vec<Vec<u8>>, ".repeat(MAX_DEPTH * 2);
        assert_eq!(depth_of(&shifts), None);
        let compared = "a <= b; c < d; ".repeat(MAX_DEPTH * 2);
        assert_eq!(depth_of(&compared), None);
        // A stray `>` cannot close its enclosing group's angle brackets.
        let stray = format!(
            "{}({}){}",
            "Vec<".repeat(60),
            ">".repeat(10),
            "Vec<".repeat(5)
        );
        assert_eq!(depth_of(&stray), Some(MAX_DEPTH + 1));
    }

    #[test]
    fn a_body_is_skipped_only_after_fn() {
        let deep = nested("(", ")", MAX_DEPTH + 5);
        let item = TokenStream::from_str(&format!("fn f() -> u8 {{ {deep} }}")).unwrap();
        assert!(too_deep(&item, Body::Skip).is_none());
        assert!(too_deep(&item, Body::Scan).is_some());
        let not_fn = TokenStream::from_str(&format!("struct S {{ x: {deep} }}")).unwrap();
        assert!(too_deep(&not_fn, Body::Skip).is_some());
    }

    #[test]
    fn the_error_is_coded_and_points_at_the_first_level_too_many() {
        let src = format!("x: {}", nested("Vec<", ">", MAX_DEPTH + 3));
        let err = check(&TokenStream::from_str(&src).unwrap(), Body::Scan).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("[nesting-too-deep] this is nested 65 levels deep"),
            "{err}"
        );
        assert_eq!(err.span().source_text().as_deref(), Some("<"));
    }

    #[test]
    fn very_deep_input_does_not_overflow_the_scan() {
        let src = nested("(", ")", 100_000);
        assert!(depth_of(&src).is_some());
    }
}
