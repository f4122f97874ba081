//! The live response: body chunks go through the decoder until a terminal item, then the
//! connection is released.

use agent_core::model::{EventStream, StreamError, StreamEvent};
use agent_core::tool::BoxFuture;

use super::problems::stream_problem;
use super::sse::{Decoder, Protocol};

/// The live response and the decoder turning its bytes into events.
pub(crate) struct SseStream<P> {
    /// `None` once the body ended or a terminal item was decoded: dropping it closes the
    /// connection (a partly read response is never returned to the pool).
    response: Option<reqwest::Response>,
    decoder: Decoder<P>,
}

impl<P: Protocol> SseStream<P> {
    pub(crate) fn new(response: reqwest::Response, protocol: P) -> Self {
        SseStream {
            response: Some(response),
            decoder: Decoder::new(protocol),
        }
    }
}

impl<P: Protocol> EventStream for SseStream<P> {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<StreamEvent>, StreamError>> {
        Box::pin(async move {
            loop {
                if let Some(item) = self.decoder.out.pop() {
                    return item.map(Some).map_err(StreamError::new);
                }
                if self.decoder.out.is_done() {
                    self.response = None;
                    return Ok(None);
                }
                let Some(response) = self.response.as_mut() else {
                    return Ok(None);
                };
                match response.chunk().await {
                    Ok(Some(bytes)) => self.decoder.feed(&bytes),
                    Ok(None) => {
                        self.response = None;
                        self.decoder.end_of_body();
                    }
                    Err(error) => {
                        self.response = None;
                        let message = if error.is_timeout() {
                            "the model server stopped sending before the response finished"
                        } else {
                            "the connection to the model server failed mid-response"
                        };
                        self.decoder.fail(stream_problem(message));
                    }
                }
                if self.decoder.out.is_done() {
                    // Everything needed is decoded: release the connection now.
                    self.response = None;
                }
            }
        })
    }
}
