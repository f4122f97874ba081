//! Runtime types used by graphs that [`compose!`](crate::compose!) generates: managed values
//! with cleanups, test overrides, build and stop errors, and the manifest.
//!
//! Nothing here looks anything up: generated code calls every factory directly and only uses
//! these types to carry values, cleanups and errors.

use serde::Serialize;
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use crate::tool::BoxFuture;

/// The error type factories and cleanups may return: any boxed `Error + Send + Sync`.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// A registered cleanup: called once, it returns the future that releases the resource.
pub type Cleanup = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), BoxError>> + Send>;

/// A bean value paired with an optional asynchronous cleanup.
///
/// Return `Managed<T>` (or `Result<Managed<T>, E>`) from a factory whose bean owns a
/// resource; the cleanup runs when the application stops, or during rollback if a later
/// factory fails.
///
/// ```
/// use agent_core::compose::Managed;
///
/// let pool = Managed::new(String::from("pool")).with_cleanup(|| async {
///     // close connections here
///     Ok(())
/// });
/// assert_eq!(pool.value(), "pool");
/// ```
pub struct Managed<T> {
    value: T,
    cleanup: Option<Cleanup>,
}

impl<T> Managed<T> {
    /// A value without cleanup.
    pub fn new(value: T) -> Self {
        Managed {
            value,
            cleanup: None,
        }
    }

    /// Attaches the cleanup (replacing any earlier one).
    pub fn with_cleanup<F, Fut>(mut self, cleanup: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.cleanup = Some(Box::new(move || Box::pin(cleanup())));
        self
    }

    /// The value.
    pub fn value(&self) -> &T {
        &self.value
    }

    /// Whether a cleanup is attached.
    pub fn has_cleanup(&self) -> bool {
        self.cleanup.is_some()
    }

    /// The value and its cleanup, for code that runs cleanups itself (a hand-written
    /// graph, a test harness).
    ///
    /// ```
    /// use agent_core::compose::Managed;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), agent_core::compose::BoxError> {
    /// let managed = Managed::new(7).with_cleanup(|| async { Ok(()) });
    /// let (value, cleanup) = managed.into_parts();
    /// assert_eq!(value, 7);
    /// if let Some(cleanup) = cleanup {
    ///     cleanup().await?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_parts(self) -> (T, Option<Cleanup>) {
        (self.value, self.cleanup)
    }
}

impl<T: fmt::Debug> fmt::Debug for Managed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Managed")
            .field("value", &self.value)
            .field("has_cleanup", &self.cleanup.is_some())
            .finish()
    }
}

type OverrideFactory<T> =
    Box<dyn FnOnce() -> BoxFuture<'static, Result<Managed<T>, BoxError>> + Send>;

pub(crate) enum OverrideKind<T> {
    Keep,
    Value(T),
    Factory(OverrideFactory<T>),
}

/// A typed replacement for one bean, used in the generated `...Overrides` struct.
///
/// The replacement takes the original's place in the construction order; the original
/// factory is not called (its dependencies are still built, since every bean is eager).
///
/// ```
/// use agent_core::compose::{Managed, Override};
///
/// let by_value: Override<u32> = Override::value(7);
/// let by_factory: Override<u32> = Override::factory(|| async { Ok(Managed::new(7)) });
/// let failing: Override<u32> = Override::factory(|| async { Err("no database in tests".into()) });
/// assert!(by_value.is_set() && by_factory.is_set() && failing.is_set());
/// assert!(!Override::<u32>::default().is_set());
/// ```
pub struct Override<T>(pub(crate) OverrideKind<T>);

impl<T> Override<T> {
    /// Replace the bean by this value (no cleanup).
    pub fn value(value: T) -> Self {
        Override(OverrideKind::Value(value))
    }

    /// Replace the bean by this factory; its cleanup, if any, is registered like the
    /// original's and its error fails the build like the original's.
    pub fn factory<F, Fut>(factory: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Managed<T>, BoxError>> + Send + 'static,
    {
        Override(OverrideKind::Factory(Box::new(move || Box::pin(factory()))))
    }

    /// Whether a replacement is set.
    pub fn is_set(&self) -> bool {
        !matches!(self.0, OverrideKind::Keep)
    }
}

impl<T> Default for Override<T> {
    fn default() -> Self {
        Override(OverrideKind::Keep)
    }
}

impl<T> fmt::Debug for Override<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            OverrideKind::Keep => "Override::None",
            OverrideKind::Value(_) => "Override::Value(..)",
            OverrideKind::Factory(_) => "Override::Factory(..)",
        })
    }
}

/// One cleanup that failed, with the bean it belongs to.
#[derive(Clone, Debug)]
pub struct CleanupFailure {
    bean: &'static str,
    error: Arc<dyn StdError + Send + Sync>,
}

impl CleanupFailure {
    pub(crate) fn new(bean: &'static str, error: BoxError) -> Self {
        CleanupFailure {
            bean,
            error: Arc::from(error),
        }
    }

    /// The bean whose cleanup failed.
    pub fn bean(&self) -> &str {
        self.bean
    }

    /// The cleanup's error.
    pub fn error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.error
    }
}

impl fmt::Display for CleanupFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cleanup of bean `{}` failed: {}", self.bean, self.error)
    }
}

/// Building the graph failed: one factory (or override) returned an error.
///
/// The cleanups registered before the failure have already run, in reverse order. The
/// factory's own error is the [`source`](StdError::source), so `downcast_ref` finds it.
#[derive(Debug)]
pub struct BuildError {
    bean: &'static str,
    source: BoxError,
    rollback: Vec<CleanupFailure>,
}

impl BuildError {
    pub(crate) fn new(bean: &'static str, source: BoxError, rollback: Vec<CleanupFailure>) -> Self {
        BuildError {
            bean,
            source,
            rollback,
        }
    }

    /// The canonical name of the bean whose factory failed.
    pub fn bean(&self) -> &str {
        self.bean
    }

    /// Cleanups that failed while rolling back, in the order they ran.
    pub fn rollback_failures(&self) -> &[CleanupFailure] {
        &self.rollback
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "building bean `{}` failed: {}", self.bean, self.source)?;
        if !self.rollback.is_empty() {
            write!(
                f,
                " ({} cleanup(s) also failed during rollback)",
                self.rollback.len()
            )?;
        }
        Ok(())
    }
}

impl StdError for BuildError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}

/// Stopping the application ran every cleanup, and some failed.
#[derive(Clone, Debug)]
pub struct StopError {
    failures: Vec<CleanupFailure>,
}

impl StopError {
    pub(crate) fn new(failures: Vec<CleanupFailure>) -> Self {
        StopError { failures }
    }

    /// Every failed cleanup, in the order they ran.
    pub fn failures(&self) -> &[CleanupFailure] {
        &self.failures
    }
}

impl fmt::Display for StopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} cleanup(s) failed while stopping",
            self.failures.len()
        )?;
        for failure in &self.failures {
            write!(f, "; {failure}")?;
        }
        Ok(())
    }
}

impl StdError for StopError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.failures
            .first()
            .map(|f| &*f.error as &(dyn StdError + 'static))
    }
}

/// Which attribute declared a bean.
///
/// `agent-compose` has the same enum for the attributes it parses; generated manifests name
/// this enum's variant by that enum's variant name, so the two keep the same variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BeanKind {
    /// `#[bean]`
    Bean,
    /// `#[tool]`
    Tool,
    /// `#[stage]`
    Stage,
    /// `#[model_provider]`
    ModelProvider,
}

impl BeanKind {
    /// The attribute's name.
    pub fn as_str(self) -> &'static str {
        match self {
            BeanKind::Bean => "bean",
            BeanKind::Tool => "tool",
            BeanKind::Stage => "stage",
            BeanKind::ModelProvider => "model_provider",
        }
    }
}

/// How a parameter was injected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InjectionShape {
    /// One bean.
    Single,
    /// `Option<T>`.
    Optional,
    /// `Vec<T>`, ordered.
    List,
    /// `BTreeMap<String, T>`, keyed by canonical name.
    Map,
}

/// One bean in a [`Manifest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ManifestBean {
    /// Canonical name.
    pub name: &'static str,
    /// Aliases.
    pub aliases: &'static [&'static str],
    /// Qualifiers.
    pub qualifiers: &'static [&'static str],
    /// Marked primary.
    pub primary: bool,
    /// Marked fallback.
    pub fallback: bool,
    /// Collection order.
    pub order: i64,
    /// Declaring attribute.
    pub kind: BeanKind,
    /// The bean type as written at the factory.
    pub output: &'static str,
    /// The factory's path as listed in `compose!` (set members appear under the set).
    pub factory: &'static str,
    /// `file:line:column` of the factory.
    pub location: &'static str,
}

/// One resolved dependency in a [`Manifest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ManifestSelection {
    /// The bean whose factory takes the parameter.
    pub consumer: &'static str,
    /// The parameter's name (`#N` for patterns).
    pub parameter: &'static str,
    /// The parameter's position.
    pub position: usize,
    /// How it is injected.
    pub shape: InjectionShape,
    /// The parameter type as written.
    pub ty: &'static str,
    /// The chosen bean (single, optional) or members in injection order (list, map).
    pub chosen: &'static [&'static str],
}

/// A static description of a composed graph, produced at compile time.
///
/// ```
/// use agent_core::compose::Manifest;
///
/// static EMPTY: Manifest = Manifest { app: "App", beans: &[], selections: &[], order: &[] };
/// assert_eq!(EMPTY.to_json(), "{\n  \"app\": \"App\",\n  \"beans\": [],\n  \"selections\": [],\n  \"order\": []\n}");
/// assert!(EMPTY.to_dot().starts_with("digraph App {"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The application type's name.
    pub app: &'static str,
    /// Every bean, in `compose!` list order.
    pub beans: &'static [ManifestBean],
    /// Every parameter of every bean, with what it received.
    pub selections: &'static [ManifestSelection],
    /// Canonical names in construction order.
    pub order: &'static [&'static str],
}

#[derive(Serialize)]
struct SortedManifest<'a> {
    app: &'a str,
    beans: Vec<&'a ManifestBean>,
    selections: Vec<&'a ManifestSelection>,
    order: &'a [&'a str],
}

impl Manifest {
    /// Looks up a bean by canonical name.
    pub fn bean(&self, name: &str) -> Option<&ManifestBean> {
        self.beans.iter().find(|b| b.name == name)
    }

    /// The selection for `consumer`'s parameter `parameter`.
    pub fn selection(&self, consumer: &str, parameter: &str) -> Option<&ManifestSelection> {
        self.selections
            .iter()
            .find(|s| s.consumer == consumer && s.parameter == parameter)
    }

    /// Pretty JSON with beans sorted by name and selections by consumer and position, so the
    /// output is stable across list reorderings that do not change the graph.
    pub fn to_json(&self) -> String {
        let mut beans: Vec<&ManifestBean> = self.beans.iter().collect();
        beans.sort_by_key(|b| b.name);
        let mut selections: Vec<&ManifestSelection> = self.selections.iter().collect();
        selections.sort_by_key(|s| (s.consumer, s.position));
        let sorted = SortedManifest {
            app: self.app,
            beans,
            selections,
            order: self.order,
        };
        // Serializing plain strings, numbers and bools into a String cannot fail.
        serde_json::to_string_pretty(&sorted).unwrap_or_default()
    }

    /// A Graphviz picture: one node per bean, one edge from each consumer to what it uses,
    /// labelled with the parameter.
    pub fn to_dot(&self) -> String {
        let mut out = format!("digraph {} {{\n  rankdir=LR;\n", self.app);
        for b in self.beans {
            let mut flags = Vec::new();
            if b.primary {
                flags.push("primary");
            }
            if b.fallback {
                flags.push("fallback");
            }
            let flags = if flags.is_empty() {
                String::new()
            } else {
                format!(" [{}]", flags.join(", "))
            };
            out.push_str(&format!(
                "  {:?} [label={:?}];\n",
                b.name,
                format!("{}\n{}: {}{}", b.name, b.kind.as_str(), b.output, flags)
            ));
        }
        for s in self.selections {
            for chosen in s.chosen {
                out.push_str(&format!(
                    "  {:?} -> {:?} [label={:?}];\n",
                    s.consumer, chosen, s.parameter
                ));
            }
        }
        out.push_str("}\n");
        out
    }
}

impl fmt::Display for Manifest {
    /// A readable table of beans, selections and the construction order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: {} beans", self.app, self.beans.len())?;
        let width = self
            .beans
            .iter()
            .map(|b| b.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            f,
            "  {:<width$}  {:<14}  {:>6}  {:<17}  output",
            "bean", "kind", "order", "flags"
        )?;
        for b in self.beans {
            let mut flags = Vec::new();
            if b.primary {
                flags.push("primary");
            }
            if b.fallback {
                flags.push("fallback");
            }
            writeln!(
                f,
                "  {:<width$}  {:<14}  {:>6}  {:<17}  {}",
                b.name,
                b.kind.as_str(),
                b.order,
                flags.join(","),
                b.output
            )?;
        }
        writeln!(f, "selections:")?;
        for s in self.selections {
            writeln!(
                f,
                "  {}.{} ({:?}) <- [{}]",
                s.consumer,
                s.parameter,
                s.shape,
                s.chosen.join(", ")
            )?;
        }
        write!(f, "construction order: {}", self.order.join(" -> "))
    }
}
