//! OAuth for MCP clients, the person's side: the consent page's question and
//! the grants listed (and revoked) on the Account page. The protocol itself is
//! served by the server's `oauth` routes.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use crate::error::AppError;

/// The authorization request's parameters, as the consent page's URL carries
/// them; the page's form sends them back unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsentParams {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub state: Option<String>,
    pub scope: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    pub resource: Option<String>,
}

/// What the person is asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessRequest {
    pub client_name: String,
    /// The site whose metadata document names the client; `None` when the
    /// client registered itself.
    pub client_site: Option<String>,
    /// Where the answer goes (the redirect URI's host, or its scheme for an app).
    pub answer_to: String,
    /// That place as a CSP source (`https://host:port`, `cursor:`).
    pub answer_origin: String,
    /// `department/name` (`@vN` when pinned), or "your personal endpoint".
    pub listing: String,
    pub listing_title: String,
    /// The listing's page (the Account page for the personal endpoint).
    pub href: String,
    /// The client asked to run the tools, not only to list them.
    pub asks_to_call: bool,
    pub username: String,
}

#[cfg(feature = "ssr")]
fn domain_params(p: ConsentParams) -> toolshed_domain::oauth::AuthorizationParams {
    toolshed_domain::oauth::AuthorizationParams {
        response_type: p.response_type,
        client_id: p.client_id,
        redirect_uri: p.redirect_uri,
        state: p.state,
        scope: p.scope,
        code_challenge: p.code_challenge,
        code_challenge_method: p.code_challenge_method,
        resource: p.resource,
    }
}

/// The question for an authorization request, or why it cannot be asked.
#[server(endpoint = "oauth/consent")]
pub async fn consent_question(params: ConsentParams) -> Result<AccessRequest, AppError> {
    use toolshed_domain::oauth::AuthorizationFailure;
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let base = use_context::<crate::PublicUrl>().map(|p| p.0).unwrap_or_default();
    let req = match ts.oauth().authorization_request(&domain_params(params), &base).await {
        Ok(req) => req,
        Err(AuthorizationFailure::Untrusted(e) | AuthorizationFailure::Redirect { error: e, .. }) => {
            return Err(server::fail(AppError::Invalid(e.to_string())))
        }
    };
    let listing = ts.oauth().granted_listing(&user, &req.resource).await.map_err(server::fail)?;
    let answer_to = req.answers_to();
    let answer_origin = req.answer_origin();
    Ok(AccessRequest {
        answer_origin,
        client_name: req.client.name,
        client_site: req.client.site,
        answer_to,
        listing: req.resource.label(),
        listing_title: listing.as_ref().map_or_else(|| "Every tool you may use, through one endpoint".into(), |l| l.title.clone()),
        href: listing.map_or_else(|| "/account".into(), |l| format!("/{}/{}", l.kind.plural(), l.slug())),
        asks_to_call: req.scope.call,
        username: user.username,
    })
}

/// An MCP client the person allowed one listing's endpoint, or their own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantView {
    pub id: i64,
    pub client_name: String,
    /// `department/name`, or "your personal endpoint".
    pub listing: String,
    /// The listing's page (the Account page for the personal endpoint).
    pub href: String,
    pub may_call: bool,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
}

#[server(endpoint = "oauth/grants")]
pub async fn my_grants() -> Result<Vec<GrantView>, AppError> {
    let user = server::require_user().await?;
    let grants = server::toolshed()?.oauth().grants(&user).await.map_err(server::fail)?;
    Ok(grants
        .into_iter()
        .map(|g| GrantView {
            id: g.id,
            client_name: g.client_name,
            href: g.listing.as_ref().map_or_else(|| "/account".into(), |(kind, slug)| format!("/{}/{slug}", kind.plural())),
            listing: g.listing.map_or_else(|| "your personal endpoint".into(), |(_, slug)| slug),
            may_call: g.scope.call,
            created_at: g.created_at,
            last_used_at: g.last_used_at,
        })
        .collect())
}

#[server(endpoint = "oauth/grants/revoke")]
pub async fn revoke_grant(id: i64) -> Result<(), AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.oauth().revoke_grant(&user, id).await.map_err(server::fail)
}
