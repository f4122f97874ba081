//! The gRPC connector: Initialize with the reconnect gate, fencing of the
//! prior local session, the one-retry rule for attempt ids, and response
//! validation (docs/client.md, "Connecting" and "Reconnect").

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use agent_client as c;
use agent_protocol::initialize::{
    validate_initialize_request, validate_initialize_response_for_request,
};
use agent_protocol::limits::INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES;
use agent_protocol::pb::engine::v1 as pbe;
use agent_protocol::pb::engine::v1::engine_service_client::EngineServiceClient;
use agent_protocol::status::is_ok;
use tokio::sync::Semaphore;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};

use crate::convert::{connection_from_wire, initialize_to_wire, limits_fit_platform, protocol};
use crate::session::{AUTHORIZATION_HEADER, GrpcSession, Link, Shared};
use crate::status::{Correlation, status_error, transport_error};

/// Waiters a client's reconnect gate admits besides its holder.
pub const RECONNECT_GATE_WAITERS: u64 = 1;
/// The overload resource name of a full reconnect gate.
pub const RECONNECT_WAITERS_RESOURCE: &str = "client-reconnect-waiters";
/// Attempts of an Initialize that carries an attempt id (one retry).
pub const ATTEMPTS_WITH_ATTEMPT_ID: usize = 2;
/// Attempts of a legacy Initialize (never retried).
pub const ATTEMPTS_LEGACY: usize = 1;

/// What the adapter needs: a channel to the daemon and its endpoint token.
pub struct Config {
    channel: Channel,
    authorization: MetadataValue<Ascii>,
}

impl Config {
    /// A channel over the Unix socket at `socket` (connected lazily, on the
    /// first call) and the endpoint token sent as `authorization: Bearer
    /// <token>` on every call. tonic implements no gRPC retry policy, so the
    /// transport can never replay a request on its own. Call it inside a
    /// tokio runtime: the channel's worker task is spawned on it.
    pub fn unix(socket: &Path, token: &str) -> Result<Self, c::ValueError> {
        let path = socket
            .to_str()
            .ok_or(c::ValueError::new("socket path is not UTF-8"))?;
        let endpoint = Endpoint::from_shared(format!("unix:{path}"))
            .map_err(|_| c::ValueError::new("socket path is not a valid endpoint"))?;
        Self::with_channel(endpoint.connect_lazy(), token)
    }

    /// Any tonic channel (for example one with a custom connector).
    pub fn with_channel(channel: Channel, token: &str) -> Result<Self, c::ValueError> {
        let authorization = format!("Bearer {token}")
            .parse()
            .map_err(|_| c::ValueError::new("endpoint token is not header-safe"))?;
        Ok(Self {
            channel,
            authorization,
        })
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Config([redacted])")
    }
}

/// One client id's reconnect gate: a holder and at most one waiter.
struct Gate {
    permit: Arc<Semaphore>,
    /// Holder plus waiters.
    entrants: u64,
}

struct Inner {
    link: Arc<Link>,
    gates: Mutex<HashMap<String, Gate>>,
}

/// Implements [`c::Connector`] over gRPC. Clones share one channel and one
/// fencing state, so keep one connector per daemon.
#[derive(Clone)]
pub struct GrpcConnector {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for GrpcConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GrpcConnector([redacted])")
    }
}

/// Leaves the gate on drop (also when the Initialize future is dropped).
struct GateEntry {
    inner: Arc<Inner>,
    client_id: String,
}

impl Drop for GateEntry {
    fn drop(&mut self) {
        let mut gates = self.inner.gates.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(gate) = gates.get_mut(&self.client_id) {
            gate.entrants -= 1;
            if gate.entrants == 0 {
                gates.remove(&self.client_id);
            }
        }
    }
}

impl GrpcConnector {
    /// A connector for `config`.
    pub fn new(config: Config) -> Self {
        Self {
            inner: Arc::new(Inner {
                link: Arc::new(Link {
                    channel: config.channel,
                    authorization: config.authorization,
                    sessions: Mutex::new(HashMap::new()),
                }),
                gates: Mutex::new(HashMap::new()),
            }),
        }
    }

    async fn enter_gate(
        &self,
        client_id: &str,
    ) -> Result<(GateEntry, tokio::sync::OwnedSemaphorePermit), c::Error> {
        let permit = {
            let mut gates = self.inner.gates.lock().unwrap_or_else(|p| p.into_inner());
            let gate = gates.entry(client_id.to_owned()).or_insert_with(|| Gate {
                permit: Arc::new(Semaphore::new(1)),
                entrants: 0,
            });
            if gate.entrants > RECONNECT_GATE_WAITERS {
                let facts =
                    c::ErrorFacts::new(agent_protocol::status::OVERLOAD_MESSAGE, true, None)?;
                return Err(c::OverloadError::new(
                    RECONNECT_WAITERS_RESOURCE,
                    RECONNECT_GATE_WAITERS,
                    RECONNECT_GATE_WAITERS + 1,
                    facts,
                )?
                .into());
            }
            gate.entrants += 1;
            gate.permit.clone()
        };
        let entry = GateEntry {
            inner: self.inner.clone(),
            client_id: client_id.to_owned(),
        };
        let permit = permit.acquire_owned().await.map_err(|_| c::Error::Closed)?;
        Ok((entry, permit))
    }

    /// Closes the live local session of the claim's client if its epoch is
    /// the claim's expected epoch, and waits until every one of its streams
    /// has finished. A claim for another epoch leaves it alone.
    async fn fence(&self, claim: &c::ReconnectClaim) {
        let prior = {
            let sessions = self
                .inner
                .link
                .sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            sessions.get(claim.client_id()).and_then(Weak::upgrade)
        };
        if let Some(prior) = prior
            && prior.connection.epoch() == claim.expected_epoch()
        {
            prior.close();
            prior.join_streams().await;
        }
    }

    async fn send(
        &self,
        wire: &pbe::InitializeRequest,
        request: &c::InitializeRequest,
    ) -> Result<pbe::InitializeResponse, c::Error> {
        let receive = usize::try_from(request.limits().message_bytes())
            .unwrap_or(usize::MAX)
            .max(INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES);
        let attempts = if request.attempt().is_some() {
            ATTEMPTS_WITH_ATTEMPT_ID
        } else {
            ATTEMPTS_LEGACY
        };
        let mut last = None;
        for _ in 0..attempts {
            let mut client = EngineServiceClient::new(self.inner.link.channel.clone())
                .max_encoding_message_size(INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES)
                .max_decoding_message_size(receive);
            // The same message value each time: prost encodes it
            // deterministically, so the resend is byte-identical.
            let mut call = tonic::Request::new(wire.clone());
            call.metadata_mut()
                .insert(AUTHORIZATION_HEADER, self.inner.link.authorization.clone());
            match client.initialize(call).await {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) => {
                    let again = status.code() == tonic::Code::Unavailable;
                    last = Some(status);
                    if !again {
                        break;
                    }
                }
            }
        }
        let status = last.expect("at least one attempt ran");
        Err(initialize_transport_error(&status, request))
    }
}

/// The fixed message of an Initialize whose outcome is unknown.
pub(crate) const INITIALIZE_UNKNOWN_MESSAGE: &str = "initialize outcome is unknown";

fn initialize_transport_error(status: &tonic::Status, request: &c::InitializeRequest) -> c::Error {
    use tonic::Code;
    match status.code() {
        Code::Unauthenticated
        | Code::PermissionDenied
        | Code::InvalidArgument
        | Code::OutOfRange => transport_error(status),
        _ => match request.attempt() {
            Some(attempt) => c::ErrorFacts::new(INITIALIZE_UNKNOWN_MESSAGE, true, None)
                .and_then(|facts| c::InitializationReplayError::new(*attempt, facts))
                .map(c::Error::from)
                .unwrap_or_else(c::Error::Invalid),
            // A legacy request has no replay: the daemon may have committed
            // a new epoch, so the same claim must not be sent again.
            None => c::Error::status(
                c::StatusCode::Unavailable,
                "initialize outcome is unknown; do not retry the same request",
                false,
            ),
        },
    }
}

impl c::Connector for GrpcConnector {
    type Session = GrpcSession;

    async fn initialize(&self, request: c::InitializeRequest) -> Result<GrpcSession, c::Error> {
        let wire = initialize_to_wire(&request);
        validate_initialize_request(&wire).map_err(|_| {
            c::Error::Invalid(c::ValueError::new("initialize request breaks the protocol"))
        })?;
        if !wire
            .requested_limits
            .as_ref()
            .is_some_and(limits_fit_platform)
        {
            return Err(c::Error::Invalid(c::ValueError::new(
                "requested limits exceed this platform",
            )));
        }
        let _gate = match request.reconnect_claim() {
            Some(claim) => {
                let gate = self.enter_gate(claim.client_id()).await?;
                self.fence(claim).await;
                Some(gate)
            }
            None => None,
        };
        let response = self.send(&wire, &request).await?;
        let negotiated =
            validate_initialize_response_for_request(&wire, &response).map_err(protocol)?;
        let Some(negotiated) = negotiated else {
            // A validated failure has a status; a daemon breaking that is a protocol fault.
            let status = response.status.as_ref().ok_or_else(|| protocol(()))?;
            let corr = Correlation {
                operation: None,
                epoch: request
                    .reconnect_claim()
                    .map(c::ReconnectClaim::expected_epoch),
                cursor: None,
            };
            debug_assert!(!is_ok(Some(status)));
            return Err(status_error(status, corr));
        };
        let connection = connection_from_wire(&response)?;
        let shared = Shared::new(self.inner.link.clone(), connection, negotiated);
        let mut sessions = self
            .inner
            .link
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let client_id = shared.connection.client_id().to_owned();
        if sessions
            .get(&client_id)
            .and_then(Weak::upgrade)
            .is_some_and(|s| !s.is_closed())
        {
            drop(sessions);
            shared.close();
            return Err(c::Error::Protocol(
                "daemon granted a second live session for one client",
            ));
        }
        sessions.insert(client_id, Arc::downgrade(&shared));
        Ok(GrpcSession::new(shared))
    }
}
