//! A compiled identity names the factory (its crate, canonical module path, name and
//! signature), not the path `compose!` reaches it by: the same graph listed through module
//! paths, `crate::` paths, `use` imports and re-exports has the same identities, and two
//! factories of one name in two modules have different ones.

use agent_core::{bean, compose};

/// A bean type.
pub struct Alpha;
/// Another.
pub struct Beta;

/// The factories.
pub mod graph {
    use super::{Alpha, Beta, bean};
    use std::sync::Arc;

    /// Builds an `Alpha`.
    #[bean]
    pub fn alpha() -> Arc<Alpha> {
        Arc::new(Alpha)
    }

    /// Builds a `Beta` from an `Alpha`.
    #[bean]
    pub fn beta(_alpha: Arc<Alpha>) -> Arc<Beta> {
        Arc::new(Beta)
    }
}

/// The same factories, re-exported under another module.
pub mod reexports {
    pub use super::graph::beta;
    pub use crate::graph::alpha;
}

/// A factory of the same name and signature as `graph::alpha`, in another module.
pub mod other {
    use super::{Alpha, bean};
    use std::sync::Arc;

    /// Builds an `Alpha` too.
    #[bean]
    pub fn alpha() -> Arc<Alpha> {
        Arc::new(Alpha)
    }
}

compose! {
    /// Listed by module paths.
    pub struct ByModule { beans: [graph::alpha, graph::beta] }
}

compose! {
    /// Listed by `crate::` paths, in another order.
    pub struct ByCrate { beans: [crate::graph::beta, crate::graph::alpha] }
}

compose! {
    /// Listed through re-exports.
    pub struct ByReexport { beans: [reexports::alpha, reexports::beta] }
}

mod imported {
    use crate::graph::{alpha, beta};

    agent_core::compose! {
        /// Listed by imported bare names.
        pub struct ByUse { beans: [alpha, beta] }
    }
}

compose! {
    /// With the other `alpha`.
    pub struct Other { beans: [other::alpha, graph::beta] }
}

compose! {
    /// One bean.
    pub struct AlphaOnly { beans: [graph::alpha] }
}

fn identity_of<'a>(identities: &[&'a str], name: &str) -> &'a str {
    identities
        .iter()
        .copied()
        .find(|i| i.starts_with(&format!("bean:{name}@")))
        .unwrap_or_else(|| panic!("no identity for {name} in {identities:?}"))
}

#[test]
fn the_path_a_factory_is_listed_by_does_not_change_its_identity() {
    let by_module = ByModule::compiled_identities();
    assert_eq!(by_module.len(), 2, "{by_module:?}");
    assert_eq!(ByCrate::compiled_identities(), by_module);
    assert_eq!(ByReexport::compiled_identities(), by_module);
    assert_eq!(imported::ByUse::compiled_identities(), by_module);
    // A bean's identity is its own, not the graph's.
    assert_eq!(
        identity_of(AlphaOnly::compiled_identities(), "alpha"),
        identity_of(by_module, "alpha")
    );
}

#[test]
fn two_factories_of_one_name_in_two_modules_differ() {
    let by_module = ByModule::compiled_identities();
    let other = Other::compiled_identities();
    assert_ne!(
        identity_of(other, "alpha"),
        identity_of(by_module, "alpha"),
        "graph::alpha and other::alpha are two factories"
    );
    assert_eq!(identity_of(other, "beta"), identity_of(by_module, "beta"));
}

#[test]
fn identities_are_sorted_and_computed_once() {
    let first = ByCrate::compiled_identities();
    let mut sorted = first.to_vec();
    sorted.sort_unstable();
    assert_eq!(first, sorted.as_slice());
    assert!(std::ptr::eq(first, ByCrate::compiled_identities()));
    for identity in first {
        let (_, hex) = identity.split_once('@').unwrap_or_default();
        assert_eq!(hex.len(), 64, "{identity}");
    }
}
