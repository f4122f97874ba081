//! `Option<T>` (present and absent), `Vec<T>` (ordered by `order`, then name; qualifier
//! filtered; empty) and `BTreeMap<String, T>` (keyed by canonical name, never by alias).
#![deny(warnings)]

use agent_core::{bean, compose, qualifier};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A collection member.
pub struct Step(pub &'static str);
/// Present exactly once.
pub struct Config;
/// Produced by no bean.
pub struct Nothing;

#[bean(order = 7, qualifiers = ["core"])]
pub fn omega() -> Arc<Step> {
    Arc::new(Step("omega"))
}

#[bean(fallback)]
pub fn gamma() -> Arc<Step> {
    Arc::new(Step("gamma"))
}

#[bean(aliases = ["second"])]
pub fn beta() -> Arc<Step> {
    Arc::new(Step("beta"))
}

#[bean(aliases = ["first"], qualifiers = ["core"])]
pub fn alpha() -> Arc<Step> {
    Arc::new(Step("alpha"))
}

#[bean(order = -5)]
pub fn zeta() -> Arc<Step> {
    Arc::new(Step("zeta"))
}

#[bean]
pub fn config() -> Arc<Config> {
    Arc::new(Config)
}

/// Everything the consumer received.
pub struct Seen {
    pub present: bool,
    pub absent: bool,
    pub all: Vec<&'static str>,
    pub core: Vec<&'static str>,
    pub none: usize,
    pub keys: Vec<String>,
    pub no_keys: usize,
}

#[bean]
pub fn seen(
    present: Option<Arc<Config>>,
    absent: Option<Arc<Nothing>>,
    all: Vec<Arc<Step>>,
    #[qualifier("core")] core: Vec<Arc<Step>>,
    none: Vec<Arc<Nothing>>,
    by_name: BTreeMap<String, Arc<Step>>,
    no_names: BTreeMap<String, Arc<Nothing>>,
) -> Arc<Seen> {
    for (key, step) in &by_name {
        assert_eq!(key, step.0);
    }
    Arc::new(Seen {
        present: present.is_some(),
        absent: absent.is_none(),
        all: all.iter().map(|s| s.0).collect(),
        core: core.iter().map(|s| s.0).collect(),
        none: none.len(),
        keys: by_name.into_keys().collect(),
        no_keys: no_names.len(),
    })
}

compose! {
    /// Listed in an order that neither `order` nor the names follow.
    pub struct App { beans: [omega, gamma, beta, alpha, zeta, config, seen] }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let app = App::build().await.unwrap();
        let seen = &app.components().seen;
        assert!(seen.present);
        assert!(seen.absent);
        assert_eq!(seen.all, ["zeta", "alpha", "beta", "gamma", "omega"]);
        assert_eq!(seen.core, ["alpha", "omega"]);
        assert_eq!(seen.none, 0);
        assert_eq!(seen.keys, ["alpha", "beta", "gamma", "omega", "zeta"]);
        assert_eq!(seen.no_keys, 0);
        assert!(
            App::manifest()
                .selection("seen", "absent")
                .unwrap()
                .chosen
                .is_empty()
        );
        assert_eq!(
            App::manifest().selection("seen", "all").unwrap().chosen,
            ["zeta", "alpha", "beta", "gamma", "omega"]
        );
        app.stop().await.unwrap();
    });
}
