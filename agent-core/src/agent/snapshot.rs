//! Versioned, validated snapshots of a run at a turn boundary or after it ended.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::definition::AgentDefinition;
use super::identity::PlanIdentity;
use crate::interaction::is_interaction_id;
use crate::message::{Message, Part, Role};
use crate::model::{MAX_MESSAGES, Usage};
use crate::run_id::{RUN_ID_RULE, RunId};
use crate::stage::PlanId;
use crate::tool::{Effect, ReplaySafety, RetryDisposition};

/// The snapshot format this version writes and reads. Other versions are refused, never
/// upgraded silently.
pub const SNAPSHOT_VERSION: &str = "agent-core.snapshot/v2";

/// What the model reads for a call whose outcome is uncertain when a run resumes: the call
/// is not run again. Hosts that settle such a call themselves say the same.
pub const UNCERTAIN_CALL_NOT_RUN_AGAIN: &str =
    "This call was interrupted and its outcome is uncertain; it was not run again.";

/// Largest encoded snapshot, in bytes.
pub const MAX_SNAPSHOT_BYTES: usize = 16 << 20;

/// Where the run stood when the snapshot was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotStatus {
    /// Parked at a turn boundary; resumable.
    Suspended,
    /// Finished with an answer; not resumable.
    Completed,
    /// Failed; resumable (unfinished calls are settled first).
    Failed,
    /// Cancelled; resumable (unfinished calls are settled first).
    Cancelled,
}

/// What is known about a tool call the model requested but that has no result in history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// It was never dispatched (no `tool.started` was committed). Resuming runs it.
    NotStarted,
    /// A read-only call was dispatched and interrupted. Resuming runs it again only when
    /// the tool is replay safe or idempotent.
    Interrupted,
    /// A mutating call was dispatched and its outcome is unknown, or the tool said so.
    /// Resuming never runs it again: the model is told the outcome is uncertain.
    Uncertain,
    /// The tool reported a definitive failure. Resuming runs it again only when the tool
    /// allowed a retry and is not replay-unsafe.
    Failed,
}

/// A tool call without a result, recorded when a run ended in the middle of a tool round.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnfinishedCall {
    /// The call's id (its arguments are in the history's last assistant message).
    pub call_id: String,
    /// The requested tool.
    pub name: String,
    /// What is known about it.
    pub state: CallState,
    /// The tool's effect, when the plan declares it.
    pub effect: Option<Effect>,
    /// The tool's replay safety, when the plan declares it.
    pub replay_safety: Option<ReplaySafety>,
    /// Whether the tool allowed a retry, for [`CallState::Failed`].
    pub retry: Option<RetryDisposition>,
}

impl UnfinishedCall {
    /// Whether resuming may dispatch this call without asking anyone: never for an
    /// uncertain outcome or a replay-unsafe tool that already started.
    pub fn may_run_on_resume(&self) -> bool {
        let replayable = self.effect.is_some()
            && self
                .replay_safety
                .is_some_and(|safety| safety != ReplaySafety::Unsafe);
        match self.state {
            CallState::NotStarted => self.effect.is_some(),
            CallState::Interrupted => replayable,
            CallState::Uncertain => false,
            CallState::Failed => replayable && self.retry == Some(RetryDisposition::Allowed),
        }
    }
}

/// Why a snapshot could not be taken, parsed or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The bytes are not a snapshot of this version.
    #[error("snapshot is malformed: {0}")]
    Malformed(String),
    /// The snapshot names another format version.
    #[error("snapshot version `{0}` is not supported (expected `{SNAPSHOT_VERSION}`)")]
    Version(String),
    /// The snapshot is larger than [`MAX_SNAPSHOT_BYTES`].
    #[error("snapshot exceeds {MAX_SNAPSHOT_BYTES} bytes")]
    TooLarge,
    /// The snapshot's content breaks a rule.
    #[error("snapshot is invalid: {0}")]
    Invalid(&'static str),
    /// A snapshot can be taken only while suspended or after the run ended.
    #[error("a snapshot can be taken only while the run is suspended or after it ended")]
    NotAtBoundary,
    /// A snapshot cannot be taken while interactions are open.
    #[error("a snapshot cannot be taken while {0} interaction(s) are open")]
    InteractionsActive(u32),
    /// A local resume holds the suspended boundary; its commit or abort decides.
    #[error("a snapshot cannot be taken while a local resume is reserved")]
    ResumeReserved,
}

/// A run's state at a turn boundary or after it ended: everything needed to resume it, and
/// nothing secret beyond the conversation itself.
///
/// Serialized as deterministic JSON by [`to_json`](Self::to_json) and validated by
/// [`from_json`](Self::from_json): unknown members, other versions and inconsistent
/// histories are refused. The run id is a [`RunId`] and the plan a [`PlanIdentity`], the
/// types a live [`Run`](super::Run) gives, so a host compares the two without converting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub(crate) version: String,
    pub(crate) run_id: RunId,
    pub(crate) agent: AgentDefinition,
    pub(crate) status: SnapshotStatus,
    pub(crate) completed_turns: u32,
    pub(crate) history: Vec<Message>,
    /// What the run executes: the leased generation and the engine's identities.
    pub(crate) plan: PlanIdentity,
    pub(crate) last_sequence: u64,
    pub(crate) usage: Usage,
    pub(crate) unfinished_calls: Vec<UnfinishedCall>,
    pub(crate) interaction_ids: BTreeSet<String>,
}

/// The snapshot as written: the plan identity's parts are flat members (the format did not
/// change when [`Snapshot`] started holding a [`PlanIdentity`]).
#[derive(Serialize)]
struct WireRef<'a> {
    version: &'a str,
    run_id: &'a RunId,
    agent: &'a AgentDefinition,
    status: SnapshotStatus,
    completed_turns: u32,
    history: &'a [Message],
    plan_id: &'a str,
    plan_fingerprint: &'a str,
    plan_identity: &'a str,
    static_identity: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    compatibility: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    workspace: Option<&'a str>,
    last_sequence: u64,
    usage: Usage,
    unfinished_calls: &'a [UnfinishedCall],
    interaction_ids: &'a BTreeSet<String>,
}

/// The snapshot as read, before its ids and identities are checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    version: String,
    run_id: String,
    agent: AgentDefinition,
    status: SnapshotStatus,
    completed_turns: u32,
    history: Vec<Message>,
    plan_id: String,
    plan_fingerprint: String,
    plan_identity: String,
    static_identity: String,
    #[serde(default)]
    compatibility: Option<String>,
    #[serde(default)]
    workspace: Option<String>,
    last_sequence: u64,
    usage: Usage,
    unfinished_calls: Vec<UnfinishedCall>,
    interaction_ids: BTreeSet<String>,
}

impl Wire {
    /// The snapshot, once its run id and plan id are valid (the types it holds them in);
    /// the other rules are [`Snapshot::validate`]'s.
    fn into_snapshot(self) -> Result<Snapshot, SnapshotError> {
        use SnapshotError::Invalid;
        if self.version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version(self.version));
        }
        let run_id = RunId::new(self.run_id).map_err(|_| Invalid(RUN_ID_RULE))?;
        let plan_id = PlanId::new(self.plan_id).map_err(|_| Invalid("plan id is invalid"))?;
        let snapshot = Snapshot {
            version: self.version,
            run_id,
            agent: self.agent,
            status: self.status,
            completed_turns: self.completed_turns,
            history: self.history,
            plan: PlanIdentity::from_parts(
                self.plan_identity.into(),
                self.static_identity.into(),
                self.compatibility.map(Into::into),
                self.workspace.map(Into::into),
                plan_id,
                self.plan_fingerprint.into(),
            ),
            last_sequence: self.last_sequence,
            usage: self.usage,
            unfinished_calls: self.unfinished_calls,
            interaction_ids: self.interaction_ids,
        };
        Ok(snapshot)
    }
}

impl Serialize for Snapshot {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireRef {
            version: &self.version,
            run_id: &self.run_id,
            agent: &self.agent,
            status: self.status,
            completed_turns: self.completed_turns,
            history: &self.history,
            plan_id: self.plan.plan_id().as_str(),
            plan_fingerprint: self.plan.plan_fingerprint(),
            plan_identity: self.plan.fingerprint(),
            static_identity: self.plan.static_identity(),
            compatibility: self.plan.compatibility(),
            workspace: self.plan.workspace(),
            last_sequence: self.last_sequence,
            usage: self.usage,
            unfinished_calls: &self.unfinished_calls,
            interaction_ids: &self.interaction_ids,
        }
        .serialize(serializer)
    }
}

/// Decodes the types (a valid run id and plan id), not every rule: that is
/// [`Snapshot::from_json`]'s, and resuming validates again.
impl<'de> Deserialize<'de> for Snapshot {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Snapshot, D::Error> {
        Wire::deserialize(deserializer)?
            .into_snapshot()
            .map_err(serde::de::Error::custom)
    }
}

impl Snapshot {
    /// The run.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The agent definition the run executes.
    pub fn agent(&self) -> &AgentDefinition {
        &self.agent
    }

    /// Where the run stood.
    pub fn status(&self) -> SnapshotStatus {
        self.status
    }

    /// Turns fully completed.
    pub fn completed_turns(&self) -> u32 {
        self.completed_turns
    }

    /// The conversation, starting with the user's input; a final answer is included.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// The tool plan generation the run leased; resuming requires exactly this one.
    pub fn plan_id(&self) -> &PlanId {
        self.plan.plan_id()
    }

    /// The leased plan's fingerprint; resuming requires an identical plan.
    pub fn plan_fingerprint(&self) -> &str {
        self.plan.plan_fingerprint()
    }

    /// What the run executed: the same [`PlanIdentity`] its [`Run::plan_identity`]
    /// gave; resuming requires an engine that gives it again.
    ///
    /// [`Run::plan_identity`]: super::Run::plan_identity
    pub fn plan_identity(&self) -> &PlanIdentity {
        &self.plan
    }

    /// The static identity of the engine that took it.
    pub fn static_identity(&self) -> &str {
        self.plan.static_identity()
    }

    /// The snapshot-compatibility identity of the engine that took it, if set.
    pub fn compatibility(&self) -> Option<&str> {
        self.plan.compatibility()
    }

    /// The workspace identity of the engine that took it, if set.
    pub fn workspace(&self) -> Option<&str> {
        self.plan.workspace()
    }

    /// The sequence number of the last event; a resumed run continues after it.
    pub fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// Tokens used so far.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Tool calls without a result, in request order.
    pub fn unfinished_calls(&self) -> &[UnfinishedCall] {
        &self.unfinished_calls
    }

    /// Interaction ids this run already used; they may not be used again.
    pub fn interaction_ids(&self) -> &BTreeSet<String> {
        &self.interaction_ids
    }

    /// Deterministic JSON (fields in declaration order, sets sorted).
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing plain data into a Vec cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses and validates JSON written by [`to_json`](Self::to_json).
    pub fn from_json(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
        if bytes.len() > MAX_SNAPSHOT_BYTES {
            return Err(SnapshotError::TooLarge);
        }
        #[derive(Deserialize)]
        struct VersionOnly {
            version: String,
        }
        // Check the version first, so a foreign format says so rather than failing on fields.
        let version: VersionOnly =
            serde_json::from_slice(bytes).map_err(|e| SnapshotError::Malformed(e.to_string()))?;
        if version.version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version(version.version));
        }
        let wire: Wire =
            serde_json::from_slice(bytes).map_err(|e| SnapshotError::Malformed(e.to_string()))?;
        let snapshot = wire.into_snapshot()?;
        snapshot.validate()?;
        Ok(snapshot)
    }

    /// Checks every rule a snapshot must satisfy.
    pub fn validate(&self) -> Result<(), SnapshotError> {
        use SnapshotError::Invalid;
        if self.version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version(self.version.clone()));
        }
        // The run id and the plan id are checked by their types.
        self.agent
            .validate()
            .map_err(|_| Invalid("agent definition is invalid"))?;
        if !crate::stage::is_sha256_fingerprint(self.plan.plan_fingerprint()) {
            return Err(Invalid("plan fingerprint is invalid"));
        }
        if !crate::stage::is_sha256_fingerprint(self.plan.fingerprint())
            || !crate::stage::is_sha256_fingerprint(self.plan.static_identity())
        {
            return Err(Invalid(
                "plan and static identities must be sha256 fingerprints",
            ));
        }
        let compatible = self.plan.compatibility().is_none_or(|c| {
            super::EngineIdentity::default()
                .with_compatibility(c)
                .is_ok()
        });
        if !compatible {
            return Err(Invalid("compatibility identity is invalid"));
        }
        if self
            .plan
            .workspace()
            .is_some_and(|w| !crate::stage::is_sha256_fingerprint(w))
        {
            return Err(Invalid("workspace identity is invalid"));
        }
        if self.last_sequence == 0 {
            return Err(Invalid("last sequence must be positive"));
        }
        if self.completed_turns > self.agent.max_turns() {
            return Err(Invalid("completed turns exceed the maximum"));
        }
        if self.status == SnapshotStatus::Suspended
            && (self.completed_turns == 0 || self.completed_turns >= self.agent.max_turns())
        {
            return Err(Invalid(
                "a suspended run stands between two turns below the maximum",
            ));
        }
        if self.history.is_empty() || self.history.len() > MAX_MESSAGES {
            return Err(Invalid("history needs 1 to 4096 messages"));
        }
        if self.history[0].role() != Role::User {
            return Err(Invalid("history must start with the user's message"));
        }
        if self.interaction_ids.len() > MAX_MESSAGES
            || !self.interaction_ids.iter().all(|id| is_interaction_id(id))
        {
            return Err(Invalid("interaction ids must be at most 4096 valid ids"));
        }
        for call in &self.unfinished_calls {
            let possible = match (call.effect, call.replay_safety) {
                (None, None) => true,
                // Definitions require read-only tools to be replay safe.
                (Some(Effect::ReadOnly), Some(safety)) => safety == ReplaySafety::Safe,
                (Some(Effect::Mutating), Some(_)) => true,
                _ => false,
            };
            let state_fits = match call.state {
                CallState::Interrupted => call.effect != Some(Effect::Mutating),
                CallState::Failed => call.retry.is_some(),
                CallState::NotStarted | CallState::Uncertain => true,
            };
            if !possible || !state_fits {
                return Err(Invalid("an unfinished call records facts no tool can have"));
            }
        }
        let open = open_calls(&self.history)?;
        let listed: Vec<(&str, &str)> = self
            .unfinished_calls
            .iter()
            .map(|c| (c.call_id.as_str(), c.name.as_str()))
            .collect();
        if open != listed {
            return Err(Invalid(
                "unfinished calls must be exactly the calls without a result, in order",
            ));
        }
        if !open.is_empty()
            && matches!(
                self.status,
                SnapshotStatus::Suspended | SnapshotStatus::Completed
            )
        {
            return Err(Invalid(
                "only a failed or cancelled run may leave calls open",
            ));
        }
        Ok(())
    }
}

/// Whether `history` is a settled conversation a new run may continue: 1 to
/// [`MAX_MESSAGES`] messages within [`MAX_REQUEST_BYTES`](crate::model::MAX_REQUEST_BYTES),
/// the first the user's, every tool call answered. The reason when it is not.
pub(crate) fn check_conversation(history: &[Message]) -> Result<(), &'static str> {
    if history.is_empty() || history.len() > MAX_MESSAGES {
        return Err("a conversation holds 1 to 4096 messages");
    }
    let bytes: usize = history.iter().map(Message::size_bytes).sum();
    if bytes > crate::model::MAX_REQUEST_BYTES {
        return Err("the conversation is larger than a model request may be");
    }
    if history[0].role() != Role::User {
        return Err("a conversation starts with the user's message");
    }
    match open_calls(history) {
        Ok(open) if open.is_empty() => Ok(()),
        Ok(_) => Err("a tool call was left without its result"),
        Err(SnapshotError::Invalid(reason)) => Err(reason),
        Err(_) => Err("the history is malformed"),
    }
}

/// The calls without a result, in order; checks that results answer an earlier open call of
/// the same name, that ids are unique, and that open calls belong to the last assistant
/// message.
fn open_calls(history: &[Message]) -> Result<Vec<(&str, &str)>, SnapshotError> {
    use SnapshotError::Invalid;
    let mut seen = BTreeSet::new();
    let mut open: Vec<(&str, &str)> = Vec::new();
    for message in history {
        if message.role() == Role::Assistant && !open.is_empty() {
            // A new assistant message must not start while a round is unanswered.
            return Err(Invalid("a tool round was left unanswered"));
        }
        for part in message.parts() {
            match part {
                Part::ToolCall(call) => {
                    if !seen.insert(call.id()) {
                        return Err(Invalid("a tool call id is used twice"));
                    }
                    open.push((call.id(), call.name()));
                }
                Part::ToolResult(result) => {
                    let Some(index) = open
                        .iter()
                        .position(|(id, _)| *id == result.call_id.as_str())
                    else {
                        return Err(Invalid("a tool result answers no open call"));
                    };
                    if open[index].1 != result.name {
                        return Err(Invalid("a tool result names another tool than its call"));
                    }
                    open.remove(index);
                }
                Part::Text(_) | Part::Extension { .. } => {}
            }
        }
    }
    Ok(open)
}
