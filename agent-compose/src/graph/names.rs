//! Unique names: a name or alias names one bean of a graph, and each bean has its own
//! components field.

use super::Ctx;
use crate::diag::{Code, Errors};
use crate::ident;
use crate::transport::descriptor::Descriptor;
use std::collections::{BTreeMap, HashMap};

impl Ctx<'_> {
    /// One factory, one entry: the same factory listed twice (directly and through a set,
    /// or through two sets) is one `[duplicate-bean-name]`, at the second entry.
    pub(super) fn check_listed_once(&self, errors: &mut Errors) {
        let mut first: HashMap<(&str, &str), usize> = HashMap::new();
        for (i, b) in self.beans.iter().enumerate() {
            if let Some(&earlier) = first.get(&(b.krate.as_str(), b.location.as_str())) {
                errors.at(
                    Code::DuplicateBeanName,
                    self.entry_span(i),
                    format!(
                        "factory `{}` is listed twice in `compose!`: as `{}` and as `{}`; list it once (bean sets include their members)\nnote: first listed at {}",
                        b.fn_ident,
                        self.beans[earlier].label(),
                        b.label(),
                        crate::location::of(self.entry_span(earlier))
                    ),
                );
            } else {
                first.insert((b.krate.as_str(), b.location.as_str()), i);
            }
        }
    }

    /// Rejects a name or alias claimed twice when either claim is explicit, and two names
    /// that become one components field. Returns clashes of two implicit names (both taken
    /// from function names), reported later by the most specific check that trips on them.
    pub(super) fn check_names(&self, errors: &mut Errors) -> Vec<(usize, usize)> {
        let explicit =
            |b: &Descriptor| b.name.value() != b.fn_ident.to_string().trim_start_matches("r#");
        let mut claims: BTreeMap<String, (usize, bool)> = BTreeMap::new();
        let mut implicit = Vec::new();
        for (i, b) in self.beans.iter().enumerate() {
            let own = std::iter::once((b.name.clone(), explicit(b) || !b.aliases.is_empty()))
                .chain(b.aliases.iter().map(|a| (a.clone(), true)));
            for (lit, is_explicit) in own {
                let word = lit.value();
                match claims.get(&word) {
                    Some(&(earlier, earlier_explicit)) if earlier != i => {
                        if is_explicit || earlier_explicit {
                            errors.at(
                                Code::DuplicateBeanName,
                                if self.is_local(i) { lit.span() } else { self.entry_span(i) },
                                format!(
                                    "`{word}` names two beans: {} and {}; names and aliases must be unique in one graph, so rename one with `name = \"...\"`",
                                    self.describe(earlier),
                                    self.describe(i)
                                ),
                            );
                        } else {
                            implicit.push((earlier, i));
                        }
                    }
                    Some(_) => {}
                    None => {
                        claims.insert(word, (i, is_explicit));
                    }
                }
            }
        }
        let mut fields: BTreeMap<String, usize> = BTreeMap::new();
        for (i, b) in self.beans.iter().enumerate() {
            let field = ident::field_name(&b.name.value());
            match fields.get(&field) {
                Some(&earlier) if self.beans[earlier].name.value() != b.name.value() => errors.at(
                    Code::DuplicateBeanName,
                    self.name_span(i),
                    format!(
                        "beans {} and {} both become the components field `{field}`; rename one",
                        self.describe(earlier),
                        self.describe(i)
                    ),
                ),
                Some(_) => {}
                None => {
                    fields.insert(field, i);
                }
            }
        }
        implicit
    }

    /// Two default names (from two functions of one name) that no more specific check
    /// reported: `[duplicate-bean-name]` at the second function.
    pub(super) fn name_clash(&self, a: usize, b: usize, errors: &mut Errors) {
        errors.at(
            Code::DuplicateBeanName,
            self.fn_span(b),
            format!(
                "two beans take the default name `{}` from their function: {} and {}; bean names must be unique (they name the components and override fields), so give one `name = \"...\"`",
                self.beans[a].name.value(),
                self.describe(a),
                self.describe(b)
            ),
        );
    }
}
