//! Reading one HTTP/1.1 request on loopback, for the tests' scripted model servers.

use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The JSON body of the next request on `socket` (`Null` when it is not JSON), or `None`
/// when the peer closes first.
pub(crate) async fn read_json_request(socket: &mut TcpStream) -> Option<Value> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let (header_end, length) = loop {
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while buffer.len() < header_end + length {
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    Some(serde_json::from_slice(&buffer[header_end..header_end + length]).unwrap_or(Value::Null))
}
