//! Canonical names become fields: a keyword becomes a raw identifier, `-` and `.` become `_`.
#![deny(warnings)]

use agent_core::compose::Override;
use agent_core::{bean, compose};
use std::sync::Arc;

/// The bean named `type`.
pub struct Kind(pub &'static str);
/// The bean named `web.search-v2`.
pub struct Search(pub &'static str);

#[bean(name = "type")]
pub fn kind() -> Arc<Kind> {
    Arc::new(Kind("kind"))
}

#[bean(name = "web.search-v2")]
pub fn search() -> Arc<Search> {
    Arc::new(Search("search"))
}

/// A function named with a raw identifier keeps its name without the `r#`.
#[bean]
pub fn r#match(r#type: Arc<Kind>, search: Arc<Search>) -> Arc<String> {
    Arc::new(format!("{}+{}", r#type.0, search.0))
}

compose! {
    /// Keyword and punctuated names.
    pub struct App { beans: [kind, search, r#match] }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let app = App::build().await.unwrap();
        let c = app.components();
        assert_eq!(c.r#type.0, "kind");
        assert_eq!(c.web_search_v2.0, "search");
        assert_eq!(*c.r#match, "kind+search");
        assert_eq!(App::manifest().order, ["type", "web.search-v2", "match"]);

        let overrides = AppOverrides {
            r#type: Override::value(Arc::new(Kind("replaced"))),
            web_search_v2: Override::value(Arc::new(Search("other"))),
            ..Default::default()
        };
        let app = App::build_with(overrides).await.unwrap();
        assert_eq!(*app.components().r#match, "replaced+other");
    });
}
