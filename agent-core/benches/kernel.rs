//! The kernel reference workloads, reproduced exactly (see `docs/performance.md`):
//!
//! - `kernel/engine_construction`: build an empty dispatcher, the static plan source and the
//!   engine, then close it with no runs;
//! - `kernel/text_run`: `start` + `wait` of a one-turn run whose provider answers
//!   `[completed]` (6 events);
//! - `kernel/tool_round`: `start` + `wait` of a two-turn run with one `read` tool call
//!   (12 events, 2 provider requests, 1 dispatch);
//! - `kernel/cancellation`: `start`, wait until the provider is streaming, `cancel`, `wait`
//!   (6 events ending in `run.cancelled`).
//!
//! Every run uses a scripted provider, atomic ids, a fixed clock, a static plan, no
//! observers, and one long-lived engine on a single-threaded runtime. Besides criterion's
//! timings, the benchmark counts heap allocations and bytes per iteration with a counting
//! global allocator and prints them (`allocations/iter`). Run with
//! `cargo bench -p agent-core --bench kernel`.

use std::alloc::System;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use agent_core::agent::{AgentDefinition, AtomicIdSource, Engine};
use agent_core::event::{Clock, FixedClock, Timestamp};
use agent_core::message::{Message, Role};
use agent_core::model::{
    EventStream, ModelProvider, ModelRequest, ProviderError, ScriptedProvider, StreamError,
    StreamEvent, Usage,
};
use agent_core::stage::{Dispatcher, StaticToolPlanSource};
use agent_core::tool::{
    BoxFuture, Call, Capability, Definition, Effect, ExecutionError, ReplaySafety, Tool,
    ToolContext, ToolResult,
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio::runtime::Runtime;
use tokio::sync::Notify;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The reference `read` tool.
struct ReadTool(Definition);

impl Tool for ReadTool {
    fn definition(&self) -> &Definition {
        &self.0
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        _ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move { Ok(ToolResult::success(call.id(), r#"{"content":"fixture"}"#)) })
    }
}

fn read_tool() -> Arc<dyn Tool> {
    let definition = Definition::builder("read", "Read benchmark data.")
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .capability(Capability::FilesystemRead)
        .build()
        .expect("valid definition");
    Arc::new(ReadTool(definition))
}

fn completed() -> StreamEvent {
    StreamEvent::Completed {
        usage: Usage::new(1, 1),
    }
}

/// Streams nothing until dropped, after telling the benchmark it started.
struct BlockingProvider {
    started: Arc<Notify>,
}

struct Pending;

impl EventStream for Pending {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<StreamEvent>, StreamError>> {
        Box::pin(std::future::pending())
    }
}

impl ModelProvider for BlockingProvider {
    fn stream(
        &self,
        _request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        self.started.notify_one();
        Box::pin(async { Ok(Box::new(Pending) as Box<dyn EventStream>) })
    }
}

fn fixed_clock() -> Arc<dyn Clock> {
    Arc::new(FixedClock::new(Timestamp::from_unix_nanos(1_000_000_000)))
}

/// Builds the dispatcher, the static plan source and the engine, as the reference does on
/// every construction; the provider and the clock are made once by the caller.
fn engine_with(
    provider: Arc<dyn ModelProvider>,
    clock: Arc<dyn Clock>,
    tools: Vec<Arc<dyn Tool>>,
) -> Engine {
    let tools: BTreeMap<String, Arc<dyn Tool>> = tools
        .into_iter()
        .map(|t| (t.definition().name().to_owned(), t))
        .collect();
    let dispatcher = Dispatcher::new(tools).expect("valid tools");
    let plans = StaticToolPlanSource::new(Arc::new(dispatcher)).expect("plan");
    Engine::builder(provider, Arc::new(plans))
        .ids(Arc::new(AtomicIdSource::new()))
        .clock(clock)
        .build()
        .expect("engine")
}

fn engine(provider: Arc<dyn ModelProvider>, tools: Vec<Arc<dyn Tool>>) -> Engine {
    engine_with(provider, fixed_clock(), tools)
}

fn input() -> Message {
    Message::user("hello").expect("valid input")
}

/// One workload: an async closure run once per iteration.
struct Workload {
    name: &'static str,
    run: Box<dyn Fn() -> BoxFuture<'static, ()>>,
}

fn workloads() -> Vec<Workload> {
    let text_engine = engine(
        Arc::new(ScriptedProvider::new(|_: &ModelRequest| vec![completed()])),
        vec![],
    );
    let text_agent = AgentDefinition::new("benchmark", "scripted", 1).expect("agent");

    let tool_engine = engine(
        Arc::new(ScriptedProvider::new(|request: &ModelRequest| {
            let last_is_tool = request
                .messages()
                .last()
                .is_some_and(|m| m.role() == Role::Tool);
            if last_is_tool {
                vec![completed()]
            } else {
                let call = Call::new("benchmark-call", "read", json!({})).expect("call");
                vec![StreamEvent::ToolCall(call), completed()]
            }
        })),
        vec![read_tool()],
    );
    let tool_agent = AgentDefinition::new("benchmark", "scripted", 2).expect("agent");

    let started = Arc::new(Notify::new());
    let cancel_engine = engine(
        Arc::new(BlockingProvider {
            started: started.clone(),
        }),
        vec![],
    );
    let cancel_agent = text_agent.clone();
    let text_input = input();
    let idle_provider: Arc<dyn ModelProvider> =
        Arc::new(ScriptedProvider::new(|_: &ModelRequest| vec![completed()]));
    let clock = fixed_clock();

    vec![
        Workload {
            name: "engine_construction",
            run: Box::new(move || {
                let (provider, clock) = (idle_provider.clone(), clock.clone());
                Box::pin(async move {
                    let engine = engine_with(provider, clock, vec![]);
                    engine.close().await;
                })
            }),
        },
        Workload {
            name: "text_run",
            run: Box::new(move || {
                let (engine, agent, input) =
                    (text_engine.clone(), text_agent.clone(), text_input.clone());
                Box::pin(async move {
                    let run = engine.start(&agent, input).await.expect("start");
                    run.wait().await.expect("completed");
                })
            }),
        },
        Workload {
            name: "tool_round",
            run: Box::new(move || {
                let (engine, agent) = (tool_engine.clone(), tool_agent.clone());
                Box::pin(async move {
                    let run = engine.start(&agent, input()).await.expect("start");
                    run.wait().await.expect("completed");
                })
            }),
        },
        Workload {
            name: "cancellation",
            run: Box::new(move || {
                let (engine, agent, started) =
                    (cancel_engine.clone(), cancel_agent.clone(), started.clone());
                Box::pin(async move {
                    let run = engine.start(&agent, input()).await.expect("start");
                    started.notified().await;
                    run.cancel();
                    let error = run.wait().await.expect_err("cancelled");
                    assert!(error.is_cancelled());
                })
            }),
        },
    ]
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

/// Runs `iterations` of `run` and returns (allocations, bytes) per iteration.
fn count_allocations(
    runtime: &Runtime,
    iterations: u32,
    run: &dyn Fn() -> BoxFuture<'static, ()>,
) -> (f64, f64) {
    // Warm up: first iterations grow buffers that later ones reuse.
    for _ in 0..50 {
        runtime.block_on(run());
    }
    let region = Region::new(GLOBAL);
    for _ in 0..iterations {
        runtime.block_on(run());
    }
    let stats = region.change();
    let n = f64::from(iterations);
    (
        stats.allocations as f64 / n,
        stats.bytes_allocated as f64 / n,
    )
}

fn bench(c: &mut Criterion) {
    let runtime = runtime();
    let workloads = workloads();
    let mut group = c.benchmark_group("kernel");
    for workload in &workloads {
        let (allocations, bytes) = count_allocations(&runtime, 500, &*workload.run);
        println!(
            "kernel/{}: {allocations:.1} allocations/iter, {bytes:.0} bytes/iter",
            workload.name
        );
        group.bench_function(workload.name, |b| {
            b.to_async(&runtime).iter(|| (workload.run)());
        });
    }
    group.finish();
}

/// Keeps `Future` in scope for readers of the workload type.
#[allow(dead_code)]
fn assert_send<F: Future + Send>(_: F) {}

criterion_group!(benches, bench);
criterion_main!(benches);
