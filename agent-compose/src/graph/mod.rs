//! Phase 3, resolve: selects a bean for every dependency, detects cycles and orders
//! construction. Pure data in, data or every independent error out.
//!
//! Each rule of `docs/architecture.md`, "Resolution", is one named
//! function, and each function's doc names its rule:
//!
//! | rule | function |
//! | --- | --- |
//! | 1-2. candidates of the key, qualifier filter | `select::qualifier_filter` |
//! | 3. none left | `Ctx::no_candidate` (select.rs) |
//! | 4. fallback suppression | `select::suppress_fallbacks` |
//! | 5. primary | `select::prefer_primaries` |
//! | 6. parameter name | `select::match_parameter_name` |
//! | 7. ambiguity | `Ctx::report_ambiguity` (select.rs) |
//! | single selection, rules 3-7 in order | `Ctx::select_single` (select.rs) |
//! | `Vec<P>` order | `Ctx::collection_order` (select.rs) |
//! | `BTreeMap<String, P>` names | `Ctx::check_map_names` (select.rs) |
//! | unique names and aliases | `Ctx::check_names`, `Ctx::name_clash` (names.rs) |
//! | one entry per factory | `Ctx::check_listed_once` (names.rs) |
//! | cycles | `Ctx::check_cycles` (cycles.rs) |
//! | construction order | `order::construction_order` |

pub mod cycles;
pub mod names;
pub mod order;
pub mod select;

use crate::diag::Errors;
use crate::key::{self, ParamShape};
use crate::transport::descriptor::{Descriptor, ParamDesc};
use proc_macro2::Span;
use std::collections::{BTreeSet, HashMap};

/// What one parameter receives. Indices point into the bean list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binding {
    /// One bean.
    Single(usize),
    /// Zero or one bean.
    Optional(Option<usize>),
    /// Every matching bean, ordered by `order`, then name, then list position.
    List(Vec<usize>),
    /// Every matching bean, keyed by canonical name (same order as `List`).
    Map(Vec<usize>),
}

impl Binding {
    /// The beans this binding uses, in injection order.
    pub fn members(&self) -> Vec<usize> {
        match self {
            Binding::Single(i) => vec![*i],
            Binding::Optional(o) => o.iter().copied().collect(),
            Binding::List(v) | Binding::Map(v) => v.clone(),
        }
    }
}

/// A resolved graph.
#[derive(Debug, PartialEq, Eq)]
pub struct Resolution {
    /// Bean indices in construction order (dependencies first; ties by list position).
    pub order: Vec<usize>,
    /// For each bean, one binding per parameter.
    pub bindings: Vec<Vec<Binding>>,
}

/// Resolves `beans` (in `compose!` list order). `current_crate` decides where diagnostics
/// can point: spans of another crate's tokens are not usable, so those errors point at the
/// `compose!` entry instead and name the location as text.
pub fn resolve(beans: &[Descriptor], current_crate: &str) -> Result<Resolution, syn::Error> {
    let mut errors = Errors::default();
    let names: Vec<String> = beans.iter().map(|b| b.name.value()).collect();
    let ctx = Ctx {
        beans,
        rank: select::collection_ranks(beans, &names),
        names,
        current_crate,
        by_tail: std::cell::OnceCell::new(),
    };
    ctx.check_listed_once(&mut errors);
    if !errors.is_empty() {
        // Everything below would repeat the same mistake once per dependency.
        return Err(errors.into_result().unwrap_err());
    }
    let implicit_clashes = ctx.check_names(&mut errors);
    let by_key = candidates_by_key(beans);
    let mut reported_clashes = BTreeSet::new();
    let mut bindings = Vec::with_capacity(beans.len());
    let mut complete = true;
    for (consumer, bean) in beans.iter().enumerate() {
        let mut bean_bindings = Vec::with_capacity(bean.params.len());
        for (index, param) in bean.params.iter().enumerate() {
            let candidates = select::qualifier_filter(beans, &by_key, param);
            if ctx.check_one_type(consumer, index, param, &candidates, &mut errors) {
                complete = false;
                continue;
            }
            let binding = match param.shape {
                ParamShape::Single | ParamShape::Optional => {
                    ctx.select_single(consumer, index, param, candidates, &by_key, &mut errors)
                }
                ParamShape::List => Some(Binding::List(ctx.collection_order(candidates))),
                ParamShape::Map => {
                    let members = ctx.collection_order(candidates);
                    ctx.check_map_names(
                        consumer,
                        index,
                        param,
                        &members,
                        &mut reported_clashes,
                        &mut errors,
                    );
                    Some(Binding::Map(members))
                }
            };
            match binding {
                Some(b) => bean_bindings.push(b),
                None => complete = false,
            }
        }
        bindings.push(bean_bindings);
    }
    for (a, b) in implicit_clashes {
        if !reported_clashes.contains(&(a, b)) {
            ctx.name_clash(a, b, &mut errors);
        }
    }
    if complete {
        ctx.check_cycles(&bindings, &mut errors);
    }
    errors.into_result()?;
    let order = order::construction_order(beans.len(), &bindings);
    Ok(Resolution { order, bindings })
}

/// The candidates of every key a parameter asks for: the beans whose key is
/// [`key::compatible`] with it (the same key, or one written with longer or shorter paths).
/// Beans are indexed by [`key::tail`] first, so this is one lookup per distinct key.
fn candidates_by_key(beans: &[Descriptor]) -> HashMap<&str, Vec<usize>> {
    let mut by_tail: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, b) in beans.iter().enumerate() {
        by_tail.entry(key::tail(&b.key)).or_default().push(i);
    }
    let mut by_key: HashMap<&str, Vec<usize>> = HashMap::new();
    let asked = beans.iter().flat_map(|b| &b.params).map(|p| p.key.as_str());
    for wanted in asked {
        if by_key.contains_key(wanted) {
            continue;
        }
        let found = by_tail
            .get(&key::tail(wanted))
            .map(|c| {
                c.iter()
                    .copied()
                    .filter(|&b| key::compatible(&beans[b].key, wanted))
                    .collect()
            })
            .unwrap_or_default();
        by_key.insert(wanted, found);
    }
    by_key
}

/// What every rule reads: the beans, their names and where diagnostics may point.
struct Ctx<'a> {
    beans: &'a [Descriptor],
    /// Each bean's canonical name, read once: `LitStr::value` re-parses the literal.
    names: Vec<String>,
    /// Each bean's place in collection order, so ordering a collection's members compares
    /// numbers, not names (see `Ctx::collection_order`).
    rank: Vec<usize>,
    current_crate: &'a str,
    /// The beans of each key reduced to its last path segments (see `key::tail`),
    /// built at the first missing dependency, so its "at another path" note is a lookup
    /// instead of a scan of every bean.
    by_tail: std::cell::OnceCell<HashMap<String, Vec<usize>>>,
}

impl Ctx<'_> {
    fn is_local(&self, bean: usize) -> bool {
        self.beans[bean].krate == self.current_crate
    }

    /// The span of the `compose!` entry that brought `bean` in.
    fn entry_span(&self, bean: usize) -> Span {
        self.beans[bean]
            .path
            .clone()
            .into_iter()
            .next()
            .map_or_else(Span::call_site, |t| t.span())
    }

    /// The smallest user token for a parameter: its qualifier, else its name, else its type.
    fn param_span(&self, bean: usize, param: &ParamDesc) -> Span {
        if !self.is_local(bean) {
            return self.entry_span(bean);
        }
        if let Some(q) = param.qualifiers.first() {
            return q.span();
        }
        if let Some(n) = &param.name {
            return n.span();
        }
        param
            .ty
            .clone()
            .into_iter()
            .next()
            .map_or_else(|| self.entry_span(bean), |t| t.span())
    }

    fn name_span(&self, bean: usize) -> Span {
        if self.is_local(bean) {
            self.beans[bean].name.span()
        } else {
            self.entry_span(bean)
        }
    }

    fn fn_span(&self, bean: usize) -> Span {
        if self.is_local(bean) {
            self.beans[bean].fn_ident.span()
        } else {
            self.entry_span(bean)
        }
    }

    /// `` `name` (path at file:line:col) ``
    fn describe(&self, bean: usize) -> String {
        let b = &self.beans[bean];
        format!("`{}` ({} at {})", b.name.value(), b.label(), b.location)
    }

    fn describe_param(&self, consumer: usize, index: usize, param: &ParamDesc) -> String {
        let name = param
            .name
            .as_ref()
            .map_or_else(|| format!("#{index}"), |n| format!("`{n}`"));
        let mut s = format!(
            "bean {} needs {} `{}` for parameter {}",
            self.describe(consumer),
            match param.shape {
                ParamShape::Single => "one",
                ParamShape::Optional => "at most one",
                ParamShape::List | ParamShape::Map => "every",
            },
            crate::key::render(&param.bean_ty),
            name
        );
        if !param.qualifiers.is_empty() {
            let qs: Vec<String> = param
                .qualifiers
                .iter()
                .map(|q| format!("\"{}\"", q.value()))
                .collect();
            s.push_str(&format!(" qualified [{}]", qs.join(", ")));
        }
        s
    }

    fn list(&self, beans: &[usize]) -> String {
        beans
            .iter()
            .map(|&b| format!("\n  - {}", self.describe(b)))
            .collect()
    }

    /// Like `list`, with each bean's `primary`/`fallback` flags, which decide selection.
    fn list_flagged(&self, beans: &[usize]) -> String {
        beans
            .iter()
            .map(|&b| {
                let bean = &self.beans[b];
                let flag = match (bean.primary, bean.fallback) {
                    (true, _) => " [primary]",
                    (_, true) => " [fallback]",
                    _ => "",
                };
                format!("\n  - {}{flag}", self.describe(b))
            })
            .collect()
    }
}

/// The stable codes of every error in `err`, in order; for tests (see `__testing`).
#[doc(hidden)]
pub fn error_codes(err: &syn::Error) -> Vec<String> {
    err.clone()
        .into_iter()
        .map(|e| {
            e.to_string()
                .split(']')
                .next()
                .unwrap_or_default()
                .trim_start_matches('[')
                .to_owned()
        })
        .collect()
}
