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

mod clients;
pub mod documents;
mod grants;
mod tokens;

pub(crate) use grants::revoke_all_grants;

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

#[cfg(test)]
mod tests {
    use super::clients::{check_redirect_uri, redirect_matches};
    use super::tokens::pkce_matches;
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
