//! Cost of one tool call through the dispatch layers.
//!
//! Three ways to run the same trivial tool, and the pipeline taken apart, on a current-thread
//! tokio runtime:
//!
//! - `dispatch/direct`: `tool.execute(call, ToolContext::new(..))`, no dispatcher at all;
//! - `dispatch/dispatcher`: the canonical [`Dispatcher`];
//! - `dispatch/pipeline_3d_2g`: [`compose_pipeline`] over that dispatcher with three
//!   decorators that only forward and two guards that only call [`Next::run`];
//! - `dispatch/pipeline_0d_0g`, `dispatch/pipeline_3d_0g` and `dispatch/pipeline_0d_2g`:
//!   the same pipeline with no layers, only the decorators, or only the guards, which take
//!   the full pipeline's cost apart (the composed layer's binding, the decorators, the
//!   guards).
//!
//! Every variant clones the one [`Call`] once per iteration (the direct call by hand, the
//! dispatcher internally), so the differences are the layers' own cost. The same process
//! then times the floors of the pipeline's contracts (`dispatch/floor_<id>`): the plain
//! tokio, tokio-util and std operations each contract makes every call pay, with none of the
//! kernel's code around them. Run with
//! `cargo bench -p agent-core --bench dispatch`; results are recorded in
//! `docs/performance.md`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use agent_core::stage::{
    DispatchError, DispatchRequest, DispatchScope, Dispatcher, GuardRequest, Next, PlanId,
    ToolDispatchDecorator, ToolDispatchGuard, ToolDispatcher, compose_pipeline,
};
use agent_core::tool::{
    BoxFuture, Call, Definition, Effect, ExecutionError, NoopReporter, ReplaySafety, Tool,
    ToolContext, ToolResult,
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[path = "support/contained.rs"]
mod contained;

use contained::Contained;

/// Answers every call with a fixed success, so the benchmark measures the layers around it.
struct Echo(Definition);

impl Tool for Echo {
    fn definition(&self) -> &Definition {
        &self.0
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        _ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move { Ok(ToolResult::success(call.id(), "ok")) })
    }
}

/// A decorator whose dispatcher forwards every call unchanged.
struct Forward;

impl ToolDispatchDecorator for Forward {
    fn wrap(&self, inner: Arc<dyn ToolDispatcher>) -> Option<Arc<dyn ToolDispatcher>> {
        Some(Arc::new(Forwarding(inner)))
    }
}

struct Forwarding(Arc<dyn ToolDispatcher>);

impl ToolDispatcher for Forwarding {
    fn definitions(&self) -> &[Definition] {
        self.0.definitions()
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        self.0.dispatch(request)
    }
}

/// A guard that lets every call through.
struct Allow;

impl ToolDispatchGuard for Allow {
    fn guard<'a>(
        &'a self,
        _request: GuardRequest<'a>,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        next.run()
    }
}

fn dispatch(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime");

    let definition = Definition::builder("echo", "Answers `ok`.")
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .build()
        .expect("a valid definition");
    let tool: Arc<dyn Tool> = Arc::new(Echo(definition));
    let dispatcher: Arc<dyn ToolDispatcher> = Arc::new(
        Dispatcher::new(BTreeMap::from([("echo".to_owned(), tool.clone())]))
            .expect("a valid dispatcher"),
    );
    let guards: Vec<Arc<dyn ToolDispatchGuard>> = vec![Arc::new(Allow), Arc::new(Allow)];
    let decorators: Vec<Arc<dyn ToolDispatchDecorator>> =
        vec![Arc::new(Forward), Arc::new(Forward), Arc::new(Forward)];
    let pipeline = compose_pipeline(dispatcher.clone(), guards.clone(), decorators.clone())
        .expect("a valid pipeline");
    let bare = compose_pipeline(dispatcher.clone(), Vec::new(), Vec::new()).expect("a pipeline");
    let decorated =
        compose_pipeline(dispatcher.clone(), Vec::new(), decorators).expect("a pipeline");
    let guarded = compose_pipeline(dispatcher.clone(), guards, Vec::new()).expect("a pipeline");

    let call = Call::new("call-1", "echo", json!({ "text": "hello" })).expect("a valid call");
    let scope = DispatchScope::new(
        "run-1",
        1,
        PlanId::new("static:bench").expect("a valid plan id"),
        format!("sha256:{}", "0".repeat(64)),
    )
    .expect("a valid scope");
    let cancel = CancellationToken::new();
    let request = DispatchRequest {
        cancel: &cancel,
        scope: &scope,
        call: &call,
        reporter: &NoopReporter,
    };

    // Every variant must produce the same answer, or the comparison means nothing.
    let expected = ToolResult::success("call-1", "ok");
    let direct =
        runtime.block_on(tool.execute(call.clone(), ToolContext::new(&NoopReporter, &cancel)));
    assert_eq!(direct, Ok(expected.clone()));
    assert_eq!(
        runtime.block_on(dispatcher.dispatch(request)),
        Ok(expected.clone())
    );
    for layers in [&pipeline, &bare, &decorated, &guarded] {
        assert_eq!(
            runtime.block_on(layers.dispatch(request)),
            Ok(expected.clone())
        );
    }

    let mut group = c.benchmark_group("dispatch");
    group.bench_function("direct", |b| {
        b.to_async(&runtime).iter(|| {
            tool.execute(
                black_box(&call).clone(),
                ToolContext::new(&NoopReporter, &cancel),
            )
        });
    });
    group.bench_function("dispatcher", |b| {
        b.to_async(&runtime)
            .iter(|| dispatcher.dispatch(black_box(request)));
    });
    group.bench_function("pipeline_3d_2g", |b| {
        b.to_async(&runtime)
            .iter(|| pipeline.dispatch(black_box(request)));
    });
    for (name, layers) in [
        ("pipeline_0d_0g", &bare),
        ("pipeline_3d_0g", &decorated),
        ("pipeline_0d_2g", &guarded),
    ] {
        group.bench_function(name, |b| {
            b.to_async(&runtime)
                .iter(|| layers.dispatch(black_box(request)));
        });
    }

    // "Every layer answers through its trait's boxed future, and a call into a layer the
    // pipeline does not own is contained": the composed layer and each guard's rest of the
    // pipeline are one such future each above the dispatcher's own.
    group.bench_function("floor_boxed_contained_layer", |b| {
        b.to_async(&runtime).iter(|| async {
            let future: BoxFuture<'_, &Call> = Box::pin(async { black_box(&call) });
            black_box(Contained(future).await)
        });
    });
    // "Guards see only the scope the pipeline bound to the call": the by-value copy bound
    // in a task-local for the call's future, compared once below, and dropped.
    group.bench_function("floor_scope_binding", |b| {
        b.to_async(&runtime).iter(|| {
            BOUND.scope(black_box(&scope).clone(), async {
                BOUND.with(|bound| *bound == scope)
            })
        });
    });
    // "A cancelled call never reaches the next guard": one check of the public token.
    group.bench_function("floor_cancellation_check", |b| {
        b.iter(|| black_box(&cancel).is_cancelled());
    });
    group.finish();
}

tokio::task_local! {
    /// The scope a call is bound to, as the composed layer binds it.
    static BOUND: DispatchScope;
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
