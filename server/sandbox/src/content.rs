//! `return $content([...blocks])`: a result made of MCP content blocks (text,
//! images, audio, embedded resources, resource links) rather than one text or
//! JSON value. The blocks are checked when `$content` is called, and only the
//! very object it returned counts as content (the host keeps it and compares
//! identity), so no value a tool builds from its input can pass for it.

use base64::Engine as _;
use serde_json::{Map, Value};

/// Blocks one result may hold.
const MAX_BLOCKS: usize = 64;

/// The blocks, each reduced to the fields MCP defines for its type, or why
/// they are not content. `limit` bounds them all as JSON (the result limit).
pub(super) fn blocks(value: Value, limit: usize) -> Result<Vec<Value>, String> {
    let Value::Array(items) = value else { return Err("$content takes an array of content blocks".into()) };
    if items.is_empty() || items.len() > MAX_BLOCKS {
        return Err(format!("$content takes 1 to {MAX_BLOCKS} blocks, not {}", items.len()));
    }
    let blocks = items.into_iter().enumerate().map(|(i, item)| block(item).map_err(|e| format!("$content: block {i}: {e}")));
    let blocks: Vec<Value> = blocks.collect::<Result<_, _>>()?;
    let size: usize = blocks.iter().map(|b| b.to_string().len()).sum();
    if size > limit {
        return Err(format!("$content: the blocks are {size} bytes as JSON (limit {limit})"));
    }
    Ok(blocks)
}

fn block(item: Value) -> Result<Value, String> {
    let Value::Object(item) = item else { return Err("a block must be an object with a type".into()) };
    let kind = item.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut out = Map::new();
    out.insert("type".into(), kind.clone().into());
    match kind.as_str() {
        "text" => copy(&item, &mut out, &[("text", Field::Text)])?,
        "image" | "audio" => {
            copy(&item, &mut out, &[("data", Field::Base64), ("mimeType", Field::Text)])?;
            let mime = out["mimeType"].as_str().unwrap_or_default();
            if !mime.starts_with(&format!("{kind}/")) {
                return Err(format!("an {kind} block's mimeType must be {kind}/…, not “{mime}”"));
            }
        }
        "resource" => {
            let Some(Value::Object(resource)) = item.get("resource") else {
                return Err("a resource block needs resource: {uri, text or blob}".into());
            };
            let mut inner = Map::new();
            copy(resource, &mut inner, &[("uri", Field::Uri), ("mimeType", Field::OptionalText)])?;
            match (resource.get("text"), resource.get("blob")) {
                (Some(_), None) => copy(resource, &mut inner, &[("text", Field::Text)])?,
                (None, Some(_)) => copy(resource, &mut inner, &[("blob", Field::Base64)])?,
                _ => return Err("a resource has either text or blob".into()),
            }
            out.insert("resource".into(), Value::Object(inner));
        }
        "resource_link" => copy(
            &item,
            &mut out,
            &[
                ("uri", Field::Uri),
                ("name", Field::Text),
                ("title", Field::OptionalText),
                ("description", Field::OptionalText),
                ("mimeType", Field::OptionalText),
            ],
        )?,
        other => return Err(format!("type “{other}” is not one of text, image, audio, resource, resource_link")),
    }
    if let Some(annotations) = item.get("annotations") {
        if !annotations.is_object() {
            return Err("annotations must be an object".into());
        }
        out.insert("annotations".into(), annotations.clone());
    }
    Ok(Value::Object(out))
}

#[derive(Clone, Copy)]
enum Field {
    Text,
    OptionalText,
    /// Standard base64, as MCP carries binary data.
    Base64,
    /// `scheme:…`
    Uri,
}

fn copy(from: &Map<String, Value>, to: &mut Map<String, Value>, fields: &[(&str, Field)]) -> Result<(), String> {
    for &(name, field) in fields {
        let value = match (from.get(name), field) {
            (None | Some(Value::Null), Field::OptionalText) => continue,
            (Some(Value::String(s)), _) => s,
            (None, _) => return Err(format!("{name} is missing")),
            (Some(_), _) => return Err(format!("{name} must be a string")),
        };
        match field {
            Field::Base64 if base64::engine::general_purpose::STANDARD.decode(value).is_err() => {
                return Err(format!("{name} is not base64"));
            }
            Field::Uri if !is_uri(value) => return Err(format!("{name} “{value}” is not a URI (scheme:…)")),
            _ => {}
        }
        to.insert(name.into(), Value::String(value.clone()));
    }
    Ok(())
}

fn is_uri(text: &str) -> bool {
    match text.split_once(':') {
        Some((scheme, _)) => {
            scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

/// A line of text for each block, as a model or a transcript reads a result
/// it cannot show: text as it is, binary data by its type and size, a
/// resource by its URI (and its text).
pub fn as_text(blocks: &[Value]) -> String {
    let lines: Vec<String> = blocks
        .iter()
        .map(|b| match b["type"].as_str().unwrap_or_default() {
            "text" => b["text"].as_str().unwrap_or_default().to_owned(),
            kind @ ("image" | "audio") => {
                let data = b["data"].as_str().unwrap_or_default();
                let bytes = (data.len() / 4 * 3).saturating_sub(data.bytes().rev().take_while(|&c| c == b'=').count());
                format!("[{kind} {}, {} bytes]", b["mimeType"].as_str().unwrap_or_default(), bytes)
            }
            "resource" => {
                let r = &b["resource"];
                match r["text"].as_str() {
                    Some(text) => format!("[resource {}]\n{text}", r["uri"].as_str().unwrap_or_default()),
                    None => format!("[resource {}, binary]", r["uri"].as_str().unwrap_or_default()),
                }
            }
            _ => format!("[link {} ({})]", b["name"].as_str().unwrap_or_default(), b["uri"].as_str().unwrap_or_default()),
        })
        .collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_mcp_content_type_is_accepted_and_reduced_to_its_fields() {
        let blocks = blocks(
            json!([
                {"type": "text", "text": "hi", "extra": 1},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "test://r", "mimeType": "text/plain", "text": "body"}},
                {"type": "resource_link", "uri": "https://example.com/a", "name": "a", "annotations": {"priority": 1}}
            ]),
            1 << 20,
        )
        .unwrap();
        assert_eq!(blocks[0], json!({"type": "text", "text": "hi"}));
        assert_eq!(blocks[4]["annotations"]["priority"], 1);
        assert_eq!(as_text(&blocks).lines().next(), Some("hi"));
        assert!(as_text(&blocks).contains("[image image/png, 8 bytes]"));
    }

    #[test]
    fn malformed_blocks_say_which_and_why() {
        for (value, expected) in [
            (json!({"type": "text"}), "array"),
            (json!([]), "1 to 64"),
            (json!([{"type": "video"}]), "block 0: type “video”"),
            (json!([{"type": "image", "data": "not base64!", "mimeType": "image/png"}]), "not base64"),
            (json!([{"type": "image", "data": "AAAA", "mimeType": "text/html"}]), "must be image/"),
            (json!([{"type": "resource", "resource": {"uri": "x", "text": "t"}}]), "not a URI"),
            (json!([{"type": "resource", "resource": {"uri": "a:b", "text": "t", "blob": "AAAA"}}]), "either text or blob"),
            (json!([{"type": "text", "text": "x".repeat(100)}]), "limit 50"),
        ] {
            let err = super::blocks(value.clone(), 50).unwrap_err();
            assert!(err.contains(expected), "{value}: {err}");
        }
    }
}
