//! What a listing looks like to a model or an SDK, generated from its tools'
//! JSON Schemas: the TypeScript API of code mode (`typescript.rs`), OpenAI
//! function-calling definitions (`openai.rs`), the plain MCP `tools/list`
//! answer, and what each costs in tokens. Pure: no I/O, no database; the
//! caller loads the [`ToolDef`]s (`Bundles::tool_defs`).

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
    /// What the platform knows a Toolshed tool can do (`None`: an external
    /// server's tool, or one made here such as `run_code`).
    pub permissions: Option<crate::tools::Permissions>,
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
            if let Some(p) = &t.permissions {
                tool["annotations"]["openWorldHint"] = p.open_world().into();
                tool["_meta"] = p.meta();
            }
            tool
        })
        .collect();
    json!({ "tools": list }).to_string()
}

/// The name of code mode's one tool.
pub const RUN_CODE: &str = "run_code";

/// How to use `run_code`, in front of the TypeScript API in its description.
const RUN_CODE_HOW_TO: &str = "Runs JavaScript that calls this server's tools, so several calls, loops and \
filtering happen in one step. Write the body of an async function: call a tool with \
`await tools.name(input)` (it resolves with the tool's result, parsed JSON when the tool returns JSON, \
and throws an Error with the tool's message when the tool fails or the input is invalid). \
Everything passed to `console.log` is the result; a returned value other than undefined is appended. \
There is no network or file access except through the tools, and the time and memory of the whole run are limited. \
The tools:";

/// Code mode's one tool: `run_code`, described by the TypeScript API of
/// `tools`. Read-only when every tool is, destructive when any is.
pub fn run_code_def(slug: &str, tools: &[ToolDef]) -> ToolDef {
    ToolDef {
        name: RUN_CODE.into(),
        title: "Run code".into(),
        description: format!("{RUN_CODE_HOW_TO}\n\n```ts\n{}```", typescript_api(slug, tools)),
        input_schema: json!({
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The body of an async function, in JavaScript."}},
            "required": ["code"],
            "additionalProperties": false,
        }),
        output_schema: None,
        read_only: tools.iter().all(|t| t.read_only),
        destructive: tools.iter().any(|t| t.destructive),
        permissions: None,
    }
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
    /// Tokens of the `tools/list` JSON in code mode: the `run_code` tool alone,
    /// what a model is shown instead.
    pub code_mode_tokens: usize,
}

impl ListingApi {
    /// `slug` names the listing in the API's header; `prefix` (a bundle's name)
    /// goes in front of OpenAI function names as `prefix__tool`.
    pub fn build(slug: &str, prefix: Option<&str>, tools: &[ToolDef]) -> Self {
        let typescript = typescript_api(slug, tools);
        let openai = serde_json::to_string_pretty(&openai_functions(prefix, tools)).expect("JSON values always serialize");
        Self {
            tools_list_tokens: token_count(&tools_list_json(tools)),
            code_mode_tokens: token_count(&tools_list_json(&[run_code_def(slug, tools)])),
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
        permissions: None,
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
        assert!(api.tools_list_tokens > 0 && api.code_mode_tokens > 0);
    }

    #[test]
    fn run_code_is_described_by_the_typescript_api() {
        let t = sample("echo", json!({"type": "object", "properties": {"text": {"type": "string"}}}), None);
        let def = run_code_def("demo/kit", std::slice::from_ref(&t));
        assert_eq!(def.name, "run_code");
        assert!(def.description.contains("await tools.name(input)"));
        assert!(def.description.contains(&typescript_api("demo/kit", &[t])));
        assert_eq!(def.input_schema["required"], json!(["code"]));
        let api = ListingApi::build("demo/kit", None, &[sample("echo", json!({"type": "object"}), None)]);
        assert_eq!(
            api.code_mode_tokens,
            token_count(&tools_list_json(&[run_code_def("demo/kit", &[sample("echo", json!({"type": "object"}), None)])]))
        );
    }
}
