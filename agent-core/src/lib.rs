//! Compile-time composed AI agents.
//!
//! `agent-core` is the one dependency users add. It holds:
//!
//! * the **attributes** [`bean`], [`tool`](macro@tool), [`stage`](macro@stage), [`model_provider`] with the modifiers
//!   [`primary`], [`fallback`], [`qualifier`], [`order`], plus [`bean_set!`] and [`compose!`],
//!   which assemble an application graph at compile time;
//! * the **kernel contracts** the attributes build on: [`message`], [`tool`](mod@tool),
//!   [`interaction`], [`model`], [`stage`](mod@stage), [`event`];
//! * the **engine** in [`agent`]: the deterministic single-agent loop that runs a composed
//!   graph;
//! * the **runtime support** for generated graphs in [`compose`](mod@compose);
//! * the **starter** in [`starter`]: replaceable beans for the tool plan, the interaction hub
//!   and the engine, so a first agent is a provider, its tools and one `compose!`.
//!
//! ```
//! use std::sync::Arc;
//! use agent_core::{bean, compose};
//!
//! pub struct Greeting(String);
//!
//! #[bean]
//! pub fn greeting() -> Arc<Greeting> {
//!     Arc::new(Greeting("hello".into()))
//! }
//!
//! #[bean(name = "shout")]
//! pub fn shout(greeting: Arc<Greeting>) -> Arc<String> {
//!     Arc::new(greeting.0.to_uppercase())
//! }
//!
//! compose! {
//!     /// The whole application.
//!     pub struct App { beans: [greeting, shout] }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let app = App::build().await?;
//! assert_eq!(*app.components().shout, "HELLO");
//! assert_eq!(App::manifest().order, ["greeting", "shout"]);
//! app.stop().await?;
//! # Ok(())
//! # })
//! # }
//! ```
//!
//! Factories must be items of a module (not of a function body), since the attributes add
//! items beside them that refer to the enclosing module.
#![forbid(unsafe_code)]

pub mod agent;
pub mod compose;
pub mod event;
mod future;
mod hash;
pub(crate) mod ident;
pub mod interaction;
pub mod message;
pub mod model;
mod panic;
mod run_id;
pub mod stage;
pub mod starter;
mod text;
pub mod tool;

/// Support for generated code; not public API. The name carries this crate's version
/// (major and minor), and `agent-compose` writes the same versioned path into every
/// expansion, so code generated for another version fails to compile with an error that
/// names the expected module.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private_v0_1;

pub use future::BoxFuture;
pub use run_id::{RunId, RunIdError};

/// The README's example, compiled and run as a doc test so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExample;

/// Declares a bean factory: an ordinary function whose return value becomes a bean.
///
/// Arguments: `name = "..."` (default: the function's name), `aliases = [...]`,
/// `qualifiers = [...]`, `primary`, `fallback`, `order = N`. Parameters are dependencies,
/// selected at compile time by [`compose!`]; the return form is `T`, `Result<T, E>`,
/// `Managed<T>` or `Result<Managed<T>, E>`, sync or `async`.
///
/// ```
/// use std::sync::Arc;
/// #[agent_core::bean(name = "clock", aliases = ["time"])]
/// pub fn system_clock() -> Arc<u64> {
///     Arc::new(0)
/// }
/// # fn main() {}
/// ```
pub use agent_macros::bean;

/// Declares a tool. Two forms:
///
/// * **A typed tool**: one function is the tool. `effect`, `replay` and `capabilities` are
///   stated in the attribute and checked at compile time (a contradiction is a coded error);
///   the parameters are beans, one `#[args]` value (a type deriving `serde::Deserialize` and
///   `schemars::JsonSchema`) and optionally the call's [`ToolContext`](tool::ToolContext); the
///   doc comment is the description. The function may return text, [`Json`](tool::typed::Json),
///   a [`Problem`](tool::typed::Problem) or a `Result` of those (see [`tool::typed`]).
///   `docs/tool-authoring.md` has the whole guide.
///
///   ```
///   use agent_core::tool;
///   use agent_core::tool::ToolContext;
///   use agent_core::tool::typed::Problem;
///   use std::sync::Arc;
///
///   pub struct Greeting(pub &'static str);
///
///   #[derive(serde::Deserialize, schemars::JsonSchema)]
///   pub struct Args {
///       /// Who to greet.
///       pub name: String,
///   }
///
///   /// Greet someone by name.
///   #[tool(effect = read_only, replay = safe)]
///   pub async fn greet(
///       greeting: Arc<Greeting>,
///       #[args] args: Args,
///       ctx: ToolContext<'_>,
///   ) -> Result<String, Problem> {
///       if ctx.is_cancelled() {
///           return Err(Problem::new("cancelled"));
///       }
///       Ok(format!("{} {}", greeting.0, args.name))
///   }
///
///   # fn main() -> Result<(), Box<dyn std::error::Error>> {
///   let tool = greet(Arc::new(Greeting("hello")))?;
///   assert_eq!(tool.definition().name(), "greet");
///   assert_eq!(tool.definition().description(), "Greet someone by name.");
///   assert_eq!(tool.definition().input_schema()["required"], serde_json::json!(["name"]));
///   # Ok(())
///   # }
///   ```
///
/// * **A factory**: `#[tool] fn f(deps) -> Arc<dyn Tool>` (or `Result<..>`, `Managed<..>`,
///   `async`) builds the [`Definition`](tool::Definition) and the tool itself.
///
/// Either way the bean is `Arc<dyn agent_core::tool::Tool>` and takes the same arguments as
/// [`bean`] (plus `effect`, `replay`, `capabilities` for the typed form). The bean name is the
/// key in `BTreeMap<String, Arc<dyn Tool>>`.
pub use agent_macros::tool;

/// Declares a stage factory; the bean must be an `Arc` of a stage trait object such as
/// `Arc<dyn agent_core::stage::Stage<I, O>>`. Takes the same arguments as [`bean`].
pub use agent_macros::stage;

/// Declares a model provider factory; the bean must be
/// `Arc<dyn agent_core::model::ModelProvider>`. Takes the same arguments as [`bean`].
pub use agent_macros::model_provider;

/// Marks a bean as preferred when several candidates remain for one dependency.
pub use agent_macros::primary;

/// Marks a bean as a replaceable default: any non-fallback candidate of the same type wins.
pub use agent_macros::fallback;

/// On a factory: adds a qualifier. On a parameter: narrows the dependency to beans whose
/// name, an alias or a qualifier equals the value.
pub use agent_macros::qualifier;

/// Sets the position of a bean in ordered `Vec<T>` injections (ascending; default 0).
pub use agent_macros::order;

/// Defines reusable, named groups of factories that [`compose!`] accepts wherever it accepts
/// a factory, in this crate or another.
///
/// ```
/// # use std::sync::Arc;
/// # #[agent_core::bean] pub fn one() -> Arc<u8> { Arc::new(1) }
/// # #[agent_core::bean] pub fn two(one: Arc<u8>) -> Arc<u16> { Arc::new(u16::from(*one) + 1) }
/// agent_core::bean_set! {
///     /// Both numbers.
///     pub numbers = [one, two];
/// }
/// agent_core::compose! { pub struct App { beans: [numbers] } }
/// # fn main() {}
/// ```
pub use agent_macros::bean_set;

/// Generates an application type from a list of factories and bean sets.
///
/// For `compose! { pub struct App { beans: [...] } }` it generates `App` with `build()`,
/// `build_with(AppOverrides)`, `components()`, `stop()` and `manifest()`, plus
/// `AppComponents` (one field per bean) and `AppOverrides` (one `Override<T>` per bean).
/// See the crate documentation for an example and `docs/` for every rule and diagnostic.
pub use agent_macros::compose;
