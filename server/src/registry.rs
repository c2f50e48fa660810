//! The company's listings as an MCP registry: the official MCP Registry's
//! read API (v0.1: `GET /v0.1/servers`, `…/servers/{name}/versions`,
//! `…/versions/{version}` and `…/versions/latest`), each entry a `server.json`
//! with the listing's Streamable HTTP endpoint as its remote, filtered to what
//! the caller's API token may see. VS Code's private-registry setting
//! (`chat.mcp.gallery.serviceUrl`) takes a base URL and sends no credentials,
//! so the same API also answers under `/registry/{token}` (with the same
//! caveat as a token in any URL).
//!
//! Names: `{reversed host}.tools/{department}.{name}` for a tool and
//! `….bundles/…` for a bundle (`com.example.toolshed.tools/demo.echo`).
//! Version N of a listing is `N.0.0`; the latest's remote is the endpoint that
//! follows publishes, an older one's is pinned (`…@vN`).

use axum::extract::{Path, Query, RawPathParams, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use toolshed_domain::market::{ListedVersion, RegistryEntry, RegistryFilter, ServedVersion};
use toolshed_domain::tokens::TokenInfo;
use toolshed_domain::tools::{ListingKind, ToolError};
use toolshed_domain::{Toolshed, User};

/// The `server.json` schema the entries follow.
pub const SCHEMA: &str = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json";
const OFFICIAL: &str = "io.modelcontextprotocol.registry/official";
const DEFAULT_LIMIT: usize = 30;
const MAX_LIMIT: usize = 100;

#[derive(Clone)]
struct Registry {
    toolshed: Toolshed,
    /// This server's base URL without a trailing slash: endpoints live under it.
    base: String,
    /// The reversed host names start with (`com.example.toolshed`).
    namespace: String,
}

/// Who asks: the user and token, put in the request by [`authenticate`].
#[derive(Clone)]
struct Caller {
    user: User,
    token: TokenInfo,
}

pub fn routes(toolshed: Toolshed, base: &url::Url) -> axum::Router {
    let registry = Registry {
        toolshed: toolshed.clone(),
        base: base.as_str().trim_end_matches('/').to_owned(),
        namespace: namespace(base.host_str().unwrap_or("localhost")),
    };
    let api = axum::Router::new()
        .route("/v0.1/servers", get(list))
        .route("/v0.1/servers/{name}/versions", get(versions))
        .route("/v0.1/servers/{name}/versions/{version}", get(version))
        .with_state(registry);
    // Browser-based clients read registries too (GitHub's Copilot settings ask for CORS).
    let cors = tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::Any)
        .allow_methods([Method::GET, Method::OPTIONS])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE]);
    axum::Router::new()
        .merge(api.clone())
        .nest("/registry/{token}", api)
        .route_layer(axum::middleware::from_fn_with_state(toolshed, authenticate))
        .layer(cors)
}

/// `toolshed.example.com` → `com.example.toolshed`; an address stays as it is.
fn namespace(host: &str) -> String {
    if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
        return host.trim_matches(['[', ']']).replace(':', "-");
    }
    host.split('.').rev().collect::<Vec<_>>().join(".")
}

/// An error as the official registry sends it (RFC 9457 problem details).
fn problem(status: StatusCode, detail: &str) -> Response {
    let title = status.canonical_reason().unwrap_or("Error");
    let mut res = (status, Json(json!({"title": title, "status": status.as_u16(), "detail": detail}))).into_response();
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
    res
}

/// The API token: `Authorization: Bearer …`, or the `/registry/{token}` prefix.
async fn authenticate(State(ts): State<Toolshed>, params: RawPathParams, mut req: Request, next: Next) -> Response {
    let from_path = params.iter().find(|(k, _)| *k == "token").map(|(_, v)| v.to_owned());
    let Some(token) = from_path.or_else(|| bearer(req.headers())) else {
        let mut res =
            problem(StatusCode::UNAUTHORIZED, "Send an API token: Authorization: Bearer <token>, or use the base URL /registry/<token>.");
        res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(r#"Bearer realm="toolshed""#));
        return res;
    };
    match ts.tokens().authenticate_token(&token).await {
        Ok(Ok((user, token))) => {
            req.extensions_mut().insert(Caller { user, token });
            next.run(req).await
        }
        Ok(Err(_)) => problem(StatusCode::UNAUTHORIZED, "Invalid, expired or revoked API token."),
        Err(e) => {
            tracing::error!(error = %e, "token check failed");
            problem(StatusCode::SERVICE_UNAVAILABLE, "Toolshed could not check the token; try again.")
        }
    }
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers.get(header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ").map(|t| t.trim().to_owned())
}

impl Registry {
    fn name(&self, e: &RegistryEntry) -> String {
        format!("{}.{}/{}.{}", self.namespace, e.kind.plural(), e.department, e.name)
    }

    /// `{namespace}.{tools|bundles}/{department}.{name}` → the listing's kind, department and name.
    fn parse_name<'a>(&self, name: &'a str) -> Option<(ListingKind, &'a str, &'a str)> {
        let (space, local) = name.split_once('/')?;
        let kind = match space.strip_prefix(&self.namespace)?.strip_prefix('.')? {
            "tools" => ListingKind::Tool,
            "bundles" => ListingKind::Bundle,
            _ => return None,
        };
        let (department, listing) = local.split_once('.')?;
        Some((kind, department, listing))
    }

    fn endpoint(&self, e: &RegistryEntry, pinned: Option<i64>) -> String {
        let pin = pinned.map(|n| format!("@v{n}")).unwrap_or_default();
        format!("{}/mcp/{}/{}{pin}", self.base, e.kind.plural(), e.slug())
    }

    /// One version of a listing as a registry answers it: `server.json` and the registry's `_meta`.
    fn response(&self, e: &RegistryEntry, v: ServedVersion) -> Value {
        let latest = v.version == e.published_version;
        let url = self.endpoint(e, (!latest).then_some(v.version));
        json!({
            "server": {
                "$schema": SCHEMA,
                "name": self.name(e),
                "title": e.title.chars().take(100).collect::<String>(),
                "description": e.description,
                "version": format!("{}.0.0", v.version),
                "websiteUrl": format!("{}/{}/{}", self.base, e.kind.plural(), e.slug()),
                "remotes": [
                    {"type": "streamable-http", "url": url},
                    {"type": "sse", "url": format!("{url}/sse")},
                ],
            },
            "_meta": {
                OFFICIAL: {
                    "status": "active",
                    "statusChangedAt": rfc3339(v.published_at),
                    "publishedAt": rfc3339(v.published_at),
                    "updatedAt": rfc3339(e.updated_at.max(v.published_at)),
                    "isLatest": latest,
                }
            }
        })
    }

    /// The entry named `name` and its served versions, if the caller may see it.
    async fn entry(&self, caller: &Caller, name: &str) -> Result<(RegistryEntry, Vec<ServedVersion>), Response> {
        let not_found = || problem(StatusCode::NOT_FOUND, "Server not found");
        let (kind, department, listing) = self.parse_name(name).ok_or_else(not_found)?;
        match self.toolshed.market().registry_entry(&caller.user, kind, department, listing).await {
            Ok((e, _)) if !caller.token.allows(&e.slug()) => Err(not_found()),
            Ok(found) => Ok(found),
            Err(ToolError::NotFound) => Err(not_found()),
            Err(e) => {
                tracing::error!(error = %e, "registry lookup failed");
                Err(problem(StatusCode::SERVICE_UNAVAILABLE, "Toolshed could not read its listings; try again."))
            }
        }
    }
}

fn rfc3339(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

/// A route's parameters by name (under `/registry/{token}` there is one more).
#[derive(Deserialize)]
struct ServerPath {
    name: String,
    version: Option<String>,
}

#[derive(Deserialize)]
struct ListQuery {
    cursor: Option<String>,
    limit: Option<String>,
    search: Option<String>,
    version: Option<String>,
    updated_since: Option<String>,
}

/// `GET /v0.1/servers`: every listing the caller may see, by name, at its
/// latest version or (`version`) at that version, of those that served it;
/// `search` matches names and titles; `updated_since` (RFC 3339) keeps those
/// updated after it; `cursor` is the last name of the previous page.
async fn list(State(r): State<Registry>, axum::Extension(caller): axum::Extension<Caller>, Query(q): Query<ListQuery>) -> Response {
    let limit = match q.limit.as_deref().map(str::parse::<usize>) {
        None => DEFAULT_LIMIT,
        Some(Ok(n)) if (1..=MAX_LIMIT).contains(&n) => n,
        Some(_) => return problem(StatusCode::UNPROCESSABLE_ENTITY, "limit must be a number from 1 to 100"),
    };
    // An empty parameter is no filter, as the official registry reads it.
    let updated_since = match q.updated_since.as_deref().filter(|s| !s.is_empty()).map(unix_ms) {
        None => None,
        Some(Some(ms)) => Some(ms),
        Some(None) => {
            return problem(
                StatusCode::BAD_REQUEST,
                "Invalid updated_since format: expected an RFC 3339 timestamp (e.g. 2025-08-07T13:15:04.280Z)",
            )
        }
    };
    let version = match q.version.as_deref() {
        None | Some("" | "latest") => ListedVersion::Latest,
        Some(v) => match version_number(v) {
            Some(n) => ListedVersion::Exact(n),
            // Not a version any listing here has (they are all N.0.0).
            None => return Json(json!({"servers": [], "metadata": {"count": 0}})).into_response(),
        },
    };
    let entries = match r.toolshed.market().registry_entries(&caller.user, &RegistryFilter { version, updated_since }).await {
        Ok(entries) => entries,
        Err(e) => {
            tracing::error!(error = %e, "registry listing failed");
            return problem(StatusCode::SERVICE_UNAVAILABLE, "Toolshed could not read its listings; try again.");
        }
    };
    let search = q.search.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_lowercase);
    let mut named: Vec<(String, RegistryEntry, ServedVersion)> = entries
        .into_iter()
        .filter(|(e, _)| caller.token.allows(&e.slug()))
        .map(|(e, v)| (r.name(&e), e, v))
        .filter(|(name, e, _)| search.as_ref().is_none_or(|s| name.to_lowercase().contains(s) || e.title.to_lowercase().contains(s)))
        .filter(|(name, _, _)| q.cursor.as_ref().is_none_or(|c| name.as_str() > c.as_str()))
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let more = named.len() > limit;
    named.truncate(limit);
    let servers: Vec<Value> = named.iter().map(|(_, e, v)| r.response(e, *v)).collect();
    let mut metadata = json!({"count": servers.len()});
    if more {
        metadata["nextCursor"] = json!(named.last().map(|(name, _, _)| name.clone()));
    }
    Json(json!({"servers": servers, "metadata": metadata})).into_response()
}

/// An RFC 3339 timestamp as Unix milliseconds.
fn unix_ms(timestamp: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(timestamp, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// Version N of a listing: `N.0.0` (or `N`).
fn version_number(version: &str) -> Option<i64> {
    version.strip_suffix(".0.0").unwrap_or(version).parse::<i64>().ok()
}

/// `GET /v0.1/servers/{name}/versions`: every version that was served, newest first.
async fn versions(State(r): State<Registry>, axum::Extension(caller): axum::Extension<Caller>, Path(p): Path<ServerPath>) -> Response {
    match r.entry(&caller, &p.name).await {
        Ok((e, versions)) => {
            let servers: Vec<Value> = versions.iter().map(|v| r.response(&e, *v)).collect();
            Json(json!({"metadata": {"count": servers.len()}, "servers": servers})).into_response()
        }
        Err(res) => res,
    }
}

/// `GET /v0.1/servers/{name}/versions/{version}`: `N.0.0` (or `N`), or `latest`.
async fn version(State(r): State<Registry>, axum::Extension(caller): axum::Extension<Caller>, Path(p): Path<ServerPath>) -> Response {
    let (e, versions) = match r.entry(&caller, &p.name).await {
        Ok(found) => found,
        Err(res) => return res,
    };
    let wanted = match p.version.as_deref().unwrap_or_default() {
        "latest" => Some(e.published_version),
        v => version_number(v),
    };
    match versions.iter().find(|v| Some(v.version) == wanted) {
        Some(v) => Json(r.response(&e, *v)).into_response(),
        None => problem(StatusCode::NOT_FOUND, "Server not found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_becomes_a_reverse_dns_namespace() {
        assert_eq!(namespace("toolshed.example.com"), "com.example.toolshed");
        assert_eq!(namespace("localhost"), "localhost");
        assert_eq!(namespace("127.0.0.1"), "127.0.0.1");
    }
}
