//! Single sign-on with the company's OpenID Connect provider.
//!
//! `GET /auth/sso` starts the authorization code flow with PKCE (S256): the
//! verifier, `state` and `nonce` wait in the browser's session (SameSite=Lax,
//! so the provider's redirect back carries it) and are used once. The
//! callback exchanges the code, has `openidconnect` check the ID token
//! (signature, issuer, audience, expiry, nonce), reads the user info, and
//! hands the identity to the domain (`Sso::sso_sign_in`), which decides
//! who that is here. Failures end on the sign-in page with one sentence.
//!
//! The provider's metadata and keys are fetched per sign-in: sign-ins are
//! rare, and keys the provider rotates are never stale.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use base64::Engine;
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreGenderClaim, CoreProviderMetadata};
use openidconnect::{
    AccessTokenHash, AdditionalClaims, AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, TokenResponse, UserInfoClaims,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use toolshed_domain::sso::Identity;
use toolshed_domain::Toolshed;
use tower_sessions::Session;
use tracing::Instrument;

use crate::config::Config;

pub const START: &str = "/auth/sso";
pub const CALLBACK: &str = "/auth/sso/callback";
const FLOW_KEY: &str = "sso.flow";
/// A sign-in left at the provider's page longer than this starts over.
const FLOW_LIFETIME_MS: i64 = 15 * 60 * 1000;

/// The provider as configured.
pub struct Provider {
    issuer: IssuerUrl,
    client_id: ClientId,
    client_secret: Option<ClientSecret>,
    redirect: RedirectUrl,
    scopes: Vec<Scope>,
    groups_claim: String,
    /// Never follows redirects (the library's advice against SSRF by the provider).
    http: reqwest::Client,
}

impl Provider {
    /// The provider `config` names, if any.
    pub fn from_config(config: &Config) -> anyhow::Result<Option<Self>> {
        let Some(issuer) = &config.oidc_issuer else { return Ok(None) };
        let redirect = config.base_url().join(CALLBACK)?;
        let secret = config.oidc_client_secret.trim();
        Ok(Some(Self {
            issuer: IssuerUrl::new(issuer.as_str().trim_end_matches('/').to_owned())?,
            client_id: ClientId::new(config.oidc_client_id.trim().to_owned()),
            client_secret: (!secret.is_empty()).then(|| ClientSecret::new(secret.to_owned())),
            redirect: RedirectUrl::from_url(redirect),
            scopes: config.oidc_scopes.split_whitespace().filter(|s| *s != "openid").map(|s| Scope::new(s.to_owned())).collect(),
            groups_claim: config.oidc_groups_claim.trim().to_owned(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(std::time::Duration::from_secs(10))
                .build()?,
        }))
    }

    async fn client(&self) -> Result<Client, Failure> {
        let metadata = CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http).await.map_err(|e| {
            tracing::error!(issuer = %self.issuer.as_str(), error = %e, "identity provider discovery failed");
            Failure::Unreachable
        })?;
        Ok(CoreClient::from_provider_metadata(metadata, self.client_id.clone(), self.client_secret.clone())
            .set_redirect_uri(self.redirect.clone()))
    }
}

type Client = CoreClient<
    openidconnect::EndpointSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointMaybeSet,
    openidconnect::EndpointMaybeSet,
>;

/// The routes, when a provider is configured.
pub fn routes<S: Clone + Send + Sync + 'static>(provider: Option<Provider>, toolshed: Toolshed) -> Router<S> {
    match provider {
        Some(provider) => {
            Router::new().route(START, get(start)).route(CALLBACK, get(callback)).with_state(Sso { provider: Arc::new(provider), toolshed })
        }
        None => Router::new(),
    }
}

#[derive(Clone)]
struct Sso {
    provider: Arc<Provider>,
    toolshed: Toolshed,
}

/// What waits in the session between the redirect and the callback.
#[derive(Serialize, Deserialize)]
struct Flow {
    state: String,
    nonce: String,
    verifier: String,
    next: String,
    started_ms: i64,
}

/// Why a sign-in through the provider ended; said on the sign-in page.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("The identity provider cannot be reached right now. Try again in a moment.")]
    Unreachable,
    #[error("This sign-in was started too long ago or in another window. Start again.")]
    StaleFlow,
    #[error("The identity provider did not sign you in: {0}")]
    Refused(String),
    #[error("The identity provider's answer could not be verified. Try again; if it keeps failing, tell an administrator.")]
    Unverified,
    #[error("{0}")]
    Account(#[from] toolshed_domain::AccountError),
    #[error("Your session could not be stored. Try again.")]
    Session,
}

#[derive(Deserialize)]
struct StartQuery {
    next: Option<String>,
}

async fn start(State(sso): State<Sso>, session: Session, Query(q): Query<StartQuery>) -> Response {
    match begin(&sso.provider, &session, q.next).await {
        Ok(url) => Redirect::to(url.as_str()).into_response(),
        Err(failure) => to_sign_in(&session, failure).await,
    }
}

async fn begin(provider: &Provider, session: &Session, next: Option<String>) -> Result<url::Url, Failure> {
    let client = provider.client().await?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state, nonce) = client
        .authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random)
        .add_scopes(provider.scopes.iter().cloned())
        .set_pkce_challenge(challenge)
        .url();
    let flow = Flow {
        state: state.into_secret(),
        nonce: nonce.secret().clone(),
        verifier: verifier.into_secret(),
        // The callback is on this site: its origin is the one `next` must stay on.
        next: app::safe_next(next.as_deref(), provider.redirect.url()),
        started_ms: toolshed_domain::now_ms(),
    };
    session.insert(FLOW_KEY, flow).await.map_err(|_| Failure::Session)?;
    Ok(url)
}

#[derive(Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

async fn callback(State(sso): State<Sso>, session: Session, Query(q): Query<CallbackQuery>) -> Response {
    match finish(&sso.provider, &sso.toolshed, &session, q).instrument(tracing::info_span!("sso_callback")).await {
        Ok(next) => Redirect::to(&next).into_response(),
        Err(failure) => {
            tracing::warn!(reason = %failure, "single sign-on failed");
            to_sign_in(&session, failure).await
        }
    }
}

async fn finish(provider: &Provider, toolshed: &Toolshed, session: &Session, q: CallbackQuery) -> Result<String, Failure> {
    // Used once, whatever happens next.
    let flow: Flow = session.remove(FLOW_KEY).await.map_err(|_| Failure::Session)?.ok_or(Failure::StaleFlow)?;
    if toolshed_domain::now_ms() - flow.started_ms > FLOW_LIFETIME_MS {
        return Err(Failure::StaleFlow);
    }
    if let Some(error) = q.error {
        let said = q.error_description.unwrap_or(error);
        return Err(Failure::Refused(said.chars().filter(|c| !c.is_control()).take(200).collect()));
    }
    let (Some(code), Some(state)) = (q.code, q.state) else { return Err(Failure::StaleFlow) };
    if state != flow.state {
        return Err(Failure::StaleFlow);
    }
    let client = provider.client().await?;
    let tokens = client
        .exchange_code(AuthorizationCode::new(code))
        .map_err(|e| unverified("token endpoint", e))?
        .set_pkce_verifier(PkceCodeVerifier::new(flow.verifier))
        .request_async(&provider.http)
        .await
        .map_err(|e| unverified("code exchange", e))?;
    let id_token = tokens.id_token().ok_or_else(|| unverified("answer", "no ID token"))?;
    let verifier = client.id_token_verifier();
    let claims = id_token.claims(&verifier, &Nonce::new(flow.nonce)).map_err(|e| unverified("ID token", e))?;
    // When the ID token commits to the access token, the two must match.
    if let Some(expected) = claims.access_token_hash() {
        let signing = id_token.signing_alg().map_err(|e| unverified("ID token", e))?;
        let key = id_token.signing_key(&verifier).map_err(|e| unverified("ID token", e))?;
        let actual = AccessTokenHash::from_token(tokens.access_token(), signing, key).map_err(|e| unverified("at_hash", e))?;
        if actual != *expected {
            return Err(unverified("at_hash", "does not match the access token"));
        }
    }
    // The ID token's own claims (checked above) with the user info's over them:
    // some providers put groups and names only in the one or the other.
    let mut all = token_payload(&id_token.to_string()).ok_or_else(|| unverified("ID token", "unreadable payload"))?;
    if let Ok(request) = client.user_info(tokens.access_token().clone(), Some(claims.subject().clone())) {
        let info: UserInfoClaims<Other, CoreGenderClaim> =
            request.request_async(&provider.http).await.map_err(|e| unverified("user info", e))?;
        if let Ok(Value::Object(more)) = serde_json::to_value(&info) {
            all.extend(more);
        }
    }
    let text = |name: &str| all.get(name).and_then(Value::as_str).map(str::to_owned).filter(|s| !s.trim().is_empty());
    let identity = Identity {
        issuer: claims.issuer().to_string(),
        subject: claims.subject().to_string(),
        preferred_username: text("preferred_username"),
        email: text("email"),
        name: text("name"),
        groups: groups(all.get(&provider.groups_claim)),
    };
    let user = toolshed.sso().sso_sign_in(&identity).await?;
    toolshed.sessions().start_session(session, &user).await.map_err(|_| Failure::Session)?;
    tracing::info!(user = %user.username, department = %user.department.name, "signed in through the identity provider");
    Ok(flow.next)
}

fn unverified(what: &str, e: impl std::fmt::Display) -> Failure {
    tracing::error!(error = %e, "identity provider: {what} failed");
    Failure::Unverified
}

/// The remembered failure, then the sign-in page that says it.
async fn to_sign_in(session: &Session, failure: Failure) -> Response {
    if session.insert(toolshed_domain::sso::FAILURE_KEY, failure.to_string()).await.is_err() {
        tracing::warn!("could not keep the sign-in failure for the sign-in page");
    }
    Redirect::to("/login?sso=failed").into_response()
}

/// Every claim of a JWT's payload. Only read after the token was verified.
fn token_payload(jwt: &str) -> Option<Map<String, Value>> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// A groups claim: a list of strings, or one string (some providers).
fn groups(claim: Option<&Value>) -> Vec<String> {
    match claim {
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    }
}

/// Every claim beyond the standard ones (the groups claim among them).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Other {
    #[serde(flatten)]
    claims: Map<String, Value>,
}

impl AdditionalClaims for Other {}
