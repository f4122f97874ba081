//! What a run executes, as one identity: the engine's static identity (the compiled
//! identities of its graph, the application's snapshot-compatibility identity and its
//! workspace identity) and the exact tool-plan generation with its definitions.

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::event::{OccurrenceError, ToolStarted, ToolStartedVersion};
use crate::hash::fields_digest;
use crate::stage::{PlanId, ToolPlanLease, is_sha256_fingerprint};
use crate::text::format_arc;
use crate::tool::ToolFacts;

/// Most compiled identities an engine takes.
pub const MAX_COMPILED_IDENTITIES: usize = 4096;

/// Longest compiled or compatibility identity, in bytes.
pub const MAX_IDENTITY_BYTES: usize = 512;

/// Names the derivation of the static identity; a change to it changes every identity.
const STATIC_IDENTITY_VERSION: &str = "agent-core.static-identity/v1";

/// Names the derivation of the plan identity.
const PLAN_IDENTITY_VERSION: &str = "agent-core.plan-identity/v1";

/// Why an [`EngineIdentity`] was rejected; the rejected text is not echoed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// More than [`MAX_COMPILED_IDENTITIES`] compiled identities.
    #[error("at most {MAX_COMPILED_IDENTITIES} compiled identities are allowed")]
    TooMany,
    /// A compiled identity is not `<category>:<name>`, 1 to [`MAX_IDENTITY_BYTES`] bytes,
    /// without whitespace or control characters.
    #[error(
        "a compiled identity must be `<category>:<name>`, at most {MAX_IDENTITY_BYTES} bytes, without whitespace"
    )]
    Compiled,
    /// A compiled identity is listed twice.
    #[error("a compiled identity is listed twice")]
    Duplicate,
    /// The compatibility identity is empty, longer than [`MAX_IDENTITY_BYTES`] or contains
    /// whitespace or control characters.
    #[error(
        "the compatibility identity must be 1 to {MAX_IDENTITY_BYTES} bytes without whitespace"
    )]
    Compatibility,
    /// The workspace identity is not `sha256:` followed by 64 lowercase hex digits.
    #[error("the workspace identity must be `sha256:` followed by 64 lowercase hex digits")]
    Workspace,
}

/// Whether `value` is a non-empty token of at most [`MAX_IDENTITY_BYTES`] bytes without
/// whitespace or control characters anywhere.
fn is_identity_token(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_IDENTITY_BYTES
        && !value.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// What an application states about the code its engine runs: the compiled identity of
/// every executable bean of its graph (`compose!` generates them:
/// `App::compiled_identities()`), a snapshot-compatibility identity and a workspace
/// identity. Every run's [`PlanIdentity`] covers it.
///
/// Local suspension and resumption ([`Run::suspend`](super::Run::suspend),
/// [`Run::resume`](super::Run::resume)) need none of it; resuming a snapshot with
/// [`Engine::prepare_resume`](super::Engine::prepare_resume) requires that both engines
/// have the same non-empty compatibility identity, the same compiled identities and the same
/// workspace identity.
///
/// ```
/// use agent_core::agent::EngineIdentity;
///
/// let identity = EngineIdentity::new(["tool:read@1f2e", "model_provider:offline@9a0b"])?
///     .with_compatibility("coding-agent/2026-12")?
///     .with_workspace(EngineIdentity::workspace_of(b"/srv/project"))?;
/// assert_eq!(&*identity.compiled()[0], "model_provider:offline@9a0b"); // sorted
/// assert_eq!(identity.compatibility(), Some("coding-agent/2026-12"));
/// assert!(identity.static_identity().starts_with("sha256:"));
/// assert!(EngineIdentity::new(["no-category"]).is_err());
/// # Ok::<(), agent_core::agent::IdentityError>(())
/// ```
#[derive(Clone, Default)]
pub struct EngineIdentity {
    compiled: Arc<[Box<str>]>,
    compatibility: Option<Arc<str>>,
    workspace: Option<Arc<str>>,
    /// Computed on first use, so engines that never ask pay nothing.
    digest: OnceLock<Arc<str>>,
}

impl PartialEq for EngineIdentity {
    fn eq(&self, other: &Self) -> bool {
        self.compiled == other.compiled
            && self.compatibility == other.compatibility
            && self.workspace == other.workspace
    }
}

impl Eq for EngineIdentity {}

impl fmt::Debug for EngineIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineIdentity")
            .field("compiled", &self.compiled.len())
            .field("compatibility", &self.compatibility)
            .field("workspace", &self.workspace)
            .finish()
    }
}

impl EngineIdentity {
    /// Validates `compiled` (each `<category>:<name>`, at most [`MAX_IDENTITY_BYTES`]
    /// bytes without whitespace; at most [`MAX_COMPILED_IDENTITIES`]; no duplicates) and
    /// keeps it sorted. No compatibility and no workspace identity yet.
    pub fn new<I, S>(compiled: I) -> Result<Self, IdentityError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut list: Vec<Box<str>> = Vec::new();
        for identity in compiled {
            if list.len() == MAX_COMPILED_IDENTITIES {
                return Err(IdentityError::TooMany);
            }
            let identity = identity.as_ref();
            let categorized = identity
                .split_once(':')
                .is_some_and(|(category, name)| !category.is_empty() && !name.is_empty());
            if !is_identity_token(identity) || !categorized {
                return Err(IdentityError::Compiled);
            }
            list.push(Box::from(identity));
        }
        list.sort();
        if list.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err(IdentityError::Duplicate);
        }
        Ok(EngineIdentity {
            compiled: list.into(),
            ..EngineIdentity::default()
        })
    }

    /// The same identity with the application's snapshot-compatibility identity: a token
    /// the application changes whenever a snapshot of the old code must not resume on the
    /// new one.
    pub fn with_compatibility(mut self, identity: impl AsRef<str>) -> Result<Self, IdentityError> {
        let identity = identity.as_ref();
        if !is_identity_token(identity) {
            return Err(IdentityError::Compatibility);
        }
        self.compatibility = Some(Arc::from(identity));
        self.digest = OnceLock::new();
        Ok(self)
    }

    /// The same identity with a workspace identity (`sha256:` + 64 lowercase hex digits;
    /// see [`workspace_of`](Self::workspace_of)).
    pub fn with_workspace(mut self, fingerprint: impl AsRef<str>) -> Result<Self, IdentityError> {
        let fingerprint = fingerprint.as_ref();
        if !is_sha256_fingerprint(fingerprint) {
            return Err(IdentityError::Workspace);
        }
        self.workspace = Some(Arc::from(fingerprint));
        self.digest = OnceLock::new();
        Ok(self)
    }

    /// A workspace identity: `sha256:` over `workspace` (a canonical root path, a
    /// repository and commit, whatever names the workspace for the application).
    pub fn workspace_of(workspace: &[u8]) -> String {
        format!("sha256:{}", fields_digest([workspace]).as_str())
    }

    /// The compiled identities, sorted.
    pub fn compiled(&self) -> &[Box<str>] {
        &self.compiled
    }

    /// The snapshot-compatibility identity, if set.
    pub fn compatibility(&self) -> Option<&str> {
        self.compatibility.as_deref()
    }

    /// The workspace identity, if set.
    pub fn workspace(&self) -> Option<&str> {
        self.workspace.as_deref()
    }

    /// `sha256:` over the compiled identities, the compatibility identity and the
    /// workspace identity: what two engines must share for a snapshot to move between them.
    pub fn static_identity(&self) -> &str {
        self.static_identity_arc()
    }

    pub(super) fn static_identity_arc(&self) -> &Arc<str> {
        self.digest.get_or_init(|| {
            let head = [
                STATIC_IDENTITY_VERSION.as_bytes(),
                self.compatibility.as_deref().unwrap_or("").as_bytes(),
                self.workspace.as_deref().unwrap_or("").as_bytes(),
            ];
            let fields = head
                .into_iter()
                .chain(self.compiled.iter().map(|c| c.as_bytes()));
            format_arc(format_args!("sha256:{}", fields_digest(fields).as_str()))
        })
    }
}

/// The one identity of what a run executes: its engine's static identity
/// ([`EngineIdentity`]) and the exact tool-plan generation it leased, with the canonical
/// fingerprint of every definition and the plan's fingerprint (which covers its guards).
/// Two runs with the same plan identity run the same code against the same tools.
///
/// ```
/// # use std::collections::BTreeMap;
/// # use std::sync::Arc;
/// # use agent_core::agent::{AgentDefinition, Engine, EngineIdentity};
/// # use agent_core::message::Message;
/// # use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
/// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let provider = Arc::new(ScriptedProvider::new(|_| vec![StreamEvent::Completed { usage: Usage::new(1, 1) }]));
/// # let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
/// let identity = EngineIdentity::new(["model_provider:scripted@0a"])?.with_compatibility("demo/1")?;
/// let engine = Engine::builder(provider, tools).identity(identity).build()?;
/// let run = engine.start(&AgentDefinition::new("a", "scripted", 1)?, Message::user("hi")?).await?;
/// let plan = run.plan_identity();
/// assert!(plan.fingerprint().starts_with("sha256:"));
/// assert_eq!(plan.compatibility(), Some("demo/1"));
/// assert_eq!(plan.static_identity(), engine.identity().static_identity());
/// assert_eq!(plan.plan_id(), run.plan_id());
/// run.wait().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanIdentity {
    fingerprint: Arc<str>,
    static_identity: Arc<str>,
    compatibility: Option<Arc<str>>,
    workspace: Option<Arc<str>>,
    plan_id: PlanId,
    plan_fingerprint: Arc<str>,
}

impl PlanIdentity {
    /// The identity of `lease` run by an engine of `engine`.
    pub(super) fn of(engine: &EngineIdentity, lease: &ToolPlanLease) -> PlanIdentity {
        let static_identity = engine.static_identity_arc().clone();
        let head = [
            PLAN_IDENTITY_VERSION.as_bytes(),
            static_identity.as_bytes(),
            lease.id().as_str().as_bytes(),
            lease.fingerprint().as_bytes(),
        ];
        let facts: Vec<&[u8]> = lease
            .definitions()
            .iter()
            .zip(lease.definitions().iter().map(|d| lease.facts(d.name())))
            .flat_map(|(d, f)| {
                [
                    d.name().as_bytes(),
                    f.map_or(&[][..], |f| f.fingerprint.as_bytes()),
                ]
            })
            .collect();
        let digest = fields_digest(head.into_iter().chain(facts));
        PlanIdentity {
            fingerprint: format_arc(format_args!("sha256:{}", digest.as_str())),
            static_identity,
            compatibility: engine.compatibility.clone(),
            workspace: engine.workspace.clone(),
            plan_id: lease.id().clone(),
            plan_fingerprint: lease.fingerprint_arc().clone(),
        }
    }

    /// An identity as a snapshot recorded it; [`Snapshot::validate`](super::Snapshot::validate)
    /// checks the parts.
    pub(super) fn from_parts(
        fingerprint: Arc<str>,
        static_identity: Arc<str>,
        compatibility: Option<Arc<str>>,
        workspace: Option<Arc<str>>,
        plan_id: PlanId,
        plan_fingerprint: Arc<str>,
    ) -> PlanIdentity {
        PlanIdentity {
            fingerprint,
            static_identity,
            compatibility,
            workspace,
            plan_id,
            plan_fingerprint,
        }
    }

    /// Whether this identity describes `lease` (same generation and fingerprint), so an
    /// engine can reuse it for the next lease of a static plan.
    pub(super) fn describes(&self, lease: &ToolPlanLease) -> bool {
        (Arc::ptr_eq(&self.plan_fingerprint, lease.fingerprint_arc())
            || *self.plan_fingerprint == *lease.fingerprint())
            && self.plan_id == *lease.id()
    }

    /// `sha256:` over everything below.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    pub(crate) fn fingerprint_arc(&self) -> &Arc<str> {
        &self.fingerprint
    }

    /// The engine's [`EngineIdentity::static_identity`].
    pub fn static_identity(&self) -> &str {
        &self.static_identity
    }

    /// The engine's snapshot-compatibility identity, if set.
    pub fn compatibility(&self) -> Option<&str> {
        self.compatibility.as_deref()
    }

    /// The engine's workspace identity, if set.
    pub fn workspace(&self) -> Option<&str> {
        self.workspace.as_deref()
    }

    pub(crate) fn workspace_arc(&self) -> Option<&Arc<str>> {
        self.workspace.as_ref()
    }

    /// The leased tool-plan generation.
    pub fn plan_id(&self) -> &PlanId {
        &self.plan_id
    }

    /// The leased plan's fingerprint.
    pub fn plan_fingerprint(&self) -> &str {
        &self.plan_fingerprint
    }

    pub(crate) fn plan_fingerprint_arc(&self) -> &Arc<str> {
        &self.plan_fingerprint
    }
}

// Here rather than in `event`, which sits below `agent` and cannot name a `PlanIdentity`.
impl ToolStarted {
    /// The occurrence of call `call_id` of tool `name` in `turn` of a run with `plan`, with
    /// the facts the plan declares for the name (`None` when it declares none). Refuses what
    /// decoding would refuse.
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::Arc;
    /// # use agent_core::agent::{AgentDefinition, Engine};
    /// # use agent_core::message::Message;
    /// # use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
    /// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    /// use agent_core::event::{OccurrenceError, ToolStarted};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let provider = Arc::new(ScriptedProvider::new(|_| vec![StreamEvent::Completed { usage: Usage::new(1, 1) }]));
    /// # let tools = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
    /// # let engine = Engine::builder(provider, tools).build()?;
    /// let run = engine.start(&AgentDefinition::new("a", "scripted", 1)?, Message::user("hi")?).await?;
    /// let plan = run.plan_identity();
    /// let started = ToolStarted::new("c1", "read", 1, &plan, None)?;
    /// assert_eq!(&*started.plan_identity, plan.fingerprint());
    /// assert_eq!(ToolStarted::new("c1", "read", 0, &plan, None), Err(OccurrenceError::Turn));
    /// # run.wait().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        turn: u32,
        plan: &PlanIdentity,
        declared: Option<Arc<ToolFacts>>,
    ) -> Result<Self, OccurrenceError> {
        let started = ToolStarted {
            version: ToolStartedVersion,
            call_id: call_id.into(),
            name: name.into(),
            turn,
            plan_id: plan.plan_id().as_arc().clone(),
            plan_fingerprint: plan.plan_fingerprint_arc().clone(),
            plan_identity: plan.fingerprint_arc().clone(),
            workspace: plan.workspace_arc().cloned(),
            declared,
        };
        started.check()?;
        Ok(started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_identities_are_bounded() {
        let at: Vec<String> = (0..MAX_COMPILED_IDENTITIES)
            .map(|n| format!("bean:b{n}"))
            .collect();
        assert_eq!(
            EngineIdentity::new(&at).map(|i| i.compiled().len()),
            Ok(MAX_COMPILED_IDENTITIES)
        );
        let past: Vec<String> = (0..=MAX_COMPILED_IDENTITIES)
            .map(|n| format!("bean:b{n}"))
            .collect();
        assert_eq!(EngineIdentity::new(&past), Err(IdentityError::TooMany));
        let longest = format!("bean:{}", "x".repeat(MAX_IDENTITY_BYTES - 5));
        assert!(EngineIdentity::new([&longest]).is_ok());
        let longer = format!("{longest}x");
        assert_eq!(EngineIdentity::new([&longer]), Err(IdentityError::Compiled));
        for bad in ["", "bean", ":x", "bean:", "bean:a b", "bean:a\n"] {
            assert_eq!(
                EngineIdentity::new([bad]),
                Err(IdentityError::Compiled),
                "{bad:?}"
            );
        }
        assert_eq!(
            EngineIdentity::new(["bean:a", "bean:a"]),
            Err(IdentityError::Duplicate)
        );
        let compat = "c".repeat(MAX_IDENTITY_BYTES);
        assert!(
            EngineIdentity::default()
                .with_compatibility(&compat)
                .is_ok()
        );
        assert_eq!(
            EngineIdentity::default().with_compatibility(format!("{compat}c")),
            Err(IdentityError::Compatibility)
        );
        assert_eq!(
            EngineIdentity::default().with_compatibility(""),
            Err(IdentityError::Compatibility)
        );
        assert_eq!(
            EngineIdentity::default().with_workspace("sha256:00"),
            Err(IdentityError::Workspace)
        );
    }

    #[test]
    fn the_static_identity_covers_every_part() {
        let base = EngineIdentity::new(["tool:read@1", "stage:trim@2"]).unwrap();
        let reordered = EngineIdentity::new(["stage:trim@2", "tool:read@1"]).unwrap();
        assert_eq!(base.static_identity(), reordered.static_identity());
        let variants = [
            EngineIdentity::new(["tool:read@1"]).unwrap(),
            EngineIdentity::new(["tool:read@1", "stage:trim@3"]).unwrap(),
            base.clone().with_compatibility("v1").unwrap(),
            base.clone()
                .with_workspace(EngineIdentity::workspace_of(b"/a"))
                .unwrap(),
        ];
        for variant in &variants {
            assert_ne!(
                variant.static_identity(),
                base.static_identity(),
                "{variant:?}"
            );
        }
        assert_ne!(
            base.clone()
                .with_compatibility("v1")
                .unwrap()
                .static_identity(),
            base.clone()
                .with_compatibility("v2")
                .unwrap()
                .static_identity()
        );
        assert!(is_sha256_fingerprint(base.static_identity()));
    }
}
