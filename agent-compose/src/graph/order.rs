//! Construction order: a topological order of the resolved graph.

use super::Binding;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The construction-order rule: dependencies first (Kahn's algorithm); among ready beans
/// the one listed first in `compose!` goes first. Every bean is built exactly once,
/// including beans nobody injects.
pub fn construction_order(n: usize, bindings: &[Vec<Binding>]) -> Vec<usize> {
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
