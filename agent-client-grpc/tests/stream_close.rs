//! Closing a session while a stream tails ends its background reader quietly: the reader
//! must not poll its finished stop signal a second time (which panics the reader's task).
//! Its own test binary, because it counts the panics of the whole process.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_client as c;
use agent_client::{Connector as _, EventStream as _, Session as _};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_tailing_stream_ends_its_reader_without_a_panic() {
    let panics = Arc::new(AtomicUsize::new(0));
    let counted = panics.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        counted.fetch_add(1, Ordering::SeqCst);
        previous(info);
    }));

    let server = Server::start();
    let session = server.connector().initialize(fresh()).await.unwrap();
    let tx = server.script_events();
    tx.send(Ok(control(1, 0, 0, true))).await.unwrap();
    let options = c::EventStreamOptions::new(8, true, &client_limits()).unwrap();
    let cursor = c::Cursor::new(c::RunRef::new("run-1").unwrap(), 0);
    let mut stream = session.events(cursor, options).await.unwrap();
    stream.next().await.unwrap();
    session.close();
    // The reader drops the server stream when it ends, panicking or not.
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        server.script.streams.wait_dropped(1),
    )
    .await
    .expect("the reader ends");
    assert_eq!(
        panics.load(Ordering::SeqCst),
        0,
        "the stream's reader panicked"
    );
}
