//! Demo data for a new instance: a `demo` department with published tools that
//! show what Toolshed does, and a bundle of some of them. Seeded once, on the
//! first start of an empty database.

use serde_json::json;

use crate::accounts::Accounts;
use crate::accounts::{AccountError, Registration};
use crate::bundles::Bundles;
use crate::bundles::MemberSpec;
use crate::names::{Description, Invalid, Tags, Title};
use crate::passwords;
use crate::schema::ArgDef;
use crate::tools::Tools;
use crate::tools::{Check, NewTool, Source, ToolError, ToolSettings, Visibility};

handle! {
    /// The demo data `make run` starts with.
    Demo
}

struct DemoTool {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    tags: &'static str,
    args: serde_json::Value,
    code: &'static str,
    test_cases: &'static [(&'static str, &'static str, Option<&'static str>)],
}

fn demo_tools() -> Vec<DemoTool> {
    vec![
        DemoTool {
            name: "echo",
            title: "Echo",
            description: "Returns its `text` argument unchanged.\n\nUse it to check that a client is connected and can call tools.",
            tags: "demo starter",
            args: json!([{ "name": "text", "type": { "kind": "string" }, "description": "The text to send back", "required": true, "example": "Hello, Toolshed" }]),
            code: "return $text;\n",
            test_cases: &[("hello", r#"{"text":"hello"}"#, Some("hello"))],
        },
        DemoTool {
            name: "table",
            title: "Markdown table",
            description: "Turns a list of records into a Markdown table, the format models read best.\n\n\
                          Pass `rows` (objects) and optionally `columns` to pick and order the columns.",
            tags: "demo markdown formatting",
            args: json!([
                { "name": "rows", "type": { "kind": "array", "items": { "kind": "object", "fields": [
                    { "name": "name", "type": { "kind": "string" }, "description": "Row label", "required": true },
                    { "name": "value", "type": { "kind": "number" }, "description": "A number", "required": false }
                ] } }, "description": "The records to show", "required": true,
                  "example": [{ "name": "apples", "value": 3 }, { "name": "pears", "value": 5 }] },
                { "name": "columns", "type": { "kind": "array", "items": { "kind": "string" } }, "description": "Columns to show, in order", "required": false }
            ]),
            code: "console.log(`formatting ${$rows.length} rows`);\nif ($rows.length === 0) console.warn('no rows given');\nreturn $json2MarkdownTable($rows, args.columns);\n",
            test_cases: &[("two fruits", r#"{"rows":[{"name":"apples","value":3},{"name":"pears","value":5}]}"#, None)],
        },
        DemoTool {
            name: "word_stats",
            title: "Word statistics",
            description: "Counts words and characters in a text and lists the most frequent words. Returns JSON.",
            tags: "demo text json",
            args: json!([
                { "name": "text", "type": { "kind": "string" }, "description": "The text to analyse", "required": true,
                  "example": "the quick brown fox jumps over the lazy dog the end" },
                { "name": "top", "type": { "kind": "integer" }, "description": "How many frequent words to list", "required": false, "default": 3 }
            ]),
            code: "const words = $text.toLowerCase().match(/[\\p{L}\\p{N}']+/gu) ?? [];\nconst counts = {};\nfor (const w of words) counts[w] = (counts[w] ?? 0) + 1;\nconst top = Object.entries(counts).sort((a, b) => b[1] - a[1]).slice(0, args.top ?? 3)\n  .map(([word, count]) => ({ word, count }));\nreturn { words: words.length, characters: $text.length, top };\n",
            test_cases: &[("three words", r#"{"text":"a b a"}"#, Some(r#"{"words":3,"characters":5,"top":[{"word":"a","count":2},{"word":"b","count":1}]}"#))],
        },
        DemoTool {
            name: "convert_units",
            title: "Unit converter",
            description: "Converts a length between metres, feet, inches and kilometres.",
            tags: "demo math",
            args: json!([
                { "name": "value", "type": { "kind": "number" }, "description": "The length", "required": true, "example": 10 },
                { "name": "from", "type": { "kind": "enum" }, "enum_values": ["m", "ft", "in", "km"], "description": "Unit of value", "required": true, "default": "m" },
                { "name": "to", "type": { "kind": "enum" }, "enum_values": ["m", "ft", "in", "km"], "description": "Unit wanted", "required": true, "default": "ft" }
            ]),
            code: "const metres = { m: 1, ft: 0.3048, in: 0.0254, km: 1000 };\nconst result = $value * metres[$from] / metres[$to];\nreturn `${$value} ${$from} = ${Number(result.toFixed(4))} ${$to}`;\n",
            test_cases: &[("1 km in m", r#"{"value":1,"from":"km","to":"m"}"#, Some("1 km = 1000 m"))],
        },
        DemoTool {
            name: "countdown",
            title: "Countdown",
            description: "Counts down from `from` to zero, reporting progress and logging each step.\n\n\
                          Shows `$progress` (MCP progress notifications) and `console` (MCP log messages).",
            tags: "demo progress",
            args: json!([
                { "name": "from", "type": { "kind": "integer" }, "description": "Where to start", "required": false, "default": 3, "example": 3 }
            ]),
            code: "const from = args.from ?? 3;\nfor (let i = from; i > 0; i--) {\n  console.info(`${i}…`);\n  $progress(from - i + 1, from, `${i} to go`);\n}\nconsole.warn('liftoff');\nreturn `Counted down from ${from}.`;\n",
            test_cases: &[("from three", r#"{"from":3}"#, Some("Counted down from 3."))],
        },
    ]
}

impl Demo<'_> {
    /// Seeds the demo department and its published tools. Call on an empty database.
    pub async fn seed_demo(self) -> Result<(), ToolError> {
        let account_err = |e: AccountError| match e {
            AccountError::Invalid(i) => ToolError::Invalid(i),
            AccountError::Store(s) => ToolError::Store(s),
            other => ToolError::Invalid(Invalid { field: "Demo", reason: other.to_string() }),
        };
        // The demo tools' author: an account nobody knows the password of.
        let mut reg = Registration::parse("demo", "Toolshed demos", "demo", &passwords::generate_for("demo")).map_err(account_err)?;
        reg.role = crate::names::Role::Maintainer;
        let owner = Accounts::new(self.core).register(reg, None).await.map_err(account_err)?;
        let mut text_tools = Vec::new();
        for t in demo_tools() {
            let tool =
                Tools::new(self.core).create_tool(&owner, NewTool::parse(t.name, t.title, t.description, t.tags, "everyone")?).await?;
            // The demo tools only compute: held to reading, and labelled so.
            let settings = ToolSettings {
                title: Title::parse(t.title)?,
                description: Description::parse(t.description)?,
                tags: Tags::parse(t.tags)?,
                visibility: Visibility::Everyone,
                read_only_hint: true,
                destructive_hint: false,
                fetch_allow: Vec::new(),
                timeout_ms: tool.timeout_ms,
                memory_mib: tool.memory_mib,
            };
            let tool = Tools::new(self.core).update_tool_settings(&owner, tool.id, settings).await?;
            let args: Vec<ArgDef> = serde_json::from_value(t.args).expect("demo arguments are well-formed");
            let version = Tools::new(self.core).save_version(&owner, tool.id, Source::parse(t.code, args, None)?, "First version").await?;
            for (name, args, expected) in t.test_cases {
                let args = serde_json::from_str(args).expect("demo test cases are JSON");
                let check = match expected {
                    Some(text) => Check::Equals { expected: (*text).to_owned() },
                    None => Check::Succeeds,
                };
                Tools::new(self.core).save_test_case(&owner, tool.id, name, args, check).await?;
            }
            Tools::new(self.core).publish(&owner, tool.id, version).await?;
            if ["echo", "word_stats", "table"].contains(&t.name) {
                text_tools.push(MemberSpec { tool: tool.id, pinned_version: None, exposed_name: String::new() });
            }
        }
        let kit = Tools::new(self.core)
            .create_bundle(
                &owner,
                NewTool::parse(
                    "text_kit",
                    "Text kit",
                    "Three demo tools at one MCP endpoint: echo a text, count its words, lay records out as a Markdown table.",
                    "demo bundle text",
                    "everyone",
                )?,
            )
            .await?;
        let version = Bundles::new(self.core).save_bundle_version(&owner, kit.id, &text_tools, "First version").await?;
        Tools::new(self.core).publish(&owner, kit.id, version).await?;
        tracing::info!("seeded the demo department");
        Ok(())
    }
}
