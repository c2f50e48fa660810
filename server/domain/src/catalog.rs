//! The personal endpoint, `/mcp/me`: the whole catalog one person may use,
//! offered to a model as four tools instead of hundreds — `search_tools`,
//! `describe_tool`, `call_tool` and `run_code` — beside the person's
//! favourites (listings they starred), which are listed as tools of their own.
//!
//! Only published, active tools the person may see, and their token allows,
//! are found, described or called. A call through the catalog runs exactly as
//! one through the tool's own endpoint ([`crate::calls::Callables`]) and is recorded the same
//! way, with `+me` on its transport.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Map, Value};
use sqlx::Row;

use crate::accounts::User;
use crate::bundles::Bundles;
use crate::calls::Answer;
use crate::calls::Calls;
use crate::code_mode::{prepare_member, MAX_TOOL_CALLS};
use crate::codegen::{token_count, tools_list_json, ToolDef, RUN_CODE};
use crate::ids::ToolId;
use crate::market::Market;
use crate::market::{BrowseQuery, BrowseSort, ListingCard, ListingKind, SearchText};
use crate::names::{DepartmentName, Invalid, Tags};
use crate::policy::Policies;
use crate::sandbox::{CodeTools, Limits, PreparedCall, RunOutcome, RunRequest, ToolHost};
use crate::tokens::TokenInfo;
use crate::tools::Tools;
use crate::tools::{Live, Status, Tool, ToolError, Via};
use crate::Core;
use crate::{audit, now_ms};

handle! {
    /// Stars: the tools a person lists on their personal endpoint.
    Favourites
}

pub const SEARCH_TOOLS: &str = "search_tools";
pub const DESCRIBE_TOOL: &str = "describe_tool";
pub const CALL_TOOL: &str = "call_tool";

/// Marks calls made through the personal endpoint in usage: `mcp-http+me`.
const USAGE_SUFFIX: &str = "+me";

/// One `search_tools` request, parsed from its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogSearch {
    pub text: Option<SearchText>,
    pub department: Option<DepartmentName>,
    pub tags: Tags,
    pub limit: i64,
}

impl CatalogSearch {
    pub const DEFAULT_LIMIT: i64 = 8;
    pub const MAX_LIMIT: i64 = 25;

    /// `query`, `department`, `tag` and `limit` as a model sends them; absent or blank means "any".
    pub fn parse(args: &Map<String, Value>) -> Result<Self, Invalid> {
        let text = |key: &'static str| match args.get(key) {
            None | Some(Value::Null) => Ok(""),
            Some(Value::String(s)) => Ok(s.as_str()),
            Some(_) => Err(Invalid { field: key, reason: "must be a string".into() }),
        };
        let limit = match args.get("limit") {
            None | Some(Value::Null) => Self::DEFAULT_LIMIT,
            Some(v) => v
                .as_i64()
                .filter(|n| (1..=Self::MAX_LIMIT).contains(n))
                .ok_or_else(|| Invalid { field: "limit", reason: format!("must be a whole number from 1 to {}", Self::MAX_LIMIT) })?,
        };
        let department = text("department")?.trim();
        Ok(Self {
            text: SearchText::parse(text("query")?)?,
            department: if department.is_empty() { None } else { Some(DepartmentName::parse(department)?) },
            tags: Tags::parse(text("tag")?)?,
            limit,
        })
    }
}

/// One tool `search_tools` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CatalogHit {
    /// `department/name`: what `describe_tool`, `call_tool` and `run_code` take.
    pub name: String,
    pub title: String,
    /// The description's first words, plain text.
    pub summary: String,
    /// What its definition costs a model in tokens, were it listed.
    pub tokens: usize,
}

/// Everything one caller may use through their personal endpoint.
#[derive(Clone)]
pub struct Catalog {
    core: Core,
    user: User,
    /// The caller's token's listings (`department/name`); empty: every listing they may see.
    scope: Vec<String>,
}

impl Favourites<'_> {
    /// Stars listing `id` for `user` (who must be able to see it), or takes the
    /// star away. Their personal endpoint lists starred tools directly.
    pub async fn set_favourite(self, user: &User, id: ToolId, favourite: bool) -> Result<(), ToolError> {
        let tool = Tools::new(self.core).tool(user, id).await?;
        let mut tx = self.core.begin().await?;
        let sql = if favourite {
            "INSERT INTO favourites (user_id, tool_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (user_id, tool_id) DO NOTHING"
        } else {
            "DELETE FROM favourites WHERE user_id = $1 AND tool_id = $2 AND created_at <= $3"
        };
        let changed = sqlx::query(sql).bind(user.id.0).bind(id.0).bind(now_ms()).execute(&mut *tx).await?.rows_affected();
        if changed == 0 {
            return Ok(());
        }
        // The audit row is the change feed: the person's open personal
        // endpoints, on any replica, are told their list changed.
        let action = if favourite { "favourite.added" } else { "favourite.removed" };
        let detail = Some(json!({"listing": tool.slug()}));
        audit::record(&mut tx, Some(user.id), action, &favourites_target(user), None, detail).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether `user` starred listing `id`.
    pub async fn is_favourite(self, user: &User, id: ToolId) -> Result<bool, ToolError> {
        let row = sqlx::query("SELECT 1 AS yes FROM favourites WHERE user_id = $1 AND tool_id = $2")
            .bind(user.id.0)
            .bind(id.0)
            .fetch_optional(self.core.db().pool())
            .await?;
        Ok(row.is_some())
    }
}

/// The change-feed target a person's favourites go by: their personal
/// endpoint's sessions listen for it (and for each favourite's own).
pub fn favourites_target(user: &User) -> String {
    format!("favourites:{}", user.id.0)
}

/// A favourite's name as a tool of the personal endpoint: `department__name`
/// (`/` is not allowed in MCP tool names, `__` is).
pub fn favourite_name(tool: &Tool) -> String {
    format!("{}__{}", tool.department, tool.name)
}

impl Catalog {
    /// The catalog as `user` (calling with `token`, if any) may use it.
    pub(crate) fn new(core: Core, user: &User, token: Option<&TokenInfo>) -> Self {
        Catalog { core, user: user.clone(), scope: token.map(|t| t.scope.clone()).unwrap_or_default() }
    }

    pub fn user(&self) -> &User {
        &self.user
    }

    fn allows(&self, slug: &str) -> bool {
        self.scope.is_empty() || self.scope.iter().any(|s| s == slug)
    }

    /// The tools that best match `q`, best first (the Browse box's ranking,
    /// [`Market::best_first`]); with no text, the most used.
    pub async fn search(&self, q: &CatalogSearch) -> Result<Vec<CatalogHit>, ToolError> {
        let market = Market::new(&self.core);
        let query = BrowseQuery {
            sort: BrowseSort::MostUsed,
            text: q.text.clone(),
            department: q.department.clone(),
            tags: q.tags.clone(),
            kind: Some(ListingKind::Tool),
            within: self.scope.clone(),
            per_page: q.limit,
            ..BrowseQuery::default()
        };
        let cards = match &q.text {
            Some(_) => {
                let found = market.best_first(&self.user, &query, q.limit.max(0) as usize).await?;
                market.cards(&self.user, &found.iter().map(|f| f.id).collect::<Vec<_>>()).await?
            }
            None => market.browse(&self.user, &query).await?.cards,
        };
        self.hits(cards).await
    }

    /// `cards` as search hits, with what each costs a model to read.
    async fn hits(&self, cards: Vec<ListingCard>) -> Result<Vec<CatalogHit>, ToolError> {
        let mut hits = Vec::with_capacity(cards.len());
        for card in cards {
            let name = card.slug();
            let tokens = match self.definition(&name).await {
                Ok((_, def)) => token_count(&tools_list_json(&[def])),
                // Changed since the search (hidden, unpublished): not offered.
                Err(ToolError::NotFound | ToolError::NotPublished | ToolError::Disabled) => continue,
                Err(e) => return Err(e),
            };
            hits.push(CatalogHit { name, title: card.title, summary: card.summary, tokens });
        }
        Ok(hits)
    }

    /// The published, active tool `name` (`department/name`, or a favourite's
    /// listed name) as this caller may use it; [`ToolError::UnknownTool`] for
    /// anything else, so what the caller may not see is not revealed.
    pub async fn tool(&self, name: &str) -> Result<Tool, ToolError> {
        let unknown = || ToolError::UnknownTool(name.to_owned());
        let (department, tool) = match name.split_once('/') {
            Some(parts) => parts,
            None => return self.favourites().await?.into_iter().find(|t| favourite_name(t) == name).ok_or_else(unknown),
        };
        let found = match Tools::new(&self.core).listing_for_call(&self.user, ListingKind::Tool, department, tool).await {
            Ok(t) => t,
            Err(ToolError::NotFound) => return Err(unknown()),
            Err(e) => return Err(e),
        };
        if found.published_version.is_none() || !self.allows(&found.slug()) {
            return Err(unknown());
        }
        match found.status {
            Status::Active => Ok(found),
            Status::Disabled => Err(ToolError::Disabled),
            // Out of the catalog, for its owner and admins too.
            Status::Hidden | Status::Deleted => Err(unknown()),
        }
    }

    /// `name`'s full definition, named `department/name`.
    pub async fn definition(&self, name: &str) -> Result<(Tool, ToolDef), ToolError> {
        let tool = self.tool(name).await?;
        let def = Bundles::new(&self.core).tool_defs(&self.user, &tool).await?.into_iter().next().ok_or(ToolError::NotPublished)?;
        Ok((tool.clone(), ToolDef { name: tool.slug(), ..def }))
    }

    /// `describe_tool`'s answer: the definition as MCP lists a tool, and its version.
    pub async fn describe(&self, name: &str) -> Result<Value, ToolError> {
        let (tool, def) = self.definition(name).await?;
        let listed: Value = serde_json::from_str(&tools_list_json(std::slice::from_ref(&def))).expect("tools_list_json is JSON");
        let mut described = listed["tools"][0].clone();
        described["version"] = json!(tool.published_version);
        Ok(described)
    }

    /// Calls tool `name` with `input`, exactly as its own endpoint would.
    pub async fn call(&self, name: &str, input: Value, via: Via<'_>, live: Live) -> Result<Answer, ToolError> {
        let tool = self.tool(name).await?;
        let transport = format!("{}{USAGE_SUFFIX}", via.transport);
        let callables = Calls::new(&self.core).callables(&self.user, &tool).await?;
        callables.call(&tool.name, input, Via { transport: &transport, ..via }, live).await
    }

    /// The caller's starred tools that they may still use, most recently starred first.
    pub async fn favourites(&self) -> Result<Vec<Tool>, ToolError> {
        let rows = sqlx::query("SELECT tool_id FROM favourites WHERE user_id = $1 ORDER BY created_at DESC, tool_id DESC")
            .bind(self.user.id.0)
            .fetch_all(self.core.db().pool())
            .await?;
        let mut tools = Vec::new();
        for row in rows {
            let id = ToolId(row.try_get("tool_id")?);
            match Tools::new(&self.core).tool(&self.user, id).await {
                Ok(t)
                    if t.kind == ListingKind::Tool
                        && t.published_version.is_some()
                        && t.status == Status::Active
                        && self.allows(&t.slug()) =>
                {
                    tools.push(t)
                }
                Ok(_) | Err(ToolError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(tools)
    }

    /// What the personal endpoint lists: the four catalog tools, then each
    /// favourite under its [`favourite_name`].
    pub async fn tool_defs(&self) -> Result<Vec<ToolDef>, ToolError> {
        let mut defs = catalog_tool_defs();
        for tool in self.favourites().await? {
            if let Some(def) = Bundles::new(&self.core).tool_defs(&self.user, &tool).await?.into_iter().next() {
                defs.push(ToolDef { name: favourite_name(&tool), ..def });
            }
        }
        Ok(defs)
    }

    /// Model-written `code` whose `tools["department/name"](input)` (and
    /// `tools.<favourite>(input)`) call any tool of the catalog, each call
    /// exactly as `call_tool` makes it, at most [`MAX_TOOL_CALLS`] of them.
    pub async fn run_code(&self, code: String, via: Via<'_>) -> Result<RunOutcome, ToolError> {
        let policy = Policies::new(&self.core).policy().await?;
        let mut context = Map::new();
        context.insert("caller".into(), self.user.username.clone().into());
        context.insert("department".into(), self.user.department.name.clone().into());
        context.insert("transport".into(), via.transport.into());
        let request = RunRequest {
            code,
            context,
            limits: Limits {
                memory_bytes: (CODE_MEMORY_MIB.min(policy.max_memory_mib.max(1)) as usize) * 1024 * 1024,
                wall_clock_ms: CODE_TIMEOUT_MS.min(policy.max_timeout_ms.max(100)) as u64,
                ..Limits::default()
            },
            tools: Some(CodeTools {
                names: self.favourites().await?.iter().map(favourite_name).collect(),
                any_name: true,
                max_calls: MAX_TOOL_CALLS,
                host: Arc::new(CatalogHost {
                    catalog: self.clone(),
                    transport: format!("{}{USAGE_SUFFIX}{}", via.transport, crate::code_mode::USAGE_SUFFIX),
                    token_id: via.token_id,
                }),
                runtime: tokio::runtime::Handle::current(),
            }),
            env: BTreeMap::new(),
            ..RunRequest::default()
        };
        let span = tracing::info_span!(
            "run_code",
            endpoint = "me",
            department = %self.user.department.name,
            transport = via.transport,
            outcome = tracing::field::Empty,
        );
        // One lane per person: their runs queue behind each other, not behind everyone's.
        let lane = crate::sandbox::Lane { tool: ToolId(0), caller: self.user.id };
        Ok(self.core.run_sandboxed(request, lane, span).await?)
    }
}

/// The personal endpoint's `run_code` may orchestrate many tools: more time
/// and memory than one tool's defaults, within the admins' policy.
const CODE_TIMEOUT_MS: i64 = 30_000;
const CODE_MEMORY_MIB: i64 = 64;

/// Answers `tools[name](input)` in the personal endpoint's `run_code`.
struct CatalogHost {
    catalog: Catalog,
    transport: String,
    token_id: Option<i64>,
}

impl ToolHost for CatalogHost {
    fn prepare(&self, name: String, input: Value) -> PreparedCall {
        let (catalog, transport, token_id) = (self.catalog.clone(), self.transport.clone(), self.token_id);
        Box::pin(async move {
            let tool = catalog.tool(&name).await.map_err(|e| match e {
                ToolError::UnknownTool(_) => {
                    format!("there is no tool “{name}” you may use: name tools as \"department/name\", as search_tools lists them")
                }
                e => format!("{name}: {e}"),
            })?;
            let callables = Calls::new(&catalog.core).callables(&catalog.user, &tool).await.map_err(|e| format!("{name}: {e}"))?;
            prepare_member(Arc::new(callables), tool.name.clone(), input, transport, token_id).await
        })
    }
}

/// The four tools every personal endpoint lists, described for a model.
fn catalog_tool_defs() -> Vec<ToolDef> {
    let def = |name: &str, title: &str, description: &str, input_schema: Value| ToolDef {
        name: name.into(),
        title: title.into(),
        description: description.into(),
        input_schema,
        output_schema: None,
        read_only: true,
        destructive: false,
        permissions: None,
    };
    vec![
        def(
            SEARCH_TOOLS,
            "Search tools",
            "Finds the company's tools you may use. Describe what you want to do in a few words; \
             answers the best matches as `department/name` with a one-line summary and what the tool's \
             definition costs in tokens. Then describe_tool a match, and call_tool it.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, in keywords or a sentence."},
                    "department": {"type": "string", "description": "Only tools of this department (its short name)."},
                    "tag": {"type": "string", "description": "Only tools with this tag."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": CatalogSearch::MAX_LIMIT, "default": CatalogSearch::DEFAULT_LIMIT},
                },
                "additionalProperties": false,
            }),
        ),
        def(
            DESCRIBE_TOOL,
            "Describe a tool",
            "The full definition of one tool: its description and the JSON Schema of its arguments.",
            json!({
                "type": "object",
                "properties": {"name": {"type": "string", "description": "The tool as search_tools names it: department/name."}},
                "required": ["name"],
                "additionalProperties": false,
            }),
        ),
        ToolDef {
            // What a called tool does is up to that tool.
            read_only: false,
            ..def(
                CALL_TOOL,
                "Call a tool",
                "Calls one tool with its arguments (as describe_tool gives their schema) and answers its result.",
                json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "The tool as search_tools names it: department/name."},
                        "arguments": {"type": "object", "description": "The tool's arguments."},
                    },
                    "required": ["name"],
                    "additionalProperties": false,
                }),
            )
        },
        ToolDef {
            read_only: false,
            ..def(
                RUN_CODE,
                "Run code",
                "Runs JavaScript that calls several tools in one step (loops, filtering, combining results). \
                 Write the body of an async function; call a tool with `await tools[\"department/name\"](arguments)` \
                 (your favourites also as `tools.<name>` by the names listed here). A call resolves with the tool's \
                 result (parsed JSON when it returns JSON) and throws an Error with the tool's message when it fails. \
                 Everything passed to `console.log` is the result; a returned value other than undefined is appended. \
                 No network or file access except through the tools; time and memory are limited.",
                json!({
                    "type": "object",
                    "properties": {"code": {"type": "string", "description": "The body of an async function, in JavaScript."}},
                    "required": ["code"],
                    "additionalProperties": false,
                }),
            )
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn search_arguments_are_parsed_with_defaults_and_clear_errors() {
        let q = CatalogSearch::parse(&args(json!({"query": "convert euros", "department": "Finance"}))).unwrap();
        assert_eq!(q.text.unwrap().terms(), ["convert", "euros"]);
        assert_eq!(q.department.unwrap().as_str(), "finance");
        assert_eq!(q.limit, CatalogSearch::DEFAULT_LIMIT);
        let none = CatalogSearch::parse(&Map::new()).unwrap();
        assert_eq!((none.text, none.department), (None, None));
        assert_eq!(CatalogSearch::parse(&args(json!({"limit": 0}))).unwrap_err().to_string(), "limit: must be a whole number from 1 to 25");
        assert_eq!(CatalogSearch::parse(&args(json!({"query": 3}))).unwrap_err().to_string(), "query: must be a string");
    }

    #[test]
    fn the_four_catalog_tools_have_mcp_names_and_object_schemas() {
        let defs = catalog_tool_defs();
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, [SEARCH_TOOLS, DESCRIBE_TOOL, CALL_TOOL, RUN_CODE]);
        assert!(defs.iter().all(|d| d.input_schema["type"] == "object"));
    }
}
