//! OpenAI function-calling definitions: `{"type": "function", "function":
//! {name, description, parameters, strict}}` per tool. `strict` is true only
//! where OpenAI's structured-outputs rules accept the schema: an object at the
//! root, every object closed (`additionalProperties: false`) with every
//! property required, and only the keywords OpenAI supports.

use serde_json::{json, Map, Value};

use super::ToolDef;

/// OpenAI's limit on function names (`^[a-zA-Z0-9_-]{1,64}$`).
const MAX_NAME: usize = 64;

/// The keywords strict mode accepts (OpenAI, "Supported schemas").
const STRICT_KEYWORDS: [&str; 22] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "description",
    "title",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// One definition per tool; `prefix` (a bundle's name) makes names `prefix__tool`.
pub fn openai_functions(prefix: Option<&str>, tools: &[ToolDef]) -> Value {
    tools
        .iter()
        .map(|t| {
            let mut name = match prefix {
                Some(p) => format!("{p}__{}", t.name),
                None => t.name.clone(),
            };
            name.truncate(MAX_NAME); // names are ASCII
            json!({
                "type": "function",
                "function": {
                    "name": name,
                    "description": t.description,
                    "parameters": t.input_schema,
                    "strict": strict_problem(&t.input_schema).is_none(),
                },
            })
        })
        .collect()
}

/// Why `schema` may not be used with `strict: true`, or `None` when it may.
pub fn strict_problem(schema: &Value) -> Option<String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Some("the parameters must be an object".into());
    }
    check(schema, "parameters")
}

fn check(schema: &Value, path: &str) -> Option<String> {
    let Value::Object(s) = schema else { return Some(format!("{path} is not a schema object")) };
    if let Some(k) = s.keys().find(|k| !STRICT_KEYWORDS.contains(&k.as_str())) {
        return Some(format!("{path} uses `{k}`, which strict mode does not support"));
    }
    let is_object = match s.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => s.contains_key("properties"),
    };
    if is_object {
        if s.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Some(format!("{path} must set additionalProperties to false"));
        }
        let empty = Map::new();
        let props = s.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        let required: Vec<&str> = s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        if let Some(name) = props.keys().find(|k| !required.contains(&k.as_str())) {
            return Some(format!("{path}.{name} is optional; strict mode needs every property required"));
        }
        if let Some(p) = props.iter().find_map(|(name, p)| check(p, &format!("{path}.{name}"))) {
            return Some(p);
        }
    }
    if let Some(items) = s.get("items") {
        if let Some(p) = check(items, &format!("{path}[]")) {
            return Some(p);
        }
    }
    for key in ["anyOf", "$defs", "definitions"] {
        let nested: Vec<&Value> = match s.get(key) {
            Some(Value::Array(a)) => a.iter().collect(),
            Some(Value::Object(o)) => o.values().collect(),
            _ => continue,
        };
        if let Some(p) = nested.into_iter().find_map(|n| check(n, &format!("{path}.{key}"))) {
            return Some(p);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::sample;

    fn closed(props: Value, required: &[&str]) -> Value {
        json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
    }

    #[test]
    fn a_closed_schema_with_every_property_required_is_strict() {
        let schema = closed(json!({"text": {"type": "string", "description": "What to echo"}, "n": {"type": "integer"}}), &["text", "n"]);
        let defs = openai_functions(None, &[sample("echo", schema.clone(), None)]);
        assert_eq!(
            defs,
            json!([{"type": "function", "function": {"name": "echo", "description": "Does echo.", "parameters": schema, "strict": true}}])
        );
    }

    #[test]
    fn an_optional_property_is_not_strict() {
        let schema = closed(json!({"text": {"type": "string"}, "n": {"type": "integer"}}), &["text"]);
        assert_eq!(strict_problem(&schema).as_deref(), Some("parameters.n is optional; strict mode needs every property required"));
        assert_eq!(openai_functions(None, &[sample("echo", schema, None)])[0]["function"]["strict"], false);
    }

    #[test]
    fn an_open_nested_object_is_not_strict() {
        let schema =
            closed(json!({"where": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}), &["where"]);
        assert_eq!(strict_problem(&schema).as_deref(), Some("parameters.where must set additionalProperties to false"));
    }

    #[test]
    fn unsupported_keywords_are_not_strict() {
        let schema = closed(json!({"unit": {"type": "string", "default": "km"}}), &["unit"]);
        assert_eq!(strict_problem(&schema).as_deref(), Some("parameters.unit uses `default`, which strict mode does not support"));
        let schema = closed(json!({"tags": {"type": "array", "items": {"type": "string", "minLength": 2}}}), &["tags"]);
        assert_eq!(strict_problem(&schema).as_deref(), Some("parameters.tags[] uses `minLength`, which strict mode does not support"));
    }

    #[test]
    fn bundle_members_are_named_bundle_then_tool_within_64_characters() {
        let schema = closed(json!({}), &[]);
        let defs = openai_functions(Some("text_kit"), &[sample("echo", schema.clone(), None), sample(&"x".repeat(64), schema, None)]);
        assert_eq!(defs[0]["function"]["name"], "text_kit__echo");
        assert_eq!(defs[0]["function"]["strict"], true);
        assert_eq!(defs[1]["function"]["name"].as_str().unwrap().len(), 64);
    }
}
