//! Cycles: beans that depend on each other in a loop can never be built.

use super::{Binding, Ctx};
use crate::diag::{Code, Errors};
use std::collections::{BTreeMap, BTreeSet};

impl Ctx<'_> {
    /// The cycle rule: every strongly connected component of more than one bean (Tarjan's
    /// algorithm, [`strongly_connected`]), or a bean that depends on itself, is one
    /// `[dependency-cycle]` naming a shortest closed path ([`cycle_path`]) and every bean on it.
    pub(super) fn check_cycles(&self, bindings: &[Vec<Binding>], errors: &mut Errors) {
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

/// Tarjan's strongly connected components of the graph `edges`, each sorted, in order.
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
