//! Which failures travel as gRPC status codes. Everything an application
//! decides (validation, ownership, conflicts, limits) travels as a typed
//! `Status` inside the response; a gRPC error is kept for the five
//! conditions below, where no response message can be trusted or produced.

/// A failure outside the application protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportFailure {
    /// The endpoint credential in the transport metadata is missing or wrong.
    Unauthenticated,
    /// The daemon is shutting down and admits no new calls.
    DaemonStopping,
    /// The caller cancelled the request.
    Cancelled,
    /// The request's deadline passed.
    DeadlineExceeded,
    /// A server stream broke before its terminal frame.
    BrokenStream,
}

impl TransportFailure {
    /// Every transport failure.
    pub const ALL: [Self; 5] = [
        Self::Unauthenticated,
        Self::DaemonStopping,
        Self::Cancelled,
        Self::DeadlineExceeded,
        Self::BrokenStream,
    ];
}

/// The gRPC code a transport failure travels as. A broken stream is
/// `Aborted` so a client can tell it from a stopping daemon (`Unavailable`).
pub fn grpc_code(failure: TransportFailure) -> tonic::Code {
    match failure {
        TransportFailure::Unauthenticated => tonic::Code::Unauthenticated,
        TransportFailure::DaemonStopping => tonic::Code::Unavailable,
        TransportFailure::Cancelled => tonic::Code::Cancelled,
        TransportFailure::DeadlineExceeded => tonic::Code::DeadlineExceeded,
        TransportFailure::BrokenStream => tonic::Code::Aborted,
    }
}

/// The transport failure a received gRPC code means, or `None` for a code
/// this protocol never sends (a client treats that as a protocol violation;
/// `Ok` is not a failure).
pub fn transport_failure(code: tonic::Code) -> Option<TransportFailure> {
    TransportFailure::ALL
        .into_iter()
        .find(|f| grpc_code(*f) == code)
}

/// A `tonic::Status` for a transport failure, with a fixed message.
pub fn grpc_status(failure: TransportFailure) -> tonic::Status {
    let message = match failure {
        TransportFailure::Unauthenticated => "endpoint authentication failed",
        TransportFailure::DaemonStopping => "daemon is stopping",
        TransportFailure::Cancelled => "request cancelled",
        TransportFailure::DeadlineExceeded => "request deadline exceeded",
        TransportFailure::BrokenStream => "stream broke",
    };
    tonic::Status::new(grpc_code(failure), message)
}
