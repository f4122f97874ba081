//! The live response: body chunks go through the decoder until a terminal item, then the
//! connection is released.

use agent_core::model::{EventStream, StreamError, StreamEvent};
use agent_core::tool::BoxFuture;

use super::errors::stream_problem;
use super::sse::Decoder;

/// The live response and the decoder turning its bytes into events.
pub(super) struct OpenAiStream {
    /// `None` once the body ended or a terminal item was decoded: dropping it closes the
    /// connection.
    pub(super) response: Option<reqwest::Response>,
    pub(super) decoder: Decoder,
}

impl EventStream for OpenAiStream {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<StreamEvent>, StreamError>> {
        Box::pin(async move {
            loop {
                if let Some(item) = self.decoder.out.pop_front() {
                    return item.map(Some).map_err(StreamError::new);
                }
                if self.decoder.done {
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
                if self.decoder.done {
                    // Everything needed is decoded: release the connection now.
                    self.response = None;
                }
            }
        })
    }
}
