//! Argument definitions (the type the domain uses, from `toolshed_types`) and
//! the editable rows of the visual argument editor.

use serde_json::Value;

pub use toolshed_types::args::{ArgDef, ArgType};

/// One row of the visual editor: everything as typed, so a half-typed value
/// is never lost; `to_defs` turns rows into definitions.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Stable identity for keyed rendering while rows move.
    pub key: u64,
    pub name: String,
    /// string | number | integer | boolean | enum | array | object
    pub ty: String,
    /// For arrays: the item type (string | number | integer | boolean | object).
    pub item_ty: String,
    pub description: String,
    pub required: bool,
    pub default: String,
    /// Comma-separated, for enums.
    pub enum_values: String,
    pub example: String,
    /// Redacted from kept calls (see `ArgDef::sensitive`).
    pub sensitive: bool,
    /// Fields of an object, or of the objects in an array.
    pub children: Vec<Row>,
}

pub const TYPES: [&str; 7] = ["string", "number", "integer", "boolean", "enum", "array", "object"];
pub const ITEM_TYPES: [&str; 5] = ["string", "number", "integer", "boolean", "object"];

fn next_key() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Row {
    pub fn new(name: &str) -> Self {
        Row {
            key: next_key(),
            name: name.to_owned(),
            ty: "string".into(),
            item_ty: "string".into(),
            description: String::new(),
            required: true,
            default: String::new(),
            enum_values: String::new(),
            example: String::new(),
            sensitive: false,
            children: Vec::new(),
        }
    }

    pub fn has_children(&self) -> bool {
        self.ty == "object" || (self.ty == "array" && self.item_ty == "object")
    }
}

fn value_text(v: &Option<Value>) -> String {
    match v {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// A typed value: JSON when it parses as such (numbers, booleans, arrays),
/// else the text itself, for string-like types.
fn typed_value(raw: &str, ty: &str) -> Option<Value> {
    let raw = raw.trim();
    if raw.is_empty() {
        return None;
    }
    if matches!(ty, "string" | "enum") {
        return Some(Value::String(raw.to_owned()));
    }
    Some(serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned())))
}

pub fn to_rows(defs: &[ArgDef]) -> Vec<Row> {
    defs.iter()
        .map(|d| {
            let mut row = Row::new(&d.name);
            row.description = d.description.clone();
            row.required = d.required;
            row.default = value_text(&d.default);
            row.example = value_text(&d.example);
            row.sensitive = d.sensitive;
            row.enum_values = d.enum_values.join(", ");
            match &d.ty {
                ArgType::String => row.ty = "string".into(),
                ArgType::Number => row.ty = "number".into(),
                ArgType::Integer => row.ty = "integer".into(),
                ArgType::Boolean => row.ty = "boolean".into(),
                ArgType::Enum => row.ty = "enum".into(),
                ArgType::Object { fields } => {
                    row.ty = "object".into();
                    row.children = to_rows(fields);
                }
                ArgType::Array { items } => {
                    row.ty = "array".into();
                    match items.as_ref() {
                        ArgType::Object { fields } => {
                            row.item_ty = "object".into();
                            row.children = to_rows(fields);
                        }
                        other => row.item_ty = simple_name(other).into(),
                    }
                }
            }
            row
        })
        .collect()
}

fn simple_name(t: &ArgType) -> &'static str {
    match t {
        ArgType::Number => "number",
        ArgType::Integer => "integer",
        ArgType::Boolean => "boolean",
        _ => "string",
    }
}

fn simple_type(name: &str) -> ArgType {
    match name {
        "number" => ArgType::Number,
        "integer" => ArgType::Integer,
        "boolean" => ArgType::Boolean,
        "enum" => ArgType::Enum,
        _ => ArgType::String,
    }
}

pub fn to_defs(rows: &[Row]) -> Vec<ArgDef> {
    rows.iter()
        .map(|r| {
            let ty = match r.ty.as_str() {
                "object" => ArgType::Object { fields: to_defs(&r.children) },
                "array" if r.item_ty == "object" => ArgType::Array { items: Box::new(ArgType::Object { fields: to_defs(&r.children) }) },
                "array" => ArgType::Array { items: Box::new(simple_type(&r.item_ty)) },
                other => simple_type(other),
            };
            ArgDef {
                name: r.name.trim().to_owned(),
                description: r.description.trim().to_owned(),
                required: r.required,
                default: typed_value(&r.default, &r.ty),
                enum_values: if r.ty == "enum" {
                    r.enum_values.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
                } else {
                    Vec::new()
                },
                example: typed_value(&r.example, &r.ty),
                sensitive: r.sensitive,
                ty,
            }
        })
        .collect()
}

/// Finds the row with `key` anywhere in the tree.
pub fn find_mut(rows: &mut [Row], key: u64) -> Option<&mut Row> {
    for r in rows.iter_mut() {
        if r.key == key {
            return Some(r);
        }
        if let Some(found) = find_mut(&mut r.children, key) {
            return Some(found);
        }
    }
    None
}

/// The list (top level or some row's children) that holds `key`.
pub fn parent_list_mut(rows: &mut Vec<Row>, key: u64) -> Option<&mut Vec<Row>> {
    if rows.iter().any(|r| r.key == key) {
        return Some(rows);
    }
    for r in rows.iter_mut() {
        if let Some(list) = parent_list_mut(&mut r.children, key) {
            return Some(list);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_definitions_round_trip() {
        let defs = vec![
            ArgDef {
                name: "rows".into(),
                ty: ArgType::Array {
                    items: Box::new(ArgType::Object {
                        fields: vec![ArgDef {
                            name: "n".into(),
                            ty: ArgType::Integer,
                            description: "count".into(),
                            required: true,
                            default: Some(Value::from(3)),
                            enum_values: vec![],
                            example: None,
                            sensitive: false,
                        }],
                    }),
                },
                description: "the rows".into(),
                required: false,
                default: None,
                enum_values: vec![],
                example: None,
                sensitive: true,
            },
            ArgDef {
                name: "unit".into(),
                ty: ArgType::Enum,
                description: String::new(),
                required: true,
                default: Some(Value::from("kg")),
                enum_values: vec!["kg".into(), "lb".into()],
                example: None,
                sensitive: false,
            },
        ];
        assert_eq!(to_defs(&to_rows(&defs)), defs);
    }

    #[test]
    fn typed_values_parse_json_except_for_strings() {
        assert_eq!(typed_value("42", "integer"), Some(Value::from(42)));
        assert_eq!(typed_value("42", "string"), Some(Value::from("42")));
        assert_eq!(typed_value(" ", "number"), None);
        assert_eq!(typed_value("[1,2]", "array"), Some(serde_json::json!([1, 2])));
    }
}
