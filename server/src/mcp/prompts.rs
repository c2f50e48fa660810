//! Prompts and resources over MCP. Each is a tool its author serves as one
//! ([`Serves`]): listed from what the endpoint serves, run as a call is
//! (arguments checked, approval, questions to the person), and its value
//! reshaped here: a prompt's into messages, a resource's into contents.

use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, GetPromptResponse, GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;
use toolshed_domain::bundles::ServedDef;
use toolshed_domain::serves::Serves;

/// A prompt as `prompts/list` shows it: its arguments are the tool's.
pub(super) fn prompt(d: &ServedDef) -> Prompt {
    let schema = &d.def.input_schema;
    let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let arguments: Vec<PromptArgument> = schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, property)| {
            let mut argument = PromptArgument::new(name.clone()).with_required(required.contains(&name.as_str()));
            if let Some(description) = property["description"].as_str() {
                argument = argument.with_description(description);
            }
            argument
        })
        .collect();
    Prompt::new(d.def.name.clone(), Some(d.def.description.clone()), Some(arguments).filter(|a| !a.is_empty()))
        .with_title(d.def.title.clone())
}

/// A resource at a fixed URI, as `resources/list` shows it.
pub(super) fn resource(d: &ServedDef) -> Option<Resource> {
    let Serves::Resource { uri, mime } = &d.serves else { return None };
    (!uri.is_template()).then(|| {
        Resource::new(uri.as_str(), d.def.name.clone())
            .with_title(d.def.title.clone())
            .with_description(d.def.description.clone())
            .with_mime_type(mime.as_str())
    })
}

/// A resource at a URI template, as `resources/templates/list` shows it.
pub(super) fn template(d: &ServedDef) -> Option<ResourceTemplate> {
    let Serves::Resource { uri, mime } = &d.serves else { return None };
    uri.is_template().then(|| {
        ResourceTemplate::new(uri.as_str(), d.def.name.clone())
            .with_title(d.def.title.clone())
            .with_description(d.def.description.clone())
            .with_mime_type(mime.as_str())
    })
}

/// The arguments for a run of a prompt or a resource. MCP sends a prompt's
/// arguments (and a URI's values) as strings: one the tool takes as a
/// number, a boolean, a list or an object is read as JSON. A missing
/// required argument is the client's error.
pub(super) fn arguments(schema: &Value, given: JsonObject) -> Result<Value, McpError> {
    let missing: Vec<&str> =
        schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).filter(|name| !given.contains_key(*name)).collect();
    if !missing.is_empty() {
        return Err(McpError::invalid_params(format!("Missing required arguments: {}", missing.join(", ")), None));
    }
    let typed = given
        .into_iter()
        .map(|(name, value)| {
            let wants_text = matches!(schema["properties"][&name]["type"].as_str(), None | Some("string"));
            let value = match value {
                Value::String(s) if !wants_text => serde_json::from_str(&s).unwrap_or(Value::String(s)),
                value => value,
            };
            (name, value)
        })
        .collect();
    Ok(Value::Object(typed))
}

/// A prompt run's answer: its messages (`{ messages: [...] }` as MCP
/// spells them, or each content block the person's message), or the
/// questions it asks first. A failed run is an error: a prompt has no
/// error result.
pub(super) fn prompt_result(response: CallToolResponse, description: &str) -> Result<GetPromptResponse, McpError> {
    let result = match response {
        CallToolResponse::Complete(result) => ok(result)?,
        CallToolResponse::InputRequired(asks) => return Ok(asks.into()),
        _ => return Err(McpError::internal_error("a prompt answers at once or asks: it never runs as a task", None)),
    };
    let messages = match result.structured_content.as_ref().and_then(|s| s.get("messages")) {
        Some(messages) => serde_json::from_value::<Vec<PromptMessage>>(messages.clone())
            .map_err(|e| McpError::internal_error(format!("The prompt's messages are not valid MCP prompt messages: {e}"), None))?,
        None => result.content.into_iter().map(|block| PromptMessage::new(Role::User, block)).collect(),
    };
    Ok(GetPromptResult::new(messages).with_description(description).into())
}

/// A resource run's answer: its contents at `uri` (text as `mime`, images
/// and audio as blobs, embedded resources as they are), or the questions
/// it asks first.
pub(super) fn resource_result(response: CallToolResponse, uri: &str, mime: &str) -> Result<ReadResourceResponse, McpError> {
    let result = match response {
        CallToolResponse::Complete(result) => ok(result)?,
        CallToolResponse::InputRequired(asks) => return Ok(asks.into()),
        _ => return Err(McpError::internal_error("a resource answers at once or asks: it never runs as a task", None)),
    };
    let blob = |blob: String, mime_type: String| ResourceContents::BlobResourceContents {
        uri: uri.to_owned(),
        mime_type: Some(mime_type),
        blob,
        meta: None,
    };
    let contents = result
        .content
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(t) => Ok(ResourceContents::TextResourceContents {
                uri: uri.to_owned(),
                mime_type: Some(mime.to_owned()),
                text: t.text,
                meta: None,
            }),
            ContentBlock::Image(i) => Ok(blob(i.data, i.mime_type)),
            ContentBlock::Audio(a) => Ok(blob(a.data, a.mime_type)),
            ContentBlock::Resource(embedded) => Ok(embedded.resource),
            _ => Err(McpError::internal_error("A resource's contents cannot be a link to another resource.", None)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if contents.is_empty() {
        // MCP forbids an empty `contents`: it would read as "no such resource".
        return Err(McpError::internal_error("The resource's tool returned no contents.", None));
    }
    let mut result = ReadResourceResult::new(contents);
    // Computed for this person, now: nobody else may reuse it, and it may differ next time.
    (result.ttl_ms, result.cache_scope) = (Some(0), Some(rmcp::model::CacheScope::Private));
    Ok(result.into())
}

/// The most resources a session (or a 2026 `subscriptions/listen`) may subscribe to.
pub(super) const MAX_SUBSCRIPTIONS: usize = 100;

/// A URI no resource here answers to, with the URI: `-32002` in the 2025
/// revisions, invalid params from 2026-07-28 on (SEP-2164).
pub(super) fn no_resource(context: &RequestContext<RoleServer>, uri: &str) -> McpError {
    let (message, data) = (format!("Resource not found: {uri}"), Some(serde_json::json!({ "uri": uri })));
    match context.protocol_version() {
        Some(v) if v.has_initialize() => McpError::resource_not_found(message, data),
        _ => McpError::invalid_params(message, data),
    }
}

pub(super) fn no_prompt(name: &str) -> McpError {
    McpError::invalid_params(format!("There is no prompt named “{name}” here."), None)
}

/// The run's result, or its error's text as a protocol error.
fn ok(result: CallToolResult) -> Result<CallToolResult, McpError> {
    if result.is_error != Some(true) {
        return Ok(result);
    }
    let text: Vec<String> = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
    Err(McpError::internal_error(text.join("\n"), None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({ "type": "object", "required": ["topic"], "properties": {
            "topic": { "type": "string" }, "count": { "type": "integer" }, "tags": { "type": "array" } } })
    }

    #[test]
    fn prompt_arguments_arrive_as_strings_and_are_read_as_the_types_the_tool_takes() {
        let given = json!({ "topic": "42", "count": "3", "tags": "[\"a\"]" });
        let typed = arguments(&schema(), given.as_object().unwrap().clone()).unwrap();
        assert_eq!(typed, json!({ "topic": "42", "count": 3, "tags": ["a"] }));
        // Not JSON: left as it came, for the schema check to refuse with its own words.
        let typed = arguments(&schema(), json!({ "topic": "x", "count": "three" }).as_object().unwrap().clone()).unwrap();
        assert_eq!(typed["count"], "three");
    }

    #[test]
    fn a_missing_required_prompt_argument_is_invalid_params() {
        let e = arguments(&schema(), JsonObject::new()).unwrap_err();
        assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(e.message.contains("topic"), "{}", e.message);
    }

    #[test]
    fn content_blocks_become_the_persons_messages_and_a_messages_object_is_taken_as_it_is() {
        let blocks = CallToolResult::success(vec![ContentBlock::text("one"), ContentBlock::text("two")]);
        let GetPromptResponse::Complete(r) = prompt_result(blocks.into(), "d").unwrap() else { panic!("complete") };
        assert_eq!(r.messages.len(), 2);
        assert_eq!(serde_json::to_value(&r.messages[1]).unwrap(), json!({ "role": "user", "content": { "type": "text", "text": "two" } }));
        let mut shaped = CallToolResult::success(vec![ContentBlock::text("ignored")]);
        shaped.structured_content = Some(json!({ "messages": [
            { "role": "user", "content": { "type": "text", "text": "Q" } },
            { "role": "assistant", "content": { "type": "text", "text": "A" } } ] }));
        let GetPromptResponse::Complete(r) = prompt_result(shaped.into(), "d").unwrap() else { panic!("complete") };
        assert_eq!(r.messages[1].role, Role::Assistant);
        let failed = CallToolResult::error(vec![ContentBlock::text("Error: boom")]);
        assert!(prompt_result(failed.into(), "d").unwrap_err().message.contains("boom"));
    }

    #[test]
    fn a_resource_is_text_of_its_type_and_images_are_blobs() {
        let text = CallToolResult::success(vec![ContentBlock::text("{\"id\":\"1\"}")]);
        let ReadResourceResponse::Complete(r) = resource_result(text.into(), "test://t/1", "application/json").unwrap() else {
            panic!("complete")
        };
        assert_eq!(
            serde_json::to_value(&r.contents[0]).unwrap(),
            json!({ "uri": "test://t/1", "mimeType": "application/json", "text": "{\"id\":\"1\"}" })
        );
        let image = CallToolResult::success(vec![ContentBlock::image("AAAA", "image/png")]);
        let ReadResourceResponse::Complete(r) = resource_result(image.into(), "test://i", "image/png").unwrap() else { panic!("complete") };
        assert_eq!(serde_json::to_value(&r.contents[0]).unwrap(), json!({ "uri": "test://i", "mimeType": "image/png", "blob": "AAAA" }));
        assert!(resource_result(CallToolResult::success(vec![]).into(), "test://e", "text/plain").is_err(), "never empty");
    }
}
