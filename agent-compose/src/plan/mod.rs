//! Phase 4, plan: the construction-plan analysis between resolution and code generation.
//!
//! It decides *how* the resolved graph is built, without writing any code:
//!
//! - **batches** ([`ConstructionPlan::batches`]): the construction order cut into batches of
//!   at most [`BATCH`] beans, each of which `codegen` turns into one `async fn`;
//! - **collection sharing** ([`ConstructionPlan::collections`]): a `Vec` or `BTreeMap`
//!   injected into several consumers with the same members is built once, before its first
//!   consumer, and cloned into the others; the last consumer in the defining batch takes it
//!   by move when no later batch needs it.

use crate::graph::{Binding, Resolution};
use crate::transport::descriptor::Descriptor;
use proc_macro2::TokenStream;
use quote::quote;
use std::collections::{HashMap, HashSet};

/// Beans are built in batches of at most `BATCH` beans, one `async fn` per batch, each
/// returning a struct of its beans. rustc's type and borrow checking of one `async fn` grows
/// faster than linearly with the values live across its `.await`s, so one function for a
/// thousand beans would dominate build time; batches keep every function small.
pub const BATCH: usize = 32;

/// How a resolved graph is built.
pub struct ConstructionPlan {
    /// Construction order, cut into batches.
    pub batches: Vec<Vec<usize>>,
    /// The batch of each bean.
    pub batch_of: Vec<usize>,
    /// Collections injected somewhere, each built once.
    pub collections: Vec<Collection>,
    /// For each bean and parameter, the shared collection it receives (a clone of).
    pub collection_of: HashMap<(usize, usize), usize>,
    /// The (bean, parameter) pairs that receive their shared collection by move.
    pub moves: HashSet<(usize, usize)>,
}

/// A `Vec` or `BTreeMap` injection, built once right before its first consumer and cloned
/// into every consumer with the same members (as hand-written code would do).
pub struct Collection {
    /// A `BTreeMap` keyed by name (else a `Vec`).
    pub map: bool,
    /// The members, in injection order.
    pub members: Vec<usize>,
    /// The element type: the first consumer's parameter alias.
    pub element: TokenStream,
    /// The first consumer, before whose construction the collection is built.
    pub first: usize,
    /// Whether a batch after the first consumer's uses it (so its batch struct keeps it).
    pub used_later: bool,
    /// Whether more than one parameter receives it (otherwise it is built inline).
    pub shared: bool,
}

impl ConstructionPlan {
    /// Plans the construction of `beans` as `resolution` orders and binds them.
    pub fn new(beans: &[Descriptor], resolution: &Resolution) -> Self {
        let order = &resolution.order;
        let batches: Vec<Vec<usize>> = order.chunks(BATCH).map(<[usize]>::to_vec).collect();
        let mut batch_of = vec![0; beans.len()];
        for (k, batch) in batches.iter().enumerate() {
            for &i in batch {
                batch_of[i] = k;
            }
        }
        let mut collections: Vec<Collection> = Vec::new();
        let mut collection_of = HashMap::new();
        let mut by_content = HashMap::new();
        for &i in order {
            for (p, binding) in resolution.bindings[i].iter().enumerate() {
                let (map, members) = match binding {
                    Binding::List(m) if !m.is_empty() => (false, m),
                    Binding::Map(m) if !m.is_empty() => (true, m),
                    _ => continue,
                };
                let param = &beans[i].params[p];
                let content = (map, members.clone(), param.key.clone());
                let c = *by_content.entry(content).or_insert_with(|| {
                    let path = &beans[i].path;
                    let alias = crate::naming::Name::new("__Param").number(p).call_site();
                    collections.push(Collection {
                        map,
                        members: members.clone(),
                        element: quote!(#path::#alias),
                        first: i,
                        used_later: false,
                        shared: false,
                    });
                    collections.len() - 1
                });
                if batch_of[i] != batch_of[collections[c].first] {
                    collections[c].used_later = true;
                }
                collection_of.insert((i, p), c);
            }
        }
        // A collection with one consumer is built inline as its argument: nothing to share.
        let mut consumers = vec![0usize; collections.len()];
        for &c in collection_of.values() {
            consumers[c] += 1;
        }
        collection_of.retain(|_, c| consumers[*c] > 1);
        for (c, collection) in collections.iter_mut().enumerate() {
            collection.shared = consumers[c] > 1;
        }
        // The last consumer in the defining batch takes the collection itself when no later
        // batch needs it.
        let mut last = HashMap::new();
        for &i in order {
            for p in 0..resolution.bindings[i].len() {
                if let Some(&c) = collection_of.get(&(i, p)) {
                    last.insert(c, (i, p));
                }
            }
        }
        let moves = last
            .into_iter()
            .filter(|(c, (i, _))| {
                !collections[*c].used_later && batch_of[*i] == batch_of[collections[*c].first]
            })
            .map(|(_, at)| at)
            .collect();
        ConstructionPlan {
            batches,
            batch_of,
            collections,
            collection_of,
            moves,
        }
    }

    /// The batch in which collection `c` is built.
    pub fn batch_of_collection(&self, c: usize) -> usize {
        self.batch_of[self.collections[c].first]
    }

    /// The shared collections built in batch `k` that later batches use.
    pub fn kept_collections(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        self.collections
            .iter()
            .enumerate()
            .filter(move |(_, c)| c.shared && c.used_later && self.batch_of[c.first] == k)
            .map(|(c, _)| c)
    }
}
