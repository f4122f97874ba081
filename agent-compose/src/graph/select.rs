//! Selection: which beans a parameter receives. Single selection applies rules 1-7 of
//! docs/architecture.md ("Resolution") in order, one function per rule; collections apply the order rule
//! and, for maps, the name rule.

use super::{Binding, Ctx};
use crate::diag::{Code, Errors};
use crate::ident;
use crate::key::{self, ParamShape};
use crate::transport::descriptor::{Descriptor, ParamDesc};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use syn::LitStr;

/// Rules 1 and 2, candidates and qualifier filter: the beans whose key is the parameter's
/// (`by_key`), keeping those that every qualifier on the parameter selects (by name, alias or
/// qualifier).
pub fn qualifier_filter(
    beans: &[Descriptor],
    by_key: &HashMap<&str, Vec<usize>>,
    param: &ParamDesc,
) -> Vec<usize> {
    // Read once: `LitStr::value` re-parses the literal.
    let wanted: Vec<String> = param.qualifiers.iter().map(LitStr::value).collect();
    by_key
        .get(param.key.as_str())
        .map(|c| {
            c.iter()
                .copied()
                .filter(|&c| wanted.iter().all(|q| beans[c].matches_qualifier(q)))
                .collect()
        })
        .unwrap_or_default()
}

/// Rule 4, fallback suppression: if any non-fallback candidate remains, drop every fallback.
pub fn suppress_fallbacks(beans: &[Descriptor], mut candidates: Vec<usize>) -> Vec<usize> {
    if candidates.iter().any(|&c| !beans[c].fallback) {
        candidates.retain(|&c| !beans[c].fallback);
    }
    candidates
}

/// Rule 5, primary: if several candidates remain and some are primary, keep the primaries.
pub fn prefer_primaries(beans: &[Descriptor], mut candidates: Vec<usize>) -> Vec<usize> {
    if candidates.len() > 1 && candidates.iter().any(|&c| beans[c].primary) {
        candidates.retain(|&c| beans[c].primary);
    }
    candidates
}

/// Rule 6, parameter name: if several candidates remain, keep those whose name or an alias
/// equals the parameter's name (also after `-` and `.` became `_`, since parameters are Rust
/// identifiers); if none does, keep all.
pub fn match_parameter_name(
    beans: &[Descriptor],
    param: &ParamDesc,
    candidates: Vec<usize>,
) -> Vec<usize> {
    let Some(name) = &param.name else {
        return candidates;
    };
    if candidates.len() < 2 {
        return candidates;
    }
    let word = name.to_string();
    let word = word.trim_start_matches("r#");
    let named: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&c| {
            let b = &beans[c];
            b.is_called(word)
                || std::iter::once(&b.name)
                    .chain(&b.aliases)
                    .any(|n| ident::field_name(&n.value()) == word)
        })
        .collect();
    if named.is_empty() { candidates } else { named }
}

impl Ctx<'_> {
    /// Rule 2a, one type: the candidates' keys must be able to name one type. Keys written
    /// with longer or shorter paths (`Config`, `config::Config`) are grouped; keys whose
    /// paths tell them apart (`a::Config`, `b::Config`) but that both fit the parameter's
    /// shorter path are two types the tokens cannot decide between: `[ambiguous-type]`.
    /// Returns whether it reported.
    pub(super) fn check_one_type(
        &self,
        consumer: usize,
        index: usize,
        param: &ParamDesc,
        candidates: &[usize],
        errors: &mut Errors,
    ) -> bool {
        let mut keys: Vec<&str> = candidates
            .iter()
            .map(|&c| self.beans[c].key.as_str())
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let clash = keys.iter().enumerate().find_map(|(i, a)| {
            keys[i + 1..]
                .iter()
                .find(|b| !key::compatible(a, b))
                .map(|b| (*a, *b))
        });
        let Some((a, b)) = clash else {
            return false;
        };
        let of = |k: &str| -> Vec<usize> {
            candidates
                .iter()
                .copied()
                .filter(|&c| self.beans[c].key == k)
                .collect()
        };
        errors.at(
            Code::AmbiguousType,
            self.param_span(consumer, param),
            format!(
                "{}, and beans of two types fit it: `{a}` and `{b}` are told apart by their paths, but `{}` could be either\n`{a}`:{}\n`{b}`:{}\nhelp: write the parameter's type with the path of the one you mean (e.g. `{a}`), or add `#[qualifier(\"name\")]` to choose a bean",
                self.describe_param(consumer, index, param),
                param.key,
                self.list(&of(a)),
                self.list(&of(b)),
            ),
        );
        true
    }

    /// Single selection of a `P` or `Option<P>` parameter from the candidates left by
    /// [`qualifier_filter`] (rules 1-2): rule 3 ([`Ctx::no_candidate`]), rule 4
    /// ([`suppress_fallbacks`]), rule 5 ([`prefer_primaries`]), rule 6
    /// ([`match_parameter_name`]) and rule 7 ([`Ctx::report_ambiguity`]), in that order.
    pub(super) fn select_single(
        &self,
        consumer: usize,
        index: usize,
        param: &ParamDesc,
        candidates: Vec<usize>,
        by_key: &HashMap<&str, Vec<usize>>,
        errors: &mut Errors,
    ) -> Option<Binding> {
        let optional = param.shape == ParamShape::Optional;
        if candidates.is_empty() {
            return self.no_candidate(consumer, index, param, by_key, errors);
        }
        let before = candidates.clone();
        let remaining = suppress_fallbacks(self.beans, candidates);
        let remaining = prefer_primaries(self.beans, remaining);
        let remaining = match_parameter_name(self.beans, param, remaining);
        if let [chosen] = remaining[..] {
            return Some(if optional {
                Binding::Optional(Some(chosen))
            } else {
                Binding::Single(chosen)
            });
        }
        self.report_ambiguity(consumer, index, param, &before, &remaining, errors);
        None
    }

    /// Rule 3, none left: `None` for an `Option<P>`, else `[missing-dependency]`, listing
    /// beans of the type that the qualifiers set aside and beans of a type written
    /// differently.
    fn no_candidate(
        &self,
        consumer: usize,
        index: usize,
        param: &ParamDesc,
        by_key: &HashMap<&str, Vec<usize>>,
        errors: &mut Errors,
    ) -> Option<Binding> {
        if param.shape == ParamShape::Optional {
            return Some(Binding::Optional(None));
        }
        let mut message = format!(
            "{}, but no bean of that type",
            self.describe_param(consumer, index, param)
        );
        message.push_str(if param.qualifiers.is_empty() {
            " exists"
        } else {
            " matches the qualifiers"
        });
        let same_type = by_key.get(param.key.as_str()).cloned().unwrap_or_default();
        if !same_type.is_empty() {
            message.push_str(&format!(
                "\nbeans of this type whose name, aliases and qualifiers do not match:{}",
                self.list(&same_type)
            ));
        }
        let by_tail = self.by_tail.get_or_init(|| {
            let mut by_tail: HashMap<String, Vec<usize>> = HashMap::new();
            for (b, bean) in self.beans.iter().enumerate() {
                by_tail.entry(key::tail(&bean.key)).or_default().push(b);
            }
            by_tail
        });
        let similar: Vec<usize> = by_tail
            .get(&key::tail(&param.key))
            .into_iter()
            .flatten()
            .copied()
            .filter(|&b| !key::compatible(&self.beans[b].key, &param.key))
            .collect();
        if !similar.is_empty() {
            message.push_str(&format!(
                "\nnote: these beans produce a type of the same name at another path ({}); paths that differ in more than how much of them is written name different types, so write the path of the type you mean:{}",
                similar.iter().map(|&b| format!("`{}`", self.beans[b].key)).collect::<Vec<_>>().join(", "),
                self.list(&similar)
            ));
        }
        message.push_str("\nhelp: add a factory for this type to `compose!`, or take `Option<_>` if it may be absent");
        errors.at(
            Code::MissingDependency,
            self.param_span(consumer, param),
            message,
        );
        None
    }

    /// Rule 7, not exactly one: `[ambiguous-dependency]`, listing every remaining candidate
    /// and those that rules 4-6 set aside.
    fn report_ambiguity(
        &self,
        consumer: usize,
        index: usize,
        param: &ParamDesc,
        before: &[usize],
        remaining: &[usize],
        errors: &mut Errors,
    ) {
        let dropped: Vec<usize> = before
            .iter()
            .copied()
            .filter(|c| !remaining.contains(c))
            .collect();
        let mut message = format!(
            "{}, but {} candidates remain after qualifier, fallback, primary and parameter-name selection:{}",
            self.describe_param(consumer, index, param),
            remaining.len(),
            self.list_flagged(remaining)
        );
        if !dropped.is_empty() {
            message.push_str(&format!(
                "\nset aside as fallbacks or non-primaries:{}",
                self.list_flagged(&dropped)
            ));
        }
        let help = if remaining.iter().all(|&c| self.beans[c].primary) {
            "help: keep `primary` on one of them, add `#[qualifier(\"name\")]` to the parameter, or name the parameter after one candidate"
        } else if remaining.iter().all(|&c| self.beans[c].fallback) {
            "help: only fallbacks are left: add a normal bean of this type, mark one fallback `#[primary]`, or add `#[qualifier(\"name\")]` to the parameter"
        } else {
            "help: mark one candidate `#[primary]`, add `#[qualifier(\"name\")]` to the parameter, or name the parameter after one candidate"
        };
        message.push('\n');
        message.push_str(help);
        errors.at(
            Code::AmbiguousDependency,
            self.param_span(consumer, param),
            message,
        );
    }

    /// The order of a `Vec<P>` (and of a map's members): `order` ascending, then canonical
    /// name, then position in the `compose!` list. Fallbacks are members like any bean.
    pub(super) fn collection_order(&self, mut members: Vec<usize>) -> Vec<usize> {
        members.sort_unstable_by_key(|&m| self.rank[m]);
        members
    }

    /// The map rule: a `BTreeMap<String, P>` is keyed by canonical name (aliases are never
    /// keys), so two members of one name are `[duplicate-collection-name]`. Records the
    /// pairs reported, so the name check does not report them again.
    pub(super) fn check_map_names(
        &self,
        consumer: usize,
        index: usize,
        param: &ParamDesc,
        members: &[usize],
        reported: &mut BTreeSet<(usize, usize)>,
        errors: &mut Errors,
    ) {
        let mut by_name: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for &m in members {
            by_name.entry(&self.names[m]).or_default().push(m);
        }
        for (name, same) in by_name {
            if same.len() < 2 {
                continue;
            }
            for pair in same.windows(2) {
                reported.insert((pair[0].min(pair[1]), pair[0].max(pair[1])));
            }
            // Reported at the second member's name, with a note naming the first.
            errors.at(
                Code::DuplicateCollectionName,
                self.name_span(same[1]),
                format!(
                    "{}, keyed by bean name, but `{name}` names {} of them:{}\nnote: the first with that name is {}\nhelp: give each a distinct `name = \"...\"`",
                    self.describe_param(consumer, index, param),
                    same.len(),
                    self.list(&same),
                    self.describe(same[0])
                ),
            );
        }
    }
}

/// Every bean's place in the collection order (`order`, then canonical name, then list
/// position), computed once: the order is total, so a collection's members sorted by it are
/// in exactly that order.
pub(super) fn collection_ranks(beans: &[Descriptor], names: &[String]) -> Vec<usize> {
    let mut all: Vec<usize> = (0..beans.len()).collect();
    all.sort_by(|&a, &b| (beans[a].order, &names[a], a).cmp(&(beans[b].order, &names[b], b)));
    let mut rank = vec![0; beans.len()];
    for (place, bean) in all.into_iter().enumerate() {
        rank[bean] = place;
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::descriptor::tests::sample;
    use proc_macro2::Span;
    use syn::{Ident, LitStr};

    /// Beans of one type named `names`, none primary or fallback.
    fn beans(names: &[&str]) -> Vec<Descriptor> {
        names
            .iter()
            .map(|name| {
                let mut b = sample();
                b.name = LitStr::new(name, Span::call_site());
                b.aliases.clear();
                b.qualifiers.clear();
                b.fallback = false;
                b
            })
            .collect()
    }

    fn param(name: &str) -> ParamDesc {
        let mut p = sample().params.remove(0);
        p.name = Some(Ident::new(name, Span::call_site()));
        p.qualifiers.clear();
        p
    }

    #[test]
    fn rule_4_drops_fallbacks_only_when_another_remains() {
        let mut b = beans(&["a", "b"]);
        b[0].fallback = true;
        assert_eq!(suppress_fallbacks(&b, vec![0, 1]), [1]);
        assert_eq!(suppress_fallbacks(&b, vec![0]), [0]);
    }

    #[test]
    fn rule_5_keeps_primaries_only_among_several() {
        let mut b = beans(&["a", "b", "c"]);
        b[2].primary = true;
        assert_eq!(prefer_primaries(&b, vec![0, 1, 2]), [2]);
        assert_eq!(prefer_primaries(&b, vec![0, 1]), [0, 1]);
    }

    #[test]
    fn rule_6_matches_the_parameter_name_or_keeps_all() {
        let b = beans(&["fallback-only", "other"]);
        assert_eq!(
            match_parameter_name(&b, &param("fallback_only"), vec![0, 1]),
            [0]
        );
        assert_eq!(match_parameter_name(&b, &param("none"), vec![0, 1]), [0, 1]);
    }

    #[test]
    fn rules_1_and_2_filter_by_every_qualifier() {
        let mut b = beans(&["a", "b"]);
        b[1].qualifiers = vec![LitStr::new("fs", Span::call_site())];
        let key = b[0].key.clone();
        let by_key = HashMap::from([(key.as_str(), vec![0, 1])]);
        let mut p = param("x");
        p.key = key.clone();
        assert_eq!(qualifier_filter(&b, &by_key, &p), [0, 1]);
        p.qualifiers = vec![LitStr::new("fs", Span::call_site())];
        assert_eq!(qualifier_filter(&b, &by_key, &p), [1]);
        p.qualifiers.push(LitStr::new("a", Span::call_site()));
        assert!(qualifier_filter(&b, &by_key, &p).is_empty());
    }
}
