//! Argument definitions: the rows of the visual argument editor, as stored
//! with each version and sent to the browser. What they mean (the JSON
//! Schema, the checks, the mock values) is the domain's `schema` module.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ArgType {
    String,
    Number,
    Integer,
    Boolean,
    /// A string from `enum_values`.
    Enum,
    Array {
        items: Box<ArgType>,
    },
    Object {
        fields: Vec<ArgDef>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArgDef {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: ArgType,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enum_values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<Value>,
    /// Its value is redacted wherever Toolshed keeps a call (failed calls):
    /// JSON Schema's `writeOnly`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
}
