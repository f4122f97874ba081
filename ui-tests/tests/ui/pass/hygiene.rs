//! Generated code names everything by absolute path: a module that shadows the prelude's
//! `Result`, `Option`, `Box`, `Vec`, `String`, `Some`, `None`, `Ok`, `Err`, `Clone` and
//! `Default` right next to every macro use still composes.
#![deny(warnings)]

/// Look-alikes of the prelude's names.
mod shadow {
    pub struct Result;
    pub struct Option;
    pub struct Box;
    pub struct Vec;
    pub struct String;
    pub struct Some;
    pub struct None;
    pub struct Ok;
    pub struct Err;
    pub trait Clone {}
    pub trait Default {}

    /// Uses the look-alikes, so every glob import below is used.
    pub fn look_alikes() -> (Result, Option, Box, Vec, String, Some, None, Ok, Err) {
        (Result, Option, Box, Vec, String, Some, None, Ok, Err)
    }

    impl Clone for Result {}
    impl Default for Result {}
}

mod beans {
    use super::shadow::*;

    /// The error every fallible factory here returns.
    #[derive(Debug)]
    pub struct Failure;

    impl ::std::fmt::Display for Failure {
        fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
            f.write_str("failure")
        }
    }

    impl ::std::error::Error for Failure {}

    /// A bean.
    pub struct Greeting(pub ::std::string::String);

    #[agent_core::bean(name = "greeting", aliases = ["hello"])]
    #[agent_core::order(1)]
    pub fn greeting() -> ::std::result::Result<::std::sync::Arc<Greeting>, Failure> {
        ::std::result::Result::Ok(::std::sync::Arc::new(Greeting("hi".into())))
    }

    #[agent_core::primary]
    #[agent_core::bean(name = "loud")]
    pub async fn loud() -> ::agent_core::compose::Managed<::std::sync::Arc<Greeting>> {
        ::agent_core::compose::Managed::new(::std::sync::Arc::new(Greeting("HI".into())))
            .with_cleanup(|| async { ::std::result::Result::Ok(()) })
    }

    /// Everything the consumer saw.
    pub struct Report {
        pub chosen: ::std::string::String,
        pub all: ::std::vec::Vec<::std::string::String>,
        pub by_name: ::std::vec::Vec<::std::string::String>,
        pub absent: bool,
    }

    /// A type no bean produces.
    pub struct Absent;

    #[agent_core::bean]
    pub async fn report(
        chosen: ::std::sync::Arc<Greeting>,
        #[agent_core::qualifier("hello")] all: ::std::vec::Vec<::std::sync::Arc<Greeting>>,
        by_name: ::std::collections::BTreeMap<::std::string::String, ::std::sync::Arc<Greeting>>,
        absent: ::std::option::Option<::std::sync::Arc<Absent>>,
    ) -> ::std::result::Result<::agent_core::compose::Managed<::std::sync::Arc<Report>>, Failure>
    {
        let _ = look_alikes();
        ::std::result::Result::Ok(::agent_core::compose::Managed::new(::std::sync::Arc::new(
            Report {
                chosen: ::std::clone::Clone::clone(&chosen.0),
                all: all
                    .iter()
                    .map(|g| ::std::clone::Clone::clone(&g.0))
                    .collect(),
                by_name: by_name.keys().cloned().collect(),
                absent: absent.is_none(),
            },
        )))
    }

    /// A stage written without the prelude.
    pub struct Upper;

    impl ::agent_core::stage::Stage<::std::string::String, ::std::string::String> for Upper {
        fn process(
            &self,
            input: ::std::string::String,
        ) -> ::agent_core::tool::BoxFuture<
            '_,
            ::std::result::Result<::std::string::String, ::agent_core::stage::StageError>,
        > {
            ::std::boxed::Box::pin(async move { ::std::result::Result::Ok(input.to_uppercase()) })
        }
    }

    #[agent_core::stage(name = "upper")]
    pub fn upper(
        _greeting: ::std::option::Option<::std::sync::Arc<Greeting>>,
    ) -> ::std::sync::Arc<
        dyn ::agent_core::stage::Stage<::std::string::String, ::std::string::String>,
    > {
        ::std::sync::Arc::new(Upper)
    }

    #[agent_core::tool(name = "echo")]
    pub async fn echo() -> ::std::result::Result<
        ::std::sync::Arc<dyn ::agent_core::tool::Tool>,
        ::agent_core::tool::DefinitionError,
    > {
        let definition = ::agent_core::tool::Definition::builder("echo", "Echoes.")
            .effect(::agent_core::tool::Effect::ReadOnly)
            .replay_safety(::agent_core::tool::ReplaySafety::Safe)
            .build()?;
        ::std::result::Result::Ok(::fixtures::tools::EchoTool::shared(definition))
    }

    #[agent_core::model_provider(name = "model")]
    pub fn model() -> ::std::sync::Arc<dyn ::agent_core::model::ModelProvider> {
        ::std::sync::Arc::new(::fixtures::providers::NamedProvider::new("model"))
    }

    agent_core::bean_set! {
        /// Every bean of this module.
        pub greetings = [greeting, loud, report, upper, echo, model];
    }
}

mod app {
    use super::shadow::*;

    agent_core::compose! {
        /// The shadowed application.
        pub struct App { beans: [super::beans::greetings] }
    }

    /// Uses the look-alikes here too.
    pub fn shadowed() -> bool {
        let (_, _, _, _, _, _, _, _, _) = look_alikes();
        true
    }
}

fn main() {
    assert!(app::shadowed());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let app = app::App::build().await.unwrap();
        let report = &app.components().report;
        assert_eq!(report.chosen, "HI");
        assert_eq!(report.all, ["hi"]);
        assert_eq!(report.by_name, ["greeting", "loud"]);
        assert!(report.absent);
        let c = app.components();
        let upper = c.upper.process("shout".into()).await.unwrap();
        assert_eq!(upper, "SHOUT");
        assert_eq!(c.echo.definition().name(), "echo");
        assert_eq!(
            ::fixtures::providers::first_text(c.model.as_ref())
                .await
                .as_deref(),
            Some("model")
        );
        app.stop().await.unwrap();
    });
}
