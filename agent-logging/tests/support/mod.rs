//! A capturing `tracing` layer and envelope builders for the projection's tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex};

use agent_core::event::{Envelope, Event, Timestamp};
use tracing::field::{Field, Visit};
use tracing::{Dispatch, Event as TracingEvent, Level, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One emitted record: its callsite name, level and every field, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub name: String,
    pub level: Level,
    pub fields: BTreeMap<String, String>,
}

impl Record {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// The field names other than the three every record carries and the message.
    pub fn extra_fields(&self) -> Vec<&str> {
        self.fields
            .keys()
            .map(String::as_str)
            .filter(|k| {
                !matches!(
                    *k,
                    "message" | "run_correlation" | "sequence" | "at_unix_nanos"
                )
            })
            .collect()
    }
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// What a [`Capture`] layer does before recording.
#[derive(Clone, Default)]
pub enum Behaviour {
    #[default]
    Record,
    /// Panics on the record of this name (after counting it as seen).
    PanicOn(&'static str),
    /// Blocks every record until [`Gate::open`].
    Block(Gate),
}

/// A latch the blocking layer waits on, with a signal for "a record is waiting".
#[derive(Clone, Default)]
pub struct Gate {
    state: Arc<(Mutex<(bool, usize)>, Condvar)>,
}

impl Gate {
    pub fn open(&self) {
        let (lock, cvar) = &*self.state;
        lock.lock().unwrap().0 = true;
        cvar.notify_all();
    }

    /// Waits until `n` records have reached the gate (no timeout: the test harness bounds it).
    pub fn wait_for_waiting(&self, n: usize) {
        let (lock, cvar) = &*self.state;
        let mut state = lock.lock().unwrap();
        while state.1 < n {
            state = cvar.wait(state).unwrap();
        }
    }

    fn pass(&self) {
        let (lock, cvar) = &*self.state;
        let mut state = lock.lock().unwrap();
        state.1 += 1;
        cvar.notify_all();
        while !state.0 {
            state = cvar.wait(state).unwrap();
        }
    }
}

struct Capture {
    records: Arc<Mutex<Vec<Record>>>,
    behaviour: Behaviour,
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &TracingEvent<'_>, _ctx: Context<'_, S>) {
        let name = event.metadata().name();
        match &self.behaviour {
            Behaviour::Record => {}
            Behaviour::PanicOn(target) if *target == name => panic!("sink failure"),
            Behaviour::PanicOn(_) => {}
            Behaviour::Block(gate) => gate.pass(),
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.records.lock().unwrap().push(Record {
            name: name.to_owned(),
            level: *event.metadata().level(),
            fields: fields.0,
        });
    }
}

/// A dispatcher that records every event (all levels) into the returned list.
pub fn capture(behaviour: Behaviour) -> (Dispatch, Arc<Mutex<Vec<Record>>>) {
    let records = Arc::new(Mutex::new(Vec::new()));
    let layer = Capture {
        records: records.clone(),
        behaviour,
    };
    (Dispatch::new(Registry::default().with(layer)), records)
}

pub fn envelope(run: &str, sequence: u64, event: Event) -> Envelope {
    Envelope::new(
        agent_core::RunId::new(run).expect("a valid run id"),
        sequence,
        Timestamp::from_unix_nanos(1_000 + sequence),
        event,
    )
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
