//! Modifiers say the same thing above and below the main attribute.
#![deny(warnings)]

use agent_core::{bean, compose, fallback, order, primary, qualifier};
use std::sync::Arc;

/// Primary, written above.
pub struct Clock(pub &'static str);
/// Primary, written below.
pub struct Store(pub &'static str);
/// Fallbacks, one above and one below.
pub struct Cache(pub &'static str);
/// Qualifiers, one above and one below.
pub struct Link(pub &'static str);
/// Orders, above, below and mixed with other modifiers.
pub struct Step(pub &'static str);

#[primary]
#[bean(name = "clock-above")]
pub fn clock_above() -> Arc<Clock> {
    Arc::new(Clock("clock-above"))
}

#[bean(name = "clock-plain")]
pub fn clock_plain() -> Arc<Clock> {
    Arc::new(Clock("clock-plain"))
}

#[bean(name = "store-below")]
#[primary]
pub fn store_below() -> Arc<Store> {
    Arc::new(Store("store-below"))
}

#[bean(name = "store-plain")]
pub fn store_plain() -> Arc<Store> {
    Arc::new(Store("store-plain"))
}

#[fallback]
#[bean(name = "cache-above")]
pub fn cache_above() -> Arc<Cache> {
    Arc::new(Cache("cache-above"))
}

#[bean(name = "cache-below")]
#[fallback]
pub fn cache_below() -> Arc<Cache> {
    Arc::new(Cache("cache-below"))
}

#[bean(name = "cache-plain")]
pub fn cache_plain() -> Arc<Cache> {
    Arc::new(Cache("cache-plain"))
}

#[qualifier("fast")]
#[bean(name = "link-above")]
pub fn link_above() -> Arc<Link> {
    Arc::new(Link("link-above"))
}

#[bean(name = "link-below")]
#[qualifier("slow")]
pub fn link_below() -> Arc<Link> {
    Arc::new(Link("link-below"))
}

#[order(30)]
#[bean(name = "aa-last")]
pub fn step_above() -> Arc<Step> {
    Arc::new(Step("aa-last"))
}

#[bean(name = "bb-middle")]
#[order(20)]
pub fn step_below() -> Arc<Step> {
    Arc::new(Step("bb-middle"))
}

#[agent_core::order(10)]
#[bean(name = "cc-first")]
#[agent_core::qualifier("mixed")]
pub fn step_mixed() -> Arc<Step> {
    Arc::new(Step("cc-first"))
}

/// What the consumer received.
pub struct Seen {
    pub clock: &'static str,
    pub store: &'static str,
    pub cache: &'static str,
    pub fast: &'static str,
    pub slow: &'static str,
    pub steps: Vec<&'static str>,
}

#[bean]
pub fn seen(
    clock: Arc<Clock>,
    store: Arc<Store>,
    cache: Arc<Cache>,
    #[qualifier("fast")] fast: Arc<Link>,
    #[qualifier("slow")] slow: Arc<Link>,
    steps: Vec<Arc<Step>>,
) -> Arc<Seen> {
    Arc::new(Seen {
        clock: clock.0,
        store: store.0,
        cache: cache.0,
        fast: fast.0,
        slow: slow.0,
        steps: steps.iter().map(|s| s.0).collect(),
    })
}

compose! {
    /// Every modifier above and below.
    pub struct App {
        beans: [
            clock_above, clock_plain, store_below, store_plain,
            cache_above, cache_below, cache_plain, link_above, link_below,
            step_above, step_below, step_mixed, seen,
        ],
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let app = App::build().await.unwrap();
        let seen = &app.components().seen;
        assert_eq!(seen.clock, "clock-above");
        assert_eq!(seen.store, "store-below");
        assert_eq!(seen.cache, "cache-plain");
        assert_eq!(seen.fast, "link-above");
        assert_eq!(seen.slow, "link-below");
        assert_eq!(seen.steps, ["cc-first", "bb-middle", "aa-last"]);

        let manifest = App::manifest();
        let bean = |name: &str| manifest.bean(name).unwrap();
        assert!(bean("clock-above").primary && bean("store-below").primary);
        assert!(bean("cache-above").fallback && bean("cache-below").fallback);
        assert_eq!(bean("link-above").qualifiers, ["fast"]);
        assert_eq!(bean("link-below").qualifiers, ["slow"]);
        assert_eq!(bean("cc-first").qualifiers, ["mixed"]);
        assert_eq!(
            [
                bean("aa-last").order,
                bean("bb-middle").order,
                bean("cc-first").order
            ],
            [30, 20, 10]
        );
        app.stop().await.unwrap();
    });
}
