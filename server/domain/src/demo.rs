//! Demo data for a new instance: a `demo` department with published tools that
//! show what Toolshed does, and a bundle of some of them. Seeded once, on the
//! first start of an empty database.

use serde_json::json;

use crate::accounts::Accounts;
use crate::accounts::User;
use crate::accounts::{AccountError, Registration};
use crate::bundles::Bundles;
use crate::bundles::MemberSpec;
use crate::names::TaskSupport;
use crate::names::{Description, Invalid, Tags, Title};
use crate::passwords;
use crate::schema::ArgDef;
use crate::serves::Serves;
use crate::tools::Tools;
use crate::tools::{Check, NewTool, Source, Tool, ToolError, ToolSettings, Visibility};

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
    code: String,
    test_cases: &'static [(&'static str, &'static str, Option<&'static str>)],
    /// Whether calls run as tasks, and the time limit if not the default.
    tasks: TaskSupport,
    timeout_ms: Option<i64>,
    /// The output schema its results must match, if any.
    output: Option<serde_json::Value>,
    /// A tool, or a prompt or resource.
    serves: Serves,
}

fn demo_tools() -> Vec<DemoTool> {
    vec![
        DemoTool {
            name: "echo",
            title: "Echo",
            description: "Returns its `text` argument unchanged.\n\nUse it to check that a client is connected and can call tools.",
            tags: "demo starter",
            args: json!([{ "name": "text", "type": { "kind": "string" }, "description": "The text to send back", "required": true, "example": "Hello, Toolshed" }]),
            code: "return $text;\n".into(),
            test_cases: &[("hello", r#"{"text":"hello"}"#, Some("hello"))],
            tasks: TaskSupport::Forbidden,
            timeout_ms: None,
            output: None,
            serves: Serves::Tool,
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
            code: "console.log(`formatting ${$rows.length} rows`);\nif ($rows.length === 0) console.warn('no rows given');\nreturn $json2MarkdownTable($rows, args.columns);\n".into(),
            test_cases: &[("two fruits", r#"{"rows":[{"name":"apples","value":3},{"name":"pears","value":5}]}"#, None)],
            tasks: TaskSupport::Forbidden,
            timeout_ms: None,
            output: None,
            serves: Serves::Tool,
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
            code: "const words = $text.toLowerCase().match(/[\\p{L}\\p{N}']+/gu) ?? [];\nconst counts = {};\nfor (const w of words) counts[w] = (counts[w] ?? 0) + 1;\nconst top = Object.entries(counts).sort((a, b) => b[1] - a[1]).slice(0, args.top ?? 3)\n  .map(([word, count]) => ({ word, count }));\nreturn { words: words.length, characters: $text.length, top };\n".into(),
            test_cases: &[("three words", r#"{"text":"a b a"}"#, Some(r#"{"words":3,"characters":5,"top":[{"word":"a","count":2},{"word":"b","count":1}]}"#))],
            tasks: TaskSupport::Forbidden,
            timeout_ms: None,
            output: None,
            serves: Serves::Tool,
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
            code: "const metres = { m: 1, ft: 0.3048, in: 0.0254, km: 1000 };\nconst result = $value * metres[$from] / metres[$to];\nreturn `${$value} ${$from} = ${Number(result.toFixed(4))} ${$to}`;\n".into(),
            test_cases: &[("1 km in m", r#"{"value":1,"from":"km","to":"m"}"#, Some("1 km = 1000 m"))],
            tasks: TaskSupport::Forbidden,
            timeout_ms: None,
            output: None,
            serves: Serves::Tool,
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
            code: "const from = args.from ?? 3;\nfor (let i = from; i > 0; i--) {\n  console.info(`${i}…`);\n  $progress(from - i + 1, from, `${i} to go`);\n}\nconsole.warn('liftoff');\nreturn `Counted down from ${from}.`;\n".into(),
            test_cases: &[("from three", r#"{"from":3}"#, Some("Counted down from 3."))],
            tasks: TaskSupport::Forbidden,
            timeout_ms: None,
            output: None,
            serves: Serves::Tool,
        },
    ]
}

/// A red pixel, and a short silence: the smallest image and audio results.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const WAV: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// The fixture tools of the official MCP conformance suite
/// (`@modelcontextprotocol/conformance`), each as its scenario describes it,
/// written as any author would write them: the `demo/conformance` bundle is
/// what the suite runs against.
fn conformance_tools() -> Vec<DemoTool> {
    // The data a fixture's code names, declared at its top as an author would.
    let constants = [
        ("PNG", format!("'{PNG}'")),
        ("WAV", format!("'{WAV}'")),
        (
            "NAME",
            "{ method: 'elicitation/create', params: { message: 'What is your name?',\n  \
             requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } } }"
                .to_owned(),
        ),
    ];
    let tool = |name, description, args: serde_json::Value, code: &str| {
        let declared: String = constants.iter().filter(|(k, _)| code.contains(k)).map(|(k, v)| format!("const {k} = {v};\n")).collect();
        DemoTool {
            name,
            title: name,
            description,
            tags: "conformance",
            args,
            code: declared + code,
            test_cases: &[],
            tasks: TaskSupport::Forbidden,
            timeout_ms: None,
            output: None,
            serves: Serves::Tool,
        }
    };
    let prompt = |name, description, args, code| DemoTool { serves: Serves::Prompt, ..tool(name, description, args, code) };
    let resource = |name, description, uri, mime, args, code| DemoTool {
        serves: Serves::parse("resource", uri, mime).expect("the fixtures' URIs are well-formed"),
        ..tool(name, description, args, code)
    };
    let text_arg =
        |name: &str, description: &str| json!({ "name": name, "type": { "kind": "string" }, "description": description, "required": true });
    // The tasks extension's fixtures: calls that may outlive their request.
    let task = |name, description, args, code, tasks, output| DemoTool {
        tasks,
        timeout_ms: Some(120_000),
        output,
        ..tool(name, description, args, code)
    };
    let confirm = "{ method: 'elicitation/create', params: { message: `Delete ${$filename}?`,\n  \
                   requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] } } }";
    vec![
        tool("greet", "Conformance fixture: greets at once, never as a task.",
            json!([{ "name": "name", "type": { "kind": "string" }, "description": "Who to greet", "required": true }]),
            "return `Hello, ${$name}!`;\n"),
        task("slow_compute", "Conformance fixture: computes for the given number of seconds; a task once it runs long.",
            json!([{ "name": "seconds", "type": { "kind": "number" }, "description": "How long to compute", "required": true },
                   { "name": "label", "type": { "kind": "string" }, "description": "What the result is called" }]),
            "$progress(0, $seconds, `Computing ${$label ?? 'the result'}`);\nawait $sleep($seconds * 1000);\nreturn `Computed ${$label ?? 'the result'} in ${$seconds} s.`;\n",
            TaskSupport::Optional, None),
        task("failing_job", "Conformance fixture: a job that fails after a second, run as a task.", json!([]),
            "await $sleep(1000);\nthrow new Error('The job failed, as this fixture always does.');\n",
            TaskSupport::Required, None),
        task("protocol_error_job", "Conformance fixture: a job whose result breaks its own output schema, which no client may be given, run as a task.", json!([]),
            "await $sleep(200);\nreturn { count: 'not a number' };\n",
            TaskSupport::Required, Some(json!({ "type": "object", "properties": { "count": { "type": "number" } }, "required": ["count"] }))),
        task("confirm_delete", "Conformance fixture: asks before it deletes a file, run as a task.",
            json!([{ "name": "filename", "type": { "kind": "string" }, "description": "The file to delete", "required": true }]),
            &format!("const {{ confirm }} = await $input({{ confirm: {confirm} }});\nreturn confirm.action === 'accept' && confirm.content?.confirm ? `Deleted ${{$filename}}.` : `Kept ${{$filename}}.`;\n"),
            TaskSupport::Required, None),
        task("multi_input", "Conformance fixture: asks two things at once, run as a task.", json!([]),
            "const { name, confirm } = await $input({\n  name: NAME,\n  confirm: { method: 'elicitation/create', params: { message: 'Go ahead?',\n    requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] } } },\n});\nreturn `${name.content?.name} said ${confirm.action}.`;\n",
            TaskSupport::Required, None),
        task("test_tool_with_task", "Conformance fixture: asks for a name at once, then works long enough to become a task.", json!([]),
            "const { user_name } = await $input({ user_name: NAME });\nawait $sleep(1500);\nreturn `Hello, ${user_name.content?.name ?? 'stranger'}! The task is done.`;\n",
            TaskSupport::Optional, None),
        tool("test_simple_text", "Conformance fixture: answers with one text block.", json!([]),
            "return 'This is a simple text response for testing.';\n"),
        tool("test_image_content", "Conformance fixture: answers with a one-pixel PNG image.", json!([]),
            "return $content([{ type: 'image', data: PNG, mimeType: 'image/png' }]);\n"),
        tool("test_audio_content", "Conformance fixture: answers with a short WAV sound.", json!([]),
            "return $content([{ type: 'audio', data: WAV, mimeType: 'audio/wav' }]);\n"),
        tool("test_embedded_resource", "Conformance fixture: answers with an embedded text resource.", json!([]),
            "return $content([{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }]);\n"),
        tool("test_multiple_content_types", "Conformance fixture: answers with text, an image and a JSON resource.", json!([]),
            "return $content([\n  { type: 'text', text: 'Multiple content types test:' },\n  { type: 'image', data: PNG, mimeType: 'image/png' },\n  { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: JSON.stringify({ test: 'data', value: 123 }) } },\n]);\n"),
        tool("test_error_handling", "Conformance fixture: always fails with a tool error.", json!([]),
            "throw new Error('This tool intentionally returns an error for testing');\n"),
        tool("test_tool_with_progress", "Conformance fixture: reports progress 0, 50 and 100 of 100.", json!([]),
            "for (const done of [0, 50, 100]) $progress(done, 100);\nreturn 'Progress reported.';\n"),
        tool("test_tool_with_logging", "Conformance fixture: logs three lines while it runs.", json!([]),
            "console.info('Tool execution started');\nconsole.info('Tool processing data');\nconsole.info('Tool execution completed');\nreturn 'Logged three lines.';\n"),
        tool("test_logging_tool", "Conformance fixture: logs while it runs, heard only at the level the client asked for.", json!([]),
            "console.info('Logging tool started');\nconsole.warn('Logging tool warning');\nreturn 'Logged.';\n"),
        tool("test_missing_capability", "Conformance fixture: asks the client's model, refused to a client that cannot answer.", json!([]),
            "const { reply } = await $input({ reply: { method: 'sampling/createMessage', params: {\n  messages: [{ role: 'user', content: { type: 'text', text: 'Say hello' } }], maxTokens: 20 } } });\nreturn `The model says: ${reply.content.text}`;\n"),
        tool("test_streaming_elicitation", "Conformance fixture: asks the person for a name mid-call.", json!([]),
            "const { user_name } = await $input({ user_name: NAME });\nreturn `Hello, ${user_name.content?.name ?? 'stranger'}!`;\n"),
        tool("test_elicitation", "Conformance fixture: asks the person for a username and an email address.",
            json!([{ "name": "message", "type": { "kind": "string" }, "description": "What to ask", "required": true }]),
            "const answer = await $ask($message, { type: 'object', required: ['username', 'email'], properties: {\n  username: { type: 'string', description: \"User's response\" },\n  email: { type: 'string', description: \"User's email address\" } } });\nreturn `User response: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`;\n"),
        tool("test_sampling", "Conformance fixture: asks the client's model to answer a prompt.",
            json!([{ "name": "prompt", "type": { "kind": "string" }, "description": "The prompt", "required": true }]),
            "const { reply } = await $input({ reply: { method: 'sampling/createMessage', params: {\n  messages: [{ role: 'user', content: { type: 'text', text: $prompt } }], maxTokens: 100 } } });\nreturn `LLM response: ${reply.content.text ?? JSON.stringify(reply.content)}`;\n"),
        tool("test_elicitation_sep1034_defaults", "Conformance fixture: asks with a default for every kind of field.", json!([]),
            "const answer = await $ask('Please review your details', { type: 'object', properties: {\n  name: { type: 'string', default: 'John Doe' },\n  age: { type: 'integer', default: 30 },\n  score: { type: 'number', default: 95.5 },\n  status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },\n  verified: { type: 'boolean', default: true } } });\nreturn `Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`;\n"),
        tool("test_elicitation_sep1330_enums", "Conformance fixture: asks with each kind of choice list.", json!([]),
            "const answer = await $ask('Please choose', { type: 'object', properties: {\n  untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },\n  titledSingle: { type: 'string', oneOf: [{ const: 'value1', title: 'First Option' }, { const: 'value2', title: 'Second Option' }, { const: 'value3', title: 'Third Option' }] },\n  legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },\n  untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },\n  titledMulti: { type: 'array', items: { anyOf: [{ const: 'value1', title: 'First Choice' }, { const: 'value2', title: 'Second Choice' }, { const: 'value3', title: 'Third Choice' }] } } } });\nreturn `Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`;\n"),
        tool("test_input_required_result_elicitation", "Conformance fixture: asks for a name, then greets.", json!([]),
            "const { user_name } = await $input({ user_name: NAME });\nreturn `Hello, ${user_name.content?.name ?? 'stranger'}!`;\n"),
        tool("test_input_required_result_sampling", "Conformance fixture: asks the client's model a question.", json!([]),
            "const { capital_question: a } = await $input({ capital_question: { method: 'sampling/createMessage', params: {\n  messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }], maxTokens: 100 } } });\nreturn `The model says: ${a.content.text ?? JSON.stringify(a.content)}`;\n"),
        tool("test_input_required_result_list_roots", "Conformance fixture: asks for the client's roots.", json!([]),
            "const { client_roots } = await $input({ client_roots: { method: 'roots/list' } });\nreturn `Roots: ${client_roots.roots.map((r) => r.uri).join(', ')}`;\n"),
        tool("test_input_required_result_request_state", "Conformance fixture: asks for a confirmation across a sealed request state.", json!([]),
            "const { confirm } = await $input({ confirm: { method: 'elicitation/create', params: { message: 'Please confirm',\n  requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } } } });\nreturn `state-ok: ${confirm.action}`;\n"),
        tool("test_input_required_result_multiple_inputs", "Conformance fixture: asks three things at once.", json!([]),
            "const a = await $input({\n  user_name: NAME,\n  greeting: { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 } },\n  client_roots: { method: 'roots/list' },\n});\nreturn `${a.greeting.content.text ?? 'Hello'}, ${a.user_name.content?.name} (${a.client_roots.roots.length} roots)`;\n"),
        tool("test_input_required_result_multi_round", "Conformance fixture: asks twice, one question after the other.", json!([]),
            "const { step1 } = await $input({ step1: { method: 'elicitation/create', params: { message: 'Step 1: What is your name?',\n  requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } } } });\nconst { step2 } = await $input({ step2: { method: 'elicitation/create', params: { message: 'Step 2: What is your favorite color?',\n  requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] } } } });\nreturn `${step1.content?.name} likes ${step2.content?.color}`;\n"),
        tool("test_input_required_result_tampered_state", "Conformance fixture: asks, and refuses a changed request state.", json!([]),
            "const { ok } = await $input({ ok: { method: 'elicitation/create', params: { message: 'Proceed?',\n  requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } } } });\nreturn `Answered: ${ok.action}`;\n"),
        tool("test_input_required_result_capabilities", "Conformance fixture: asks only what the client declared it can answer.", json!([]),
            "const can = $context.client.capabilities;\nconst asks = {};\nif (can.elicitation) asks.name = NAME;\nif (can.sampling) asks.greeting = { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'Say hello' } }], maxTokens: 20 } };\nif (can.roots) asks.roots = { method: 'roots/list' };\nif (Object.keys(asks).length === 0) return 'This client can answer nothing.';\nconst answers = await $input(asks);\nreturn `Answered: ${Object.keys(answers).join(', ')}`;\n"),
        prompt("test_simple_prompt", "Conformance fixture: a prompt of one message.", json!([]),
            "return 'This is a simple prompt for testing.';\n"),
        prompt("test_prompt_with_arguments", "Conformance fixture: a prompt that says its two arguments.",
            json!([text_arg("arg1", "First test argument"), text_arg("arg2", "Second test argument")]),
            "return `Prompt with arguments: arg1='${$arg1}', arg2='${$arg2}'`;\n"),
        prompt("test_prompt_with_embedded_resource", "Conformance fixture: a prompt that embeds a resource, then asks about it.",
            json!([text_arg("resourceUri", "URI of the resource to embed")]),
            "return $content([\n  { type: 'resource', resource: { uri: $resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } },\n  { type: 'text', text: 'Please process the embedded resource above.' },\n]);\n"),
        prompt("test_prompt_with_image", "Conformance fixture: a prompt that shows an image, then asks about it.", json!([]),
            "return $content([\n  { type: 'image', data: PNG, mimeType: 'image/png' },\n  { type: 'text', text: 'Please analyze the image above.' },\n]);\n"),
        prompt("test_input_required_result_prompt", "Conformance fixture: a prompt that asks its person for context first.", json!([]),
            "const { user_context } = await $input({ user_context: { method: 'elicitation/create', params: { message: 'What context should the prompt use?',\n  requestedSchema: { type: 'object', properties: { context: { type: 'string' } }, required: ['context'] } } } });\nreturn `Answer with this context in mind: ${user_context.content?.context ?? 'none given'}`;\n"),
        resource("test_static_text", "Conformance fixture: a fixed text resource.", "test://static-text", "text/plain", json!([]),
            "return 'This is the content of the static text resource.';\n"),
        resource("test_static_binary", "Conformance fixture: a fixed binary resource, a PNG image.", "test://static-binary", "image/png", json!([]),
            "return $content([{ type: 'image', data: PNG, mimeType: 'image/png' }]);\n"),
        resource("test_template", "Conformance fixture: JSON data for any id.", "test://template/{id}/data", "application/json",
            json!([text_arg("id", "The id the URI names")]),
            "return { id: $id, templateTest: true, data: `Data for ID: ${$id}` };\n"),
        resource("test_watched_resource", "Conformance fixture: a resource clients subscribe to.", "test://watched-resource", "text/plain", json!([]),
            "return 'A resource whose subscribers hear when its tool is published again.';\n"),
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
        // The fixtures first: listings that tie (a new instance's, all unused) list newest first,
        // so the demo tools lead the home page and Browse.
        let mut fixtures = Vec::new();
        for t in conformance_tools() {
            let tool = self.publish_tool(&owner, &t).await?;
            fixtures.push(MemberSpec { tool: tool.id, pinned_version: None, exposed_name: String::new() });
        }
        self.publish_bundle(
            &owner,
            "conformance",
            "MCP conformance fixtures",
            "The fixture tools of the official MCP conformance suite, written as Toolshed tools.",
            "conformance bundle mcp",
            &fixtures,
        )
        .await?;
        let mut text_tools = Vec::new();
        for t in demo_tools() {
            let tool = self.publish_tool(&owner, &t).await?;
            if ["echo", "word_stats", "table"].contains(&t.name) {
                text_tools.push(MemberSpec { tool: tool.id, pinned_version: None, exposed_name: String::new() });
            }
        }
        self.publish_bundle(
            &owner,
            "text_kit",
            "Text kit",
            "Three demo tools at one MCP endpoint: echo a text, count its words, lay records out as a Markdown table.",
            "demo bundle text",
            &text_tools,
        )
        .await?;
        tracing::info!("seeded the demo department");
        Ok(())
    }

    /// Creates, sets up, tests and publishes one demo tool.
    async fn publish_tool(self, owner: &User, t: &DemoTool) -> Result<Tool, ToolError> {
        let tool = Tools::new(self.core).create_tool(owner, NewTool::parse(t.name, t.title, t.description, t.tags, "everyone")?).await?;
        // The demo tools only compute: held to reading, and labelled so.
        let settings = ToolSettings {
            title: Title::parse(t.title)?,
            description: Description::parse(t.description)?,
            tags: Tags::parse(t.tags)?,
            visibility: Visibility::Everyone,
            read_only_hint: true,
            destructive_hint: false,
            fetch_allow: Vec::new(),
            timeout_ms: t.timeout_ms.unwrap_or(tool.timeout_ms),
            memory_mib: tool.memory_mib,
            task_support: t.tasks,
            serves: t.serves.clone(),
        };
        let tool = Tools::new(self.core).update_tool_settings(owner, tool.id, settings).await?;
        let args: Vec<ArgDef> = serde_json::from_value(t.args.clone()).expect("demo arguments are well-formed");
        let version =
            Tools::new(self.core).save_version(owner, tool.id, Source::parse(&t.code, args, t.output.clone())?, "First version").await?;
        for (name, args, expected) in t.test_cases {
            let args = serde_json::from_str(args).expect("demo test cases are JSON");
            let check = match expected {
                Some(text) => Check::Equals { expected: (*text).to_owned() },
                None => Check::Succeeds,
            };
            Tools::new(self.core).save_test_case(owner, tool.id, name, args, check).await?;
        }
        Tools::new(self.core).publish(owner, tool.id, version).await?;
        Ok(tool)
    }

    async fn publish_bundle(
        self,
        owner: &User,
        name: &str,
        title: &str,
        description: &str,
        tags: &str,
        members: &[MemberSpec],
    ) -> Result<(), ToolError> {
        let bundle = Tools::new(self.core).create_bundle(owner, NewTool::parse(name, title, description, tags, "everyone")?).await?;
        let version = Bundles::new(self.core).save_bundle_version(owner, bundle.id, members, "First version").await?;
        Tools::new(self.core).publish(owner, bundle.id, version).await?;
        Ok(())
    }
}
