//! The kernel reference workloads, shared by the `kernel` benchmark (which counts
//! allocations with a counting global allocator), `kernel_uncounted` (which times them on
//! the plain system allocator) and `kernel_fixed` (which runs one of them a given number of
//! times, for instruction counts); see `docs/performance.md`.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use agent_core::agent::{AgentDefinition, Engine};
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
use criterion::Criterion;
use serde_json::json;
use tokio::runtime::Runtime;
use tokio::sync::Notify;

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

/// Builds the dispatcher, the static plan source and the engine (with its default atomic id
/// source), as the reference does on every construction; the provider and the clock are made
/// once by the caller.
fn engine_with(
    provider: Arc<dyn ModelProvider>,
    clock: Arc<dyn Clock>,
    tools: BTreeMap<String, Arc<dyn Tool>>,
) -> Engine {
    let dispatcher = Dispatcher::new(tools).expect("valid tools");
    let plans = StaticToolPlanSource::from_dispatcher(dispatcher);
    Engine::builder(provider, plans)
        .clock(clock)
        .build()
        .expect("engine")
}

fn engine(provider: Arc<dyn ModelProvider>, tools: Vec<Arc<dyn Tool>>) -> Engine {
    let tools = tools
        .into_iter()
        .map(|t| (t.definition().name().to_owned(), t))
        .collect();
    engine_with(provider, fixed_clock(), tools)
}

fn input() -> Message {
    Message::user("hello").expect("valid input")
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

/// Reads the process's cumulative allocations (reallocations included), bytes allocated
/// and bytes reallocated (negative when reallocations shrank more than they grew).
pub(crate) type Count = fn() -> (u64, u64, i64);

/// Counts allocations over `iterations` runs of `run` (after a warm-up, since the first
/// iterations grow buffers that later ones reuse) when `count` is given and prints them with
/// the events each run committed (what `run` returns), then times `run` as `<group>/<name>`.
fn measure<F, Fut>(
    c: &mut Criterion,
    runtime: &Runtime,
    (group, count): (&str, Option<Count>),
    name: &str,
    run: F,
) where
    F: Fn() -> Fut,
    Fut: Future<Output = u64>,
{
    const ITERATIONS: u32 = 500;
    if let Some(count) = count {
        runtime.block_on(async {
            for _ in 0..50 {
                run().await;
            }
        });
        let before = count();
        let events = runtime.block_on(async {
            let mut events = 0;
            for _ in 0..ITERATIONS {
                events += run().await;
            }
            events
        });
        let after = count();
        let n = f64::from(ITERATIONS);
        let allocations = (after.0 - before.0) as f64;
        let bytes = (after.1 - before.1) as f64 + (after.2 - before.2).max(0) as f64;
        println!(
            "kernel/{name}: {:.1} allocations/iter, {:.0} bytes/iter, {:.1} events/iter",
            allocations / n,
            bytes / n,
            events as f64 / n,
        );
    }
    c.benchmark_group(group)
        .bench_function(name, |b| b.to_async(runtime).iter(&run));
}

/// What is done with each workload: timed by criterion here, repeated a fixed number of
/// times by `kernel_fixed`.
pub(crate) trait Workloads {
    /// Called once per workload, in the order of the reference, with the runtime it runs on.
    fn workload<F, Fut>(&mut self, runtime: &Runtime, name: &str, run: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = u64>;
}

/// Times each workload as `<group>/<id>`; with `count`, counts its allocations first.
struct Timed<'c> {
    c: &'c mut Criterion,
    group: &'c str,
    count: Option<Count>,
}

impl Workloads for Timed<'_> {
    fn workload<F, Fut>(&mut self, runtime: &Runtime, name: &str, run: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = u64>,
    {
        measure(self.c, runtime, (self.group, self.count), name, run);
    }
}

/// Times the four workloads as `<group>/<id>`; with `count`, counts their allocations first.
pub(crate) fn bench(c: &mut Criterion, group: &str, count: Option<Count>) {
    each(&mut Timed { c, group, count });
}

/// Builds the four workloads' engines on one runtime and hands each workload to `sink`.
pub(crate) fn each(sink: &mut impl Workloads) {
    let runtime = runtime();
    let clock = fixed_clock();

    let idle_provider: Arc<dyn ModelProvider> =
        Arc::new(ScriptedProvider::new(|_: &ModelRequest| vec![completed()]));
    sink.workload(&runtime, "engine_construction", || async {
        let engine = engine_with(idle_provider.clone(), clock.clone(), BTreeMap::new());
        engine.close().await;
        0
    });

    let text_engine = engine(
        Arc::new(ScriptedProvider::new(|_: &ModelRequest| vec![completed()])),
        vec![],
    );
    let one_turn = AgentDefinition::new("benchmark", "scripted", 1).expect("agent");
    let text_input = input();
    sink.workload(&runtime, "text_run", || async {
        let run = text_engine
            .start(&one_turn, text_input.clone())
            .await
            .expect("start");
        run.wait().await.expect("completed");
        run.events().last_sequence()
    });

    // The original builds the call once and streams that value on every first request.
    let call = Call::new("benchmark-call", "read", json!({})).expect("call");
    let tool_engine = engine(
        Arc::new(ScriptedProvider::new(move |request: &ModelRequest| {
            let last_is_tool = request
                .messages()
                .last()
                .is_some_and(|m| m.role() == Role::Tool);
            if last_is_tool {
                vec![completed()]
            } else {
                vec![StreamEvent::ToolCall(call.clone()), completed()]
            }
        })),
        vec![read_tool()],
    );
    let two_turns = AgentDefinition::new("benchmark", "scripted", 2).expect("agent");
    sink.workload(&runtime, "tool_round", || async {
        let run = tool_engine
            .start(&two_turns, text_input.clone())
            .await
            .expect("start");
        run.wait().await.expect("completed");
        run.events().last_sequence()
    });

    let started = Arc::new(Notify::new());
    let cancel_engine = engine(
        Arc::new(BlockingProvider {
            started: started.clone(),
        }),
        vec![],
    );
    sink.workload(&runtime, "cancellation", || async {
        let run = cancel_engine
            .start(&one_turn, text_input.clone())
            .await
            .expect("start");
        started.notified().await;
        run.cancel();
        let error = run.wait().await.expect_err("cancelled");
        assert!(error.is_cancelled());
        run.events().last_sequence()
    });
}
