//! The resolver: selects a bean for every dependency, detects cycles and orders
//! construction. Pure data in, data or every independent error out.

use crate::diag::{Code, Errors};
use crate::ident;
use crate::key::ParamShape;
use crate::transport::descriptor::{Descriptor, ParamDesc};
use proc_macro2::Span;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};

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
    let ctx = Ctx {
        beans,
        names: beans.iter().map(|b| b.name.value()).collect(),
        current_crate,
    };
    ctx.check_listed_once(&mut errors);
    if !errors.is_empty() {
        // Everything below would repeat the same mistake once per dependency.
        return Err(errors.into_result().unwrap_err());
    }
    let implicit_clashes = ctx.check_names(&mut errors);
    let mut by_key: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, b) in beans.iter().enumerate() {
        by_key.entry(b.key.as_str()).or_default().push(i);
    }
    let mut reported_clashes = BTreeSet::new();
    let mut bindings = Vec::with_capacity(beans.len());
    let mut complete = true;
    for (consumer, bean) in beans.iter().enumerate() {
        let mut bean_bindings = Vec::with_capacity(bean.params.len());
        for (index, param) in bean.params.iter().enumerate() {
            let candidates: Vec<usize> = by_key
                .get(param.key.as_str())
                .map(|c| {
                    c.iter()
                        .copied()
                        .filter(|&c| {
                            param
                                .qualifiers
                                .iter()
                                .all(|q| beans[c].matches_qualifier(&q.value()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let binding = match param.shape {
                ParamShape::Single | ParamShape::Optional => {
                    ctx.select_single(consumer, index, param, candidates, &by_key, &mut errors)
                }
                ParamShape::List => Some(Binding::List(ctx.ordered(candidates))),
                ParamShape::Map => {
                    let members = ctx.ordered(candidates);
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
    let order = construction_order(beans.len(), &bindings);
    Ok(Resolution { order, bindings })
}

struct Ctx<'a> {
    beans: &'a [Descriptor],
    /// Each bean's canonical name, read once: `LitStr::value` re-parses the literal.
    names: Vec<String>,
    current_crate: &'a str,
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

    fn check_listed_once(&self, errors: &mut Errors) {
        let mut first: HashMap<(&str, &str), usize> = HashMap::new();
        for (i, b) in self.beans.iter().enumerate() {
            if let Some(&earlier) = first.get(&(b.krate.as_str(), b.location.as_str())) {
                errors.at(
                    Code::DuplicateBeanName,
                    self.entry_span(i),
                    format!(
                        "factory `{}` is listed twice in `compose!`: as `{}` and as `{}`; list it once (bean sets include their members)",
                        b.fn_ident,
                        self.beans[earlier].label(),
                        b.label()
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
    fn check_names(&self, errors: &mut Errors) -> Vec<(usize, usize)> {
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

    fn name_clash(&self, a: usize, b: usize, errors: &mut Errors) {
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

    /// Steps 3-7 of single selection.
    fn select_single(
        &self,
        consumer: usize,
        index: usize,
        param: &ParamDesc,
        mut remaining: Vec<usize>,
        by_key: &HashMap<&str, Vec<usize>>,
        errors: &mut Errors,
    ) -> Option<Binding> {
        let optional = param.shape == ParamShape::Optional;
        if remaining.is_empty() {
            if optional {
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
            let similar: Vec<usize> = (0..self.beans.len())
                .filter(|&b| {
                    self.beans[b].key != param.key
                        && tail_key(&self.beans[b].key) == tail_key(&param.key)
                })
                .collect();
            if !similar.is_empty() {
                message.push_str(&format!(
                    "\nnote: these beans produce a type written differently ({}); types are matched as written, so spell the type the same way in both places:{}",
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
            return None;
        }
        let before = remaining.clone();
        if remaining.iter().any(|&c| !self.beans[c].fallback) {
            remaining.retain(|&c| !self.beans[c].fallback);
        }
        if remaining.len() > 1 && remaining.iter().any(|&c| self.beans[c].primary) {
            remaining.retain(|&c| self.beans[c].primary);
        }
        if remaining.len() > 1
            && let Some(name) = &param.name
        {
            let word = name.to_string();
            let word = word.trim_start_matches("r#");
            let named: Vec<usize> = remaining
                .iter()
                .copied()
                .filter(|&c| {
                    let b = &self.beans[c];
                    b.is_called(word)
                        || std::iter::once(&b.name)
                            .chain(&b.aliases)
                            .any(|n| ident::field_name(&n.value()) == word)
                })
                .collect();
            if !named.is_empty() {
                remaining = named;
            }
        }
        if remaining.len() == 1 {
            let chosen = remaining[0];
            return Some(if optional {
                Binding::Optional(Some(chosen))
            } else {
                Binding::Single(chosen)
            });
        }
        let dropped: Vec<usize> = before
            .iter()
            .copied()
            .filter(|c| !remaining.contains(c))
            .collect();
        let mut message = format!(
            "{}, but {} candidates remain after qualifier, fallback, primary and parameter-name selection:{}",
            self.describe_param(consumer, index, param),
            remaining.len(),
            self.list_flagged(&remaining)
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
        None
    }

    fn ordered(&self, mut members: Vec<usize>) -> Vec<usize> {
        members.sort_by(|&a, &b| {
            let (x, y) = (&self.beans[a], &self.beans[b]);
            (x.order, &self.names[a], a).cmp(&(y.order, &self.names[b], b))
        });
        members
    }

    fn check_map_names(
        &self,
        consumer: usize,
        index: usize,
        param: &ParamDesc,
        members: &[usize],
        reported: &mut BTreeSet<(usize, usize)>,
        errors: &mut Errors,
    ) {
        let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for &m in members {
            by_name.entry(self.names[m].clone()).or_default().push(m);
        }
        for (name, same) in by_name {
            if same.len() < 2 {
                continue;
            }
            for pair in same.windows(2) {
                reported.insert((pair[0].min(pair[1]), pair[0].max(pair[1])));
            }
            errors.at(
                Code::DuplicateCollectionName,
                self.param_span(consumer, param),
                format!(
                    "{}, keyed by bean name, but `{name}` names {} of them:{}\nhelp: give each a distinct `name = \"...\"`",
                    self.describe_param(consumer, index, param),
                    same.len(),
                    self.list(&same)
                ),
            );
        }
    }

    /// Tarjan's strongly connected components; every component with more than one bean,
    /// or a bean that depends on itself, is a cycle.
    fn check_cycles(&self, bindings: &[Vec<Binding>], errors: &mut Errors) {
        let edges: Vec<Vec<usize>> = bindings
            .iter()
            .map(|bs| {
                let mut deps: Vec<usize> = bs.iter().flat_map(Binding::members).collect();
                deps.sort_unstable();
                deps.dedup();
                deps
            })
            .collect();
        for component in strongly_connected(&edges) {
            let start = *component.iter().min().expect("components are non-empty");
            let self_loop = edges[start].contains(&start);
            if component.len() < 2 && !self_loop {
                continue;
            }
            let path = cycle_path(&edges, &component, start);
            // Each step names the parameter that makes the edge.
            let via = |from: usize, to: usize| {
                self.beans[from]
                    .params
                    .iter()
                    .zip(&bindings[from])
                    .find(|(_, b)| b.members().contains(&to))
                    .map(|(p, _)| p)
            };
            let mut steps = Vec::new();
            for pair in path.windows(2) {
                let name = self.beans[pair[0]].name.value();
                steps.push(match via(pair[0], pair[1]).and_then(|p| p.name.as_ref()) {
                    Some(param) => format!("`{name}` (parameter `{param}`)"),
                    None => format!("`{name}`"),
                });
            }
            steps.push(format!("`{}`", self.beans[start].name.value()));
            let span = match (
                self.is_local(start),
                path.get(1).and_then(|&next| via(start, next)),
            ) {
                (true, Some(param)) => self.param_span(start, param),
                _ => self.fn_span(start),
            };
            errors.at(
                Code::DependencyCycle,
                span,
                format!(
                    "beans depend on each other in a loop: {}\nbeans in the loop:{}\nhelp: every bean is built after the beans it takes, so a loop can never be built; move what they share into a separate bean, or drop one of these parameters",
                    steps.join(" -> "),
                    self.list(&path[..path.len() - 1])
                ),
            );
        }
    }
}

/// A key with every path reduced to its last segment, used only for "did you mean" hints.
fn tail_key(key: &str) -> String {
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

fn strongly_connected(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    // Iterative, so a deep graph cannot overflow the macro's stack.
    fn visit(s: &mut State<'_>, root: usize) {
        let mut work = vec![(root, 0usize)];
        s.index[root] = Some(s.next);
        s.low[root] = s.next;
        s.next += 1;
        s.stack.push(root);
        s.on_stack[root] = true;
        while let Some(&mut (v, ref mut child)) = work.last_mut() {
            if let Some(&w) = s.edges[v].get(*child) {
                *child += 1;
                match s.index[w] {
                    None => {
                        s.index[w] = Some(s.next);
                        s.low[w] = s.next;
                        s.next += 1;
                        s.stack.push(w);
                        s.on_stack[w] = true;
                        work.push((w, 0));
                    }
                    Some(wi) if s.on_stack[w] => s.low[v] = s.low[v].min(wi),
                    Some(_) => {}
                }
            } else {
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    s.low[parent] = s.low[parent].min(s.low[v]);
                }
                if Some(s.low[v]) == s.index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = s.stack.pop() {
                        s.on_stack[w] = false;
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    component.sort_unstable();
                    s.out.push(component);
                }
            }
        }
    }
    let n = edges.len();
    let mut s = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// A closed path `start -> ... -> start` inside one component (breadth-first, so shortest).
fn cycle_path(edges: &[Vec<usize>], component: &[usize], start: usize) -> Vec<usize> {
    let inside: BTreeSet<usize> = component.iter().copied().collect();
    let mut previous: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &edges[v] {
            if w == start {
                let mut back = vec![v];
                let mut at = v;
                while at != start {
                    at = previous[&at];
                    back.push(at);
                }
                back.reverse();
                back.push(start);
                return back;
            }
            if inside.contains(&w) && !previous.contains_key(&w) && w != start {
                previous.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    vec![start, start]
}

/// Kahn's algorithm; among ready beans the one listed first in `compose!` goes first.
fn construction_order(n: usize, bindings: &[Vec<Binding>]) -> Vec<usize> {
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut waiting = vec![0usize; n];
    for (consumer, bs) in bindings.iter().enumerate() {
        let mut deps: Vec<usize> = bs.iter().flat_map(Binding::members).collect();
        deps.sort_unstable();
        deps.dedup();
        waiting[consumer] = deps.len();
        for d in deps {
            dependents[d].push(consumer);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| waiting[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &d in &dependents[i] {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.push(Reverse(d));
            }
        }
    }
    order
}

/// Used by tests and the fuzz corpus: resolution never panics, whatever the descriptors say.
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
