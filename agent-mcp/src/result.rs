//! What the model sees of a tool result: the content blocks as text, bounded by a head and
//! tail preview that states how much was left out (never a silent cut in the middle).

use rmcp::model::ContentBlock;
use serde_json::Value;

/// Default bound of one result shown to the model, in bytes.
pub const DEFAULT_RESULT_BYTES: usize = 64 * 1024;
/// Largest bound a host may configure: the kernel's payload bound.
pub const MAX_RESULT_BYTES: usize = agent_core::tool::MAX_PAYLOAD_BYTES;
/// Smallest bound a host may configure: room for a head, a tail and the note.
pub const MIN_RESULT_BYTES: usize = 256;

/// The content as text: text blocks as they are, other blocks as a one-line description,
/// and the structured content as JSON when there is no text block.
pub fn render_content(content: &[ContentBlock], structured: Option<&Value>) -> String {
    let mut parts: Vec<String> = Vec::with_capacity(content.len());
    let mut has_text = false;
    for block in content {
        let value = serde_json::to_value(block).unwrap_or(Value::Null);
        let get = |k: &str| value.get(k).and_then(Value::as_str).unwrap_or("");
        match get("type") {
            "text" => {
                has_text = true;
                parts.push(get("text").to_owned());
            }
            kind @ ("image" | "audio") => {
                parts.push(format!(
                    "[{kind}: {}, {} bytes of base64]",
                    get("mimeType"),
                    get("data").len()
                ));
            }
            "resource" => {
                let resource = value.get("resource");
                let field = |k: &str| resource.and_then(|r| r.get(k)).and_then(Value::as_str);
                match field("text") {
                    Some(text) => {
                        has_text = true;
                        parts.push(text.to_owned());
                    }
                    None => parts.push(format!("[resource: {}]", field("uri").unwrap_or(""))),
                }
            }
            "resource_link" => parts.push(format!("[resource link: {}]", get("uri"))),
            other => parts.push(format!("[{other} content]")),
        }
    }
    if !has_text && let Some(structured) = structured {
        parts.push(structured.to_string());
    }
    parts.join("\n")
}

/// `text` when it fits in `limit` bytes; otherwise its first and last bytes (on character
/// boundaries) around a line stating how many bytes were left out of how many.
pub fn bounded_preview(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    // The note is at most 80 bytes; the rest is shared between head and tail.
    let budget = limit.saturating_sub(80);
    let mut head = budget / 2;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (budget - head);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    let omitted = tail - head;
    format!(
        "{}\n[… {omitted} of {} bytes omitted …]\n{}",
        &text[..head],
        text.len(),
        &text[tail..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_at_the_bound_is_kept_and_past_it_is_previewed() {
        let limit = 1000;
        let exact = "x".repeat(limit);
        assert_eq!(bounded_preview(&exact, limit), exact);
        let past = format!("{}{}", "h".repeat(limit), "t".repeat(limit + 1));
        let preview = bounded_preview(&past, limit);
        assert!(preview.len() <= limit, "{}", preview.len());
        assert!(preview.starts_with('h') && preview.ends_with('t'));
        let lines: Vec<&str> = preview.lines().collect();
        let omitted = past.len() - lines[0].len() - lines[2].len();
        assert!(
            preview.contains(&format!("[… {omitted} of {} bytes omitted …]", past.len())),
            "{preview}"
        );
    }

    #[test]
    fn previews_cut_on_character_boundaries() {
        let text = "é".repeat(5000);
        let preview = bounded_preview(&text, MIN_RESULT_BYTES);
        assert!(preview.len() <= MIN_RESULT_BYTES);
        assert!(preview.starts_with('é') && preview.ends_with('é'));
    }

    #[test]
    fn blocks_render_as_text() {
        let blocks: Vec<ContentBlock> = serde_json::from_value(serde_json::json!([
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ]))
        .unwrap();
        assert_eq!(
            render_content(&blocks, None),
            "hello\n[image: image/png, 4 bytes of base64]"
        );
        assert_eq!(
            render_content(&[], Some(&serde_json::json!({"a": 1}))),
            r#"{"a":1}"#
        );
    }
}
