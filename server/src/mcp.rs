//! MCP endpoints: every published tool is a live MCP server at
//! `/mcp/tools/{department}/{name}` and every published bundle at
//! `/mcp/bundles/{department}/{name}` (and each version it served at
//! `…/{name}@v3`, which keeps serving that version), and every person has
//! their own at `/mcp/me` (the catalog: search, describe, call, run code, and
//! their favourites), over Streamable HTTP (rmcp) at that URL and over the
//! legacy HTTP+SSE transport at `…/sse` and `…/messages`. A token check in
//! front ([`authorize`], [`authorize_me`]) resolves the caller and what the
//! endpoint serves them; one [`handler::ListingHandler`] lists and runs it
//! through the domain layer, whichever transport brought the request.

mod asking;
mod handler;
mod prompts;
mod sessions;
mod sse;
mod tasks;

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use toolshed_domain::ids::ToolId;
use toolshed_domain::mcp_sessions::SessionOwner;
use toolshed_domain::oauth::{AccessGrant, ACCESS_PREFIX};
use toolshed_domain::tokens::{TokenInfo, TokenRejected};
use toolshed_domain::tools::{endpoint_name, ListingKind, Status, Tool, ToolError};
use toolshed_domain::{Toolshed, User};

use handler::{ListingHandler, Transport};

/// How Streamable HTTP sessions are kept; see README ("MCP sessions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SessionMode {
    /// `Mcp-Session-Id` sessions, persisted in the database: any replica can
    /// resume any session, and sessions can be told of list changes.
    Stateful,
    /// Every request stands alone: no session, no server-sent notifications
    /// but those of the request itself (progress, logging).
    Stateless,
}

/// Who is calling what; set by [`authorize`] or [`authorize_me`] before rmcp sees the request.
#[derive(Clone)]
pub struct Caller {
    pub user: User,
    /// `None` when a signed-in browser calls (the listing page's MCP debugger)
    /// or an OAuth client (whose grant [`authorize`] checked).
    pub token: Option<TokenInfo>,
    pub served: Served,
}

/// What an endpoint serves its caller.
#[derive(Clone)]
pub enum Served {
    /// A tool or bundle, as this user sees it.
    Listing(Box<Tool>),
    /// `/mcp/me`: everything the user (and their token) may use.
    Catalog,
}

impl Served {
    /// The listing's id; `None` for the personal endpoint.
    pub fn listing_id(&self) -> Option<ToolId> {
        match self {
            Served::Listing(t) => Some(t.id),
            Served::Catalog => None,
        }
    }
}

impl Caller {
    fn owner(&self) -> SessionOwner {
        SessionOwner { user: self.user.id, listing: self.served.listing_id() }
    }
}

/// What the MCP handlers share; axum clones a handler's state for every
/// request, so it is one `Arc`.
#[derive(Clone)]
pub struct McpState(Arc<Shared>);

impl std::ops::Deref for McpState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

pub struct Shared {
    toolshed: Toolshed,
    sse: sse::SseSessions,
    /// Cancelled at shutdown: idle event streams end.
    closing: tokio_util::sync::CancellationToken,
}

/// How long an idle stateful session stays in this replica's memory.
const IDLE_IN_MEMORY: std::time::Duration = std::time::Duration::from_secs(60);

/// One JSON-RPC message is small; anything larger is refused (413) unread.
const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// The MCP routes, behind the token check. `site_origin` is this server's own
/// origin: a browser request from it may use the session cookie instead of a token.
///
/// When `closing` is cancelled (shutdown) every event stream ends once no call's
/// answer is due on it; sessions stay in the database.
pub fn routes(
    toolshed: Toolshed,
    mode: SessionMode,
    allowed_hosts: Vec<String>,
    site_origin: String,
    oauth: crate::oauth::OAuth,
    closing: tokio_util::sync::CancellationToken,
) -> axum::Router {
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts.clone())
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES)
        .with_legacy_session_mode(mode == SessionMode::Stateful)
        .with_json_response(mode == SessionMode::Stateless);
    // rmcp is not given the shutdown token: it would end the streams of calls in
    // flight with the idle ones. Those end here instead ([`watch_stream`]).
    let stored = sessions::Stored::default();
    let transport = match mode {
        SessionMode::Stateful => {
            config.session_store = Some(Arc::new(sessions::DbSessionStore { toolshed: toolshed.clone(), stored: stored.clone() }));
            Transport::StreamableHttp
        }
        SessionMode::Stateless => Transport::Stateless,
    };
    let factory = {
        let (toolshed, closing) = (toolshed.clone(), closing.clone());
        move || Ok(ListingHandler::new(toolshed.clone(), transport, closing.clone()))
    };
    let streamable = match mode {
        SessionMode::Stateful => {
            // An idle session leaves memory after a minute and lives on in the database:
            // its next request restores it (rmcp's default keeps it five minutes).
            let mut sessions = LocalSessionManager::default();
            sessions.session_config.keep_alive = Some(IDLE_IN_MEMORY);
            let sessions = Arc::new(sessions);
            tokio::spawn(sessions::keep_sessions(toolshed.clone(), sessions.clone(), stored, closing.clone()));
            shared(StreamableHttpService::new(factory, sessions, config))
        }
        SessionMode::Stateless => shared(StreamableHttpService::new(factory, Arc::new(NeverSessionManager::default()), config)),
    };
    let state = McpState(Arc::new(Shared { toolshed: toolshed.clone(), sse: sse::SseSessions::default(), closing }));
    let streamable = streamable.layer(axum::middleware::from_fn_with_state(state.clone(), watch_stream));
    let gate = Arc::new(Gate {
        toolshed,
        site_origin,
        allowed_hosts: Arc::new(allowed_hosts),
        stateful: mode == SessionMode::Stateful,
        owners: Default::default(),
        oauth,
    });
    let mut listings = axum::Router::new();
    for kind in [ListingKind::Tool, ListingKind::Bundle] {
        let base = format!("/mcp/{}/{{department}}/{{name}}", kind.plural());
        listings =
            with_legacy_sse(listings.route(&base, streamable.clone()).route(&format!("{base}/api.d.ts"), get(typescript_api)), &base);
    }
    let me = with_legacy_sse(axum::Router::new().route(ME, streamable), ME);
    listings
        .route_layer(axum::middleware::from_fn_with_state(gate.clone(), authorize))
        .merge(me.route_layer(axum::middleware::from_fn_with_state(gate, authorize_me)))
        .with_state(state)
}

/// rmcp's service clones itself, its whole configuration included, on every
/// request (twice, through axum's `any_service`); behind an `Arc` one request
/// costs one reference count.
fn shared<S, M>(service: StreamableHttpService<S, M>) -> axum::routing::MethodRouter<McpState>
where
    S: rmcp::ServerHandler + Send + 'static,
    M: rmcp::transport::streamable_http_server::SessionManager,
{
    let service = Arc::new(service);
    axum::routing::any(move |req: Request| {
        let service = service.clone();
        async move { service.handle(req).await }
    })
}

/// Every event stream counts as open in the metrics until it ends. At
/// shutdown the standalone event stream (a `GET`: server-initiated messages
/// only, no call's answer) ends at once; a POST's stream carries its call's
/// answer to the end.
async fn watch_stream(State(shared): State<McpState>, req: Request, next: Next) -> Response {
    let get = req.method() == axum::http::Method::GET;
    // A GET with Last-Event-ID resumes a call's stream.
    let resumed = req.headers().contains_key("last-event-id");
    let res = next.run(req).await;
    if !is_event_stream(&res) {
        return res;
    }
    let open = shared.toolshed.mcp_stream_opened(if get && !resumed { "standalone" } else { "call" });
    let (parts, body) = res.into_parts();
    let data = body.into_data_stream();
    let data = if get { data.take_until(shared.closing.clone().cancelled_owned()).boxed() } else { data.boxed() };
    let body = axum::body::Body::from_stream(data.map(move |chunk| {
        let _counted_until_it_ends = &open;
        chunk
    }));
    Response::from_parts(parts, body)
}

/// The legacy HTTP+SSE transport's two routes beside the endpoint at `base`,
/// marked deprecated.
fn with_legacy_sse(router: axum::Router<McpState>, base: &str) -> axum::Router<McpState> {
    let deprecated = axum::middleware::from_fn(mark_deprecated);
    router
        .route(&format!("{base}/sse"), get(sse::open_stream).layer(deprecated.clone()))
        .route(&format!("{base}/messages"), post(sse::post_message).layer(deprecated))
}

/// When MCP replaced HTTP+SSE with Streamable HTTP (the 2025-03-26 revision),
/// as an RFC 9745 `Deprecation` date.
const SSE_DEPRECATED: HeaderValue = HeaderValue::from_static("@1742947200");

/// The legacy HTTP+SSE transport is still served, but says it is deprecated
/// (RFC 9745) and links to the Streamable HTTP endpoint that replaces it.
async fn mark_deprecated(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let successor = path.strip_suffix("/sse").or_else(|| path.strip_suffix("/messages")).unwrap_or(path).to_owned();
    let mut res = next.run(req).await;
    res.headers_mut().insert("deprecation", SSE_DEPRECATED);
    if let Ok(link) = HeaderValue::from_str(&format!("<{successor}>; rel=\"successor-version\"")) {
        res.headers_mut().insert(header::LINK, link);
    }
    res
}

/// Whether an answer is a server-sent event stream.
pub fn is_event_stream(res: &Response) -> bool {
    res.headers().get(header::CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"))
}

/// Every person's own endpoint: the catalog they may use.
pub const ME: &str = "/mcp/me";

/// `GET …/api.d.ts`: the code-mode TypeScript API of what the listing serves
/// this caller, generated from its tools' JSON Schemas.
async fn typescript_api(State(state): State<McpState>, axum::Extension(caller): axum::Extension<Caller>) -> Response {
    let Served::Listing(listing) = &caller.served else { return StatusCode::NOT_FOUND.into_response() };
    match state.toolshed.bundles().tool_defs(&caller.user, listing).await {
        Ok(defs) => (
            [(header::CONTENT_TYPE, "application/typescript; charset=utf-8")],
            toolshed_domain::codegen::typescript_api(&listing.slug(), &defs),
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "generating the TypeScript API failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// A fresh, unguessable session id.
fn new_session_id() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::thread_rng().gen();
    hex::encode(bytes)
}

/// A JSON-RPC parse error (-32700) as the HTTP answer to a body that is not a message.
fn parse_error(e: &serde_json::Error) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("Parse error: not a single JSON-RPC message ({e})")},
    });
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// The database could not be asked (stopped, unreachable, pool exhausted): a
/// JSON-RPC error a client can show, and a hint to try again.
fn unavailable() -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32603, "message": "Toolshed cannot reach its database right now; try again in a few seconds."},
    });
    let mut res = (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    res
}

/// A 401 that tells an MCP client where to get a token (OAuth, see
/// `crate::oauth`); `invalid_token` when one was presented and refused.
fn unauthorized(gate: &Gate, uri: &Uri, reason: &str, presented: bool) -> Response {
    let mut res = (StatusCode::UNAUTHORIZED, format!("{reason}\n")).into_response();
    let path = crate::oauth::endpoint_path(uri.path());
    res.headers_mut().insert(header::WWW_AUTHENTICATE, crate::oauth::challenge(&gate.oauth, path, presented.then_some("invalid_token")));
    res
}

/// The caller behind a presented token, or the answer for a refused one.
fn checked<T>(gate: &Gate, uri: &Uri, found: Result<Result<T, TokenRejected>, String>) -> Result<T, Box<Response>> {
    match found {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(_)) => Err(Box::new(unauthorized(gate, uri, "Invalid, expired or revoked API token.", true))),
        Err(e) => {
            tracing::error!(error = %e, "token check failed");
            Err(Box::new(unavailable()))
        }
    }
}

/// What runs a tool's code: a call, and a prompt or resource (each a tool served as one).
const RUNS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// A run an OAuth grant without `tools:call` may not make: 403 with the scope
/// to ask for (the client may ask the person again, MCP "step-up authorization").
async fn refuse_calls(gate: &Gate, req: Request) -> Result<Request, Response> {
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_MESSAGE_BYTES).await else {
        return Err((StatusCode::PAYLOAD_TOO_LARGE, "One JSON-RPC message is at most 1 MiB.\n").into_response());
    };
    let messages = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Array(batch)) => batch,
        Ok(one) => vec![one],
        Err(_) => vec![],
    };
    if messages.iter().any(|m| m.get("method").and_then(|m| m.as_str()).is_some_and(|m| RUNS.contains(&m))) {
        let path = crate::oauth::endpoint_path(parts.uri.path());
        let mut res =
            (StatusCode::FORBIDDEN, "This connection may list the tools but not run them: allow running them when you connect.\n")
                .into_response();
        res.headers_mut().insert(header::WWW_AUTHENTICATE, crate::oauth::challenge(&gate.oauth, path, Some("insufficient_scope")));
        return Err(res);
    }
    Ok(Request::from_parts(parts, axum::body::Body::from(bytes)))
}

/// The token, from `Authorization: Bearer …` or, for clients that can only be
/// given a URL, `?token=…` (it then lands in access logs: prefer the header).
fn presented_token(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    if let Some(v) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        return v.strip_prefix("Bearer ").map(|t| t.trim().to_owned());
    }
    uri.query()?.split('&').find_map(|kv| kv.strip_prefix("token=")).map(str::to_owned)
}

#[derive(Clone)]
struct Gate {
    toolshed: Toolshed,
    site_origin: String,
    /// Host names requests may be addressed to (DNS-rebinding protection).
    allowed_hosts: Arc<Vec<String>>,
    /// Sessions are kept (in the database): requests name them, and must own them.
    stateful: bool,
    owners: SessionOwners,
    oauth: crate::oauth::OAuth,
}

/// Who owns which session, as recorded in the database; an owner never
/// changes, so what this replica has seen stays true.
#[derive(Clone, Default)]
struct SessionOwners(Arc<std::sync::Mutex<std::collections::HashMap<String, SessionOwner>>>);

impl SessionOwners {
    /// Enough for every session a busy replica serves at once; past it, start over.
    const MAX: usize = 100_000;

    async fn get(&self, ts: &Toolshed, id: &str) -> Result<Option<SessionOwner>, toolshed_domain::StoreError> {
        if let Some(owner) = self.0.lock().expect("session owners lock").get(id) {
            return Ok(Some(*owner));
        }
        let owner = ts.mcp_sessions().mcp_session_owner(id).await?;
        if let Some(owner) = owner {
            self.remember(id, owner);
        }
        Ok(owner)
    }

    fn remember(&self, id: &str, owner: SessionOwner) {
        let mut owners = self.0.lock().expect("session owners lock");
        if owners.len() >= Self::MAX {
            owners.clear();
        }
        owners.insert(id.to_owned(), owner);
    }

    fn forget(&self, id: &str) {
        self.0.lock().expect("session owners lock").remove(id);
    }
}

impl Gate {
    fn allows_host(&self, req: &Request) -> bool {
        let Some(host) = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()) else { return false };
        let name = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or_default(),
            None => host.rsplit_once(':').map_or(host, |(n, _)| n),
        };
        self.allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
    }
}

/// The signed-in user of a request the listing page itself sends. Only
/// same-origin requests qualify: another site cannot spend the cookie.
async fn browser_user(gate: &Gate, headers: &HeaderMap, session: Option<tower_sessions::Session>) -> Option<User> {
    let origin = headers.get(header::ORIGIN)?.to_str().ok()?;
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let same_origin =
        origin == gate.site_origin || host.is_some_and(|h| origin.split_once("://").is_some_and(|(_, a)| a.eq_ignore_ascii_case(h)));
    if !same_origin {
        return None;
    }
    gate.toolshed.sessions().session_user(&session?).await.ok().flatten()
}

/// Who presents which credentials: a user and their API token, their OAuth
/// grant, or their same-origin browser session; the answer for anything else
/// (401 with where to get a token, 503 when the database cannot say).
///
/// Takes the request's parts, not the request: a `&Request` may not be held
/// across an await (its body is not `Sync`).
async fn credentials(
    gate: &Gate,
    uri: &Uri,
    headers: &HeaderMap,
    session: Option<tower_sessions::Session>,
) -> Result<(User, Option<TokenInfo>, Option<AccessGrant>), Response> {
    let ts = &gate.toolshed;
    match presented_token(headers, uri) {
        // OAuth access tokens ride in the header only (OAuth 2.1 forbids them in URLs).
        Some(t) if t.starts_with(ACCESS_PREFIX) && headers.contains_key(header::AUTHORIZATION) => {
            let found = ts.oauth().authenticate_access_token(&t).await.map_err(|e| e.to_string());
            checked(gate, uri, found).map(|(user, grant)| (user, None, Some(grant))).map_err(|res| *res)
        }
        Some(t) => {
            let found = ts.tokens().authenticate_token(&t).await.map_err(|e| e.to_string());
            checked(gate, uri, found).map(|(user, token)| (user, Some(token), None)).map_err(|res| *res)
        }
        None => match browser_user(gate, headers, session).await {
            Some(user) => Ok((user, None, None)),
            None => Err(unauthorized(gate, uri, "Missing API token: connect with OAuth, or send Authorization: Bearer <token>.", false)),
        },
    }
}

/// [`credentials`] of `req`.
async fn credentials_of(gate: &Gate, req: &mut Request) -> Result<(User, Option<TokenInfo>, Option<AccessGrant>), Response> {
    let session = req.extensions().get::<tower_sessions::Session>().cloned();
    credentials(gate, req.uri(), req.headers(), session).await
}

/// Finds the caller (token, or a same-origin browser session) and the listing
/// as that caller sees it: 401 without valid credentials, 404 for a listing the
/// caller may not see (its existence is not revealed), 403 when disabled.
async fn authorize(
    State(gate): State<Arc<Gate>>,
    Path((department, name)): Path<(String, String)>,
    mut req: Request,
    next: Next,
) -> Response {
    if !gate.allows_host(&req) {
        return forbidden_host();
    }
    let ts = &gate.toolshed;
    let (user, token, grant) = match credentials_of(&gate, &mut req).await {
        Ok(found) => found,
        Err(res) => return res,
    };
    let not_found = || (StatusCode::NOT_FOUND, "No such listing.\n").into_response();
    let Some((name, pin)) = endpoint_name(&name) else { return not_found() };
    let kind = if req.uri().path().starts_with("/mcp/bundles/") { ListingKind::Bundle } else { ListingKind::Tool };
    let mut listing = match ts.tools().listing_for_call(&user, kind, &department, name).await {
        Ok(t) if t.published_version.is_some() && token.as_ref().is_none_or(|tk| tk.allows(&t.slug())) => t,
        Ok(_) | Err(ToolError::NotFound) => return not_found(),
        Err(e) => {
            tracing::error!(error = %e, "listing lookup failed");
            return unavailable();
        }
    };
    if listing.status == Status::Disabled {
        return (StatusCode::FORBIDDEN, "This listing has been disabled by an administrator.\n").into_response();
    }
    if let Some(n) = pin {
        listing = match ts.tools().pinned(&user, listing, n).await {
            Ok(pinned) => pinned,
            Err(ToolError::NoSuchVersion(_)) => {
                return (StatusCode::NOT_FOUND, format!("This listing has no version {n}.\n")).into_response()
            }
            Err(e) => {
                tracing::error!(error = %e, "version lookup failed");
                return unavailable();
            }
        };
    }
    let req = match granted(&gate, req, grant.as_ref(), Some(listing.id)).await {
        Ok(req) => req,
        Err(res) => return res,
    };
    serve(&gate, req, next, Caller { user, token, served: Served::Listing(Box::new(listing)) }).await
}

/// `/mcp/me`: the caller's own endpoint. An API token's scope limits what its
/// catalog holds; an OAuth token must have been granted for this endpoint.
async fn authorize_me(State(gate): State<Arc<Gate>>, mut req: Request, next: Next) -> Response {
    if !gate.allows_host(&req) {
        return forbidden_host();
    }
    let (user, token, grant) = match credentials_of(&gate, &mut req).await {
        Ok(found) => found,
        Err(res) => return res,
    };
    match granted(&gate, req, grant.as_ref(), None).await {
        Ok(req) => serve(&gate, req, next, Caller { user, token, served: Served::Catalog }).await,
        Err(res) => res,
    }
}

/// A token from OAuth is for the one endpoint it was granted for (RFC 8707:
/// `listing`, or `None` for the personal endpoint), and runs tools only if the
/// person allowed that.
async fn granted(gate: &Gate, req: Request, grant: Option<&AccessGrant>, listing: Option<ToolId>) -> Result<Request, Response> {
    let Some(grant) = grant else { return Ok(req) };
    if grant.listing_id != listing {
        return Err(unauthorized(gate, req.uri(), "This token was granted for another endpoint.", true));
    }
    if grant.scope.call {
        Ok(req)
    } else {
        refuse_calls(gate, req).await
    }
}

fn forbidden_host() -> Response {
    (StatusCode::FORBIDDEN, "Forbidden: this Host is not allowed (DNS-rebinding protection).\n").into_response()
}

/// Hands an authorized request to rmcp: a session it names must be the
/// caller's, on this endpoint; a new session's owner is stored first.
async fn serve(gate: &Gate, mut req: Request, next: Next, caller: Caller) -> Response {
    let ts = &gate.toolshed;
    let delete = req.method() == axum::http::Method::DELETE;
    let session = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let owner = caller.owner();
    // A session answers only the user who opened it, on its listing: to anyone
    // else it does not exist (rmcp alone would serve any valid session id).
    if gate.stateful {
        if let Some(id) = &session {
            // A DELETE asks the database: the session may have ended elsewhere.
            let found = if delete { ts.mcp_sessions().mcp_session_owner(id).await } else { gate.owners.get(ts, id).await };
            match found {
                Ok(Some(o)) if o == owner => {}
                Ok(_) => return (StatusCode::NOT_FOUND, "No such session.\n").into_response(),
                Err(e) => {
                    tracing::error!(error = %e, "session lookup failed");
                    return unavailable();
                }
            }
        }
    }
    req.extensions_mut().insert(caller);
    let mut res = next.run(req).await;
    if gate.stateful {
        match (&session, res.headers().get("mcp-session-id").and_then(|v| v.to_str().ok())) {
            // A new session: its owner is stored before the client learns its id.
            (None, Some(id)) => {
                if let Err(e) = ts.mcp_sessions().set_mcp_session_owner(id, owner).await {
                    tracing::error!(error = %e, "could not record who opened an MCP session");
                    return unavailable();
                }
                gate.owners.remember(id, owner);
            }
            (Some(id), _) if delete && res.status().is_success() => gate.owners.forget(id),
            _ => {}
        }
    }
    // A session ended: the official SDKs expect 200 (Python logs "Session termination failed: 202").
    if delete && res.status() == StatusCode::ACCEPTED {
        *res.status_mut() = StatusCode::OK;
    }
    res
}
