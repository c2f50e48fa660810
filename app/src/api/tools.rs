//! Tools: my tools, create, the editor's draft/version/publish calls, runs,
//! test cases, and the listing page's data.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use crate::args::ArgDef;
use crate::error::AppError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCard {
    pub kind: String,
    pub department: String,
    pub name: String,
    pub title: String,
    pub summary: String,
    pub tags: Vec<String>,
    pub visibility: String,
    pub status: String,
    pub owner: String,
    pub published_version: Option<i64>,
    pub latest_version: Option<i64>,
    pub updated_at: i64,
    pub moderation: Moderation,
}

/// What admins decided about a listing, as its author and admins see it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Moderation {
    /// The admin's note on the last status change.
    pub note: Option<String>,
    /// A version published in a department that requires review, not served yet.
    pub pending_version: Option<i64>,
    /// Why the last version waiting for review was turned down.
    pub review_note: Option<String>,
    /// A new title and description waiting for review (what models read is the approved one).
    pub pending_text: Option<(String, String)>,
    /// A publish held for what the scan found in what models would read.
    pub held: Option<crate::api::HeldView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionRow {
    pub version: i64,
    pub changelog: String,
    pub created_by: String,
    pub created_at: i64,
}

/// A link to another listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkView {
    pub href: String,
    /// `department/name`.
    pub slug: String,
    pub title: String,
}

/// Where a fork came from, and whether the source has moved on since.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamView {
    pub source: LinkView,
    pub forked_version: i64,
    pub source_published: Option<i64>,
    /// From the copied version to the source's newer published one.
    pub newer: Option<DiffView>,
}

/// Everything the listing page and the editor show about a tool (or a bundle).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub id: i64,
    /// `tool` or `bundle`.
    pub kind: String,
    pub department: String,
    pub name: String,
    pub title: String,
    pub description: String,
    /// The description rendered from Markdown and sanitized on the server.
    pub description_html: String,
    pub tags: Vec<String>,
    pub visibility: String,
    pub status: String,
    pub owner: String,
    pub published_version: Option<i64>,
    pub latest_version: Option<i64>,
    pub read_only_hint: bool,
    pub destructive_hint: bool,
    pub fetch_allow: Vec<String>,
    pub timeout_ms: i64,
    pub memory_mib: i64,
    /// Whether calls may run as tasks: `forbidden`, `optional` or `required`.
    pub task_support: String,
    /// Served on MCP as a `tool`, a `prompt` or a `resource`.
    pub serves: String,
    /// A resource's URI (or URI template) and MIME type; empty otherwise.
    pub resource_uri: String,
    pub resource_mime: String,
    /// A bundle's code mode: `off`, `instead` or `beside`.
    pub code_mode: String,
    /// The apps it acts as its caller at (connected accounts).
    pub accounts: Vec<String>,
    pub can_edit: bool,
    /// The viewer is an admin: the page offers the moderation actions.
    pub can_moderate: bool,
    pub moderation: Moderation,
    /// Arguments and changelog of the published version, if any.
    pub published_args: Vec<ArgDef>,
    pub published_changelog: Option<String>,
    pub versions: Vec<VersionRow>,
    /// The listing's MCP endpoint, a full URL.
    pub endpoint: String,
    /// How each MCP client connects to it.
    pub connect: Vec<crate::api::ClientSnippet>,
    /// The same, pinned to the published version (`…@vN`, which keeps serving
    /// it after later publishes); empty before the first publish.
    pub connect_pinned: Vec<crate::api::ClientSnippet>,
    pub upstream: Option<UpstreamView>,
    /// Forks the user may see.
    pub forks: Vec<crate::api::ListingCardView>,
    /// Bundles the user may see that serve this tool.
    pub in_bundles: Vec<LinkView>,
    /// The user starred it: their personal endpoint (`/mcp/me`) lists it directly.
    pub favourite: bool,
    /// What a tool can do, as Toolshed knows and enforces it; `None` for a bundle.
    pub permissions: Option<PermissionsView>,
}

/// A tool's permissions label (`toolshed_domain::tools::Permissions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionsView {
    /// Hosts its `$fetch` may reach; empty: no network.
    pub hosts: Vec<String>,
    /// Its secret variables' names.
    pub secrets: Vec<String>,
    /// It may send more than GET and HEAD.
    pub writes: bool,
    /// The apps it acts as its caller at, each with the scopes it asks for.
    pub accounts: Vec<(String, Vec<String>)>,
}

impl ToolInfo {
    pub fn slug(&self) -> String {
        format!("{}/{}", self.department, self.name)
    }

    /// The listing page: `/tools/dept/name` or `/bundles/dept/name`.
    pub fn href(&self) -> String {
        format!("/{}s/{}", self.kind, self.slug())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DraftView {
    pub code: String,
    pub args: Vec<ArgDef>,
    pub autosaved_at: Option<i64>,
    pub base_version: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestCaseView {
    pub id: i64,
    pub name: String,
    pub args: String,
    /// What the check expects, as people read it; `None`: a run without an error.
    pub expected: Option<String>,
    /// Made from a failed call: `$fetch` answers from its recording.
    pub recorded: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditorState {
    pub tool: ToolInfo,
    pub draft: DraftView,
    pub test_cases: Vec<TestCaseView>,
    /// `$env` as its editors see it (empty for anyone else).
    pub env: Vec<EnvVarView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsoleView {
    pub level: String,
    pub message: String,
    pub elapsed_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunErrorView {
    /// timeout, out_of_memory, syntax, thrown, …
    pub kind: String,
    pub message: String,
    /// Line in the tool's code, when known.
    pub line: Option<u32>,
}

/// One run as the Run panel shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    pub version: Option<i64>,
    /// `text` or `json`; empty when the run failed.
    pub kind: String,
    /// The text, or pretty-printed JSON.
    pub result: String,
    /// For text results: rendered, sanitized Markdown.
    pub result_html: Option<String>,
    pub error: Option<RunErrorView>,
    pub console: Vec<ConsoleView>,
    /// Every `$fetch` the code made.
    pub fetches: Vec<FetchView>,
    pub duration_ms: f64,
    pub peak_memory_bytes: u64,
    /// What the tool asked (`$ask`, `$input`) and waits for: the run stopped
    /// there, and runs again with the answers.
    pub questions: Vec<QuestionView>,
    /// When the tool needs approval: the key that admits the run with the
    /// answers (the next round of this call), sent back with them.
    #[serde(default)]
    pub approval: Option<String>,
}

/// A tool's question to the person running it (an MCP elicitation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionView {
    pub key: String,
    /// Which question this is (its fingerprint): an answer goes back with it,
    /// so it counts only for this question.
    pub question: String,
    pub message: String,
    pub fields: Vec<QuestionField>,
}

/// One field of a question's form, from its flat requested schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionField {
    pub name: String,
    pub label: String,
    pub description: String,
    /// `string`, `number`, `integer`, `boolean`, `choice` (one of
    /// `options`) or `choices` (any of them: a multi-select).
    pub kind: String,
    /// A choice's values and what each is called.
    pub options: Vec<(serde_json::Value, String)>,
    pub required: bool,
    pub default: Option<serde_json::Value>,
}

/// One `$fetch` of a run, as recorded (credentials redacted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FetchView {
    pub method: String,
    pub url: String,
    /// `None` when there was no response (see `error`).
    pub status: Option<u16>,
    /// Why there was no response; "no answer" when none came before the call ended.
    pub error: Option<String>,
    pub request_body: Option<String>,
    pub response_body: Option<String>,
    /// A body was cut to keep the recording small.
    pub truncated: bool,
}

/// A kept failed call, as its tool's editors see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedCallView {
    pub id: i64,
    pub version: i64,
    pub caller: String,
    pub at_ms: i64,
    pub transport: String,
    pub error: String,
    /// The arguments as pretty JSON (sensitive ones redacted).
    pub args: String,
    /// Empty in a list: only one call, whole, carries them.
    pub console: Vec<ConsoleView>,
    pub fetches: Vec<FetchView>,
    pub duration_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResultView {
    pub name: String,
    pub passed: bool,
    pub actual: String,
    pub expected: Option<String>,
    /// Why it failed, in a sentence.
    pub reason: Option<String>,
    pub duration_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffView {
    pub from: i64,
    pub to: i64,
    pub code: String,
    pub args: String,
}

/// Which code a run uses; `Draft` carries the editor's unsaved content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RunTarget {
    Draft { code: String, args: Vec<ArgDef> },
    Version(i64),
    Published,
}

#[cfg(feature = "ssr")]
pub(crate) use convert::detail;

#[cfg(feature = "ssr")]
mod convert {
    use toolshed_domain::sandbox::{RunError, ToolValue};
    use toolshed_domain::tools::{self, RunReport, Tool};
    use toolshed_domain::User;

    use super::*;

    pub fn link(t: &Tool) -> LinkView {
        LinkView { href: format!("/{}/{}", t.kind.plural(), t.slug()), slug: t.slug(), title: t.title.clone() }
    }

    pub fn diff(d: tools::VersionDiff) -> DiffView {
        DiffView { from: d.from, to: d.to, code: d.code, args: d.args }
    }

    pub fn card(t: &Tool) -> ToolCard {
        ToolCard {
            kind: t.kind.as_str().to_owned(),
            department: t.department.clone(),
            name: t.name.clone(),
            title: t.title.clone(),
            summary: toolshed_domain::markdown::summary(&t.description, 160),
            tags: t.tags.clone(),
            visibility: t.visibility.as_str().to_owned(),
            status: t.status.as_str().to_owned(),
            owner: t.owner_display_name.clone(),
            published_version: t.published_version,
            latest_version: t.latest_version,
            updated_at: t.updated_at,
            moderation: moderation(t),
        }
    }

    /// Shown to those who may edit the tool (its authors, admins).
    fn moderation(t: &Tool) -> Moderation {
        Moderation {
            note: t.moderation_note.clone(),
            pending_version: t.pending_version,
            review_note: t.review_note.clone(),
            pending_text: t.pending_text.clone().map(|p| (p.title, p.description)),
            held: None,
        }
    }

    pub async fn detail(ts: &toolshed_domain::Toolshed, user: &User, t: Tool) -> Result<ToolInfo, AppError> {
        let versions = ts.tools().versions(user, t.id).await.map_err(server::fail)?;
        let published = match t.published_version {
            Some(n) => Some(ts.tools().version(user, t.id, n).await.map_err(server::fail)?),
            None => None,
        };
        let upstream = ts.tools().upstream(user, &t).await.map_err(server::fail)?.map(|u| UpstreamView {
            source: link(&u.source),
            forked_version: u.forked_version,
            source_published: u.source.published_version,
            newer: u.newer.map(diff),
        });
        let forks = ts.market().forks(user, t.id).await.map_err(server::fail)?.into_iter().map(crate::api::market::card).collect();
        let in_bundles = ts.bundles().bundles_with(user, t.id).await.map_err(server::fail)?.iter().map(link).collect();
        let favourite = ts.favourites().is_favourite(user, t.id).await.map_err(server::fail)?;
        let held = match tools::can_edit(user, &t) {
            true => ts.moderation().held_publish(t.id).await.map_err(server::fail)?.map(crate::api::held_view),
            false => None,
        };
        let permissions = match t.kind {
            tools::ListingKind::Tool => {
                let p = ts.tools().permissions(&t).await.map_err(server::fail)?;
                let accounts = p.accounts.into_iter().map(|a| (a.app, a.scopes)).collect();
                Some(PermissionsView { hosts: p.hosts, secrets: p.secrets, writes: p.writes, accounts })
            }
            tools::ListingKind::Bundle => None,
        };
        let base = use_context::<crate::PublicUrl>().map(|p| p.0).unwrap_or_default();
        let endpoint = format!("{base}/mcp/{}/{}", t.kind.plural(), t.slug());
        use crate::api::connect::{config_key, connect_clients};
        Ok(ToolInfo {
            id: t.id.0,
            kind: t.kind.as_str().to_owned(),
            upstream,
            forks,
            in_bundles,
            favourite,
            permissions,
            department: t.department.clone(),
            name: t.name.clone(),
            title: t.title.clone(),
            description_html: toolshed_domain::markdown::to_safe_html(&t.description),
            description: t.description.clone(),
            tags: t.tags.clone(),
            visibility: t.visibility.as_str().to_owned(),
            status: t.status.as_str().to_owned(),
            owner: t.owner_display_name.clone(),
            published_version: t.published_version,
            latest_version: t.latest_version,
            read_only_hint: t.read_only_hint,
            destructive_hint: t.destructive_hint,
            fetch_allow: t.fetch_allow.clone(),
            timeout_ms: t.timeout_ms,
            memory_mib: t.memory_mib,
            task_support: t.task_support.as_str().to_owned(),
            serves: t.serves.kind().to_owned(),
            resource_uri: t.serves.uri().map(|u| u.as_str().to_owned()).unwrap_or_default(),
            resource_mime: t.serves.mime().map(|m| m.as_str().to_owned()).unwrap_or_default(),
            code_mode: t.code_mode.as_str().to_owned(),
            accounts: t.accounts.clone(),
            can_edit: tools::can_edit(user, &t),
            can_moderate: user.is_admin,
            moderation: if tools::can_edit(user, &t) { Moderation { held, ..moderation(&t) } } else { Moderation::default() },
            published_changelog: published.as_ref().map(|v| v.changelog.clone()),
            connect: connect_clients(&config_key(&t.department, &t.name, None), &endpoint),
            connect_pinned: t
                .published_version
                .map(|n| connect_clients(&config_key(&t.department, &t.name, Some(n)), &format!("{endpoint}@v{n}")))
                .unwrap_or_default(),
            endpoint,
            published_args: published.map(|v| v.args).unwrap_or_default(),
            versions: versions
                .into_iter()
                .map(|v| VersionRow { version: v.version, changelog: v.changelog, created_by: v.created_by, created_at: v.created_at })
                .collect(),
        })
    }

    pub fn test_case(c: tools::TestCase) -> TestCaseView {
        TestCaseView {
            id: c.id,
            name: c.name,
            args: serde_json::to_string_pretty(&c.args).unwrap_or_default(),
            expected: c.check.describe(),
            recorded: c.recording.is_some(),
        }
    }

    pub fn test_result(r: tools::TestCaseResult) -> TestResultView {
        TestResultView {
            name: r.name,
            passed: r.passed,
            actual: r.actual,
            expected: r.expected,
            reason: r.reason,
            duration_ms: r.duration_ms,
        }
    }

    pub fn run_view(report: RunReport) -> RunView {
        let o = report.outcome;
        let mut questions = Vec::new();
        let (kind, result, result_html, error) = match o.result {
            Ok(ToolValue::Text(t)) => ("text", t.clone(), Some(toolshed_domain::markdown::to_safe_html(&t)), None),
            Ok(ToolValue::Json(v)) => ("json", serde_json::to_string_pretty(&v).unwrap_or_default(), None, None),
            Ok(ToolValue::Content(blocks)) => {
                let text = ToolValue::Content(blocks.clone()).to_text();
                ("content", text, Some(toolshed_domain::markdown::content_html(&blocks)), None)
            }
            Err(RunError::NeedsInput { requests }) if requests.values().all(|r| r["method"] == "elicitation/create") => {
                questions = requests.iter().map(|(key, r)| question(key, r)).collect();
                ("asked", String::new(), None, None)
            }
            Err(e) => {
                let kind = serde_json::to_value(&e)
                    .ok()
                    .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
                    .unwrap_or_else(|| "error".into());
                let line = match &e {
                    RunError::Syntax { line, .. } => *line,
                    RunError::Thrown { line, .. } => *line,
                    RunError::StackOverflow { line } => *line,
                    _ => None,
                };
                ("", String::new(), None, Some(RunErrorView { kind, message: e.to_string(), line }))
            }
        };
        RunView {
            version: report.version,
            kind: kind.to_owned(),
            result,
            result_html,
            error,
            console: o.console.into_iter().map(console_line).collect(),
            fetches: o.fetches.into_iter().map(fetch).collect(),
            duration_ms: o.duration.as_secs_f64() * 1000.0,
            peak_memory_bytes: o.peak_memory_bytes as u64,
            questions,
            approval: report.approval,
        }
    }

    /// An elicitation as a form: its schema is flat (strings, numbers,
    /// booleans, choices, multi-selects), so each property is one field.
    fn question(key: &str, request: &serde_json::Value) -> QuestionView {
        let params = &request["params"];
        let schema = &params["requestedSchema"];
        let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
        // `enum` (with `enumNames`, the legacy titles), or `oneOf`/`anyOf` of `{const, title}`.
        let options = |p: &serde_json::Value| -> Vec<(serde_json::Value, String)> {
            let label = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            if let Some(values) = p["enum"].as_array() {
                let names = p["enumNames"].as_array();
                return values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (v.clone(), names.and_then(|n| n.get(i)).map_or_else(|| label(v), text)))
                    .collect();
            }
            let titled = p["oneOf"].as_array().or_else(|| p["anyOf"].as_array()).into_iter().flatten();
            titled.map(|c| (c["const"].clone(), c["title"].as_str().map_or_else(|| label(&c["const"]), str::to_owned))).collect()
        };
        let fields = schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, p)| {
                let (kind, options) = match p["type"].as_str() {
                    Some("array") => ("choices", options(&p["items"])),
                    kind => match (kind, options(p)) {
                        (_, options) if !options.is_empty() => ("choice", options),
                        (Some(kind @ ("number" | "integer" | "boolean")), _) => (kind, Vec::new()),
                        _ => ("string", Vec::new()),
                    },
                };
                QuestionField {
                    name: name.clone(),
                    label: p["title"].as_str().unwrap_or(name).to_owned(),
                    description: text(&p["description"]),
                    kind: kind.to_owned(),
                    options,
                    required: required.contains(&name.as_str()),
                    default: p.get("default").cloned(),
                }
            })
            .collect();
        QuestionView {
            key: key.to_owned(),
            question: toolshed_domain::sandbox::fingerprint(request),
            message: text(&params["message"]),
            fields,
        }
    }

    fn console_line(c: toolshed_domain::sandbox::ConsoleLine) -> ConsoleView {
        ConsoleView {
            level: serde_json::to_value(c.level).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
            message: c.message,
            elapsed_ms: c.elapsed_ms,
        }
    }

    fn fetch(f: toolshed_domain::sandbox::FetchExchange) -> FetchView {
        let (status, error, response_body) = match f.response {
            Some(Ok(r)) => (Some(r.status), None, Some(r.body)),
            Some(Err(message)) => (None, Some(message), None),
            None => (None, Some("no answer before the call ended".to_owned()), None),
        };
        FetchView { method: f.method, url: f.url, status, error, request_body: f.request_body, response_body, truncated: f.truncated }
    }

    pub fn failed_call(tools::FailedCall { id, caller, call: c }: tools::FailedCall) -> FailedCallView {
        FailedCallView {
            id,
            version: c.version,
            caller,
            at_ms: c.at_ms,
            transport: c.transport,
            error: c.error,
            args: serde_json::to_string_pretty(&c.args).unwrap_or_default(),
            console: c.console.into_iter().map(console_line).collect(),
            fetches: c.fetches.into_iter().map(fetch).collect(),
            duration_ms: c.duration_ms,
        }
    }

    /// The domain's run source; a draft keeps the output schema the tool has
    /// (the editor edits code and arguments only).
    pub async fn target(user: &User, tool: i64, t: RunTarget) -> Result<tools::RunSource, AppError> {
        Ok(match t {
            RunTarget::Draft { code, args } => {
                let output_schema = server::toolshed()?.tools().kept_output_schema(user, tool_id(tool)).await.map_err(server::fail)?;
                tools::RunSource::Draft { code, args, output_schema }
            }
            RunTarget::Version(n) => tools::RunSource::Version(n),
            RunTarget::Published => tools::RunSource::Published,
        })
    }

    pub fn parse_json(field: &str, raw: &str) -> Result<serde_json::Value, AppError> {
        if raw.trim().is_empty() {
            return Ok(serde_json::Value::Object(Default::default()));
        }
        serde_json::from_str(raw).map_err(|e| server::fail(AppError::Invalid(format!("{field}: not valid JSON ({e})"))))
    }
}

#[server(endpoint = "tools/mine")]
pub async fn my_tools() -> Result<Vec<ToolCard>, AppError> {
    let user = server::require_user().await?;
    let tools = server::toolshed()?.tools().tools_for_author(&user).await.map_err(server::fail)?;
    Ok(tools.iter().map(convert::card).collect())
}

/// Creates a tool, or a bundle when `kind` is `bundle`, and opens its editor.
#[server(endpoint = "tools/create")]
pub async fn create_tool(
    name: String,
    title: String,
    description: String,
    tags: String,
    visibility: String,
    kind: Option<String>,
) -> Result<(), AppError> {
    use toolshed_domain::tools::{ListingKind, NewTool};
    let user = server::require_user().await?;
    let invalid = |e: toolshed_domain::names::Invalid| server::fail(AppError::Invalid(e.to_string()));
    let new = NewTool::parse(&name, &title, &description, &tags, &visibility).map_err(invalid)?;
    let ts = server::toolshed()?;
    let listing = match ListingKind::parse(kind.as_deref().unwrap_or("tool")).map_err(invalid)? {
        ListingKind::Tool => ts.tools().create_tool(&user, new).await,
        ListingKind::Bundle => ts.tools().create_bundle(&user, new).await,
    }
    .map_err(server::fail)?;
    leptos_axum::redirect(&format!("/{}/{}/edit", listing.kind.plural(), listing.slug()));
    Ok(())
}

/// Forks a listing into the user's department as `name` and opens the fork's editor.
#[server(endpoint = "listings/fork")]
pub async fn fork_listing(listing: i64, name: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    let name = toolshed_domain::names::ToolName::parse(&name).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    let fork = server::toolshed()?.tools().fork(&user, tool_id(listing), name).await.map_err(server::fail)?;
    leptos_axum::redirect(&format!("/{}/{}/edit", fork.kind.plural(), fork.slug()));
    Ok(())
}

/// Stars a listing (or takes the star away); answers whether it is starred now.
#[server(endpoint = "listings/favourite")]
pub async fn set_favourite(tool: i64, favourite: bool) -> Result<bool, AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.favourites().set_favourite(&user, tool_id(tool), favourite).await.map_err(server::fail)?;
    Ok(favourite)
}

#[server(endpoint = "tools/detail")]
pub async fn tool_detail(department: String, name: String) -> Result<ToolInfo, AppError> {
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let tool = ts.tools().tool_by_slug(&user, &department, &name).await.map_err(server::fail)?;
    convert::detail(&ts, &user, tool).await
}

#[server(endpoint = "tools/editor")]
pub async fn editor_data(department: String, name: String) -> Result<EditorState, AppError> {
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let tool = ts.tools().tool_by_slug(&user, &department, &name).await.map_err(server::fail)?;
    let id = tool.id;
    let draft = ts.tools().draft(&user, id).await.map_err(server::fail)?;
    let cases = ts.tools().test_cases(&user, id).await.map_err(server::fail)?;
    let tool = convert::detail(&ts, &user, tool).await?;
    let env = if tool.can_edit { env_views(ts.tools().env_vars(&user, id).await.map_err(server::fail)?) } else { Vec::new() };
    Ok(EditorState {
        tool,
        env,
        draft: DraftView { code: draft.code, args: draft.args, autosaved_at: draft.autosaved_at, base_version: draft.base_version },
        test_cases: cases.into_iter().map(convert::test_case).collect(),
    })
}

#[cfg(feature = "ssr")]
fn tool_id(id: i64) -> toolshed_domain::ids::ToolId {
    toolshed_domain::ids::ToolId(id)
}

#[cfg(feature = "ssr")]
/// What the editor saves: its code and arguments, and the output schema the
/// tool already has (set by a push or a fork; the editor does not edit it).
async fn source(
    user: &toolshed_domain::User,
    tool: i64,
    code: String,
    args: Vec<ArgDef>,
) -> Result<toolshed_domain::tools::Source, AppError> {
    let kept = server::toolshed()?.tools().kept_output_schema(user, tool_id(tool)).await.map_err(server::fail)?;
    toolshed_domain::tools::Source::parse(&code, args, kept).map_err(server::fail)
}

/// Autosave; returns the time it was saved (Unix ms).
#[server(endpoint = "tools/draft", input = crate::api::JsonArgs)]
pub async fn save_draft(tool: i64, code: String, args: Vec<ArgDef>) -> Result<i64, AppError> {
    let user = server::require_user().await?;
    let src = source(&user, tool, code, args).await?;
    server::toolshed()?.tools().save_draft(&user, tool_id(tool), src).await.map_err(server::fail)
}

#[server(endpoint = "tools/discard_draft")]
pub async fn discard_draft(tool: i64) -> Result<(), AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.tools().discard_draft(&user, tool_id(tool)).await.map_err(server::fail)
}

/// Saves a version; returns its number.
#[server(endpoint = "tools/save_version", input = crate::api::JsonArgs)]
pub async fn save_version(tool: i64, code: String, args: Vec<ArgDef>, changelog: String) -> Result<i64, AppError> {
    let user = server::require_user().await?;
    let src = source(&user, tool, code, args).await?;
    server::toolshed()?.tools().save_version(&user, tool_id(tool), src, &changelog).await.map_err(server::fail)
}

/// Publishes `version` (an older one: rolls back). Returns the tool's new state.
/// One difference in a tool's arguments between the served version and another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaChangeView {
    pub path: String,
    pub breaking: bool,
    pub what: String,
}

/// What publishing a version would change for the tool's callers, and who
/// they are; where tests are required, how its test cases did against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImpactView {
    pub from: Option<i64>,
    pub to: i64,
    pub changes: Vec<SchemaChangeView>,
    pub following_bundles: Vec<String>,
    pub recent_callers: i64,
    /// `None`: no tests required here.
    pub tests: Option<Vec<TestResultView>>,
}

impl ImpactView {
    pub fn breaking(&self) -> bool {
        self.changes.iter().any(|c| c.breaking)
    }

    /// Whether the required tests (if any) let the version be published.
    pub fn tests_pass(&self) -> bool {
        self.tests.as_ref().is_none_or(|t| !t.is_empty() && t.iter().all(|r| r.passed))
    }
}

#[server(endpoint = "tools/publish_impact")]
pub async fn impact_of_publish(tool: i64, version: i64) -> Result<ImpactView, AppError> {
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let i = ts.tools().publish_impact(&user, tool_id(tool), version).await.map_err(server::fail)?;
    let tests = ts.tools().tests_before_publish(&user, tool_id(tool), version).await.map_err(server::fail)?;
    Ok(ImpactView {
        tests: tests.map(|t| t.into_iter().map(convert::test_result).collect()),
        from: i.from,
        to: i.to,
        changes: i.changes.into_iter().map(|c| SchemaChangeView { path: c.path, breaking: c.breaking, what: c.what }).collect(),
        following_bundles: i.following_bundles,
        recent_callers: i.recent_callers,
    })
}

/// Publishes (or rolls back to) `version`. A tool's version that would break
/// its callers' calls is refused unless `confirm_breaking` says they were told.
#[server(endpoint = "tools/publish")]
pub async fn publish(tool: i64, version: i64, #[server(default)] confirm_breaking: bool) -> Result<ToolInfo, AppError> {
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let t = ts.tools().publish_compatible(&user, tool_id(tool), version, confirm_breaking, None).await.map_err(server::fail)?;
    convert::detail(&ts, &user, t).await
}

#[server(endpoint = "tools/version")]
pub async fn load_version(tool: i64, version: i64) -> Result<DraftView, AppError> {
    let user = server::require_user().await?;
    let v = server::toolshed()?.tools().version(&user, tool_id(tool), version).await.map_err(server::fail)?;
    Ok(DraftView { code: v.code, args: v.args, autosaved_at: None, base_version: Some(v.version) })
}

#[server(endpoint = "tools/diff")]
pub async fn diff_versions(tool: i64, from: i64, to: i64) -> Result<DiffView, AppError> {
    let user = server::require_user().await?;
    let d = server::toolshed()?.tools().diff_versions(&user, tool_id(tool), from, to).await.map_err(server::fail)?;
    Ok(convert::diff(d))
}

/// Runs the tool; `input` is the arguments as JSON text, `answers` the
/// person's answers to what the tool asked so far (a JSON object by question
/// key of `{question, answer}`, `question` being the [`QuestionView`]'s;
/// empty for a first run). The page answers elicitations only.
#[server(endpoint = "tools/run", input = crate::api::JsonArgs)]
pub async fn run_tool(
    tool: i64,
    target: RunTarget,
    input: String,
    #[server(default)] answers: String,
    #[server(default)] approval: String,
) -> Result<RunView, AppError> {
    use toolshed_domain::tools::{Live, Via};
    let user = server::require_user().await?;
    let input = convert::parse_json("Arguments", &input)?;
    let answers = match answers.trim() {
        "" => toolshed_domain::sandbox::Input::default(),
        text => serde_json::from_value(convert::parse_json("Answers", text)?)
            .map_err(|e| AppError::BadRequest(format!("Answers must be an object of {{question, answer}} by key: {e}")))?,
    };
    let capabilities = serde_json::json!({ "elicitation": {} }).as_object().cloned().unwrap_or_default();
    let approval = Some(approval).filter(|a| !a.is_empty());
    let live = Live { events: None, input: answers, capabilities, approval, ..Live::default() };
    let via = Via { transport: "ui", token_id: None, bundle_id: None };
    let report = server::toolshed()?
        .tools()
        .run_tool_via(&user, tool_id(tool), convert::target(&user, tool, target).await?, input, via, live)
        .await
        .map_err(server::fail)?;
    Ok(convert::run_view(report))
}

/// The JSON Schema the argument rows produce (the editor's live preview).
#[server(endpoint = "tools/schema", input = crate::api::JsonArgs)]
pub async fn schema_preview(args: Vec<ArgDef>) -> Result<String, AppError> {
    toolshed_domain::schema::check_defs(&args).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    Ok(serde_json::to_string_pretty(&toolshed_domain::schema::to_json_schema(&args)).unwrap_or_default())
}

/// Loads a pasted JSON Schema back into argument rows, when it fits them.
#[server(endpoint = "tools/schema_rows")]
pub async fn rows_from_schema(schema: String) -> Result<Vec<ArgDef>, AppError> {
    let value = convert::parse_json("JSON Schema", &schema)?;
    let args = toolshed_domain::schema::from_json_schema(&value).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    Ok(args)
}

/// Mock arguments for the Run form: defaults, examples, or generated by type.
#[server(endpoint = "tools/mock", input = crate::api::JsonArgs)]
pub async fn mock_arguments(args: Vec<ArgDef>) -> Result<String, AppError> {
    Ok(serde_json::to_string_pretty(&toolshed_domain::schema::mock_arguments(&args)).unwrap_or_default())
}

/// `check`: `succeeds`, `equals`, `contains`, `json_path` (with `path`) or
/// `schema`; `expected` is the text, the value at the path, or the schema.
/// `from_call`: a failed call whose recorded `$fetch` answers the case's runs.
#[server(endpoint = "tools/test_case/save")]
pub async fn save_test_case(
    tool: i64,
    name: String,
    args: String,
    check: String,
    path: Option<String>,
    expected: Option<String>,
    from_call: Option<i64>,
) -> Result<(), AppError> {
    let user = server::require_user().await?;
    let args = convert::parse_json("Arguments", &args)?;
    let check = toolshed_domain::tools::Check::parse(&check, path.as_deref(), expected.as_deref())
        .map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    let ts = server::toolshed()?;
    match from_call {
        None => ts.tools().save_test_case(&user, tool_id(tool), &name, args, check).await,
        Some(call) => ts.tools().save_test_case_from_call(&user, tool_id(tool), call, &name, args, check).await,
    }
    .map_err(server::fail)
}

/// The tool's failed calls of the last 14 days, newest first (its editors only).
#[server(endpoint = "tools/failed_calls")]
pub async fn failed_calls(tool: i64) -> Result<Vec<FailedCallView>, AppError> {
    let user = server::require_user().await?;
    let calls = server::toolshed()?.tools().failed_calls(&user, tool_id(tool)).await.map_err(server::fail)?;
    Ok(calls.into_iter().map(convert::failed_call).collect())
}

/// One failed call with its console and `$fetch` exchanges.
#[server(endpoint = "tools/failed_call")]
pub async fn failed_call(tool: i64, call: i64) -> Result<FailedCallView, AppError> {
    let user = server::require_user().await?;
    let call = server::toolshed()?.tools().failed_call(&user, tool_id(tool), call).await.map_err(server::fail)?;
    Ok(convert::failed_call(call))
}

/// Runs `target` (the draft) with `input` while `$fetch` answers from the
/// failed call's recording: the network is never touched.
#[server(endpoint = "tools/replay", input = crate::api::JsonArgs)]
pub async fn replay_failed_call(tool: i64, call: i64, target: RunTarget, input: String) -> Result<RunView, AppError> {
    let user = server::require_user().await?;
    let input = convert::parse_json("Arguments", &input)?;
    let report = server::toolshed()?
        .tools()
        .replay_failed_call(&user, tool_id(tool), call, convert::target(&user, tool, target).await?, input)
        .await
        .map_err(server::fail)?;
    Ok(convert::run_view(report))
}

#[server(endpoint = "tools/test_case/delete")]
pub async fn delete_test_case(tool: i64, case: i64) -> Result<(), AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.tools().delete_test_case(&user, tool_id(tool), case).await.map_err(server::fail)
}

#[server(endpoint = "tools/test_cases")]
pub async fn test_cases(tool: i64) -> Result<Vec<TestCaseView>, AppError> {
    let user = server::require_user().await?;
    let cases = server::toolshed()?.tools().test_cases(&user, tool_id(tool)).await.map_err(server::fail)?;
    Ok(cases.into_iter().map(convert::test_case).collect())
}

#[server(endpoint = "tools/test_cases/run", input = crate::api::JsonArgs)]
pub async fn run_test_cases(tool: i64, target: RunTarget) -> Result<Vec<TestResultView>, AppError> {
    let user = server::require_user().await?;
    let results = server::toolshed()?
        .tools()
        .run_test_cases(&user, tool_id(tool), convert::target(&user, tool, target).await?)
        .await
        .map_err(server::fail)?;
    Ok(results.into_iter().map(convert::test_result).collect())
}

/// The settings form (a plain form: checkboxes arrive only when ticked).
#[server(endpoint = "tools/settings")]
#[allow(clippy::too_many_arguments)]
pub async fn update_tool_settings(
    tool: i64,
    title: String,
    description: String,
    tags: String,
    visibility: String,
    timeout_ms: i64,
    memory_mib: i64,
    fetch_allow: String,
    read_only_hint: Option<bool>,
    destructive_hint: Option<bool>,
    task_support: Option<String>,
    serves: Option<String>,
    resource_uri: Option<String>,
    resource_mime: Option<String>,
) -> Result<ToolInfo, AppError> {
    use toolshed_domain::names::TaskSupport;
    use toolshed_domain::names::{Description, Tags, Title};
    use toolshed_domain::serves::Serves;
    use toolshed_domain::tools::{parse_fetch_allow, ToolSettings, Visibility};
    let user = server::require_user().await?;
    let invalid = |e: toolshed_domain::names::Invalid| server::fail(AppError::Invalid(e.to_string()));
    let settings = ToolSettings {
        title: Title::parse(&title).map_err(invalid)?,
        description: Description::parse(&description).map_err(invalid)?,
        tags: Tags::parse(&tags).map_err(invalid)?,
        visibility: Visibility::parse(&visibility).map_err(invalid)?,
        read_only_hint: read_only_hint.unwrap_or(false),
        destructive_hint: destructive_hint.unwrap_or(false),
        fetch_allow: parse_fetch_allow(&fetch_allow).map_err(invalid)?,
        timeout_ms,
        memory_mib,
        task_support: match task_support.as_deref() {
            None => TaskSupport::Forbidden,
            Some(s) => TaskSupport::parse(s).ok_or_else(|| server::fail(AppError::Invalid(format!("Unknown task setting “{s}”"))))?,
        },
        serves: Serves::parse(
            serves.as_deref().unwrap_or("tool"),
            resource_uri.as_deref().unwrap_or_default(),
            resource_mime.as_deref().unwrap_or_default(),
        )
        .map_err(invalid)?,
    };
    let ts = server::toolshed()?;
    let t = ts.tools().update_tool_settings(&user, tool_id(tool), settings).await.map_err(server::fail)?;
    convert::detail(&ts, &user, t).await
}

/// Who can read a variable's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EnvKindView {
    /// Editors and the code.
    Plain,
    /// The code, so anyone who may edit the tool; never shown in the UI.
    Secret,
    /// Nobody: `$fetch` sends it to its hosts only.
    Outbound,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvVarView {
    pub name: String,
    /// `None` for secrets: they are never sent back.
    pub value: Option<String>,
    pub kind: EnvKindView,
    /// Where an outbound-only secret may be sent.
    pub hosts: Vec<String>,
}

#[server(endpoint = "tools/env")]
pub async fn env_vars(tool: i64) -> Result<Vec<EnvVarView>, AppError> {
    let user = server::require_user().await?;
    let vars = server::toolshed()?.tools().env_vars(&user, tool_id(tool)).await.map_err(server::fail)?;
    Ok(env_views(vars))
}

#[cfg(feature = "ssr")]
fn env_views(vars: Vec<toolshed_domain::tools::EnvVar>) -> Vec<EnvVarView> {
    use toolshed_domain::tools::EnvKind;
    vars.into_iter()
        .map(|v| {
            let (kind, hosts) = match v.kind {
                EnvKind::Plain => (EnvKindView::Plain, Vec::new()),
                EnvKind::Secret => (EnvKindView::Secret, Vec::new()),
                EnvKind::Outbound(hosts) => (EnvKindView::Outbound, hosts.hosts().to_vec()),
            };
            EnvVarView { name: v.name, value: v.value, kind, hosts }
        })
        .collect()
}

/// The variables form: `kind` is `plain`, `secret` or `outbound` (which needs `hosts`).
#[server(endpoint = "tools/env/set")]
pub async fn set_env_var(tool: i64, name: String, value: String, kind: String, hosts: Option<String>) -> Result<(), AppError> {
    use toolshed_domain::tools::{EnvKind, ToolError};
    let user = server::require_user().await?;
    let kind = EnvKind::parse(&kind, hosts.as_deref().unwrap_or_default()).map_err(|e| server::fail(ToolError::Invalid(e)))?;
    server::toolshed()?.tools().set_env_var(&user, tool_id(tool), &name, &value, kind).await.map_err(server::fail)
}

#[server(endpoint = "tools/env/delete")]
pub async fn delete_env_var(tool: i64, name: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.tools().delete_env_var(&user, tool_id(tool), &name).await.map_err(server::fail)
}

/// A listing's generated interfaces, for the listing page's API card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListingApiView {
    /// The code-mode TypeScript API.
    pub typescript: String,
    /// OpenAI function-calling definitions (JSON).
    pub openai: String,
    pub tools_list_tokens: usize,
    /// Tokens of the `tools/list` JSON in code mode (`run_code` alone).
    pub code_mode_tokens: usize,
    /// Where the TypeScript API is served (`…/api.d.ts`).
    pub typescript_url: String,
}

/// The TypeScript API, OpenAI definitions and token costs of what a published
/// listing serves the signed-in user.
#[server(endpoint = "listings/api")]
pub async fn listing_api(listing: i64) -> Result<ListingApiView, AppError> {
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let t = ts.tools().tool(&user, toolshed_domain::ids::ToolId(listing)).await.map_err(server::fail)?;
    let api = ts.bundles().listing_api(&user, &t).await.map_err(server::fail)?;
    let base = use_context::<crate::PublicUrl>().map(|p| p.0).unwrap_or_default();
    Ok(ListingApiView {
        typescript: api.typescript,
        openai: api.openai,
        tools_list_tokens: api.tools_list_tokens,
        code_mode_tokens: api.code_mode_tokens,
        typescript_url: format!("{base}/mcp/{}/{}/api.d.ts", t.kind.plural(), t.slug()),
    })
}
