//! A tool's value as MCP content blocks. `$mcp.image(…)` and its siblings
//! (server/sandbox/src/globals.rs) return objects marked with `$mcp`; a
//! value that is one such object, or an array of them, goes out as those
//! blocks (text, image, audio, an embedded resource, a resource link) instead
//! of as JSON.

use base64::Engine;
use rmcp::model::ContentBlock;
use serde_json::Value;

/// The key `$mcp`'s helpers mark their objects with; its value is the block's type.
const MARK: &str = "$mcp";

/// `Some` when `value` is content (one marked object, or a non-empty array of
/// them): the blocks, or why one of them is not a valid block.
pub fn blocks(value: &Value) -> Option<Result<Vec<ContentBlock>, String>> {
    let marked = |v: &Value| v.get(MARK).is_some_and(Value::is_string);
    let items: Vec<&Value> = match value {
        Value::Object(_) if marked(value) => vec![value],
        Value::Array(items) if !items.is_empty() && items.iter().all(marked) => items.iter().collect(),
        _ => return None,
    };
    Some(items.into_iter().enumerate().map(|(i, item)| block(item).map_err(|e| format!("content item {i}: {e}"))).collect())
}

fn block(item: &Value) -> Result<ContentBlock, String> {
    let mut object = item.as_object().cloned().unwrap_or_default();
    let kind = object.remove(MARK).and_then(|k| k.as_str().map(str::to_owned)).unwrap_or_default();
    let base64 = match kind.as_str() {
        "image" | "audio" => object.get("data"),
        "resource" => object.get("resource").and_then(|r| r.get("blob")),
        _ => None,
    };
    if let Some(data) = base64 {
        let data = data.as_str().unwrap_or_default();
        base64::engine::general_purpose::STANDARD.decode(data).map_err(|e| format!("the {kind}'s data is not base64 ({e})"))?;
    }
    object.insert("type".into(), Value::String(kind.clone()));
    serde_json::from_value(Value::Object(object)).map_err(|e| format!("not a valid {kind} block ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn types(value: Value) -> Vec<String> {
        let blocks = blocks(&value).expect("content").expect("valid");
        blocks.iter().map(|b| serde_json::to_value(b).unwrap()["type"].as_str().unwrap().to_owned()).collect()
    }

    #[test]
    fn marked_objects_become_the_blocks_they_name_in_order() {
        let value = json!([
            {"$mcp": "text", "text": "A chart"},
            {"$mcp": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"$mcp": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"$mcp": "resource", "resource": {"uri": "file:///r.txt", "mimeType": "text/plain", "text": "hello"}},
            {"$mcp": "resource_link", "uri": "https://example.com/r", "name": "report"},
        ]);
        assert_eq!(types(value), ["text", "image", "audio", "resource", "resource_link"]);
        assert_eq!(types(json!({"$mcp": "image", "data": "", "mimeType": "image/png"})), ["image"]);
    }

    #[test]
    fn ordinary_json_is_not_content() {
        for value in [json!({"type": "image", "data": "x"}), json!([]), json!([{"$mcp": "text", "text": "a"}, 1]), json!("text")] {
            assert!(blocks(&value).is_none(), "{value}");
        }
    }

    #[test]
    fn a_broken_block_is_named_with_what_is_wrong() {
        let bad = json!([{"$mcp": "text", "text": "ok"}, {"$mcp": "image", "data": "not base64!", "mimeType": "image/png"}]);
        let error = blocks(&bad).unwrap().unwrap_err();
        assert!(error.starts_with("content item 1: the image's data is not base64"), "{error}");
        let error = blocks(&json!({"$mcp": "video", "data": "AA=="})).unwrap().unwrap_err();
        assert!(error.contains("not a valid video block"), "{error}");
        let error = blocks(&json!({"$mcp": "resource_link", "uri": "https://example.com"})).unwrap().unwrap_err();
        assert!(error.contains("name"), "{error}");
    }
}
