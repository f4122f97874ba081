//! The four factory forms, each as `fn` and as `async fn`.
#![deny(warnings)]

use agent_core::compose::{Managed, Override};
use agent_core::{bean, compose};
use std::sync::{Arc, Mutex};

/// Records cleanups in the order they ran.
#[derive(Default)]
pub struct Log(Mutex<Vec<&'static str>>);

impl Log {
    fn record(&self, entry: &'static str) {
        self.0.lock().unwrap().push(entry);
    }

    fn entries(&self) -> Vec<&'static str> {
        self.0.lock().unwrap().clone()
    }
}

/// One value type per factory, so every dependency is unambiguous.
pub struct Value<const N: u8>;

fn managed<const N: u8>(log: &Arc<Log>, entry: &'static str) -> Managed<Arc<Value<N>>> {
    let log = log.clone();
    Managed::new(Arc::new(Value)).with_cleanup(move || async move {
        log.record(entry);
        Ok(())
    })
}

#[bean]
pub fn log() -> Arc<Log> {
    Arc::new(Log::default())
}

#[bean]
pub fn plain() -> Arc<Value<1>> {
    Arc::new(Value)
}

#[bean]
pub async fn plain_async() -> Arc<Value<2>> {
    Arc::new(Value)
}

#[bean]
pub fn result() -> Result<Arc<Value<3>>, std::io::Error> {
    Ok(Arc::new(Value))
}

#[bean]
pub async fn result_async() -> Result<Arc<Value<4>>, std::io::Error> {
    Ok(Arc::new(Value))
}

#[bean]
pub fn managed_sync(log: Arc<Log>) -> Managed<Arc<Value<5>>> {
    managed(&log, "managed_sync")
}

#[bean]
pub async fn managed_async(log: Arc<Log>, _before: Arc<Value<5>>) -> Managed<Arc<Value<6>>> {
    managed(&log, "managed_async")
}

#[bean]
pub fn result_managed(
    log: Arc<Log>,
    _before: Arc<Value<6>>,
) -> Result<Managed<Arc<Value<7>>>, std::io::Error> {
    Ok(managed(&log, "result_managed"))
}

#[bean]
pub async fn result_managed_async(
    log: Arc<Log>,
    _before: Arc<Value<7>>,
) -> Result<Managed<Arc<Value<8>>>, std::io::Error> {
    Ok(managed(&log, "result_managed_async"))
}

/// Takes one of each, so each form's output is injected.
#[bean]
pub fn all(
    _1: Arc<Value<1>>,
    _2: Arc<Value<2>>,
    _3: Arc<Value<3>>,
    _4: Arc<Value<4>>,
    _5: Arc<Value<5>>,
    _6: Arc<Value<6>>,
    _7: Arc<Value<7>>,
    _8: Arc<Value<8>>,
) -> Arc<Value<9>> {
    Arc::new(Value)
}

compose! {
    /// Every form.
    pub struct Forms {
        beans: [
            log, plain, plain_async, result, result_async, managed_sync, managed_async,
            result_managed, result_managed_async, all,
        ],
    }
}

/// A failing factory after one with a cleanup: the cleanup rolls back.
#[bean(name = "broken")]
pub async fn broken(_before: Arc<Value<5>>) -> Result<Arc<Value<10>>, std::io::Error> {
    Err(std::io::Error::other("no disk"))
}

compose! {
    /// A graph whose build fails.
    pub struct Broken { beans: [log, managed_sync, broken] }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let app = Forms::build().await.unwrap();
        assert_eq!(
            Forms::manifest().order,
            [
                "log",
                "plain",
                "plain_async",
                "result",
                "result_async",
                "managed_sync",
                "managed_async",
                "result_managed",
                "result_managed_async",
                "all",
            ]
        );
        let log = app.components().log.clone();
        assert!(log.entries().is_empty());
        app.stop().await.unwrap();
        assert_eq!(
            log.entries(),
            [
                "result_managed_async",
                "result_managed",
                "managed_async",
                "managed_sync",
            ]
        );

        let log = Arc::new(Log::default());
        let overrides = BrokenOverrides {
            log: Override::value(log.clone()),
            ..Default::default()
        };
        let err = Broken::build_with(overrides)
            .await
            .err()
            .expect("`broken` fails");
        assert_eq!(err.bean(), "broken");
        let source = std::error::Error::source(&err).unwrap();
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert!(err.rollback_failures().is_empty());
        assert_eq!(log.entries(), ["managed_sync"]);
    });
}
