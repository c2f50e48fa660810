//! MCP endpoints: every published tool is a live MCP server at
//! `/mcp/tools/{department}/{name}` (Streamable HTTP, via rmcp). A token check
//! in front resolves the caller and the listing; the handler lists and runs the
//! listing's tools through the domain layer, like the UI does.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, InitializeRequestParams, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool as McpTool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use toolshed_domain::sandbox::{RunError, ToolValue};
use toolshed_domain::tokens::TokenInfo;
use toolshed_domain::tools::{RunSource, Status, Tool, ToolError, Via};
use toolshed_domain::{Toolshed, User};

/// How MCP sessions are kept; see README ("MCP sessions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SessionMode {
    /// Every request stands alone: any replica can answer it.
    Stateless,
    /// `Mcp-Session-Id` sessions held in this process: one replica, or sticky routing.
    Stateful,
}

/// Who is calling which listing; set by [`authorize`] before rmcp sees the request.
#[derive(Clone)]
pub struct Caller {
    pub user: User,
    pub token: TokenInfo,
    pub tool: Tool,
}

/// The rmcp service for every tool endpoint, behind the token check.
pub fn routes(toolshed: Toolshed, mode: SessionMode, allowed_hosts: Vec<String>) -> axum::Router {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts)
        .with_legacy_session_mode(mode == SessionMode::Stateful)
        .with_json_response(mode == SessionMode::Stateless);
    let factory = {
        let toolshed = toolshed.clone();
        move || Ok(ListingHandler { toolshed: toolshed.clone() })
    };
    let service = match mode {
        SessionMode::Stateful => axum::routing::any_service(StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), config)),
        SessionMode::Stateless => axum::routing::any_service(StreamableHttpService::new(factory, Arc::new(NeverSessionManager::default()), config)),
    };
    axum::Router::new()
        .route("/mcp/tools/{department}/{name}", service)
        .route_layer(axum::middleware::from_fn_with_state(toolshed, authorize))
}

fn unauthorized(reason: &str) -> Response {
    let mut res = (StatusCode::UNAUTHORIZED, format!("{reason}\n")).into_response();
    res.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(r#"Bearer realm="toolshed", error="invalid_token", error_description="a valid Toolshed API token is required""#),
    );
    res
}

/// The token, from `Authorization: Bearer …` or, for clients that can only be
/// given a URL, `?token=…` (it then lands in access logs: prefer the header).
fn presented_token(req: &Request) -> Option<String> {
    if let Some(v) = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        return v.strip_prefix("Bearer ").map(|t| t.trim().to_owned());
    }
    req.uri().query()?.split('&').find_map(|kv| kv.strip_prefix("token=")).map(str::to_owned)
}

async fn authorize(State(ts): State<Toolshed>, Path((department, name)): Path<(String, String)>, mut req: Request, next: Next) -> Response {
    let Some(token) = presented_token(&req) else {
        return unauthorized("Missing API token: send Authorization: Bearer <token>.");
    };
    let (user, token) = match ts.authenticate_token(&token).await {
        Ok(Ok(found)) => found,
        Ok(Err(_)) => return unauthorized("Invalid, expired or revoked API token."),
        Err(e) => {
            tracing::error!(error = %e, "token check failed");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let not_found = || (StatusCode::NOT_FOUND, "No such listing.\n").into_response();
    let tool = match ts.tool_by_slug(&user, &department, &name).await {
        Ok(t) if t.published_version.is_some() && token.allows(&t.slug()) => t,
        Ok(_) | Err(ToolError::NotFound) => return not_found(),
        Err(e) => {
            tracing::error!(error = %e, "listing lookup failed");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    if tool.status == Status::Disabled {
        return (StatusCode::FORBIDDEN, "This listing has been disabled by an administrator.\n").into_response();
    }
    req.extensions_mut().insert(Caller { user, token, tool });
    next.run(req).await
}

#[derive(Clone)]
struct ListingHandler {
    toolshed: Toolshed,
}

fn caller(ctx: &RequestContext<RoleServer>) -> Result<Caller, McpError> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| McpError::internal_error("request reached the MCP handler without a caller", None))
}

impl ListingHandler {
    /// The published version of the caller's listing, as MCP describes a tool.
    async fn describe(&self, c: &Caller) -> Result<McpTool, McpError> {
        let n = c.tool.published_version.ok_or_else(|| McpError::resource_not_found("not published", None))?;
        let v = self.toolshed.version(&c.user, c.tool.id, n).await.map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let schema = match toolshed_domain::schema::to_json_schema(&v.args) {
            serde_json::Value::Object(map) => map,
            _ => Default::default(),
        };
        let mut tool = McpTool::new(c.tool.name.clone(), c.tool.description.clone(), Arc::new(schema))
            .with_title(c.tool.title.clone())
            .with_annotations(ToolAnnotations::new().read_only(c.tool.read_only_hint).destructive(c.tool.destructive_hint));
        if let Some(serde_json::Value::Object(out)) = v.output_schema {
            tool = tool.with_raw_output_schema(Arc::new(out));
        }
        Ok(tool)
    }
}

impl ServerHandler for ListingHandler {
    async fn initialize(&self, request: InitializeRequestParams, context: RequestContext<RoleServer>) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if let Ok(c) = caller(&context) {
            let version = c.tool.published_version.map(|v| format!("v{v}")).unwrap_or_default();
            result.server_info = Implementation::new(c.tool.slug(), version);
            result.instructions = Some(c.tool.description.clone()).filter(|d| !d.is_empty());
        }
        Ok(result)
    }

    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
    }

    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListToolsResult, McpError> {
        let c = caller(&context)?;
        Ok(ListToolsResult::with_all_items(vec![self.describe(&c).await?]))
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        let c = caller(&context)?;
        if request.name != c.tool.name {
            return Err(McpError::invalid_params(format!("Unknown tool: {}", request.name), None));
        }
        let input = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let via = Via { transport: "mcp-http", token_id: Some(c.token.id) };
        let report = self.toolshed.run_tool_via(&c.user, c.tool.id, RunSource::Published, input, via, None).await;
        let result = match report {
            Ok(r) => match r.outcome.result {
                Ok(ToolValue::Text(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
                Ok(ToolValue::Json(value)) => {
                    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
                    result.structured_content = Some(value);
                    result
                }
                Err(e @ RunError::Internal { .. }) => return Err(McpError::internal_error(e.to_string(), None)),
                Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
            },
            // Bad arguments are the model's to fix: a tool error it can read, not a protocol error.
            Err(ToolError::BadArguments(m)) => CallToolResult::error(vec![ContentBlock::text(m)]),
            Err(ToolError::Busy) => CallToolResult::error(vec![ContentBlock::text(ToolError::Busy.to_string())]),
            Err(ToolError::NotFound | ToolError::NotPublished) => return Err(McpError::resource_not_found("No such listing.", None)),
            Err(e) => return Err(McpError::internal_error(e.to_string(), None)),
        };
        Ok(result.into())
    }
}
