//! OAuth 2.1 for MCP clients, the HTTP side (MCP authorization, spec
//! 2025-11-25). Every MCP endpoint is a protected resource described at
//! `/.well-known/oauth-protected-resource/mcp/…` (RFC 9728); Toolshed is its
//! own authorization server, described at `/.well-known/oauth-authorization-server`
//! (RFC 8414), with dynamic client registration (RFC 7591), PKCE S256 and
//! resource indicators (RFC 8707). The decisions are the domain's
//! (`toolshed_domain::oauth`).
//!
//! The flow in a browser: `GET /oauth/authorize` checks the request, sends the
//! person to sign in if needed and then to the consent page (`/oauth/consent`,
//! a Leptos page with a plain form), whose `POST /oauth/consent` (behind the
//! cross-site check, like every page form) answers the client's redirect URI
//! with a code or `access_denied`. Clients then use `/oauth/token`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::Engine;
use serde::Deserialize;
use serde_json::json;
use toolshed_domain::oauth::{
    AuthorizationFailure, AuthorizationParams, ClientCredentials, ClientMetadata, Endpoint, OAuthError, Scope, SCOPES,
};
use toolshed_domain::Toolshed;
use tower_sessions::Session;

pub const AUTHORIZE: &str = "/oauth/authorize";
pub const CONSENT: &str = "/oauth/consent";
const TOKEN: &str = "/oauth/token";
const REGISTER: &str = "/oauth/register";
const REVOKE: &str = "/oauth/revoke";
const RESOURCE_METADATA: &str = "/.well-known/oauth-protected-resource";
const SERVER_METADATA: &str = "/.well-known/oauth-authorization-server";

/// A registration is a few hundred bytes; nothing larger is read.
const MAX_REGISTRATION_BYTES: usize = 16 * 1024;
/// Registrations (or authorizations that fetch a client's metadata document)
/// one client address may make per window: plenty for every MCP client on a
/// machine, too few to fill the table (unused ones go after a day) or to use
/// this server as a fetcher of other people's URLs.
const REGISTRATIONS_PER_WINDOW: u32 = 20;
const REGISTRATION_WINDOW: Duration = Duration::from_secs(600);

#[derive(Clone)]
pub struct OAuth {
    toolshed: Toolshed,
    registrations: PerAddressLimit,
    /// Authorization requests that fetch a client's metadata document.
    document_fetches: PerAddressLimit,
    /// This server's base URL without a trailing slash: the issuer, and what resources live under.
    base: String,
    /// The base URL's origin: where the well-known documents are.
    origin: String,
}

impl OAuth {
    pub fn new(toolshed: Toolshed, base: &url::Url) -> Self {
        Self {
            toolshed,
            registrations: PerAddressLimit::default(),
            document_fetches: PerAddressLimit::default(),
            base: base.as_str().trim_end_matches('/').to_owned(),
            origin: base.origin().ascii_serialization(),
        }
    }

    /// Where the metadata of the endpoint at `path` (`/mcp/tools/…`) is.
    pub fn resource_metadata_url(&self, path: &str) -> String {
        metadata_url(&self.origin, &self.base, path)
    }
}

/// Requests per client address in this replica's window (a replica's memory:
/// several replicas allow that many each, which still bounds the table).
#[derive(Clone, Default)]
struct PerAddressLimit(Arc<Mutex<HashMap<IpAddr, (Instant, u32)>>>);

impl PerAddressLimit {
    fn allows(&self, client: IpAddr) -> bool {
        let mut seen = self.0.lock().expect("per-address limit lock");
        let now = Instant::now();
        if seen.len() >= 10_000 {
            seen.retain(|_, (since, _)| now.duration_since(*since) < REGISTRATION_WINDOW);
        }
        let (since, count) = seen.entry(client).or_insert((now, 0));
        if now.duration_since(*since) >= REGISTRATION_WINDOW {
            (*since, *count) = (now, 0);
        }
        *count += 1;
        *count <= REGISTRATIONS_PER_WINDOW
    }
}

/// RFC 9728 §3.1: the well-known name goes between the origin and the resource's path.
fn metadata_url(origin: &str, base: &str, path: &str) -> String {
    let base_path = base.strip_prefix(origin).unwrap_or_default();
    format!("{origin}{RESOURCE_METADATA}{base_path}{path}")
}

/// The metadata documents and the endpoints clients call directly (from any
/// origin: browser-based clients such as the MCP Inspector read them too).
pub fn routes<S: Clone + Send + Sync + 'static>(oauth: OAuth) -> Router<S> {
    let cors = tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::Any)
        .allow_methods([axum::http::Method::GET, axum::http::Method::POST])
        .allow_headers([header::CONTENT_TYPE, header::AUTHORIZATION, "mcp-protocol-version".parse().expect("a header name")]);
    Router::new()
        .route(&format!("{RESOURCE_METADATA}/{{*path}}"), get(resource_metadata))
        .route(SERVER_METADATA, get(server_metadata))
        .route(&format!("{SERVER_METADATA}/{{*path}}"), get(server_metadata))
        .route(REGISTER, post(register))
        .route(TOKEN, post(token))
        .route(REVOKE, post(revoke))
        .layer(cors)
        .route(AUTHORIZE, get(authorize))
        .with_state(oauth)
}

/// `POST /oauth/consent`, for the pages router (behind its cross-site check).
pub fn consent_route<S: Clone + Send + Sync + 'static>(oauth: OAuth) -> axum::routing::MethodRouter<S> {
    post(consent).with_state(oauth)
}

/// RFC 9728: what protects the endpoint at `path`, for any path that names
/// an endpoint (whether that listing exists is not told here).
async fn resource_metadata(State(oauth): State<OAuth>, Path(path): Path<String>) -> Response {
    let Ok(endpoint) = Endpoint::parse(&format!("{}/{path}", oauth.origin), &oauth.base) else {
        return (StatusCode::NOT_FOUND, "Not an MCP endpoint of this server.\n").into_response();
    };
    let (name, documentation) = match &endpoint {
        Endpoint::Listing(r) => (r.slug(), format!("{}/{}/{}", oauth.base, r.kind.plural(), r.slug())),
        Endpoint::Me => ("every tool you may use".to_owned(), format!("{}/account", oauth.base)),
    };
    Json(json!({
        "resource": endpoint.url(&oauth.base),
        "authorization_servers": [oauth.base],
        "scopes_supported": SCOPES,
        "bearer_methods_supported": ["header"],
        "resource_name": format!("Toolshed: {name}"),
        "resource_documentation": documentation,
    }))
    .into_response()
}

/// RFC 8414: this authorization server.
async fn server_metadata(State(oauth): State<OAuth>) -> Response {
    let b = &oauth.base;
    Json(json!({
        "issuer": b,
        "authorization_endpoint": format!("{b}{AUTHORIZE}"),
        "token_endpoint": format!("{b}{TOKEN}"),
        "registration_endpoint": format!("{b}{REGISTER}"),
        "revocation_endpoint": format!("{b}{REVOKE}"),
        "scopes_supported": SCOPES,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        "revocation_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": true,
    }))
    .into_response()
}

/// An OAuth error as JSON, never cached.
fn error_response(e: &OAuthError) -> Response {
    if let OAuthError::Store(e) = e {
        tracing::error!(error = %e, "OAuth request failed");
    }
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let description = match e {
        OAuthError::Store(_) => "Toolshed could not complete the request; try again.".to_owned(),
        e => e.to_string(),
    };
    let mut res = (status, Json(json!({"error": e.code(), "error_description": description}))).into_response();
    no_store(&mut res);
    if matches!(e, OAuthError::InvalidClient(_)) {
        res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(r#"Basic realm="toolshed""#));
    }
    res
}

fn no_store(res: &mut Response) {
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// The address a request came from, behind trusted proxies.
fn client_address(oauth: &OAuth, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
    let forwarded: Vec<&str> = headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).collect();
    oauth.toolshed.settings().trusted_proxies.client(peer.ip(), &forwarded)
}

fn too_many(client: IpAddr, description: &str) -> Response {
    tracing::warn!(%client, description, "OAuth requests limited");
    let body = json!({"error": "temporarily_unavailable", "error_description": description});
    let mut res = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
    res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("600"));
    res
}

/// `POST /oauth/register` (RFC 7591).
async fn register(
    State(oauth): State<OAuth>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let client = client_address(&oauth, peer, &headers);
    if !oauth.registrations.allows(client) {
        return too_many(client, "Too many registrations from this address; try again in a few minutes.");
    }
    if body.len() > MAX_REGISTRATION_BYTES {
        return error_response(&OAuthError::InvalidClientMetadata("the registration is too large".into()));
    }
    let meta: ClientMetadata = match serde_json::from_slice(&body) {
        Ok(m) => m,
        Err(e) => return error_response(&OAuthError::InvalidClientMetadata(format!("not a client registration: {e}"))),
    };
    match oauth.toolshed.oauth().register_client(meta).await {
        Ok(client) => {
            tracing::info!(client = %client.client_name, "an OAuth client registered");
            let mut res = (StatusCode::CREATED, Json(client)).into_response();
            no_store(&mut res);
            res
        }
        Err(e) => error_response(&e),
    }
}

/// A redirect to the client with these parameters added to its redirect URI
/// (RFC 6749 §4.1.2), and `iss` (RFC 9207).
fn to_client(oauth: &OAuth, redirect_uri: &str, state: Option<&str>, params: &[(&str, &str)]) -> Response {
    let Ok(mut url) = url::Url::parse(redirect_uri) else {
        return (StatusCode::BAD_REQUEST, "The application's redirect address is not a URL.\n").into_response();
    };
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in params {
            q.append_pair(k, v);
        }
        if let Some(state) = state {
            q.append_pair("state", state);
        }
        q.append_pair("iss", &oauth.base);
    }
    Redirect::to(url.as_str()).into_response()
}

fn error_to_client(oauth: &OAuth, redirect_uri: &str, state: Option<&str>, e: &OAuthError) -> Response {
    to_client(oauth, redirect_uri, state, &[("error", e.code()), ("error_description", &e.to_string())])
}

/// `GET /oauth/authorize`: a request a client cannot be told about shows on
/// the consent page; one it can gets its error back; a good one goes to the
/// consent page, through sign-in when needed.
async fn authorize(State(oauth): State<OAuth>, session: Session, ConnectInfo(peer): ConnectInfo<SocketAddr>, req: Request) -> Response {
    let query = req.uri().query().unwrap_or_default().to_owned();
    let params = Query::<AuthorizationParams>::try_from_uri(req.uri()).map(|q| q.0).unwrap_or_default();
    let client_id = params.client_id.as_deref().unwrap_or_default();
    let client = client_address(&oauth, peer, req.headers());
    if oauth.toolshed.oauth().would_fetch_client_document(client_id).await.unwrap_or(true) && !oauth.document_fetches.allows(client) {
        return too_many(client, "Too many new applications from this address; try again in a few minutes.");
    }
    match oauth.toolshed.oauth().authorization_request(&params, &oauth.base).await {
        Err(AuthorizationFailure::Redirect { redirect_uri, state, error }) => {
            return error_to_client(&oauth, &redirect_uri, state.as_deref(), &error)
        }
        Err(AuthorizationFailure::Untrusted(_)) | Ok(_) => {}
    }
    let consent = format!("{CONSENT}?{query}");
    match oauth.toolshed.sessions().session_user(&session).await {
        Ok(Some(_)) => Redirect::to(&consent).into_response(),
        Ok(None) => Redirect::to(&format!("/login?next={}", url::form_urlencoded::byte_serialize(consent.as_bytes()).collect::<String>()))
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "session lookup failed");
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
    }
}

#[derive(Deserialize)]
struct ConsentForm {
    #[serde(flatten)]
    params: AuthorizationParams,
    /// `allow` or `deny`.
    decision: String,
    /// The "run its tools" box, when the client asked for it.
    call: Option<String>,
}

/// `POST /oauth/consent`: the person's answer. Everything is checked again:
/// the form is the person's, but its fields came from the client.
async fn consent(State(oauth): State<OAuth>, session: Session, Form(form): Form<ConsentForm>) -> Response {
    let user = match oauth.toolshed.sessions().session_user(&session).await {
        Ok(Some(user)) => user,
        Ok(None) => return Redirect::to("/login").into_response(),
        Err(e) => {
            tracing::error!(error = %e, "session lookup failed");
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
    };
    let req = match oauth.toolshed.oauth().authorization_request(&form.params, &oauth.base).await {
        Ok(req) => req,
        Err(AuthorizationFailure::Redirect { redirect_uri, state, error }) => {
            return error_to_client(&oauth, &redirect_uri, state.as_deref(), &error)
        }
        Err(AuthorizationFailure::Untrusted(e)) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    };
    let state = req.state.as_deref();
    if form.decision != "allow" {
        tracing::info!(user = %user.username, client = %req.client.name, "OAuth request declined");
        return error_to_client(&oauth, &req.redirect_uri, state, &OAuthError::AccessDenied);
    }
    let scope = Scope { call: form.call.is_some() };
    match oauth.toolshed.oauth().approve(&user, &req, scope, &oauth.base).await {
        Ok(code) => to_client(&oauth, &req.redirect_uri, state, &[("code", &code)]),
        Err(e) => {
            tracing::warn!(error = %e, "OAuth approval refused");
            let denied = OAuthError::InvalidTarget(format!("{} is not a published listing you may use", req.resource.label()));
            error_to_client(&oauth, &req.redirect_uri, state, &denied)
        }
    }
}

#[derive(Deserialize)]
struct TokenForm {
    grant_type: Option<String>,
    code: Option<String>,
    redirect_uri: Option<String>,
    code_verifier: Option<String>,
    refresh_token: Option<String>,
    scope: Option<String>,
    resource: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    /// Revocation (RFC 7009).
    token: Option<String>,
}

/// The client's credentials: HTTP Basic (RFC 6749 §2.3.1, each part
/// form-encoded) or the form's `client_id` and `client_secret`.
fn client_credentials(headers: &HeaderMap, form: &TokenForm) -> Result<ClientCredentials, OAuthError> {
    let basic = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Basic "));
    if let Some(encoded) = basic {
        let bad = || OAuthError::InvalidClient("malformed Basic credentials".into());
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).map_err(|_| bad())?;
        let decoded = String::from_utf8(decoded).map_err(|_| bad())?;
        let (id, secret) = decoded.split_once(':').ok_or_else(bad)?;
        let unescape =
            |s: &str| url::form_urlencoded::parse(format!("x={s}").as_bytes()).next().map(|(_, v)| v.into_owned()).unwrap_or_default();
        return Ok(ClientCredentials { client_id: unescape(id), client_secret: Some(unescape(secret)) });
    }
    let client_id = form.client_id.clone().ok_or_else(|| OAuthError::InvalidClient("name the client (client_id)".into()))?;
    Ok(ClientCredentials { client_id, client_secret: form.client_secret.clone() })
}

/// `POST /oauth/token`.
async fn token(State(oauth): State<OAuth>, headers: HeaderMap, Form(form): Form<TokenForm>) -> Response {
    let answer = async {
        let creds = client_credentials(&headers, &form)?;
        let missing = |name: &str| OAuthError::InvalidRequest(format!("{name} is missing"));
        match form.grant_type.as_deref() {
            Some("authorization_code") => {
                let code = form.code.as_deref().ok_or_else(|| missing("code"))?;
                let verifier = form.code_verifier.as_deref().ok_or_else(|| missing("code_verifier (PKCE)"))?;
                oauth.toolshed.oauth().exchange_code(&creds, code, form.redirect_uri.as_deref(), verifier, form.resource.as_deref()).await
            }
            Some("refresh_token") => {
                let refresh = form.refresh_token.as_deref().ok_or_else(|| missing("refresh_token"))?;
                oauth.toolshed.oauth().refresh(&creds, refresh, form.scope.as_deref(), form.resource.as_deref()).await
            }
            _ => Err(OAuthError::UnsupportedGrantType),
        }
    };
    match answer.await {
        Ok(tokens) => {
            let mut res = Json(tokens).into_response();
            no_store(&mut res);
            res.headers_mut().insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
            res
        }
        Err(e) => error_response(&e),
    }
}

/// `POST /oauth/revoke` (RFC 7009): 200 whether or not the token was known.
async fn revoke(State(oauth): State<OAuth>, headers: HeaderMap, Form(form): Form<TokenForm>) -> Response {
    let answer = async {
        let creds = client_credentials(&headers, &form)?;
        let token = form.token.as_deref().ok_or_else(|| OAuthError::InvalidRequest("token is missing".into()))?;
        oauth.toolshed.oauth().revoke_oauth_token(&creds, token).await
    };
    match answer.await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => error_response(&e),
    }
}

/// What a 401 from an MCP endpoint says: where its resource metadata is, and
/// the scope to ask for (RFC 9728 §5.1, RFC 6750 §3).
pub fn challenge(oauth: &OAuth, path: &str, error: Option<&str>) -> HeaderValue {
    let mut value = format!(r#"Bearer resource_metadata="{}", scope="{}""#, oauth.resource_metadata_url(path), SCOPES.join(" "));
    if let Some(error) = error {
        value.push_str(&format!(r#", error="{error}""#));
    }
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}

/// The path of the endpoint a request under `/mcp/…` is for (`…/sse`,
/// `…/messages` and `…/api.d.ts` belong to the endpoint itself).
pub fn endpoint_path(path: &str) -> &str {
    ["/sse", "/messages", "/api.d.ts"].iter().find_map(|s| path.strip_suffix(s)).unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_metadata_lives_at_the_origin_before_the_endpoint_path() {
        assert_eq!(
            metadata_url("https://tools.example.com", "https://tools.example.com/shed", "/mcp/tools/demo/echo"),
            "https://tools.example.com/.well-known/oauth-protected-resource/shed/mcp/tools/demo/echo"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:3000", "http://127.0.0.1:3000", "/mcp/bundles/demo/kit"),
            "http://127.0.0.1:3000/.well-known/oauth-protected-resource/mcp/bundles/demo/kit"
        );
    }

    #[test]
    fn the_legacy_transports_paths_belong_to_their_endpoint() {
        assert_eq!(endpoint_path("/mcp/tools/demo/echo/sse"), "/mcp/tools/demo/echo");
        assert_eq!(endpoint_path("/mcp/tools/demo/echo/messages"), "/mcp/tools/demo/echo");
        assert_eq!(endpoint_path("/mcp/tools/demo/echo"), "/mcp/tools/demo/echo");
    }
}
