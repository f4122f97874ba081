//! What the log projection costs a run: one `offer` per event on the run's side, and a
//! whole scripted run with and without the logger observing it, side by side.

use std::hint::black_box;
use std::sync::Arc;

use agent_core::agent::{AgentDefinition, Engine};
use agent_core::event::{Envelope, Event, Observer, ObserverError, Timestamp};
use agent_core::message::Message;
use agent_core::model::{ScriptedProvider, StreamEvent, Usage};
use agent_core::stage::{Dispatcher, StaticToolPlanSource};
use agent_core::tool::BoxFuture;
use agent_logging::{Config, EventLogger, MAX_MAILBOX_CAPACITY};
use criterion::{Criterion, criterion_group, criterion_main};

/// An observer that accepts every event and does nothing: the kernel's observer path alone.
struct Accept;

impl Observer for Accept {
    fn publish<'a>(&'a self, _: &'a Envelope) -> BoxFuture<'a, Result<(), ObserverError>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

fn envelope(event: Event) -> Envelope {
    let run = agent_core::RunId::new("run-1").expect("a valid run id");
    Envelope::new(run, 1, Timestamp::from_unix_nanos(1), event)
}

fn offer(c: &mut Criterion) {
    // No subscriber: the consumer's records are disabled, so it keeps up and nothing drops.
    let logger = EventLogger::start(
        Config::default()
            .with_mailbox_capacity(MAX_MAILBOX_CAPACITY)
            .expect("in bounds"),
    )
    .expect("logger");
    let mut group = c.benchmark_group("offer");
    let delta = envelope(Event::ModelDelta {
        text: "streamed text".into(),
    });
    group.bench_function("filtered", |b| b.iter(|| logger.offer(black_box(&delta))));
    let turn = envelope(Event::TurnStarted { turn: 1 });
    group.bench_function("enqueued", |b| b.iter(|| logger.offer(black_box(&turn))));
    group.finish();
}

fn run(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let plans = Arc::new(
        StaticToolPlanSource::new(Arc::new(
            Dispatcher::new(Default::default()).expect("no tools"),
        ))
        .expect("plan"),
    );
    let provider = || {
        Arc::new(ScriptedProvider::new(|_| {
            vec![
                StreamEvent::TextDelta("Hello.".into()),
                StreamEvent::Completed {
                    usage: Usage::new(1, 1),
                },
            ]
        }))
    };
    let agent = AgentDefinition::new("bench", "scripted", 4).expect("agent");
    let logger = Arc::new(
        EventLogger::start(
            Config::default()
                .with_mailbox_capacity(MAX_MAILBOX_CAPACITY)
                .expect("in bounds"),
        )
        .expect("logger"),
    );
    let bare = Engine::builder(provider(), plans.clone())
        .build()
        .expect("engine");
    let observed = Engine::builder(provider(), plans.clone())
        .observer(Arc::new(Accept))
        .build()
        .expect("engine");
    let logged = Engine::builder(provider(), plans)
        .observer(logger.clone())
        .build()
        .expect("engine");
    let mut group = c.benchmark_group("run");
    for (id, engine) in [
        ("baseline", &bare),
        ("noop_observer", &observed),
        ("logged", &logged),
    ] {
        group.bench_function(id, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let run = engine
                        .start(&agent, Message::user("hi").expect("message"))
                        .await
                        .expect("start");
                    black_box(run.wait().await.expect("completes"));
                })
            })
        });
    }
    group.finish();
    // Best effort: under a sustained burst the consumer may fall behind and drop (counted).
    let snapshot = logger.snapshot();
    eprintln!(
        "logged runs: {} envelopes processed, {} dropped",
        snapshot.processed, snapshot.dropped
    );
}

criterion_group!(benches, offer, run);
criterion_main!(benches);
