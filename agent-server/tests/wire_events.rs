//! Every event a client receives has its wire shape (issue 33, part 1): real runs through
//! the kernel's paths over the real socket, every event decoded with the original client's
//! strict rules; the kernel's richer facts only on a connection that asked for
//! `agent-kit.rich-events/v1`.
//!
//! Each scenario is a definition whose model names what the scripted provider does.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_core::agent::{AgentDefinition, Engine};
use agent_core::model::{
    EventStream, ModelProblem, ModelProvider, ModelRequest, ProviderError, ScriptedProvider,
    StreamEvent, Usage,
};
use agent_core::stage::{Dispatcher, StaticToolPlanSource};
use agent_core::tool::{
    BoxFuture, Call, Definition as ToolDefinition, Effect, ExecutionError, ReplaySafety, Tool,
    ToolContext, ToolResult,
};
use agent_daemon::definition::{Definition, DefinitionSet};
use agent_protocol::event_payload::{
    CAPABILITY_RICH_EVENTS, RICH_MEMBER, WirePayload, decode_event_payload,
    decode_event_payload_rich,
};
use agent_protocol::pb::common::v1::{CapabilitySet, ErrorCode};
use agent_protocol::pb::engine::v1 as pb;
use agent_server::fixture::{self, FixtureError, FixtureOptions};
use support::*;

/// What each scenario's model does.
const SCENARIOS: [&str; 9] = [
    "text",
    "tool-ok",
    "tool-problem",
    "tool-definitive",
    "tool-retryable",
    "tool-uncertain",
    "model-after-stream",
    "model-in-stream",
    "model-before-stream",
];

/// A tool that ends as its name says.
struct Ends {
    definition: ToolDefinition,
}

impl Tool for Ends {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }
    fn execute<'a>(
        &'a self,
        call: Call,
        _ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move {
            let id = call.id().to_owned();
            match self.definition.name() {
                "ok" => Ok(ToolResult::success(id, "fine")),
                "problem" => Ok(ToolResult::problem(id, "no such file")),
                "definitive" => Err(ExecutionError::definitive(id, "refused")),
                "retryable" => Err(ExecutionError::retryable(id, "timed out")),
                _ => Err(ExecutionError::uncertain(id, "connection lost")),
            }
        })
    }
}

fn tool(name: &str) -> (String, Arc<dyn Tool>) {
    // Only a mutating tool may report an uncertain outcome.
    let (effect, replay) = match name {
        "uncertain" => (Effect::Mutating, ReplaySafety::Unsafe),
        _ => (Effect::ReadOnly, ReplaySafety::Safe),
    };
    let definition = ToolDefinition::builder(name, "Ends as its name says.")
        .effect(effect)
        .replay_safety(replay)
        .build()
        .unwrap();
    (
        name.to_owned(),
        Arc::new(Ends { definition }) as Arc<dyn Tool>,
    )
}

/// The scenarios' provider: a refused request for `model-before-stream`, else a script.
struct Scenarios {
    script: ScriptedProvider<fn(&ModelRequest) -> Vec<StreamEvent>>,
}

fn script(request: &ModelRequest) -> Vec<StreamEvent> {
    let done = StreamEvent::Completed {
        usage: Usage::new(2, 3),
    };
    let first = request.messages().len() == 1;
    match request.model() {
        "model-after-stream" => vec![
            StreamEvent::TextDelta("partial".into()),
            StreamEvent::Failed(ModelProblem::new("provider_down", "the provider went away")),
        ],
        "model-in-stream" => vec![StreamEvent::Failed(ModelProblem::new(
            "overloaded",
            "try later",
        ))],
        model if first && model.starts_with("tool-") => vec![
            StreamEvent::ToolCall(
                Call::new("c1", &model["tool-".len()..], serde_json::json!({})).unwrap(),
            ),
            done,
        ],
        _ => vec![StreamEvent::TextDelta("answer".into()), done],
    }
}

impl ModelProvider for Scenarios {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        if request.model() == "model-before-stream" {
            return Box::pin(async {
                Err(ProviderError::new(ModelProblem::new(
                    "rate_limited",
                    "slow down",
                )))
            });
        }
        self.script.stream(request)
    }
}

async fn scenario_fixture(tag: &str) -> Fixture {
    Fixture::with_host(
        tag,
        |root, authority| {
            let definitions = DefinitionSet::new(SCENARIOS.map(|name| {
                let agent = AgentDefinition::new(name, name, 3).unwrap();
                Definition::new(name, fixture::REVISION, agent).unwrap()
            }))
            .unwrap();
            let engine = |pending: Arc<agent_daemon::pending::PendingRouter>| {
                let tools = BTreeMap::from(
                    ["ok", "problem", "definitive", "retryable", "uncertain"].map(tool),
                );
                let provider = Scenarios {
                    script: ScriptedProvider::new(script as fn(&ModelRequest) -> Vec<StreamEvent>),
                };
                Engine::builder(
                    Arc::new(provider),
                    StaticToolPlanSource::from_dispatcher(Dispatcher::new(tools).unwrap()),
                )
                .broker(pending)
                .build()
                .map_err(|_| FixtureError::Engine)
            };
            fixture::run_host(
                root,
                authority,
                FixtureOptions::default(),
                definitions,
                engine,
            )
            .unwrap()
        },
        |_| {},
    )
    .await
}

/// A session that enabled the rich-events capability.
async fn rich_session(client: &mut Client) -> (String, u64) {
    let mut request = initialize(None, None);
    request.supported_capabilities = Some(CapabilitySet {
        names: vec![CAPABILITY_RICH_EVENTS.to_owned()],
    });
    let response = bounded(client.initialize(request))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(response.status.as_ref()), ErrorCode::Ok);
    let enabled = response.capabilities.unwrap_or_default().names;
    assert_eq!(enabled, vec![CAPABILITY_RICH_EVENTS.to_owned()]);
    (response.client_id, response.ownership_epoch)
}

fn kind(event: &pb::RunEvent) -> pb::EventKind {
    pb::EventKind::try_from(event.kind).unwrap()
}

fn decoded(events: &[pb::RunEvent]) -> Vec<WirePayload> {
    events
        .iter()
        .map(|e| {
            decode_event_payload(kind(e), &e.payload_json).unwrap_or_else(|error| {
                panic!(
                    "{:?} {}: {error}",
                    kind(e),
                    String::from_utf8_lossy(&e.payload_json)
                )
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_of_every_path_has_the_wire_shape() {
    let mut fixture = scenario_fixture("wire-shapes").await;
    let mut client = fixture.client().await;
    let s = session(&mut client).await;
    let mut kinds = std::collections::BTreeSet::new();
    for (i, name) in SCENARIOS.iter().enumerate() {
        let run = start(&mut client, &s, &format!("op-{i}"), name).await;
        let (events, terminals) = collect_run(&mut client, &s, &run).await;
        assert_eq!(terminals, 1, "{name}");
        let payloads = decoded(&events);
        for payload in &payloads {
            kinds.insert(payload.kind() as i32);
            match payload {
                WirePayload::RunStarted(p) => assert_eq!(p.definition, *name),
                WirePayload::ModelStarted(p) => {
                    assert_eq!(p.operation_id, format!("{run}/model/{}", p.turn));
                }
                _ => {}
            }
        }
        let terminal = |k: pb::EventKind| {
            payloads
                .iter()
                .find(|p| p.kind() == k)
                .cloned()
                .unwrap_or_else(|| panic!("{name}: no {k:?} in {payloads:?}"))
        };
        match *name {
            "tool-ok" | "tool-problem" => {
                let WirePayload::ToolCompleted(t) = terminal(pb::EventKind::ToolCompleted) else {
                    unreachable!()
                };
                assert_eq!((t.error.as_str(), t.outcome, t.retry), ("", None, None));
            }
            "tool-definitive" | "tool-retryable" | "tool-uncertain" => {
                let WirePayload::ToolFailed(t) = terminal(pb::EventKind::ToolFailed) else {
                    unreachable!()
                };
                assert_eq!(t.error, agent_server::TOOL_FAILED_TEXT);
                use agent_protocol::event_payload::{ToolExecution as E, ToolRetry as R};
                let expected = match *name {
                    "tool-definitive" => (E::Definitive, R::Never),
                    "tool-retryable" => (E::Definitive, R::Allowed),
                    _ => (E::Uncertain, R::Never),
                };
                assert_eq!(
                    (t.outcome, t.retry),
                    (Some(expected.0), Some(expected.1)),
                    "{name}"
                );
            }
            "model-after-stream" | "model-in-stream" | "model-before-stream" => {
                let WirePayload::ModelFailed(m) = terminal(pb::EventKind::ModelFailed) else {
                    unreachable!()
                };
                assert_eq!(m.message, agent_server::MODEL_FAILED_MESSAGE);
                assert!(!m.code.is_empty());
                terminal(pb::EventKind::RunFailed);
            }
            _ => {
                terminal(pb::EventKind::RunCompleted);
            }
        }
    }
    // Every path above reached the wire through the same check.
    for k in [
        pb::EventKind::RunStarted,
        pb::EventKind::RunCompleted,
        pb::EventKind::RunFailed,
        pb::EventKind::TurnStarted,
        pb::EventKind::TurnCompleted,
        pb::EventKind::ModelStarted,
        pb::EventKind::ModelDelta,
        pb::EventKind::ModelCompleted,
        pb::EventKind::ModelFailed,
        pb::EventKind::ToolStarted,
        pb::EventKind::ToolCompleted,
        pb::EventKind::ToolFailed,
    ] {
        assert!(kinds.contains(&(k as i32)), "{k:?} never seen");
    }
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_says_so_in_the_wire_shape() {
    let mut fixture = Fixture::start("wire-cancel").await;
    let mut client = fixture.client().await;
    let s = session(&mut client).await;
    let run = start(&mut client, &s, "op-1", fixture::PENDING_DEFINITION_ID).await;
    let cancel = bounded(client.cancel_run(pb::CancelRunRequest {
        client_id: s.0.clone(),
        ownership_epoch: s.1,
        client_operation_id: "op-cancel".into(),
        run_id: run.clone(),
        reason: String::new(),
    }))
    .await
    .unwrap()
    .into_inner();
    assert_eq!(code(cancel.status.as_ref()), ErrorCode::Ok);
    let (events, _) = collect_run(&mut client, &s, &run).await;
    let payloads = decoded(&events);
    assert!(
        payloads.contains(&WirePayload::RunCancelled(
            agent_protocol::event_payload::StatusText {
                error: agent_server::CANCELLED_TEXT.into()
            }
        )),
        "{payloads:?}"
    );
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_client_that_asked_sees_the_kernel_facts() {
    let mut fixture = scenario_fixture("wire-rich").await;
    let mut plain_client = fixture.client().await;
    let plain = session(&mut plain_client).await;
    let run = start(&mut plain_client, &plain, "op-1", "tool-ok").await;
    let (events, _) = collect_run(&mut plain_client, &plain, &run).await;
    for event in &events {
        let text = String::from_utf8_lossy(&event.payload_json);
        assert!(!text.contains(RICH_MEMBER), "{text}");
    }
    decoded(&events);

    let mut rich_client = fixture.client().await;
    let rich = rich_session(&mut rich_client).await;
    let run = start(&mut rich_client, &rich, "op-2", "tool-problem").await;
    let (events, _) = collect_run_with(&mut rich_client, &rich, &run, true).await;
    let mut facts = Vec::new();
    for event in &events {
        let (payload, extra) = decode_event_payload_rich(kind(event), &event.payload_json)
            .unwrap_or_else(|e| panic!("{e}"));
        if let Some(extra) = extra {
            facts.push((payload.kind(), extra));
        }
    }
    let started = facts
        .iter()
        .find(|(k, _)| *k == pb::EventKind::ToolStarted)
        .expect("rich tool.started");
    assert!(
        started.1["plan_identity"]
            .as_str()
            .is_some_and(|s| s.starts_with("sha256:"))
    );
    let completed = facts
        .iter()
        .find(|(k, _)| *k == pb::EventKind::ToolCompleted)
        .expect("rich tool.completed");
    assert_eq!(completed.1["outcome"], "problem");
    // The same events are refused by a plain decoder: the member is ours.
    assert!(
        events
            .iter()
            .any(|e| decode_event_payload(kind(e), &e.payload_json).is_err())
    );
    fixture.shutdown().await;
}
