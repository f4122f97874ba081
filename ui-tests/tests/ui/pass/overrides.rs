//! `Override::value` and `Override::factory` replace a bean for its dependents, in its place
//! in the construction order, with the replacement's cleanup.
#![deny(warnings)]

use agent_core::compose::{Managed, Override};
use agent_core::{bean, compose};
use std::sync::{Arc, Mutex};

/// Records cleanups.
#[derive(Default)]
pub struct Log(pub Mutex<Vec<&'static str>>);

/// A configuration value.
pub struct Config(pub &'static str);
/// A client built from the configuration.
pub struct Client(pub &'static str);

#[bean]
pub fn log() -> Arc<Log> {
    Arc::new(Log::default())
}

#[bean]
pub fn config() -> Arc<Config> {
    Arc::new(Config("production"))
}

#[bean]
pub fn client(config: Arc<Config>, log: Arc<Log>) -> Managed<Arc<Client>> {
    Managed::new(Arc::new(Client(config.0))).with_cleanup(move || async move {
        log.0.lock().unwrap().push("client");
        Ok(())
    })
}

#[bean]
pub fn report(config: Arc<Config>, client: Arc<Client>) -> Arc<String> {
    Arc::new(format!("{}/{}", config.0, client.0))
}

compose! {
    /// A graph to override.
    pub struct App { beans: [log, config, client, report] }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let app = App::build().await.unwrap();
        assert_eq!(*app.components().report, "production/production");
        app.stop().await.unwrap();

        let by_value = AppOverrides {
            config: Override::value(Arc::new(Config("test"))),
            ..Default::default()
        };
        assert!(by_value.config.is_set() && !by_value.client.is_set());
        let app = App::build_with(by_value).await.unwrap();
        assert_eq!(*app.components().report, "test/test");
        app.stop().await.unwrap();

        let log = Arc::new(Log::default());
        let log_in_cleanup = log.clone();
        let by_factory = AppOverrides {
            log: Override::value(log.clone()),
            client: Override::factory(move || async move {
                Ok(
                    Managed::new(Arc::new(Client("fake"))).with_cleanup(move || async move {
                        log_in_cleanup.0.lock().unwrap().push("fake");
                        Ok(())
                    }),
                )
            }),
            ..Default::default()
        };
        let app = App::build_with(by_factory).await.unwrap();
        assert_eq!(*app.components().report, "production/fake");
        assert!(Arc::ptr_eq(&app.components().log, &log));
        app.stop().await.unwrap();
        assert_eq!(*log.0.lock().unwrap(), ["fake"]);
    });
}
