//! Property tests of the generation and lease rules ([`agent_mcp::generation::Registry`]):
//! random interleavings of list changes (new generations), restarts (new launches), leases,
//! resumes and releases.

use std::collections::{BTreeMap, BTreeSet};

use agent_mcp::generation::{MAX_RETAINED_GENERATIONS, Registry, plan_id};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// A list change: a new generation with the same launches.
    ListChanged(u64),
    /// A restart of server `0` or `1`: a new launch, then a new generation.
    Restart(usize, u64),
    /// A new run leases the current generation.
    LeaseCurrent,
    /// A resume leases the generation of held lease `i` (modulo), if retained.
    Resume(usize),
    /// Releases held lease `i` (modulo).
    Release(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => any::<u64>().prop_map(Op::ListChanged),
        1 => (0..2usize, any::<u64>()).prop_map(|(s, d)| Op::Restart(s, d)),
        3 => Just(Op::LeaseCurrent),
        1 => any::<usize>().prop_map(Op::Resume),
        3 => any::<usize>().prop_map(Op::Release),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn leases_see_frozen_generations_ids_never_repeat_and_launches_retire_exactly_once(ops in proptest::collection::vec(op(), 1..120)) {
        let epoch = "e".repeat(64);
        let mut registry = Registry::new();
        // What each generation froze: its definitions (a stand-in digest) and launches.
        let mut frozen: BTreeMap<u64, (u64, Vec<u64>)> = BTreeMap::new();
        let mut ids = BTreeSet::new();
        let mut launches = vec![1u64, 2];
        let mut next_launch = 3;
        let mut retired: Vec<u64> = Vec::new();
        // Held leases: (sequence, the definitions seen when leased).
        let mut held: Vec<(u64, u64)> = Vec::new();

        let publish = |registry: &mut Registry, frozen: &mut BTreeMap<u64, (u64, Vec<u64>)>, ids: &mut BTreeSet<String>, retired: &mut Vec<u64>, launches: &[u64], defs: u64| -> Result<(), TestCaseError> {
            if !registry.has_room() {
                return Ok(());
            }
            let sequence = registry.next_sequence();
            prop_assert!(frozen.insert(sequence, (defs, launches.to_vec())).is_none(), "sequence {sequence} reused");
            let id = plan_id(&epoch, sequence, launches, &[]);
            prop_assert!(ids.insert(id.to_string()), "plan id {id} reused");
            retired.extend(registry.publish(sequence, launches.to_vec()));
            Ok(())
        };
        publish(&mut registry, &mut frozen, &mut ids, &mut retired, &launches, 0)?;

        for op in ops {
            match op {
                Op::ListChanged(defs) => publish(&mut registry, &mut frozen, &mut ids, &mut retired, &launches, defs)?,
                Op::Restart(server, defs) => {
                    launches[server] = next_launch;
                    next_launch += 1;
                    publish(&mut registry, &mut frozen, &mut ids, &mut retired, &launches, defs)?;
                }
                Op::LeaseCurrent => {
                    if let Some(sequence) = registry.lease_current() {
                        prop_assert_eq!(Some(sequence), registry.current());
                        held.push((sequence, frozen[&sequence].0));
                    }
                }
                Op::Resume(i) if !held.is_empty() => {
                    let (sequence, _) = held[i % held.len()];
                    prop_assert!(registry.lease(sequence), "a held generation is retained");
                    held.push((sequence, frozen[&sequence].0));
                }
                Op::Resume(_) => {}
                Op::Release(i) if !held.is_empty() => {
                    let (sequence, seen) = held.remove(i % held.len());
                    prop_assert_eq!(frozen[&sequence].0, seen, "a lease never sees a changed definition");
                    retired.extend(registry.release(sequence));
                    let still_held = held.iter().any(|(s, _)| *s == sequence);
                    if Some(sequence) != registry.current() && !still_held {
                        prop_assert!(!registry.lease(sequence), "a drained generation cannot be leased again");
                    }
                }
                Op::Release(_) => {}
            }
            // Invariants after every step.
            let retained: BTreeSet<u64> = held.iter().map(|(s, _)| *s).chain(registry.current()).collect();
            prop_assert_eq!(registry.retained(), retained.len());
            prop_assert!(registry.retained() <= MAX_RETAINED_GENERATIONS);
            let in_use: BTreeSet<u64> = retained.iter().flat_map(|s| frozen[s].1.clone()).collect();
            for launch in &retired {
                prop_assert!(!in_use.contains(launch), "launch {launch} shut down while a retained generation uses it");
            }
            let unique: BTreeSet<u64> = retired.iter().copied().collect();
            prop_assert_eq!(unique.len(), retired.len(), "a launch was shut down twice");
        }
        // Drain: every lease released, then the source closes.
        for (sequence, _) in std::mem::take(&mut held) {
            retired.extend(registry.release(sequence));
        }
        retired.extend(registry.clear_current());
        prop_assert_eq!(registry.retained(), 0);
        let unique: BTreeSet<u64> = retired.iter().copied().collect();
        prop_assert_eq!(unique.len(), retired.len(), "a launch was shut down twice");
        // Every launch that entered a generation was shut down exactly once.
        let entered: BTreeSet<u64> = frozen.values().flat_map(|(_, l)| l.clone()).collect();
        prop_assert_eq!(unique, entered);
    }
}
