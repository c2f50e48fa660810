//! Toolshed as an OAuth 2.1 authorization server for MCP clients (MCP
//! authorization, spec 2025-11-25): clients register themselves (RFC 7591) or
//! name themselves by the URL of a metadata document ([`documents`]), a
//! person allows one of them one listing's endpoint (the resource, RFC 8707)
//! with a scope, and the client trades the code (PKCE S256 only) for a
//! short-lived access token and a refresh token that turns over at each use.
//!
//! The HTTP side (metadata documents, form parsing, redirects) is the
//! server's; this module decides. A grant is what a person allowed: revoking it
//! (from the Account page, or by deactivating the person) ends every token
//! issued under it at the next request. Only SHA-256 digests of secrets are
//! stored.

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::accounts::{user_from_row, User, USER_COLUMNS};
use crate::ids::{ToolId, UserId};
use crate::store::Tx;
use crate::tokens::{hash, TokenRejected};
use crate::tools::Tools;
use crate::tools::{ListingKind, Tool, ToolError};
use crate::{audit, now_ms, StoreError};

handle! {
    /// The OAuth authorization server: clients, grants and tokens.
    OAuth
}

pub mod documents;

/// Access tokens start with this (API tokens with `tsk_`), so one is never taken for the other.
pub const ACCESS_PREFIX: &str = "tsa_";
const REFRESH_PREFIX: &str = "tsr_";
const CLIENT_PREFIX: &str = "tsc_";

/// Long enough for a session of work, short enough that a leaked one soon dies.
pub const ACCESS_LIFETIME_MS: i64 = 60 * 60 * 1000;
const REFRESH_LIFETIME_MS: i64 = 30 * 24 * 60 * 60 * 1000;
/// A code is traded at once by a client that is waiting for it.
const CODE_LIFETIME_MS: i64 = 5 * 60 * 1000;
/// Registered clients nobody ever authorized are forgotten after this.
const UNUSED_CLIENT_MS: i64 = 24 * 60 * 60 * 1000;

/// What a grant allows. Listing the tools is always part of it.
pub const SCOPE_READ: &str = "tools:read";
/// Running the listing's tools.
pub const SCOPE_CALL: &str = "tools:call";
pub const SCOPES: [&str; 2] = [SCOPE_READ, SCOPE_CALL];

/// An OAuth error (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 8707 §2): its code goes
/// to the client as `error`, the sentence as `error_description`.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    InvalidClient(String),
    #[error("{0}")]
    InvalidGrant(String),
    #[error("this server issues codes and refresh tokens only (grant_type authorization_code or refresh_token)")]
    UnsupportedGrantType,
    #[error("this server answers with codes only (response_type=code)")]
    UnsupportedResponseType,
    #[error("{0}")]
    InvalidScope(String),
    #[error("{0}")]
    InvalidTarget(String),
    #[error("{0}")]
    InvalidRedirectUri(String),
    #[error("{0}")]
    InvalidClientMetadata(String),
    #[error("the person declined")]
    AccessDenied,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for OAuthError {
    fn from(e: sqlx::Error) -> Self {
        OAuthError::Store(e.into())
    }
}

impl OAuthError {
    /// The `error` code a client reads.
    pub fn code(&self) -> &'static str {
        match self {
            OAuthError::InvalidRequest(_) => "invalid_request",
            OAuthError::InvalidClient(_) => "invalid_client",
            OAuthError::InvalidGrant(_) => "invalid_grant",
            OAuthError::UnsupportedGrantType => "unsupported_grant_type",
            OAuthError::UnsupportedResponseType => "unsupported_response_type",
            OAuthError::InvalidScope(_) => "invalid_scope",
            OAuthError::InvalidTarget(_) => "invalid_target",
            OAuthError::InvalidRedirectUri(_) => "invalid_redirect_uri",
            OAuthError::InvalidClientMetadata(_) => "invalid_client_metadata",
            OAuthError::AccessDenied => "access_denied",
            OAuthError::Store(_) => "server_error",
        }
    }

    /// The HTTP status of the answer from the token or registration endpoint.
    pub fn status(&self) -> u16 {
        match self {
            OAuthError::InvalidClient(_) => 401,
            OAuthError::Store(_) => 500,
            _ => 400,
        }
    }
}

/// Which listing's endpoint a token is for: `{base}/mcp/{tools|bundles}/{department}/{name}`,
/// or one version's (`…/{name}@v3`). The token works at the listing's endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resource {
    pub kind: ListingKind,
    pub department: String,
    pub name: String,
    #[serde(default)]
    pub version: Option<i64>,
}

impl Resource {
    /// Parses a resource indicator against this server's base URL (no trailing
    /// slash). A trailing slash or the legacy transport's `/sse` names the same endpoint.
    pub fn parse(resource: &str, base: &str) -> Result<Self, OAuthError> {
        let wrong = || {
            OAuthError::InvalidTarget(format!(
                "{resource} is not an MCP endpoint of this server ({base}/mcp/tools/…, {base}/mcp/bundles/… or {base}/mcp/me)"
            ))
        };
        if resource.contains(['?', '#']) {
            return Err(wrong());
        }
        let path = resource.strip_prefix(base).and_then(|p| p.strip_prefix("/mcp/")).ok_or_else(wrong)?;
        let path = path.trim_end_matches('/');
        let path = path.strip_suffix("/sse").unwrap_or(path);
        let mut parts = path.split('/');
        let (Some(kind), Some(department), Some(name), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(wrong());
        };
        let kind = match kind {
            "tools" => ListingKind::Tool,
            "bundles" => ListingKind::Bundle,
            _ => return Err(wrong()),
        };
        let (name, version) = crate::tools::endpoint_name(name).ok_or_else(wrong)?;
        if department.is_empty() || name.is_empty() {
            return Err(wrong());
        }
        Ok(Resource { kind, department: department.to_owned(), name: name.to_owned(), version })
    }

    /// The canonical URL tokens for this endpoint are bound to.
    pub fn url(&self, base: &str) -> String {
        let version = self.version.map(|n| format!("@v{n}")).unwrap_or_default();
        format!("{base}/mcp/{}/{}/{}{version}", self.kind.plural(), self.department, self.name)
    }

    pub fn slug(&self) -> String {
        format!("{}/{}", self.department, self.name)
    }
}

/// The MCP endpoint a token is for: one listing's, or the person's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Endpoint {
    Listing(Resource),
    /// `{base}/mcp/me`: everything the person may use, as they may use it.
    Me,
}

impl Endpoint {
    /// Parses a resource indicator as [`Resource::parse`] does, `{base}/mcp/me` included.
    pub fn parse(resource: &str, base: &str) -> Result<Self, OAuthError> {
        let me = format!("{base}/mcp/me");
        let path = resource.trim_end_matches('/');
        if path == me || path.strip_suffix("/sse") == Some(me.as_str()) {
            return Ok(Endpoint::Me);
        }
        Resource::parse(resource, base).map(Endpoint::Listing)
    }

    /// The canonical URL tokens for this endpoint are bound to.
    pub fn url(&self, base: &str) -> String {
        match self {
            Endpoint::Listing(r) => r.url(base),
            Endpoint::Me => format!("{base}/mcp/me"),
        }
    }

    /// What people call it: `demo/echo`, `demo/echo@v3`, or "your personal endpoint".
    pub fn label(&self) -> String {
        match self {
            Endpoint::Listing(r) => r.version.map_or_else(|| r.slug(), |n| format!("{}@v{n}", r.slug())),
            Endpoint::Me => "your personal endpoint".into(),
        }
    }
}

/// The scope of a grant: the tools may always be listed; running them is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    pub call: bool,
}

impl Scope {
    /// A space-separated scope; none asked for means everything this server offers.
    pub fn parse(raw: Option<&str>) -> Result<Self, OAuthError> {
        let raw = raw.unwrap_or_default();
        if raw.trim().is_empty() {
            return Ok(Scope { call: true });
        }
        let mut call = false;
        for s in raw.split_ascii_whitespace() {
            match s {
                SCOPE_READ => {}
                SCOPE_CALL => call = true,
                other => return Err(OAuthError::InvalidScope(format!("unknown scope {other:?}: this server offers {}", SCOPES.join(" ")))),
            }
        }
        Ok(Scope { call })
    }

    pub fn as_string(self) -> String {
        if self.call {
            format!("{SCOPE_READ} {SCOPE_CALL}")
        } else {
            SCOPE_READ.to_owned()
        }
    }

    /// Is `self` at most `other`? (A refresh may narrow a grant, never widen it.)
    fn within(self, other: Scope) -> bool {
        !self.call || other.call
    }
}

/// An MCP client this server knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Client {
    pub id: String,
    pub name: String,
    pub redirect_uris: Vec<String>,
    /// Has a secret it must present at the token endpoint.
    pub confidential: bool,
    /// The site whose metadata document names the client (its `client_id` is
    /// a URL there); `None` for a client that registered itself, whose name
    /// nobody vouches for.
    pub site: Option<String>,
}

/// A dynamic client registration request (RFC 7591 §2); fields this server
/// does not use are ignored.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClientMetadata {
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    pub client_name: Option<String>,
    pub token_endpoint_auth_method: Option<String>,
    pub grant_types: Option<Vec<String>>,
    pub response_types: Option<Vec<String>>,
    pub scope: Option<String>,
}

/// What a registration answers (RFC 7591 §3.2.1).
#[derive(Debug, Clone, Serialize)]
pub struct RegisteredClient {
    pub client_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub client_id_issued_at: i64,
    /// 0: the secret does not expire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret_expires_at: Option<i64>,
    pub client_name: String,
    pub redirect_uris: Vec<String>,
    pub token_endpoint_auth_method: String,
    pub grant_types: Vec<&'static str>,
    pub response_types: Vec<&'static str>,
    pub scope: String,
}

/// An authorization request (RFC 6749 §4.1.1 with PKCE and a resource), as the
/// client sent it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AuthorizationParams {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub state: Option<String>,
    pub scope: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    pub resource: Option<String>,
}

/// An authorization request this server will put to the person.
#[derive(Debug, Clone)]
pub struct AuthorizationRequest {
    pub client: Client,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub scope: Scope,
    pub code_challenge: String,
    pub resource: Endpoint,
}

impl AuthorizationRequest {
    /// Where the answer goes, for the person: the redirect URI's host, or the
    /// app's own scheme (`cursor:`).
    pub fn answers_to(&self) -> String {
        url::Url::parse(&self.redirect_uri)
            .ok()
            .map(|u| u.host_str().map_or_else(|| format!("{}:", u.scheme()), str::to_owned))
            .unwrap_or_default()
    }

    /// The origin the answer is sent to (`https://host:port`, or `cursor:`),
    /// as a CSP source: the consent form's redirect must be allowed to go there.
    pub fn answer_origin(&self) -> String {
        url::Url::parse(&self.redirect_uri)
            .map(|u| match u.scheme() {
                "http" | "https" => u.origin().ascii_serialization(),
                scheme => format!("{scheme}:"),
            })
            .unwrap_or_default()
    }
}

/// Why an authorization request cannot go ahead. Before the client and its
/// redirect URI are known good, nothing may be sent to that URI: the person is
/// told instead. After, the client is told through its redirect.
#[derive(Debug)]
pub enum AuthorizationFailure {
    /// Show this to the person; never redirect.
    Untrusted(OAuthError),
    /// Redirect to the client with the error.
    Redirect { redirect_uri: String, state: Option<String>, error: OAuthError },
}

/// What the token endpoint answers (RFC 6749 §5.1).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenResponse {
    pub access_token: String,
    pub token_type: String,
    pub expires_in: i64,
    pub refresh_token: String,
    pub scope: String,
}

/// How a client proved who it is at the token endpoint.
#[derive(Debug, Clone, Default)]
pub struct ClientCredentials {
    pub client_id: String,
    pub client_secret: Option<String>,
}

/// An OAuth grant as the Account page lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrantInfo {
    pub id: i64,
    pub client_name: String,
    /// The listing's kind and `department/name`; `None`: the personal endpoint.
    pub listing: Option<(ListingKind, String)>,
    pub scope: Scope,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
}

/// What an access token lets its bearer do: one listing (`None`: the
/// personal endpoint), with a scope.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessGrant {
    pub id: i64,
    pub listing_id: Option<ToolId>,
    pub scope: Scope,
    pub client_name: String,
}

fn random_token(prefix: &str) -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{prefix}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// PKCE S256 (RFC 7636 §4.6): BASE64URL(SHA-256(verifier)) equals the challenge.
fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let valid = (43..=128).contains(&verifier.len()) && verifier.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    valid && base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) == challenge
}

/// A redirect URI a client may register: https anywhere, http only to this
/// machine (native apps, RFC 8252 §7.3), or an app's own scheme (`cursor://…`);
/// never a scheme a browser would run or read locally.
fn check_redirect_uri(uri: &str) -> Result<(), OAuthError> {
    let bad = |why: &str| OAuthError::InvalidRedirectUri(format!("{uri:?} {why}"));
    if uri.len() > 2000 {
        return Err(bad("is too long"));
    }
    let parsed = url::Url::parse(uri).map_err(|_| bad("is not an absolute URL"))?;
    if parsed.fragment().is_some() {
        return Err(bad("has a fragment"));
    }
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if parsed.host_str().is_some_and(|h| matches!(h, "127.0.0.1" | "localhost" | "[::1]")) => Ok(()),
        "http" => Err(bad("uses http to another machine: use https")),
        "javascript" | "data" | "file" | "vbscript" | "about" | "blob" | "ftp" | "ws" | "wss" => {
            Err(bad("uses a scheme that cannot carry a code back"))
        }
        _ => Ok(()),
    }
}

/// Does the presented redirect URI match a registered one? Exactly, except
/// that a loopback URI may use any port (RFC 8252 §7.3).
fn redirect_matches(registered: &str, presented: &str) -> bool {
    if registered == presented {
        return true;
    }
    let (Ok(mut a), Ok(mut b)) = (url::Url::parse(registered), url::Url::parse(presented)) else { return false };
    let loopback = |u: &url::Url| u.scheme() == "http" && matches!(u.host_str(), Some("127.0.0.1" | "[::1]"));
    if !(loopback(&a) && loopback(&b)) {
        return false;
    }
    let _ = a.set_port(None);
    let _ = b.set_port(None);
    a == b
}

/// A client's name as the consent page shows it: trimmed, `fallback` when
/// empty, and nothing that could disguise it (control characters, bidirectional
/// overrides, invisible ones).
fn client_name(given: Option<&str>, fallback: &str) -> Result<String, OAuthError> {
    let name = given.map(str::trim).filter(|n| !n.is_empty()).unwrap_or(fallback);
    let disguising =
        |c: char| c.is_control() || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}');
    if name.chars().count() > 100 || name.chars().any(disguising) {
        return Err(OAuthError::InvalidClientMetadata("client_name must be at most 100 printable characters".into()));
    }
    Ok(name.to_owned())
}

impl OAuth<'_> {
    /// Registers a client (RFC 7591). Anyone may: a registration by itself
    /// grants nothing, and unused ones are forgotten after a day.
    pub async fn register_client(self, meta: ClientMetadata) -> Result<RegisteredClient, OAuthError> {
        let invalid = |m: &str| OAuthError::InvalidClientMetadata(m.to_owned());
        if meta.redirect_uris.is_empty() || meta.redirect_uris.len() > 10 {
            return Err(OAuthError::InvalidRedirectUri("give 1 to 10 redirect_uris".into()));
        }
        for uri in &meta.redirect_uris {
            check_redirect_uri(uri)?;
        }
        let method = meta.token_endpoint_auth_method.as_deref().unwrap_or("client_secret_basic");
        let confidential = match method {
            "none" => false,
            "client_secret_post" | "client_secret_basic" => true,
            other => {
                return Err(invalid(&format!(
                    "token_endpoint_auth_method {other:?} is not supported: use none, client_secret_post or client_secret_basic"
                )))
            }
        };
        if meta.grant_types.as_ref().is_some_and(|g| g.iter().any(|g| g != "authorization_code" && g != "refresh_token")) {
            return Err(invalid("grant_types may be authorization_code and refresh_token only"));
        }
        if meta.response_types.as_ref().is_some_and(|r| r.iter().any(|r| r != "code")) {
            return Err(invalid("response_types may be code only"));
        }
        let scope = Scope::parse(meta.scope.as_deref())?;
        let name = client_name(meta.client_name.as_deref(), "An MCP client")?;
        let id = random_token(CLIENT_PREFIX);
        let secret = confidential.then(|| random_token("tss_"));
        let now = now_ms();
        // Not a `Tx`: registration is open to anyone and unaudited, since a
        // client without a grant can do nothing (and unused ones are deleted here).
        let mut tx = self.core.db().begin().await?;
        sqlx::query(
            "DELETE FROM oauth_clients WHERE created_at < $1 AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = oauth_clients.id)",
        )
        .bind(now - UNUSED_CLIENT_MS)
        .execute(&mut *tx)
        .await?;
        sqlx::query("INSERT INTO oauth_clients (id, secret_hash, name, redirect_uris, created_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(&id)
            .bind(secret.as_deref().map(hash))
            .bind(&name)
            .bind(meta.redirect_uris.join("\n"))
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(RegisteredClient {
            client_id: id,
            client_secret_expires_at: secret.is_some().then_some(0),
            client_secret: secret,
            client_id_issued_at: now / 1000,
            client_name: name,
            redirect_uris: meta.redirect_uris,
            token_endpoint_auth_method: method.to_owned(),
            grant_types: vec!["authorization_code", "refresh_token"],
            response_types: vec!["code"],
            scope: scope.as_string(),
        })
    }

    /// A client as stored: registered, or its document as last fetched.
    async fn client(self, id: &str) -> Result<Option<(Client, Option<String>)>, OAuthError> {
        Ok(self.stored_client(id).await?.map(|(client, secret, _)| (client, secret)))
    }

    /// A stored client, its secret's hash and when its document must be fetched again.
    async fn stored_client(self, id: &str) -> Result<Option<(Client, Option<String>, Option<i64>)>, StoreError> {
        let row = sqlx::query("SELECT id, secret_hash, name, redirect_uris, document_expires_at FROM oauth_clients WHERE id = $1")
            .bind(id)
            .fetch_optional(self.core.db().pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let secret_hash: Option<String> = row.try_get("secret_hash")?;
        let uris: String = row.try_get("redirect_uris")?;
        let id: String = row.try_get("id")?;
        let client = Client {
            site: documents::is_document_url(&id).then(|| url::Url::parse(&id).ok()?.host_str().map(str::to_owned)).flatten(),
            id,
            name: row.try_get("name")?,
            redirect_uris: uris.lines().map(str::to_owned).collect(),
            confidential: secret_hash.is_some(),
        };
        Ok(Some((client, secret_hash, row.try_get("document_expires_at")?)))
    }

    /// Whether authorizing `client_id` would fetch its metadata document now
    /// (a URL not seen, or kept past its time): such requests are limited per
    /// address, since anyone can make this server fetch a URL that way.
    pub async fn would_fetch_client_document(self, client_id: &str) -> Result<bool, StoreError> {
        if documents::parse_client_url(client_id).is_err() {
            return Ok(false);
        }
        Ok(!matches!(self.stored_client(client_id).await?, Some((_, _, Some(expires)))if expires > now_ms()))
    }

    /// The client of an authorization request: a registered one, or the one a
    /// metadata document names (fetched when not kept, or kept past its time).
    async fn authorizing_client(self, id: &str) -> Result<Option<Client>, OAuthError> {
        if !documents::is_document_url(id) {
            return Ok(self.client(id).await?.map(|(c, _)| c));
        }
        let url = documents::parse_client_url(id)?;
        if let Some((client, _, Some(expires))) = self.stored_client(id).await? {
            if expires > now_ms() {
                return Ok(Some(client));
            }
        }
        static CLIENTS: std::sync::OnceLock<crate::outbound::Clients> = std::sync::OnceLock::new();
        let http = CLIENTS
            .get_or_init(Default::default)
            .get(&self.core.settings().internal_hosts, |b| b.connect_timeout(std::time::Duration::from_secs(5)))
            .map_err(OAuthError::InvalidClient)?;
        let (body, keep) = documents::fetch(&http, &url).await?;
        let doc = documents::read_document(&url, &body)?;
        let now = now_ms();
        sqlx::query(
            "INSERT INTO oauth_clients (id, secret_hash, name, redirect_uris, created_at, document_expires_at) \
             VALUES ($1, NULL, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET name = excluded.name, \
             redirect_uris = excluded.redirect_uris, document_expires_at = excluded.document_expires_at",
        )
        .bind(id)
        .bind(&doc.name)
        .bind(doc.redirect_uris.join("\n"))
        .bind(now)
        .bind(now + keep.as_millis() as i64)
        .execute(self.core.db().pool())
        .await?;
        tracing::info!(client = %id, name = %doc.name, "fetched an OAuth client's metadata document");
        Ok(Some(Client {
            id: id.to_owned(),
            name: doc.name,
            redirect_uris: doc.redirect_uris,
            confidential: false,
            site: url.host_str().map(str::to_owned),
        }))
    }

    /// Checks an authorization request before the person is asked. `base` is
    /// this server's base URL, which resources must be under.
    pub async fn authorization_request(self, p: &AuthorizationParams, base: &str) -> Result<AuthorizationRequest, AuthorizationFailure> {
        let untrusted = |m: &str| AuthorizationFailure::Untrusted(OAuthError::InvalidRequest(m.to_owned()));
        let client_id = p.client_id.as_deref().ok_or_else(|| untrusted("The request names no client (client_id)."))?;
        let client = match self.authorizing_client(client_id).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Err(AuthorizationFailure::Untrusted(OAuthError::InvalidClient(
                    "This application is not registered here (or its registration expired). Start again from the application.".into(),
                )))
            }
            Err(e) => return Err(AuthorizationFailure::Untrusted(e)),
        };
        let redirect_uri = match (&p.redirect_uri, client.redirect_uris.as_slice()) {
            (Some(uri), registered) if registered.iter().any(|r| redirect_matches(r, uri)) => uri.clone(),
            (None, [only]) => only.clone(),
            _ => return Err(untrusted("The application asked to be answered at an address it did not register.")),
        };
        let redirect = |error| AuthorizationFailure::Redirect { redirect_uri: redirect_uri.clone(), state: p.state.clone(), error };
        if p.response_type.as_deref() != Some("code") {
            return Err(redirect(OAuthError::UnsupportedResponseType));
        }
        let code_challenge = match (p.code_challenge.as_deref(), p.code_challenge_method.as_deref()) {
            (Some(c), Some("S256")) if c.len() == 43 && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') => {
                c.to_owned()
            }
            (Some(_), Some("S256")) => {
                return Err(redirect(OAuthError::InvalidRequest("code_challenge must be 43 characters of base64url".into())))
            }
            _ => {
                return Err(redirect(OAuthError::InvalidRequest(
                    "PKCE is required: send code_challenge with code_challenge_method=S256".into(),
                )))
            }
        };
        let scope = Scope::parse(p.scope.as_deref()).map_err(redirect)?;
        let Some(resource) = p.resource.as_deref() else {
            return Err(redirect(OAuthError::InvalidTarget("name the MCP endpoint the token is for (resource, RFC 8707)".into())));
        };
        let resource = Endpoint::parse(resource, base).map_err(redirect)?;
        Ok(AuthorizationRequest { client, redirect_uri, state: p.state.clone(), scope, code_challenge, resource })
    }

    /// The listing a request's endpoint serves, as `user` may see it
    /// (published; a pinned version must exist); `None` for the personal endpoint.
    pub async fn granted_listing(self, user: &User, endpoint: &Endpoint) -> Result<Option<Tool>, ToolError> {
        let Endpoint::Listing(r) = endpoint else { return Ok(None) };
        let listing = Tools::new(self.core).listing_by_slug(user, r.kind, &r.department, &r.name).await?;
        if listing.published_version.is_none() {
            return Err(ToolError::NotPublished);
        }
        Ok(Some(match r.version {
            Some(n) => Tools::new(self.core).pinned(user, listing, n).await?,
            None => listing,
        }))
    }

    /// The person allowed the request (with `scope`, at most what was asked):
    /// a grant and a one-use code for it. A listing must be one they may see.
    pub async fn approve(self, user: &User, req: &AuthorizationRequest, scope: Scope, base: &str) -> Result<String, ToolError> {
        let listing = self.granted_listing(user, &req.resource).await?;
        let scope = if scope.within(req.scope) { scope } else { req.scope };
        let code = random_token("tsx_");
        let now = now_ms();
        let mut tx = self.core.begin().await?;
        let row = sqlx::query(
            "INSERT INTO oauth_grants (user_id, client_id, listing_id, resource, scope, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(user.id.0)
        .bind(&req.client.id)
        .bind(listing.as_ref().map(|l| l.id.0))
        .bind(req.resource.url(base))
        .bind(scope.as_string())
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        let grant: i64 = row.try_get("id")?;
        sqlx::query("INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(hash(&code))
            .bind(grant)
            .bind(&req.redirect_uri)
            .bind(&req.code_challenge)
            .bind(now + CODE_LIFETIME_MS)
            .execute(&mut *tx)
            .await?;
        let granted = listing.map_or_else(|| req.resource.label(), |l| l.slug());
        let after =
            serde_json::json!({"client": req.client.name, "client_id": req.client.id, "listing": granted, "scope": scope.as_string()});
        audit::record(&mut tx, Some(user.id), "oauth.granted", &format!("oauth_grant:{grant}"), None, Some(after)).await?;
        tx.commit().await?;
        Ok(code)
    }

    /// Checks the client's credentials: a public client names itself, a
    /// confidential one also proves its secret.
    async fn authenticate_client(self, creds: &ClientCredentials) -> Result<Client, OAuthError> {
        let unknown = || OAuthError::InvalidClient("unknown client or wrong client secret".into());
        let (client, secret_hash) = self.client(&creds.client_id).await?.ok_or_else(unknown)?;
        match (secret_hash, &creds.client_secret) {
            (None, _) => Ok(client),
            // Digests are compared: their timing tells nothing about the secret.
            (Some(stored), Some(given)) if stored == hash(given) => Ok(client),
            _ => Err(unknown()),
        }
    }

    /// The token endpoint's `authorization_code` grant: the code once, from
    /// the client it was issued to, with the PKCE verifier. A code presented a
    /// second time revokes what was issued for it (it may have been stolen).
    pub async fn exchange_code(
        self,
        creds: &ClientCredentials,
        code: &str,
        redirect_uri: Option<&str>,
        verifier: &str,
        resource: Option<&str>,
    ) -> Result<TokenResponse, OAuthError> {
        let client = self.authenticate_client(creds).await?;
        let bad = |m: &str| OAuthError::InvalidGrant(m.to_owned());
        let now = now_ms();
        let mut tx = self.core.begin().await?;
        let row = sqlx::query(
            "SELECT c.grant_id, c.redirect_uri, c.code_challenge, c.expires_at, c.used_at, g.client_id, g.resource, g.scope, g.revoked_at \
             FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id WHERE c.code_hash = $1",
        )
        .bind(hash(code))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Err(bad("unknown code")) };
        let grant: i64 = row.try_get("grant_id")?;
        if row.try_get::<Option<i64>, _>("used_at")?.is_some() {
            revoke_replayed(&mut tx, grant, "a spent authorization code was presented again", now).await?;
            tx.commit().await?;
            return Err(bad("this code was already used; everything issued for it is revoked"));
        }
        if row.try_get::<String, _>("client_id")? != client.id {
            return Err(bad("this code was issued to another client"));
        }
        if row.try_get::<Option<i64>, _>("revoked_at")?.is_some() {
            return Err(bad("this authorization was revoked; authorize again"));
        }
        if row.try_get::<i64, _>("expires_at")? <= now {
            return Err(bad("this code has expired; authorize again"));
        }
        if redirect_uri.is_some_and(|r| r != row.try_get::<String, _>("redirect_uri").unwrap_or_default()) {
            return Err(bad("redirect_uri differs from the authorization request's"));
        }
        if !pkce_matches(verifier, &row.try_get::<String, _>("code_challenge")?) {
            return Err(bad("the PKCE code_verifier does not match the code_challenge"));
        }
        bound_to(resource, &row.try_get::<String, _>("resource")?)?;
        if !spend(&mut tx, "UPDATE oauth_codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL", code, now).await? {
            return Err(bad("this code was used by another request at the same moment"));
        }
        let scope = Scope::parse(Some(&row.try_get::<String, _>("scope")?))?;
        let tokens = issue_tokens(&mut tx, grant, scope, now).await?;
        tx.commit().await?;
        Ok(tokens)
    }

    /// The token endpoint's `refresh_token` grant: a new pair, the old refresh
    /// token spent. A spent one presented again revokes the grant (RFC 9700 §4.14).
    pub async fn refresh(
        self,
        creds: &ClientCredentials,
        refresh_token: &str,
        scope: Option<&str>,
        resource: Option<&str>,
    ) -> Result<TokenResponse, OAuthError> {
        let client = self.authenticate_client(creds).await?;
        let bad = |m: &str| OAuthError::InvalidGrant(m.to_owned());
        let now = now_ms();
        let mut tx = self.core.begin().await?;
        let row = sqlx::query(
            "SELECT t.grant_id, t.expires_at, t.used_at, g.client_id, g.resource, g.scope, g.revoked_at, u.is_active \
             FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id JOIN users u ON u.id = g.user_id \
             WHERE t.token_hash = $1 AND t.kind = 'refresh'",
        )
        .bind(hash(refresh_token))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Err(bad("unknown refresh token")) };
        let grant: i64 = row.try_get("grant_id")?;
        if row.try_get::<String, _>("client_id")? != client.id {
            return Err(bad("this refresh token was issued to another client"));
        }
        if row.try_get::<Option<i64>, _>("revoked_at")?.is_some() || row.try_get::<i64, _>("is_active")? == 0 {
            return Err(bad("this authorization was revoked; authorize again"));
        }
        if row.try_get::<Option<i64>, _>("used_at")?.is_some() {
            revoke_replayed(&mut tx, grant, "a spent refresh token was presented again", now).await?;
            tx.commit().await?;
            return Err(bad("this refresh token was already used; the authorization is revoked"));
        }
        if row.try_get::<i64, _>("expires_at")? <= now {
            return Err(bad("this refresh token has expired; authorize again"));
        }
        bound_to(resource, &row.try_get::<String, _>("resource")?)?;
        let granted = Scope::parse(Some(&row.try_get::<String, _>("scope")?))?;
        let scope = match scope {
            Some(s) => Scope::parse(Some(s))?,
            None => granted,
        };
        if !scope.within(granted) {
            return Err(OAuthError::InvalidScope(format!("this authorization covers {} only", granted.as_string())));
        }
        if !spend(&mut tx, "UPDATE oauth_tokens SET used_at = $1 WHERE token_hash = $2 AND used_at IS NULL", refresh_token, now).await? {
            return Err(bad("this refresh token was used by another request at the same moment"));
        }
        let tokens = issue_tokens(&mut tx, grant, scope, now).await?;
        tx.commit().await?;
        Ok(tokens)
    }

    /// Token revocation (RFC 7009) by the client: the grant behind the token
    /// ends. An unknown token is not an error.
    pub async fn revoke_oauth_token(self, creds: &ClientCredentials, token: &str) -> Result<(), OAuthError> {
        let client = self.authenticate_client(creds).await?;
        let mut tx = self.core.begin().await?;
        let row = sqlx::query(
            "SELECT t.grant_id, g.client_id FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = $1",
        )
        .bind(hash(token))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row.filter(|row| row.try_get::<String, _>("client_id").is_ok_and(|id| id == client.id)) else {
            return Ok(());
        };
        let grant: i64 = row.try_get("grant_id")?;
        revoke_grant_in(&mut tx, grant, now_ms()).await?;
        let detail = serde_json::json!({"by": "the client", "client_id": client.id});
        audit::record(&mut tx, None, "oauth.revoked", &format!("oauth_grant:{grant}"), None, Some(detail)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The person and grant behind an access token, checked on every request
    /// so that revocation and deactivation take effect at once. Whether the
    /// grant covers the endpoint asked for is the caller's to check.
    pub async fn authenticate_access_token(self, token: &str) -> Result<Result<(User, AccessGrant), TokenRejected>, StoreError> {
        if !token.starts_with(ACCESS_PREFIX) || token.len() > 200 {
            return Ok(Err(TokenRejected::Unknown));
        }
        let sql = format!(
            "SELECT t.expires_at AS token_expires_at, g.id AS grant_id, g.listing_id, g.scope AS grant_scope, g.revoked_at AS grant_revoked_at, \
             g.last_used_at AS grant_used_at, c.name AS client_name, {USER_COLUMNS} \
             FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id JOIN oauth_clients c ON c.id = g.client_id \
             JOIN users u ON u.id = g.user_id JOIN departments d ON d.id = u.department_id \
             WHERE t.token_hash = $1 AND t.kind = 'access'"
        );
        let Some(row) = sqlx::query(&sql).bind(hash(token)).fetch_optional(self.core.db().pool()).await? else {
            return Ok(Err(TokenRejected::Unknown));
        };
        let now = now_ms();
        if row.try_get::<Option<i64>, _>("grant_revoked_at")?.is_some() {
            return Ok(Err(TokenRejected::Revoked));
        }
        if row.try_get::<i64, _>("token_expires_at")? <= now {
            return Ok(Err(TokenRejected::Expired));
        }
        let user = user_from_row(&row)?;
        if !user.is_active {
            return Ok(Err(TokenRejected::UserInactive));
        }
        let grant = AccessGrant {
            id: row.try_get("grant_id")?,
            listing_id: row.try_get::<Option<i64>, _>("listing_id")?.map(ToolId),
            scope: Scope::parse(Some(&row.try_get::<String, _>("grant_scope")?)).unwrap_or(Scope { call: false }),
            client_name: row.try_get("client_name")?,
        };
        // Last use is for people, to the minute: no write on every call.
        if row.try_get::<Option<i64>, _>("grant_used_at")?.is_none_or(|t| now - t > 60_000) {
            sqlx::query("UPDATE oauth_grants SET last_used_at = $1 WHERE id = $2")
                .bind(now)
                .bind(grant.id)
                .execute(self.core.db().pool())
                .await?;
        }
        Ok(Ok((user, grant)))
    }

    /// The person's grants in force, newest first.
    pub async fn grants(self, user: &User) -> Result<Vec<GrantInfo>, StoreError> {
        let rows = sqlx::query(
            "SELECT g.id, c.name AS client_name, d.name AS department, t.name AS listing, t.kind, g.scope, g.created_at, g.last_used_at \
             FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id LEFT JOIN tools t ON t.id = g.listing_id \
             LEFT JOIN departments d ON d.id = t.department_id WHERE g.user_id = $1 AND g.revoked_at IS NULL ORDER BY g.created_at DESC, g.id DESC",
        )
        .bind(user.id.0)
        .fetch_all(self.core.db().pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(GrantInfo {
                    id: r.try_get("id")?,
                    client_name: r.try_get("client_name")?,
                    listing: match (r.try_get::<Option<String>, _>("department")?, r.try_get::<Option<String>, _>("listing")?) {
                        (Some(department), Some(name)) => {
                            let kind = ListingKind::parse(&r.try_get::<String, _>("kind")?).unwrap_or(ListingKind::Tool);
                            Some((kind, format!("{department}/{name}")))
                        }
                        _ => None,
                    },
                    scope: Scope::parse(Some(&r.try_get::<String, _>("scope")?)).unwrap_or(Scope { call: false }),
                    created_at: r.try_get("created_at")?,
                    last_used_at: r.try_get("last_used_at")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Revokes one of the person's own grants (another person's id matches nothing).
    pub async fn revoke_grant(self, user: &User, grant: i64) -> Result<(), StoreError> {
        let mut tx = self.core.begin().await?;
        let owned = sqlx::query("SELECT id FROM oauth_grants WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL")
            .bind(grant)
            .bind(user.id.0)
            .fetch_optional(&mut *tx)
            .await?;
        if owned.is_none() {
            return Ok(());
        }
        revoke_grant_in(&mut tx, grant, now_ms()).await?;
        audit::record(&mut tx, Some(user.id), "oauth.revoked", &format!("oauth_grant:{grant}"), None, None).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Ends every grant of a person (deactivation), in the caller's transaction.
pub(crate) async fn revoke_all_grants(tx: &mut Tx, user: UserId) -> Result<(), StoreError> {
    sqlx::query("UPDATE oauth_grants SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL")
        .bind(now_ms())
        .bind(user.0)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Marks a one-use secret spent, unless another request spent it first (two
/// requests may both have read it unspent: only one wins the write).
async fn spend(tx: &mut Tx, sql: &str, secret: &str, now: i64) -> Result<bool, StoreError> {
    Ok(sqlx::query(sql).bind(now).bind(hash(secret)).execute(&mut **tx).await?.rows_affected() == 1)
}

/// A `resource` named at the token endpoint must be the one granted (RFC 8707).
fn bound_to(resource: Option<&str>, granted: &str) -> Result<(), OAuthError> {
    match resource {
        Some(r) if r.trim_end_matches('/') != granted => Err(OAuthError::InvalidTarget(format!("this authorization is for {granted}"))),
        _ => Ok(()),
    }
}

async fn revoke_grant_in(tx: &mut Tx, grant: i64, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE oauth_grants SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
        .bind(now)
        .bind(grant)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Ends `grant` because one of its one-use secrets came back (RFC 9700 §4.14):
/// someone else may hold it.
async fn revoke_replayed(tx: &mut Tx, grant: i64, why: &str, now: i64) -> Result<(), StoreError> {
    revoke_grant_in(tx, grant, now).await?;
    audit::record(tx, None, "oauth.revoked", &format!("oauth_grant:{grant}"), None, Some(serde_json::json!({"reason": why}))).await
}

/// A new access and refresh token for `grant`, audited: who holds a grant's
/// tokens, and since when, is for the audit log to answer.
async fn issue_tokens(tx: &mut Tx, grant: i64, scope: Scope, now: i64) -> Result<TokenResponse, StoreError> {
    let access = random_token(ACCESS_PREFIX);
    let refresh = random_token(REFRESH_PREFIX);
    // Expired tokens of this grant go as new ones come.
    sqlx::query("DELETE FROM oauth_tokens WHERE grant_id = $1 AND expires_at < $2").bind(grant).bind(now).execute(&mut **tx).await?;
    for (token, kind, lifetime) in [(&access, "access", ACCESS_LIFETIME_MS), (&refresh, "refresh", REFRESH_LIFETIME_MS)] {
        sqlx::query("INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires_at) VALUES ($1, $2, $3, $4)")
            .bind(hash(token))
            .bind(grant)
            .bind(kind)
            .bind(now + lifetime)
            .execute(&mut **tx)
            .await?;
    }
    audit::record(
        tx,
        None,
        "oauth.tokens_issued",
        &format!("oauth_grant:{grant}"),
        None,
        Some(serde_json::json!({"scope": scope.as_string()})),
    )
    .await?;
    Ok(TokenResponse {
        access_token: access,
        token_type: "Bearer".into(),
        expires_in: ACCESS_LIFETIME_MS / 1000,
        refresh_token: refresh,
        scope: scope.as_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "https://toolshed.example.com";

    #[test]
    fn a_resource_is_one_listings_endpoint_under_this_server() {
        let r = Resource::parse("https://toolshed.example.com/mcp/tools/demo/echo", BASE).unwrap();
        assert_eq!((r.kind, r.slug().as_str()), (ListingKind::Tool, "demo/echo"));
        assert_eq!(
            Resource::parse("https://toolshed.example.com/mcp/bundles/demo/kit/sse", BASE).unwrap().url(BASE),
            "https://toolshed.example.com/mcp/bundles/demo/kit"
        );
        assert_eq!(Resource::parse("https://toolshed.example.com/mcp/tools/demo/echo/", BASE).unwrap().slug(), "demo/echo");
        // One version's endpoint is the listing's, pinned.
        let pinned = Resource::parse("https://toolshed.example.com/mcp/tools/demo/echo@v3", BASE).unwrap();
        assert_eq!((pinned.slug().as_str(), pinned.version), ("demo/echo", Some(3)));
        assert_eq!(pinned.url(BASE), "https://toolshed.example.com/mcp/tools/demo/echo@v3");
        for wrong in [
            "https://toolshed.example.com/mcp/tools/demo/echo@latest",
            "https://evil.example.com/mcp/tools/demo/echo",
            "https://toolshed.example.com.evil.com/mcp/tools/demo/echo",
            "https://toolshed.example.com/mcp/tools/demo",
            "https://toolshed.example.com/mcp/servers/demo/echo",
            "https://toolshed.example.com/mcp/tools/demo/echo/api.d.ts",
            "https://toolshed.example.com/mcp/tools/demo/echo?x=1",
            "https://toolshed.example.com/api/v1/tools",
        ] {
            assert!(matches!(Resource::parse(wrong, BASE), Err(OAuthError::InvalidTarget(_))), "{wrong}");
        }
    }

    #[test]
    fn the_personal_endpoint_is_a_resource_of_its_own() {
        for me in ["https://toolshed.example.com/mcp/me", "https://toolshed.example.com/mcp/me/", "https://toolshed.example.com/mcp/me/sse"]
        {
            assert_eq!(Endpoint::parse(me, BASE).unwrap(), Endpoint::Me, "{me}");
        }
        assert_eq!(Endpoint::Me.url(BASE), "https://toolshed.example.com/mcp/me");
        let echo = Endpoint::parse("https://toolshed.example.com/mcp/tools/demo/echo@v2", BASE).unwrap();
        assert_eq!(echo.label(), "demo/echo@v2");
        for wrong in ["https://toolshed.example.com/mcp/me/x", "https://toolshed.example.com/mcp/mee", "https://evil.example.com/mcp/me"] {
            assert!(matches!(Endpoint::parse(wrong, BASE), Err(OAuthError::InvalidTarget(_))), "{wrong}");
        }
    }

    #[test]
    fn pkce_accepts_only_the_verifier_of_the_challenge() {
        // RFC 7636 appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(pkce_matches(verifier, challenge));
        assert!(!pkce_matches("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK", challenge));
        assert!(!pkce_matches("short", challenge));
    }

    #[test]
    fn redirect_uris_are_https_loopback_http_or_an_apps_own_scheme() {
        for ok in [
            "https://vscode.dev/redirect",
            "http://127.0.0.1:33418/",
            "http://localhost:6274/oauth/callback",
            "cursor://anysphere.cursor-retrieval/oauth/callback",
        ] {
            assert!(check_redirect_uri(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://evil.example.com/cb",
            "javascript:alert(1)",
            "data:text/html,x",
            "file:///etc/passwd",
            "https://a.example/cb#frag",
            "not a url",
        ] {
            assert!(check_redirect_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_loopback_redirect_may_change_its_port_and_nothing_else_may() {
        assert!(redirect_matches("http://127.0.0.1/cb", "http://127.0.0.1:50123/cb"));
        assert!(!redirect_matches("http://127.0.0.1/cb", "http://127.0.0.1:50123/other"));
        assert!(!redirect_matches("https://app.example/cb", "https://app.example/cb2"));
        assert!(!redirect_matches("http://localhost:1/cb", "http://evil.example:1/cb"));
    }

    #[test]
    fn scopes_default_to_everything_and_refuse_the_unknown() {
        assert_eq!(Scope::parse(None).unwrap(), Scope { call: true });
        assert_eq!(Scope::parse(Some("tools:read")).unwrap(), Scope { call: false });
        assert_eq!(Scope::parse(Some("tools:read tools:call")).unwrap().as_string(), "tools:read tools:call");
        assert!(matches!(Scope::parse(Some("admin")), Err(OAuthError::InvalidScope(_))));
        assert!(Scope { call: false }.within(Scope { call: true }));
        assert!(!Scope { call: true }.within(Scope { call: false }));
    }
}
