//! The `agent-client` adapter for a Restate cluster (docs/scale-out.md, "Clients"):
//! [`RestateConnector`] opens [`RestateSession`]s that start, stream, answer and cancel runs
//! through the cluster's ingress, so a UI or the `agent` CLI written against the seam drives
//! runs on a cluster as it drives them in the local daemon.
//!
//! What differs from the daemon, and why:
//!
//! - **Polling, not pushing.** The ingress answers requests; it does not stream. A tailing
//!   event stream reads `RunRecord/<run>/events` every [`EVENT_POLL_INTERVAL`], and the
//!   interaction stream reads the `state` of the runs it covers every
//!   [`INTERACTION_POLL_INTERVAL`].
//! - **Interactions cover the runs this session knows.** The seam's interaction stream is
//!   session-wide, but the cluster keeps pending interactions per run and has no owner of a
//!   run: a session covers the runs it started or streamed events of.
//! - **Mutations are idempotent by their operation id.** It is the request's idempotency
//!   key, so the ingress's retries while the cluster is unreachable run a mutation once; a
//!   mutation whose answer never came is [`c::Error::UncertainOperation`], and repeating the
//!   same operation id is safe.
//! - **No snapshots.** A run on the cluster is durable without them: `suspend`, `resume`,
//!   `export` and `import` need the [`SNAPSHOTS_CAPABILITY`] this adapter never offers.
//!
//! | the cluster says | the seam's error |
//! |---|---|
//! | 400 bad input | `Status(InvalidArgument)` |
//! | 401, 403 | `Status(Unauthenticated)` |
//! | 404 unknown definition, run or interaction | `Status(NotFound)` |
//! | 408 | `Status(DeadlineExceeded)`, retryable |
//! | 409 taken id, second answer | `Status(Conflict)` |
//! | 429 | `Status(Unavailable)`, retryable |
//! | another 4xx | `Status(Internal)` |
//! | unreachable past the retry budget: a read | `Status(Unavailable)`, retryable |
//! | unreachable past the retry budget: a mutation | `UncertainOperation` |
//! | an answer that is not what the handler returns | `Protocol` |

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_client as c;
use agent_protocol::pb::engine::v1 as pbe;
use prost::Message as _;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::ingress::{Ingress, IngressError, Target};
use crate::record::{
    Answer, CatalogEntry, EventPage, EventQuery, IndexedRun, MAX_EVENTS_PER_PAGE, MAX_INDEXED_RUNS,
    PendingInteraction, RunState, StartRun, WireEvent,
};
use crate::services::{
    BAD_INPUT, CONFLICT, INDEX_KEY, NOT_FOUND, RUN_INDEX, RUN_RECORD, RUNS, terminal_name,
};

/// How often a tailing event stream asks the run's record for new events.
pub const EVENT_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How often a tailing interaction stream asks the runs it covers for their pending
/// interactions.
pub const INTERACTION_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The revision of every definition the cluster serves: its workers serve one revision of
/// each definition id at a time, and the cluster does not name it.
pub const DEFINITION_REVISION: &str = "restate";
/// The revision of the cluster's catalog.
pub const CATALOG_REVISION: &str = "restate";
/// The component of the build a connection names as its server.
pub const SERVER_COMPONENT: &str = "agent-restate";
/// The prefix of the run ids a session chooses; 32 hex digits from the OS random source
/// follow it.
pub const RUN_ID_PREFIX: &str = "run-";
/// The prefix of the client ids a session is given.
pub const CLIENT_ID_PREFIX: &str = "restate-";
/// The capability `suspend`, `resume`, `export` and `import` need, which a cluster
/// connection never offers.
pub const SNAPSHOTS_CAPABILITY: &str = agent_protocol::limits::CAPABILITY_SNAPSHOTS;

/// The protocol's major version this adapter speaks.
pub const PROTOCOL_MAJOR: u32 = 1;
/// The newest protocol minor: the seam's current one (1.3, attempt ids). A session offers
/// every minor from 0 to it and selects the newest the request allows.
pub const PROTOCOL_MINOR: u32 = c::INITIALIZATION_ATTEMPT_MINIMUM_MINOR;

/// The largest message a connection allows, in bytes.
pub const MAX_MESSAGE_BYTES: u64 = 16 << 20;
/// The most definitions in the catalog and interactions pending at once in one stream.
pub const MAX_COLLECTION_ITEMS: u32 = 1024;
/// The most events in one replay page: one `events` page of the run record.
pub const MAX_REPLAY_EVENTS: u32 = MAX_EVENTS_PER_PAGE as u32;
/// The most encoded bytes of events in one replay page.
pub const MAX_REPLAY_BYTES: u64 = 8 << 20;
/// The most streams one session keeps open at once.
pub const MAX_CONCURRENT_STREAMS: u32 = 16;
/// The most active runs health reports: the run index's bound (a cluster adds workers
/// rather than refusing runs).
pub const MAX_ACTIVE_RUNS: u32 = MAX_INDEXED_RUNS as u32;

/// The limits of a cluster connection, from the constants above.
pub fn server_limits() -> c::Limits {
    c::Limits::new(
        MAX_MESSAGE_BYTES,
        MAX_COLLECTION_ITEMS,
        MAX_REPLAY_EVENTS,
        MAX_REPLAY_BYTES,
        MAX_CONCURRENT_STREAMS,
        MAX_ACTIVE_RUNS,
    )
    .expect("the adapter's limits are positive and consistent")
}

/// Opens sessions on the cluster whose ingress it was built from.
///
/// ```no_run
/// use agent_client::{Connector as _, Session as _, *};
/// use agent_restate::client::RestateConnector;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let connector = RestateConnector::new("http://127.0.0.1:8080")?;
/// let v = |minor| ProtocolVersion::new(1, minor, 0);
/// let request = InitializeRequest::new(
///     ProtocolRange::new(v(0)?, v(2)?)?,
///     Build::new("my-ui", "0.1.0", "abc123", "rustc")?,
///     vec![],
///     vec![],
///     Limits::new(4 << 20, 256, 256, 4 << 20, 8, 8)?,
/// )?;
/// let session = connector.initialize(request).await?;
/// for definition in session.connection().catalog().definitions() {
///     println!("{} ({})", definition.reference().id(), definition.model());
/// }
/// for run in connector.list_runs().await? {
///     println!("{} {:?}", run.run_id, run.ended);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RestateConnector {
    ingress: Ingress,
}

impl RestateConnector {
    /// A connector for the cluster whose ingress is at `ingress_url` (`http://host:8080`).
    /// Nothing is sent until [`c::Connector::initialize`].
    pub fn new(ingress_url: &str) -> Result<RestateConnector, IngressError> {
        Ok(RestateConnector {
            ingress: Ingress::new(ingress_url)?,
        })
    }

    /// The ingress this connector calls.
    pub fn ingress(&self) -> &Ingress {
        &self.ingress
    }

    /// The runs in the cluster's run index, oldest first (at most
    /// [`MAX_INDEXED_RUNS`]). The seam has no call that
    /// lists runs; `agent runs --restate` uses this.
    pub async fn list_runs(&self) -> Result<Vec<IndexedRun>, c::Error> {
        list_runs(&self.ingress).await
    }
}

impl c::Connector for RestateConnector {
    type Session = RestateSession;

    /// Checks the ingress's health (once: an unreachable cluster is refused at once with a
    /// retryable `Status(Unavailable)`), negotiates the protocol, capabilities and limits,
    /// and reads the catalog.
    async fn initialize(&self, request: c::InitializeRequest) -> Result<RestateSession, c::Error> {
        if !self.ingress.healthy().await {
            return Err(c::Error::status(
                c::StatusCode::Unavailable,
                "the cluster's ingress does not answer its health check",
                true,
            ));
        }
        let protocol = select_protocol(request.protocol())?;
        if !request.required_capabilities().is_empty() {
            let required = request.required_capabilities().to_vec();
            let facts = fixed_facts("this cluster offers no capabilities", false, None);
            return Err(c::CapabilityMismatchError::new(
                required.clone(),
                Vec::new(),
                required,
                facts,
            )?
            .into());
        }
        let limits = negotiate_limits(request.limits())?;
        let catalog = read_catalog(&self.ingress, &limits).await?;
        let health = cluster_health(&self.ingress).await?;
        let (client_id, epoch) = match request.reconnect_claim() {
            // The cluster fences nobody: a reconnect simply continues at the next epoch.
            Some(claim) => (claim.client_id().to_owned(), claim.expected_epoch() + 1),
            None => (format!("{CLIENT_ID_PREFIX}{}", random_hex()?), 1),
        };
        let server = c::Build::new(
            SERVER_COMPONENT,
            env!("CARGO_PKG_VERSION"),
            option_env!("AGENT_BUILD_COMMIT").unwrap_or("unknown"),
            "rustc",
        )?;
        let connection = c::Connection::new(c::ConnectionSpec {
            protocol,
            server,
            capabilities: Vec::new(),
            limits,
            health,
            client_id,
            epoch,
            catalog,
        })?;
        Ok(RestateSession {
            shared: Arc::new(Shared {
                ingress: self.ingress.clone(),
                connection,
                closed: watch::Sender::new(false),
                runs: Mutex::new(BTreeMap::new()),
                streams: AtomicU32::new(0),
            }),
        })
    }
}

/// The newest version both the request's range and `1.0.0..=1.PROTOCOL_MINOR.0` hold.
fn select_protocol(requested: &c::ProtocolRange) -> Result<c::ProtocolVersion, c::Error> {
    let ours = c::ProtocolRange::new(
        c::ProtocolVersion::new(PROTOCOL_MAJOR, 0, 0)?,
        c::ProtocolVersion::new(PROTOCOL_MAJOR, PROTOCOL_MINOR, 0)?,
    )?;
    if !requested.overlaps(&ours) {
        let facts = fixed_facts("no common protocol version", false, None);
        return Err(c::VersionMismatchError::new(*requested, ours, facts)?.into());
    }
    Ok(requested.maximum().min(ours.maximum()))
}

/// Each of the client's limits, bounded by this adapter's.
fn negotiate_limits(client: &c::Limits) -> Result<c::Limits, c::Error> {
    let ours = server_limits();
    Ok(c::Limits::new(
        client.message_bytes().min(ours.message_bytes()),
        client.collection_items().min(ours.collection_items()),
        client.replay_events().min(ours.replay_events()),
        client.replay_bytes().min(ours.replay_bytes()),
        client.concurrent_streams().min(ours.concurrent_streams()),
        client.active_runs().min(ours.active_runs()),
    )?)
}

async fn read_catalog(ingress: &Ingress, limits: &c::Limits) -> Result<c::Catalog, c::Error> {
    let entries: Vec<CatalogEntry> = match ingress
        .call(&Target::service(RUNS, "catalog"), &(), None)
        .await
    {
        Ok(entries) => entries,
        // The ingress does not know the service: no worker has registered yet.
        Err(IngressError::Refused {
            status: NOT_FOUND, ..
        }) => return Err(no_workers()),
        Err(e) => return Err(read_error(e)),
    };
    let mut definitions = BTreeMap::new();
    for entry in entries {
        let reference = c::DefinitionRef::new(&entry.id, DEFINITION_REVISION).map_err(protocol)?;
        let definition =
            c::Definition::new(reference, &entry.model, entry.max_turns).map_err(protocol)?;
        definitions.insert(entry.id, definition);
    }
    if definitions.is_empty() {
        return Err(no_workers());
    }
    let observed = definitions.len() as u64;
    if observed > u64::from(limits.collection_items()) {
        let facts = fixed_facts("the catalog exceeds the collection limit", false, None);
        return Err(c::OverloadError::new(
            "catalog-definitions",
            u64::from(limits.collection_items()),
            observed,
            facts,
        )?
        .into());
    }
    Ok(c::Catalog::new(
        CATALOG_REVISION,
        definitions.into_values().collect(),
        limits,
    )?)
}

fn no_workers() -> c::Error {
    c::Error::status(
        c::StatusCode::Unavailable,
        "no worker serves a definition on this cluster yet",
        true,
    )
}

/// Ready, with the runs the index lists as not ended.
async fn cluster_health(ingress: &Ingress) -> Result<c::Health, c::Error> {
    let limits = server_limits();
    let active = list_runs(ingress)
        .await?
        .iter()
        .filter(|run| run.ended.is_none())
        .count() as u64;
    Ok(c::Health::new(
        c::HealthState::Ready,
        Vec::new(),
        active.min(u64::from(limits.active_runs())),
        limits,
    )?)
}

async fn list_runs(ingress: &Ingress) -> Result<Vec<IndexedRun>, c::Error> {
    ingress
        .call(&Target::keyed(RUN_INDEX, INDEX_KEY, "list"), &(), None)
        .await
        .map_err(read_error)
}

/// 16 bytes of the OS random source, in hex.
fn random_hex() -> Result<String, c::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|_| {
        c::Error::status(c::StatusCode::Internal, "the OS random source failed", true)
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A value the cluster sent that does not fit the seam: the cluster broke the contract.
fn protocol<T>(_: T) -> c::Error {
    c::Error::Protocol(c::Error::PROTOCOL_VIOLATION)
}

/// Facts with a fixed adapter message.
fn fixed_facts(
    message: &'static str,
    retryable: bool,
    op: Option<&c::OperationId>,
) -> c::ErrorFacts {
    c::ErrorFacts::new(message, retryable, op.cloned())
        .expect("the adapter's fixed messages are tokens")
}

/// The seam's error for a refusal (a handler's terminal error or the ingress's own 4xx):
/// the code by the status (see the module's table), the handler's message when it is a
/// token of the allowed size, else the code's name.
pub fn refusal_error(status: u16, message: &str, operation: Option<&c::OperationId>) -> c::Error {
    use c::StatusCode as S;
    let (code, retryable) = match status {
        BAD_INPUT => (S::InvalidArgument, false),
        401 | 403 => (S::Unauthenticated, false),
        NOT_FOUND => (S::NotFound, false),
        408 => (S::DeadlineExceeded, true),
        CONFLICT => (S::Conflict, false),
        429 => (S::Unavailable, true),
        _ => (S::Internal, false),
    };
    let facts = c::ErrorFacts::new(message.trim(), retryable, operation.cloned())
        .or_else(|_| c::ErrorFacts::new(code.name(), retryable, operation.cloned()))
        .expect("a status code's name is a token");
    c::Error::Status(c::StatusError { code, facts })
}

/// The error of a read-only call.
fn read_error(error: IngressError) -> c::Error {
    match error {
        IngressError::Refused { status, message } => refusal_error(status, &message, None),
        IngressError::Unavailable(_) => c::Error::status(
            c::StatusCode::Unavailable,
            "the cluster is unavailable",
            true,
        ),
        IngressError::Malformed(_) => protocol(()),
    }
}

/// The error of a mutation (`kind`: `start`, `respond`, `cancel`) sent with `operation`
/// as its idempotency key.
fn mutation_error(error: IngressError, operation: &c::OperationId, kind: &str) -> c::Error {
    match error {
        IngressError::Refused { status, message } => {
            refusal_error(status, &message, Some(operation))
        }
        // The request may have run: repeating the same operation id is safe, a new one is not.
        IngressError::Unavailable(_) => {
            let facts = fixed_facts("mutation outcome is uncertain", true, Some(operation));
            c::UncertainOperationError::new(operation.clone(), kind, facts)
                .map_or_else(c::Error::Invalid, c::Error::from)
        }
        IngressError::Malformed(_) => protocol(()),
    }
}

/// A session on the cluster. Cheap to share behind an `Arc`; dropping it closes it.
pub struct RestateSession {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RestateSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestateSession")
            .field("ingress", &self.shared.ingress.base())
            .finish_non_exhaustive()
    }
}

struct Shared {
    ingress: Ingress,
    connection: c::Connection,
    closed: watch::Sender<bool>,
    /// The runs the session's interaction streams cover, and whether each was seen ended
    /// (an ended run has nothing pending and is not asked again).
    runs: Mutex<BTreeMap<c::RunRef, bool>>,
    /// Streams open now.
    streams: AtomicU32,
}

impl Shared {
    fn check_open(&self) -> Result<(), c::Error> {
        if *self.closed.borrow() {
            Err(c::Error::Closed)
        } else {
            Ok(())
        }
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, BTreeMap<c::RunRef, bool>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn track(&self, run: &c::RunRef) {
        self.runs().entry(run.clone()).or_insert(false);
    }

    fn is_tracked(&self, run: &c::RunRef) -> bool {
        self.runs().contains_key(run)
    }

    fn mark_ended(&self, run: &c::RunRef) {
        self.runs().insert(run.clone(), true);
    }

    /// The covered runs not seen ended.
    fn live_runs(&self) -> Vec<c::RunRef> {
        self.runs()
            .iter()
            .filter(|(_, ended)| !**ended)
            .map(|(run, _)| run.clone())
            .collect()
    }

    fn record<'a>(run: &'a c::RunRef, handler: &'a str) -> Target<'a> {
        Target::keyed(RUN_RECORD, run.as_str(), handler)
    }

    async fn state(&self, run: &c::RunRef) -> Result<RunState, c::Error> {
        self.ingress
            .call(&Self::record(run, "state"), &(), None)
            .await
            .map_err(read_error)
    }

    async fn events_after(
        &self,
        run: &c::RunRef,
        after: u64,
        limit: u32,
    ) -> Result<EventPage, c::Error> {
        self.ingress
            .call(
                &Self::record(run, "events"),
                &EventQuery { after, limit },
                None,
            )
            .await
            .map_err(read_error)
    }

    /// `Status(NotFound)` unless the run exists: this session knows it, its record has
    /// something, or the index lists it. Asked before a call that would otherwise wait for
    /// a run that never comes, or create a record for it.
    async fn ensure_exists(&self, run: &c::RunRef) -> Result<(), c::Error> {
        if self.is_tracked(run) {
            return Ok(());
        }
        let state = self.state(run).await?;
        if state.last_sequence > 0 || state.ended.is_some() || !state.pending.is_empty() {
            return Ok(());
        }
        let runs = list_runs(&self.ingress).await?;
        if runs.iter().any(|r| r.run_id == run.as_str()) {
            return Ok(());
        }
        Err(refusal_error(
            NOT_FOUND,
            "no such run on this cluster",
            None,
        ))
    }

    /// Takes a stream slot, or refuses with `Overload` when the negotiated number of
    /// streams is open.
    fn open_stream(self: &Arc<Self>) -> Result<StreamSlot, c::Error> {
        let limit = self.connection.limits().concurrent_streams();
        let taken = self
            .streams
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |open| {
                (open < limit).then_some(open + 1)
            });
        match taken {
            Ok(_) => Ok(StreamSlot {
                shared: self.clone(),
            }),
            Err(open) => {
                let facts = fixed_facts("too many streams are open", true, None);
                Err(c::OverloadError::new(
                    "concurrent-streams",
                    u64::from(limit),
                    u64::from(open) + 1,
                    facts,
                )?
                .into())
            }
        }
    }

    fn close(&self) {
        self.closed.send_replace(true);
    }
}

/// One open stream, counted until it is dropped.
struct StreamSlot {
    shared: Arc<Shared>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.shared.streams.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for RestateSession {
    fn drop(&mut self) {
        self.shared.close();
    }
}

impl c::Session for RestateSession {
    type Events = RestateEventStream;
    type Interactions = RestateInteractionStream;

    fn connection(&self) -> &c::Connection {
        &self.shared.connection
    }

    /// Starts a run under a fresh id (`run-` and 32 hex digits) through `Runs/start`, with
    /// the operation id as the idempotency key: a repeated operation answers the first run,
    /// marked duplicate.
    async fn start(&self, request: c::StartRequest) -> Result<c::StartResult, c::Error> {
        self.shared.check_open()?;
        let operation = &request.operation;
        if request.definition.revision() != DEFINITION_REVISION {
            return Err(refusal_error(
                NOT_FOUND,
                "this cluster serves no such definition revision",
                Some(operation),
            ));
        }
        let run_id = format!("{RUN_ID_PREFIX}{}", random_hex()?);
        let start = StartRun {
            run_id: run_id.clone(),
            definition: request.definition.id().to_owned(),
            input: request.input.text().to_owned(),
        };
        let started: String = self
            .shared
            .ingress
            .call(
                &Target::service(RUNS, "start"),
                &start,
                Some(operation.as_str()),
            )
            .await
            .map_err(|e| mutation_error(e, operation, "start"))?;
        let run = c::RunRef::new(&started).map_err(protocol)?;
        self.shared.track(&run);
        c::StartResult::new(run, 1, started != run_id, request.definition.id()).map_err(protocol)
    }

    /// The page of the run's events after the cursor (at most the options' limit and the
    /// negotiated replay bytes), its control, then, when tailing, the run's new events as
    /// they are published (asked every [`EVENT_POLL_INTERVAL`]) up to its terminal event,
    /// after which the stream ends. Covers the run in this session's interaction streams.
    async fn events(
        &self,
        cursor: c::Cursor,
        options: c::EventStreamOptions,
    ) -> Result<RestateEventStream, c::Error> {
        let shared = &self.shared;
        shared.check_open()?;
        let slot = shared.open_stream()?;
        let life = Lifetime::new(shared);
        let run = cursor.run().clone();
        let after = cursor.after();
        let page = life
            .until_closed(shared.events_after(&run, after, options.limit()))
            .await??;
        if page.last_sequence == 0 {
            life.until_closed(shared.ensure_exists(&run)).await??;
        }
        shared.track(&run);
        let latest = page.last_sequence;
        if after > latest {
            if latest == 0 {
                return Err(refusal_error(
                    BAD_INPUT,
                    "the cursor lies after the run's last event",
                    None,
                ));
            }
            let facts = fixed_facts("the cursor lies after the run's last event", false, None);
            return Err(c::CursorGapError::new(run, after, 1, latest, latest, facts)?.into());
        }
        let limits = *shared.connection.limits();
        let mut buffered = VecDeque::new();
        let mut page_last = after;
        let mut bytes = 0u64;
        let mut ended = false;
        for wire in page.events {
            let (event, size) = decode(&run, wire, page_last)?;
            bytes = bytes.saturating_add(size);
            if bytes > limits.replay_bytes() {
                if buffered.is_empty() {
                    let facts = fixed_facts("an event exceeds the replay bytes", false, None);
                    return Err(c::OverloadError::new(
                        "replay-bytes",
                        limits.replay_bytes(),
                        bytes,
                        facts,
                    )?
                    .into());
                }
                break;
            }
            page_last = event.sequence();
            ended = is_run_terminal(&event);
            buffered.push_back(c::EventFrame::Event(event));
            if ended {
                break;
            }
        }
        let has_more = page_last < latest;
        // Nothing follows a cursor at or past the run's terminal event.
        if !ended && !has_more && page.ended.is_some() && latest > 0 {
            ended = life
                .until_closed(last_event_is_terminal(shared, &run, latest))
                .await??;
        }
        let tailing = options.tail() && !has_more && !ended;
        let control = c::EventControl::new(1, latest, page_last, page_last, has_more, tailing)
            .map_err(protocol)?;
        buffered.push_back(c::EventFrame::Control(control));
        Ok(RestateEventStream {
            shared: shared.clone(),
            run,
            buffered,
            delivered: page_last,
            tailing,
            done: false,
            next_poll: Instant::now() + EVENT_POLL_INTERVAL,
            life,
            _slot: slot,
        })
    }

    /// The pending interactions of the runs this session started or streamed events of
    /// (a snapshot and its control), then, when tailing, their openings and closings as
    /// seen every [`INTERACTION_POLL_INTERVAL`]; runs the session starts or streams later
    /// are covered from then on.
    async fn interactions(
        &self,
        options: c::InteractionStreamOptions,
    ) -> Result<RestateInteractionStream, c::Error> {
        let shared = &self.shared;
        shared.check_open()?;
        let slot = shared.open_stream()?;
        let life = Lifetime::new(shared);
        let pending = life.until_closed(pending_now(shared)).await??;
        let limit = shared.connection.limits().collection_items();
        if pending.len() > limit as usize {
            return Err(pending_overload(limit, pending.len()));
        }
        let revision = 0;
        let snapshot =
            c::InteractionSnapshot::new(revision, pending.values().cloned().collect(), limit)?;
        let control = c::InteractionControl::new(revision, revision, false, options.tail)?;
        Ok(RestateInteractionStream {
            shared: shared.clone(),
            buffered: VecDeque::from([
                c::InteractionFrame::Snapshot(snapshot),
                c::InteractionFrame::Control(control),
            ]),
            pending,
            revision,
            tailing: options.tail,
            done: false,
            next_poll: Instant::now() + INTERACTION_POLL_INTERVAL,
            life,
            _slot: slot,
        })
    }

    /// `RunRecord/<run>/cancel`: `Requested`, or `AlreadyTerminal` with the terminal
    /// event's sequence. An unknown run is `Status(NotFound)`.
    async fn cancel(
        &self,
        operation: c::OperationId,
        run: c::RunRef,
        _reason: Option<c::CancelReason>,
    ) -> Result<c::CancelResult, c::Error> {
        self.shared.check_open()?;
        self.shared.ensure_exists(&run).await?;
        let state: RunState = self
            .shared
            .ingress
            .call(
                &Shared::record(&run, "cancel"),
                &(),
                Some(operation.as_str()),
            )
            .await
            .map_err(|e| mutation_error(e, &operation, "cancel"))?;
        match state.ended {
            Some(_) => c::CancelResult::new(false, true, state.last_sequence).map_err(protocol),
            None => Ok(c::CancelResult::Requested),
        }
    }

    /// `RunRecord/<run>/answer`: 400 (malformed, or not what the schema allows), 404 (not
    /// pending) and 409 (answered before) keep their codes.
    async fn respond(
        &self,
        operation: c::OperationId,
        run: c::RunRef,
        interaction: c::InteractionId,
        value: c::StructuredValue,
    ) -> Result<c::RespondResult, c::Error> {
        self.shared.check_open()?;
        let answer = Answer {
            interaction_id: interaction.as_str().to_owned(),
            value: serde_json::from_slice(value.encode_transfer()).map_err(|_| {
                c::Error::Invalid(c::ValueError::new("structured value is not valid JSON"))
            })?,
        };
        let () = self
            .shared
            .ingress
            .call(
                &Shared::record(&run, "answer"),
                &answer,
                Some(operation.as_str()),
            )
            .await
            .map_err(|e| mutation_error(e, &operation, "respond"))?;
        Ok(c::RespondResult::Accepted)
    }

    async fn suspend(
        &self,
        _operation: c::OperationId,
        _run: c::RunRef,
    ) -> Result<c::SuspendResult, c::Error> {
        Err(self.no_snapshots())
    }

    async fn resume(
        &self,
        _operation: c::OperationId,
        _run: c::RunRef,
    ) -> Result<c::ResumeResult, c::Error> {
        Err(self.no_snapshots())
    }

    async fn export(&self, _run: c::RunRef) -> Result<c::Snapshot, c::Error> {
        Err(self.no_snapshots())
    }

    async fn import(
        &self,
        _operation: c::OperationId,
        _snapshot: c::Snapshot,
    ) -> Result<c::ImportResult, c::Error> {
        Err(self.no_snapshots())
    }

    /// Ready while the ingress answers its health check (else a retryable
    /// `Status(Unavailable)`), with the runs the index lists as not ended.
    async fn health(&self) -> Result<c::Health, c::Error> {
        self.shared.check_open()?;
        if !self.shared.ingress.healthy().await {
            return Err(c::Error::status(
                c::StatusCode::Unavailable,
                "the cluster's ingress does not answer its health check",
                true,
            ));
        }
        cluster_health(&self.shared.ingress).await
    }

    fn close(&self) {
        self.shared.close();
    }
}

impl RestateSession {
    /// `Error::CapabilityMismatch` for the snapshot operations: the session is closed, or
    /// the connection lacks [`SNAPSHOTS_CAPABILITY`] (always).
    fn no_snapshots(&self) -> c::Error {
        if let Err(closed) = self.shared.check_open() {
            return closed;
        }
        let facts = fixed_facts(
            "runs on a Restate cluster are durable without snapshots",
            false,
            None,
        );
        let required = vec![SNAPSHOTS_CAPABILITY.to_owned()];
        c::CapabilityMismatchError::new(
            required.clone(),
            self.shared.connection.capabilities().to_vec(),
            required,
            facts,
        )
        .map_or_else(c::Error::Invalid, c::Error::from)
    }
}

/// One wire event of `run` as a seam event, through the gRPC adapter's strict decoder, and
/// its encoded size; it must follow `previous`.
fn decode(run: &c::RunRef, wire: WireEvent, previous: u64) -> Result<(c::Event, u64), c::Error> {
    if Some(wire.sequence) != previous.checked_add(1) {
        return Err(c::Error::Protocol("the run's events are not contiguous"));
    }
    let event = pbe::RunEvent {
        run_id: run.as_str().to_owned(),
        sequence: wire.sequence,
        unix_nano: wire.unix_nano,
        kind: wire.kind,
        payload_json: wire.payload_json.into_bytes(),
        terminal: wire.terminal,
    };
    let size = event.encoded_len() as u64;
    Ok((agent_client_grpc::decode_event(&event)?, size))
}

fn is_run_terminal(event: &c::Event) -> bool {
    matches!(
        event.kind(),
        c::EventKind::RunCompleted | c::EventKind::RunFailed | c::EventKind::RunCancelled
    )
}

/// Whether the run's event at `latest` ends the run.
async fn last_event_is_terminal(
    shared: &Shared,
    run: &c::RunRef,
    latest: u64,
) -> Result<bool, c::Error> {
    let page = shared.events_after(run, latest - 1, 1).await?;
    Ok(page
        .events
        .first()
        .is_some_and(|e| e.sequence == latest && terminal_name(e.kind).is_some()))
}

/// The pending interactions of the session's live runs, by (run, id); a run seen ended is
/// not asked again.
async fn pending_now(
    shared: &Shared,
) -> Result<BTreeMap<(c::RunRef, c::InteractionId), c::PendingInteraction>, c::Error> {
    let mut pending = BTreeMap::new();
    for run in shared.live_runs() {
        let state = shared.state(&run).await?;
        if state.ended.is_some() {
            shared.mark_ended(&run);
            continue;
        }
        for interaction in state.pending {
            let interaction = pending_interaction(&run, interaction)?;
            pending.insert((run.clone(), interaction.id().clone()), interaction);
        }
    }
    Ok(pending)
}

fn pending_interaction(
    run: &c::RunRef,
    pending: PendingInteraction,
) -> Result<c::PendingInteraction, c::Error> {
    let schema = serde_json::to_vec(&pending.schema).map_err(protocol)?;
    c::PendingInteraction::new(
        run.clone(),
        c::InteractionId::new(&pending.id).map_err(protocol)?,
        &pending.kind,
        &pending.prompt,
        c::StructuredValue::parse(schema).map_err(protocol)?,
    )
    .map_err(protocol)
}

fn pending_overload(limit: u32, observed: usize) -> c::Error {
    let facts = fixed_facts("too many interactions are pending", true, None);
    c::OverloadError::new(
        "pending-interactions",
        u64::from(limit),
        observed as u64,
        facts,
    )
    .map_or_else(c::Error::Invalid, c::Error::from)
}

/// A stream's own close signal and its session's.
struct Lifetime {
    own: watch::Sender<bool>,
    session: watch::Receiver<bool>,
}

impl Lifetime {
    fn new(shared: &Shared) -> Lifetime {
        Lifetime {
            own: watch::Sender::new(false),
            session: shared.closed.subscribe(),
        }
    }

    fn closed(&self) -> bool {
        *self.own.borrow() || *self.session.borrow()
    }

    /// Runs `work` unless the stream or its session closes first.
    async fn until_closed<T>(&self, work: impl Future<Output = T>) -> Result<T, c::Error> {
        let mut own = self.own.subscribe();
        let mut session = self.session.clone();
        tokio::select! {
            biased;
            _ = own.wait_for(|closed| *closed) => Err(c::Error::Closed),
            _ = session.wait_for(|closed| *closed) => Err(c::Error::Closed),
            value = work => Ok(value),
        }
    }

    /// Sleeps until `deadline` unless the stream or its session closes first.
    async fn sleep_until(&self, deadline: Instant) -> Result<(), c::Error> {
        self.until_closed(tokio::time::sleep_until(deadline)).await
    }
}

/// A run's events: the first page and its control, then, when tailing, the events polled
/// until the run's terminal one. One reader.
pub struct RestateEventStream {
    shared: Arc<Shared>,
    run: c::RunRef,
    buffered: VecDeque<c::EventFrame>,
    /// The last sequence put in `buffered`.
    delivered: u64,
    tailing: bool,
    /// The run's terminal event was buffered, or the stream failed.
    done: bool,
    next_poll: Instant,
    life: Lifetime,
    _slot: StreamSlot,
}

impl std::fmt::Debug for RestateEventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestateEventStream")
            .field("run", &self.run)
            .field("delivered", &self.delivered)
            .finish_non_exhaustive()
    }
}

impl RestateEventStream {
    /// Polls until new events are buffered.
    async fn poll(&mut self) -> Result<(), c::Error> {
        let limit = self.shared.connection.limits().replay_events();
        while self.buffered.is_empty() {
            self.life.sleep_until(self.next_poll).await?;
            self.next_poll = Instant::now() + EVENT_POLL_INTERVAL;
            let page = self
                .life
                .until_closed(self.shared.events_after(&self.run, self.delivered, limit))
                .await??;
            for wire in page.events {
                let (event, _) = decode(&self.run, wire, self.delivered)?;
                self.delivered = event.sequence();
                let ended = is_run_terminal(&event);
                self.buffered.push_back(c::EventFrame::Event(event));
                if ended {
                    self.done = true;
                    break;
                }
            }
        }
        Ok(())
    }
}

impl c::EventStream for RestateEventStream {
    async fn next(&mut self) -> Result<Option<c::EventFrame>, c::Error> {
        if self.life.closed() {
            return Err(c::Error::Closed);
        }
        if let Some(frame) = self.buffered.pop_front() {
            if matches!(&frame, c::EventFrame::Event(e) if is_run_terminal(e)) {
                self.done = true;
            }
            return Ok(Some(frame));
        }
        if self.done || !self.tailing {
            return Ok(None);
        }
        if let Err(error) = self.poll().await {
            self.done = true;
            return Err(error);
        }
        Ok(self.buffered.pop_front())
    }

    fn close(&self) {
        self.life.own.send_replace(true);
    }
}

/// The pending interactions of the runs a session covers: a snapshot and its control,
/// then, when tailing, each opening and closing as polled. One reader.
pub struct RestateInteractionStream {
    shared: Arc<Shared>,
    buffered: VecDeque<c::InteractionFrame>,
    pending: BTreeMap<(c::RunRef, c::InteractionId), c::PendingInteraction>,
    revision: u64,
    tailing: bool,
    /// The stream failed.
    done: bool,
    next_poll: Instant,
    life: Lifetime,
    _slot: StreamSlot,
}

impl std::fmt::Debug for RestateInteractionStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestateInteractionStream")
            .field("revision", &self.revision)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl RestateInteractionStream {
    /// Polls until the pending set changed, and buffers each change (closings first) with
    /// the next revision.
    async fn poll(&mut self) -> Result<(), c::Error> {
        let limit = self.shared.connection.limits().collection_items();
        while self.buffered.is_empty() {
            self.life.sleep_until(self.next_poll).await?;
            self.next_poll = Instant::now() + INTERACTION_POLL_INTERVAL;
            let now = self.life.until_closed(pending_now(&self.shared)).await??;
            let closed: Vec<_> = self
                .pending
                .iter()
                .filter(|(key, old)| now.get(key) != Some(old))
                .map(|(key, old)| (key.clone(), old.clone()))
                .collect();
            let opened: Vec<_> = now
                .iter()
                .filter(|(key, new)| self.pending.get(key) != Some(new))
                .map(|(key, new)| (key.clone(), new.clone()))
                .collect();
            for (key, interaction) in closed {
                self.pending.remove(&key);
                self.update(c::InteractionUpdateKind::Closed, interaction)?;
            }
            for (key, interaction) in opened {
                if self.pending.len() >= limit as usize {
                    return Err(pending_overload(limit, self.pending.len() + 1));
                }
                self.pending.insert(key, interaction.clone());
                self.update(c::InteractionUpdateKind::Opened, interaction)?;
            }
        }
        Ok(())
    }

    fn update(
        &mut self,
        kind: c::InteractionUpdateKind,
        interaction: c::PendingInteraction,
    ) -> Result<(), c::Error> {
        self.revision = self
            .revision
            .checked_add(1)
            .ok_or(c::Error::Protocol("the interaction revision overflowed"))?;
        let update = c::InteractionUpdate::new(self.revision, kind, interaction)?;
        self.buffered.push_back(c::InteractionFrame::Update(update));
        Ok(())
    }
}

impl c::InteractionStream for RestateInteractionStream {
    async fn next(&mut self) -> Result<Option<c::InteractionFrame>, c::Error> {
        if self.life.closed() {
            return Err(c::Error::Closed);
        }
        if let Some(frame) = self.buffered.pop_front() {
            return Ok(Some(frame));
        }
        if self.done || !self.tailing {
            return Ok(None);
        }
        if let Err(error) = self.poll().await {
            self.done = true;
            return Err(error);
        }
        Ok(self.buffered.pop_front())
    }

    fn close(&self) {
        self.life.own.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op() -> c::OperationId {
        c::OperationId::new("op-1").unwrap()
    }

    #[test]
    fn refusals_map_to_the_seam_s_codes() {
        use c::StatusCode as S;
        for (status, code, retryable) in [
            (400, S::InvalidArgument, false),
            (401, S::Unauthenticated, false),
            (403, S::Unauthenticated, false),
            (404, S::NotFound, false),
            (408, S::DeadlineExceeded, true),
            (409, S::Conflict, false),
            (429, S::Unavailable, true),
            (418, S::Internal, false),
        ] {
            let error = refusal_error(status, "the handler's words", None);
            assert_eq!(error.status_code(), Some(code), "{status}");
            assert_eq!(error.retryable(), retryable, "{status}");
            assert_eq!(error.facts().unwrap().message(), "the handler's words");
        }
        // A message that is not a token gives way to the code's name.
        let error = refusal_error(409, "two\nlines", Some(&op()));
        assert_eq!(error.facts().unwrap().message(), "conflict");
        assert_eq!(error.facts().unwrap().operation(), Some(&op()));
    }

    #[test]
    fn a_lost_mutation_is_uncertain_and_a_lost_read_is_retryable() {
        let lost = || IngressError::Unavailable("connection refused".into());
        let c::Error::UncertainOperation(uncertain) = mutation_error(lost(), &op(), "start") else {
            panic!("uncertain")
        };
        assert_eq!((uncertain.operation(), uncertain.kind()), (&op(), "start"));
        let read = read_error(lost());
        assert_eq!(read.status_code(), Some(c::StatusCode::Unavailable));
        assert!(read.retryable());
        assert!(matches!(
            read_error(IngressError::Malformed("x".into())),
            c::Error::Protocol(_)
        ));
    }

    #[test]
    fn the_protocol_is_the_newest_both_sides_hold() {
        let v = |minor| c::ProtocolVersion::new(1, minor, 0).unwrap();
        let range = |a, b| c::ProtocolRange::new(v(a), v(b)).unwrap();
        assert_eq!(select_protocol(&range(0, 2)).unwrap(), v(2));
        assert_eq!(select_protocol(&range(3, 9)).unwrap(), v(PROTOCOL_MINOR));
        assert!(matches!(
            select_protocol(&range(4, 9)),
            Err(c::Error::VersionMismatch(_))
        ));
    }

    #[test]
    fn limits_are_the_smaller_of_each_side() {
        let client = c::Limits::new(1 << 30, 8, 1000, 1 << 30, 2, 1).unwrap();
        let negotiated = negotiate_limits(&client).unwrap();
        assert_eq!(negotiated.message_bytes(), MAX_MESSAGE_BYTES);
        assert_eq!(negotiated.collection_items(), 8);
        assert_eq!(negotiated.replay_events(), MAX_REPLAY_EVENTS);
        assert_eq!(negotiated.replay_bytes(), MAX_REPLAY_BYTES);
        assert_eq!(negotiated.concurrent_streams(), 2);
        assert_eq!(negotiated.active_runs(), 1);
    }

    #[test]
    fn wire_events_decode_strictly_and_in_sequence() {
        let run = c::RunRef::new("run-1").unwrap();
        let started = |sequence| WireEvent {
            sequence,
            unix_nano: 1_700_000_000_000_000_000,
            kind: 1,
            payload_json: r#"{"definition":"fixture"}"#.into(),
            terminal: false,
        };
        let (event, size) = decode(&run, started(1), 0).unwrap();
        assert_eq!(
            (event.sequence(), event.kind()),
            (1, c::EventKind::RunStarted)
        );
        assert!(size > 0);
        assert!(matches!(
            decode(&run, started(3), 1),
            Err(c::Error::Protocol(_))
        ));
        let mut lying = started(1);
        lying.terminal = true;
        assert!(matches!(decode(&run, lying, 0), Err(c::Error::Protocol(_))));
    }
}
