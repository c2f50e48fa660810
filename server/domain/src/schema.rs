//! Argument definitions: the rows of the visual argument editor. One
//! definition produces the MCP `inputSchema`, the `$name` globals and the
//! mock values of the Run form. The definitions themselves are plain types
//! the app shares (`toolshed_types::args`); what they mean is decided here.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

pub use toolshed_types::args::{ArgDef, ArgType};

/// Why rows or a schema were refused; names the path (`rows.items.name`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct SchemaError {
    pub path: String,
    pub reason: String,
}

fn err(path: &str, reason: impl Into<String>) -> SchemaError {
    SchemaError { path: if path.is_empty() { "schema".into() } else { path.to_owned() }, reason: reason.into() }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// The rows a new tool starts with.
pub fn starter_args() -> Vec<ArgDef> {
    vec![ArgDef {
        name: "name".into(),
        ty: ArgType::String,
        description: "Who to greet".into(),
        required: true,
        default: None,
        enum_values: vec![],
        example: Some(json!("world")),
        sensitive: false,
    }]
}

/// Names are JS identifiers (so `$name` works), unique among siblings; enums
/// have values; nesting stays within reason.
pub fn check_defs(args: &[ArgDef]) -> Result<(), SchemaError> {
    check_level(args, "", 0)
}

const MAX_DEPTH: usize = 5;
const MAX_ARGS: usize = 100;

fn check_level(args: &[ArgDef], path: &str, depth: usize) -> Result<(), SchemaError> {
    if depth > MAX_DEPTH {
        return Err(err(path, format!("nesting deeper than {MAX_DEPTH} levels is not supported")));
    }
    if args.len() > MAX_ARGS {
        return Err(err(path, format!("at most {MAX_ARGS} arguments")));
    }
    let mut seen = HashSet::new();
    for a in args {
        let here = join(path, &a.name);
        let valid = a.name.len() <= 64
            && a.name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && a.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(err(&here, "an argument name must be letters, digits and _, starting with a letter or _ (at most 64)"));
        }
        if !seen.insert(a.name.as_str()) {
            return Err(err(&here, "appears twice"));
        }
        if a.description.chars().count() > 2000 {
            return Err(err(&here, "the description is longer than 2000 characters"));
        }
        check_type(&a.ty, &a.enum_values, &here, depth)?;
    }
    Ok(())
}

fn check_type(ty: &ArgType, enum_values: &[String], path: &str, depth: usize) -> Result<(), SchemaError> {
    match ty {
        ArgType::Enum if enum_values.is_empty() => Err(err(path, "an enum needs at least one value")),
        ArgType::Array { items } => check_type(items, enum_values, path, depth + 1),
        ArgType::Object { fields } => check_level(fields, path, depth + 1),
        _ => Ok(()),
    }
}

fn type_schema(ty: &ArgType, enum_values: &[String]) -> Map<String, Value> {
    let mut s = Map::new();
    match ty {
        ArgType::String => {
            s.insert("type".into(), "string".into());
        }
        ArgType::Number => {
            s.insert("type".into(), "number".into());
        }
        ArgType::Integer => {
            s.insert("type".into(), "integer".into());
        }
        ArgType::Boolean => {
            s.insert("type".into(), "boolean".into());
        }
        ArgType::Enum => {
            s.insert("type".into(), "string".into());
            s.insert("enum".into(), enum_values.iter().cloned().map(Value::String).collect());
        }
        ArgType::Array { items } => {
            s.insert("type".into(), "array".into());
            s.insert("items".into(), Value::Object(type_schema(items, enum_values)));
        }
        ArgType::Object { fields } => {
            s = object_schema(fields);
        }
    }
    s
}

fn object_schema(args: &[ArgDef]) -> Map<String, Value> {
    let mut properties = Map::new();
    for a in args {
        let mut p = type_schema(&a.ty, &a.enum_values);
        if !a.description.is_empty() {
            p.insert("description".into(), a.description.clone().into());
        }
        if let Some(d) = &a.default {
            p.insert("default".into(), d.clone());
        }
        if let Some(e) = &a.example {
            p.insert("examples".into(), json!([e]));
        }
        if a.sensitive {
            // JSON Schema's word for a value that is sent but never shown back.
            p.insert("writeOnly".into(), true.into());
        }
        properties.insert(a.name.clone(), Value::Object(p));
    }
    let required: Vec<Value> = args.iter().filter(|a| a.required).map(|a| a.name.clone().into()).collect();
    let mut s = Map::new();
    s.insert("type".into(), "object".into());
    s.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        s.insert("required".into(), Value::Array(required));
    }
    s.insert("additionalProperties".into(), false.into());
    s
}

/// The JSON Schema of the arguments object: MCP's `inputSchema`.
pub fn to_json_schema(args: &[ArgDef]) -> Value {
    Value::Object(object_schema(args))
}

/// Loads a JSON Schema back into rows, when the editor can show it.
pub fn from_json_schema(schema: &Value) -> Result<Vec<ArgDef>, SchemaError> {
    let defs = object_fields(schema, "")?;
    check_defs(&defs)?;
    Ok(defs)
}

const SUPPORTED: [&str; 12] = [
    "type",
    "properties",
    "required",
    "description",
    "default",
    "examples",
    "enum",
    "items",
    "additionalProperties",
    "title",
    "$schema",
    "writeOnly",
];

fn object_fields(schema: &Value, path: &str) -> Result<Vec<ArgDef>, SchemaError> {
    let obj = schema.as_object().ok_or_else(|| err(path, "must be a JSON object"))?;
    if let Some(t) = obj.get("type") {
        if t != "object" {
            return Err(err(path, "the top level must be `\"type\": \"object\"`"));
        }
    }
    let required: HashSet<&str> =
        obj.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let Some(props) = obj.get("properties") else { return Ok(Vec::new()) };
    let props = props.as_object().ok_or_else(|| err(&join(path, "properties"), "must be an object"))?;
    props
        .iter()
        .map(|(name, p)| {
            let here = join(path, name);
            let (ty, enum_values) = parse_type(p, &here)?;
            Ok(ArgDef {
                name: name.clone(),
                ty,
                description: p.get("description").and_then(Value::as_str).unwrap_or_default().to_owned(),
                required: required.contains(name.as_str()),
                default: p.get("default").cloned(),
                enum_values,
                example: p.get("examples").and_then(Value::as_array).and_then(|e| e.first()).cloned(),
                sensitive: p.get("writeOnly") == Some(&Value::Bool(true)),
            })
        })
        .collect()
}

fn parse_type(p: &Value, path: &str) -> Result<(ArgType, Vec<String>), SchemaError> {
    let obj = p.as_object().ok_or_else(|| err(path, "must be a JSON object"))?;
    if let Some(key) = obj.keys().find(|k| !SUPPORTED.contains(&k.as_str())) {
        return Err(err(path, format!("`{key}` is not supported by the argument editor")));
    }
    if let Some(values) = obj.get("enum") {
        let values: Option<Vec<String>> =
            values.as_array().map(|v| v.iter().map(|x| x.as_str().map(str::to_owned)).collect()).unwrap_or(None);
        return match values {
            Some(v) if !v.is_empty() => Ok((ArgType::Enum, v)),
            _ => Err(err(path, "only non-empty lists of strings are supported as `enum`")),
        };
    }
    let ty = match obj.get("type").and_then(Value::as_str) {
        Some("string") => ArgType::String,
        Some("number") => ArgType::Number,
        Some("integer") => ArgType::Integer,
        Some("boolean") => ArgType::Boolean,
        Some("object") => ArgType::Object { fields: object_fields(p, path)? },
        Some("array") => {
            let items = obj.get("items").ok_or_else(|| err(path, "an array needs `items`"))?;
            let (item, enum_values) = parse_type(items, &join(path, "items"))?;
            if matches!(item, ArgType::Array { .. }) {
                return Err(err(path, "arrays of arrays are not supported by the argument editor"));
            }
            return Ok((ArgType::Array { items: Box::new(item) }, enum_values));
        }
        Some(other) => return Err(err(path, format!("type `{other}` is not supported"))),
        None => return Err(err(path, "needs a `type` (a single type name)")),
    };
    Ok((ty, Vec::new()))
}

/// Mock arguments for a Run form: default, else example, else made up by type.
/// Optional arguments with neither default nor example are left out, as a
/// caller would leave them out.
pub fn mock_arguments(args: &[ArgDef]) -> Value {
    Value::Object(
        args.iter().filter(|a| a.required || a.default.is_some() || a.example.is_some()).map(|a| (a.name.clone(), mock_value(a))).collect(),
    )
}

fn mock_value(a: &ArgDef) -> Value {
    if let Some(v) = a.default.as_ref().or(a.example.as_ref()) {
        return v.clone();
    }
    mock_type(&a.ty, &a.enum_values, &a.name)
}

fn mock_type(ty: &ArgType, enum_values: &[String], name: &str) -> Value {
    match ty {
        ArgType::String => Value::String(format!("example {name}")),
        ArgType::Number => json!(1.5),
        ArgType::Integer => json!(1),
        ArgType::Boolean => json!(true),
        ArgType::Enum => enum_values.first().cloned().map(Value::String).unwrap_or(Value::Null),
        ArgType::Array { items } => json!([mock_type(items, enum_values, name)]),
        ArgType::Object { fields } => mock_arguments(fields),
    }
}

/// One reason an input does not fit its schema, with where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// JSON pointer into the arguments, e.g. `/rows/0/value`.
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = self.path.trim_start_matches('/').replace('/', ".");
        if at.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "`{at}`: {}", self.message)
        }
    }
}

/// A compiled validator; compile once per schema, validate many inputs.
pub struct CompiledSchema(jsonschema::Validator);

impl CompiledSchema {
    pub fn new(schema: &Value) -> Result<Self, SchemaError> {
        jsonschema::validator_for(schema).map(Self).map_err(|e| err("", e.to_string()))
    }

    pub fn validate(&self, input: &Value) -> Result<(), Vec<Violation>> {
        let violations: Vec<Violation> =
            self.0.iter_errors(input).map(|e| Violation { path: e.instance_path().to_string(), message: e.to_string() }).collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A plain argument definition, for tests.
    pub(crate) fn arg(name: &str, ty: ArgType, required: bool) -> ArgDef {
        ArgDef {
            name: name.into(),
            ty,
            description: String::new(),
            required,
            default: None,
            enum_values: vec![],
            example: None,
            sensitive: false,
        }
    }

    fn sample() -> Vec<ArgDef> {
        let mut unit = arg("unit", ArgType::Enum, true);
        unit.enum_values = vec!["kg".into(), "lb".into()];
        unit.default = Some(json!("kg"));
        let mut count = arg("count", ArgType::Integer, false);
        count.description = "How many".into();
        count.example = Some(json!(3));
        vec![
            arg("text", ArgType::String, true),
            count,
            unit,
            arg("rows", ArgType::Array { items: Box::new(ArgType::Object { fields: vec![arg("n", ArgType::Number, true)] }) }, false),
        ]
    }

    #[test]
    fn rows_become_an_object_schema_with_required_fields() {
        let s = to_json_schema(&sample());
        assert_eq!(s["type"], "object");
        assert_eq!(s["required"], json!(["text", "unit"]));
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(s["properties"]["unit"], json!({"type": "string", "enum": ["kg", "lb"], "default": "kg"}));
        assert_eq!(s["properties"]["count"]["examples"], json!([3]));
        assert_eq!(s["properties"]["rows"]["items"]["properties"]["n"]["type"], "number");
    }

    #[test]
    fn a_schema_loads_back_into_the_same_rows() {
        assert_eq!(from_json_schema(&to_json_schema(&sample())).unwrap(), sample());
    }

    #[test]
    fn an_unsupported_schema_is_refused_with_its_path() {
        let e = from_json_schema(&json!({"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}})).unwrap_err();
        assert_eq!(e.to_string(), "x: `oneOf` is not supported by the argument editor");
        let e = from_json_schema(&json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": ["string", "null"]}}}}))
            .unwrap_err();
        assert_eq!(e.path, "a.items");
    }

    #[test]
    fn bad_names_duplicates_and_empty_enums_are_refused() {
        assert!(check_defs(&[arg("has space", ArgType::String, true)]).is_err());
        assert!(check_defs(&[arg("1st", ArgType::String, true)]).is_err());
        let e = check_defs(&[arg("a", ArgType::String, true), arg("a", ArgType::Number, true)]).unwrap_err();
        assert_eq!(e.to_string(), "a: appears twice");
        assert!(check_defs(&[arg("unit", ArgType::Enum, true)]).unwrap_err().reason.contains("at least one value"));
    }

    #[test]
    fn mocks_use_defaults_then_examples_then_types() {
        let mut with_rows = sample();
        with_rows[3].required = true;
        assert_eq!(mock_arguments(&with_rows), json!({"text": "example text", "count": 3, "unit": "kg", "rows": [{"n": 1.5}]}));
        assert_eq!(mock_arguments(&sample()).get("rows"), None, "optional, no default, no example: left out");
    }

    #[test]
    fn violations_name_the_argument_and_the_problem() {
        let v = CompiledSchema::new(&to_json_schema(&sample())).unwrap();
        assert!(v.validate(&json!({"text": "hi", "unit": "kg"})).is_ok());
        let errors = v.validate(&json!({"count": "three", "unit": "st", "extra": 1})).unwrap_err();
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(text.iter().any(|t| t.contains("\"text\" is a required property")), "{text:?}");
        assert!(text.iter().any(|t| t.starts_with("`count`:") && t.contains("integer")), "{text:?}");
        assert!(text.iter().any(|t| t.starts_with("`unit`:")), "{text:?}");
        assert!(text.iter().any(|t| t.contains("extra")), "{text:?}");
    }
}
