//! Faults over the real socket: random bytes, malformed and oversized frames, a client
//! dropped mid-stream, another uid kept out by the private directory. After each fault the
//! daemon keeps serving the next client.

mod support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use agent_protocol::pb::common::v1::ErrorCode;
use agent_protocol::pb::engine::v1 as pb;
use agent_server::fixture::{FixtureOptions, PENDING_DEFINITION_ID};
use bytes::{Buf, BufMut};
use support::*;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// A codec that sends and receives message bytes as they are, so a test can put any
/// bytes inside a well-formed gRPC frame.
#[derive(Clone, Copy, Default)]
struct Raw;

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        Ok(Some(bytes.to_vec()))
    }
}

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

async fn raw_call(
    fixture: &Fixture,
    method: &str,
    body: Vec<u8>,
) -> Result<Vec<u8>, tonic::Status> {
    let channel = channel(&fixture.address).await;
    let mut grpc = tonic::client::Grpc::new(channel).max_encoding_message_size(usize::MAX);
    grpc.ready().await.unwrap();
    let mut request = tonic::Request::new(body);
    request.metadata_mut().insert(
        "authorization",
        fixture.token.authorization_value().parse().unwrap(),
    );
    let path = tonic::codegen::http::uri::PathAndQuery::try_from(format!(
        "/spice.agent.engine.v1.EngineService/{method}"
    ))
    .unwrap();
    grpc.unary(request, path, Raw)
        .await
        .map(tonic::Response::into_inner)
}

async fn still_serving(fixture: &Fixture) {
    let mut client = fixture.client().await;
    session(&mut client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_on_the_socket_close_that_connection_only() {
    let mut fixture = Fixture::start("random").await;
    let address = fixture.address.clone();
    tokio::task::spawn_blocking(move || {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..8 {
            let mut stream = UnixStream::connect(&address).unwrap();
            stream.set_read_timeout(Some(WAIT)).unwrap();
            let mut junk = vec![0u8; 4096 * (round + 1)];
            for byte in &mut junk {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *byte = seed as u8;
            }
            // The server may close before reading everything: a write error is fine.
            let _ = stream.write_all(&junk);
            let mut sink = Vec::new();
            // Ends at EOF (the server closed) or with a reset; never hangs past WAIT.
            let read = stream.read_to_end(&mut sink);
            assert!(
                read.is_ok()
                    || matches!(
                        read.as_ref().unwrap_err().kind(),
                        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                    ),
                "{read:?}"
            );
        }
    })
    .await
    .unwrap();
    still_serving(&fixture).await;
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_frames_get_a_typed_status_and_the_daemon_keeps_serving() {
    let mut fixture = Fixture::start("frames").await;
    // Not Protobuf at all.
    let error = bounded(raw_call(&fixture, "StartRun", vec![0xff; 64]))
        .await
        .unwrap_err();
    assert_ne!(error.code(), tonic::Code::Ok);
    assert_ne!(error.code(), tonic::Code::Unknown);
    // A truncated field.
    let error = bounded(raw_call(&fixture, "Initialize", vec![0x0a, 0x20, 0x01]))
        .await
        .unwrap_err();
    assert_ne!(error.code(), tonic::Code::Ok);
    // Larger than the negotiated transport bound.
    let bound = fixture.daemon().server().message_bytes();
    let error = bounded(raw_call(&fixture, "Health", vec![0u8; bound + 1]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::OutOfRange, "{error:?}");
    // An unknown method.
    let error = bounded(raw_call(&fixture, "Teleport", Vec::new()))
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unimplemented);
    // Valid bytes still work on a raw call, and typed clients are served.
    let ok = bounded(raw_call(&fixture, "Initialize", {
        use prost::Message as _;
        initialize(None, None).encode_to_vec()
    }))
    .await
    .unwrap();
    use prost::Message as _;
    let response = pb::InitializeResponse::decode(ok.as_slice()).unwrap();
    assert_eq!(code(response.status.as_ref()), ErrorCode::Ok);
    still_serving(&fixture).await;
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_dropped_mid_stream_frees_its_stream_lease() {
    let mut options = FixtureOptions::default();
    options.limits.concurrent_streams = 1;
    let mut fixture = Fixture::with("drop", options, |_| {}).await;
    let mut client = fixture.client().await;
    let s = session(&mut client).await;
    let run = start(&mut client, &s, "op", PENDING_DEFINITION_ID).await;
    let mut open = fixture.daemon().server().open_streams();
    for round in 0..4 {
        // The previous round's probe has let go of the one lease.
        bounded(open.wait_for(|n| *n == 0)).await.unwrap();
        // Open a tailing stream on its own connection, read its page, then drop the
        // whole connection mid-stream.
        let mut other = fixture.client().await;
        let mut tail = bounded(other.stream_events(stream_request(&s, &run, 0, true)))
            .await
            .unwrap()
            .into_inner();
        let first = bounded(tail.message()).await.unwrap().unwrap();
        if let Some(pb::stream_events_response::Payload::Control(c)) = &first.payload {
            panic!("round {round}: the one lease should be free: {c:?}");
        }
        drop(tail);
        drop(other);
        // The lease is freed once the server sees the drop and the stream task ends: wait
        // for the server's open-stream count, then the next open gets the lease.
        bounded(open.wait_for(|n| *n == 0)).await.unwrap();
        let mut probe = bounded(client.stream_events(stream_request(&s, &run, 0, false)))
            .await
            .unwrap()
            .into_inner();
        let frame = bounded(probe.message()).await.unwrap().unwrap();
        let freed = matches!(
            frame.payload,
            Some(pb::stream_events_response::Payload::Event(_))
        );
        drop(probe);
        assert!(freed);
    }
    fixture.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_uid_cannot_reach_the_daemon_socket() {
    let mut fixture = Fixture::start("nobody").await;
    if agent_endpoint::localipc::effective_uid() != 0 {
        eprintln!("skipped: needs root to spawn a process as another uid");
        fixture.shutdown().await;
        return;
    }
    // Looked up here: as nobody, a search of root's PATH fails on its private directories
    // with "permission denied", not "not found".
    if !on_path("python3") {
        skip_or_fail("python3");
        fixture.shutdown().await;
        return;
    }
    // Let nobody traverse the temp dir itself, so only the 0700 scope directory stops it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(fixture.temp.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let script = format!(
        "import socket\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect('{}')\n print('connected')\nexcept PermissionError:\n print('denied')\n",
        fixture.address.display()
    );
    use std::os::unix::process::CommandExt;
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(&script)
        .uid(65534)
        .gid(65534)
        .output();
    let output = output.unwrap_or_else(|e| panic!("spawn: {e}"));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "denied");
    still_serving(&fixture).await;
    fixture.shutdown().await;
}
