//! What a listing looks like to a model or an SDK, generated from its tools'
//! JSON Schemas: the TypeScript API of code mode (`typescript.rs`), OpenAI
//! function-calling definitions (`openai.rs`), the plain MCP `tools/list`
//! answer, and what each costs in tokens. Pure: no I/O, no database; the
//! caller loads the [`ToolDef`]s (`Toolshed::tool_defs`).

mod openai;
mod typescript;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub use openai::{openai_functions, strict_problem};
pub use typescript::{pascal_case, typescript_api};

/// One tool as a listing serves it: the name it goes by there, and its schemas.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub title: String,
    pub description: String,
    /// The JSON Schema of the arguments object (MCP's `inputSchema`).
    pub input_schema: Value,
    /// The version's output schema, when it declares one.
    pub output_schema: Option<Value>,
    pub read_only: bool,
    pub destructive: bool,
}

/// The plain MCP `tools/list` result for `tools`, compact as it travels.
pub fn tools_list_json(tools: &[ToolDef]) -> String {
    let list: Vec<Value> = tools
        .iter()
        .map(|t| {
            let mut tool = json!({
                "name": t.name,
                "title": t.title,
                "description": t.description,
                "inputSchema": t.input_schema,
                "annotations": {"readOnlyHint": t.read_only, "destructiveHint": t.destructive},
            });
            if let Some(out) = &t.output_schema {
                tool["outputSchema"] = out.clone();
            }
            tool
        })
        .collect();
    json!({ "tools": list }).to_string()
}

/// Tokens in `text` for OpenAI's `o200k_base` encoding (GPT-4o and later), the
/// same count within a few percent as other current models' tokenizers.
pub fn token_count(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton().encode_ordinary(text).len()
}

/// Everything the listing page shows about a listing's generated interfaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListingApi {
    /// The code-mode TypeScript API (`api.d.ts`).
    pub typescript: String,
    /// OpenAI function-calling definitions, pretty-printed JSON.
    pub openai: String,
    /// Tokens of the plain `tools/list` JSON.
    pub tools_list_tokens: usize,
    /// Tokens of the TypeScript API, what code mode puts in front of a model instead.
    pub typescript_tokens: usize,
}

impl ListingApi {
    /// `slug` names the listing in the API's header; `prefix` (a bundle's name)
    /// goes in front of OpenAI function names as `prefix__tool`.
    pub fn build(slug: &str, prefix: Option<&str>, tools: &[ToolDef]) -> Self {
        let typescript = typescript_api(slug, tools);
        let openai = serde_json::to_string_pretty(&openai_functions(prefix, tools)).expect("JSON values always serialize");
        Self {
            tools_list_tokens: token_count(&tools_list_json(tools)),
            typescript_tokens: token_count(&typescript),
            typescript,
            openai,
        }
    }
}

#[cfg(test)]
pub(crate) fn sample(name: &str, input: Value, output: Option<Value>) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: name.into(),
        description: format!("Does {name}."),
        input_schema: input,
        output_schema: output,
        read_only: true,
        destructive: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_list_json_is_what_mcp_sends() {
        let t = sample("echo", json!({"type": "object", "properties": {}}), Some(json!({"type": "object"})));
        let parsed: Value = serde_json::from_str(&tools_list_json(&[t])).unwrap();
        assert_eq!(
            parsed,
            json!({"tools": [{
                "name": "echo", "title": "echo", "description": "Does echo.",
                "inputSchema": {"type": "object", "properties": {}},
                "annotations": {"readOnlyHint": true, "destructiveHint": false},
                "outputSchema": {"type": "object"},
            }]})
        );
    }

    #[test]
    fn tokens_are_counted_with_o200k_base() {
        assert_eq!(token_count(""), 0);
        assert_eq!(token_count("hello world"), 2);
    }

    #[test]
    fn a_listing_api_counts_both_forms() {
        let t = sample("echo", json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}), None);
        let api = ListingApi::build("demo/echo", None, &[t]);
        assert!(api.typescript.contains("echo(input: EchoInput): Promise<EchoOutput>;"));
        assert!(api.openai.contains("\"name\": \"echo\""));
        assert!(api.tools_list_tokens > 0 && api.typescript_tokens > 0);
    }
}
