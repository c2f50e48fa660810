//! The OAuth 2.0 exchanges with an upstream app: the authorization request
//! (code flow with PKCE S256), the code and refresh grants, revocation
//! (RFC 7009) and discovery of an issuer's endpoints (RFC 8414, then OpenID
//! Connect's document). Every request obeys [`crate::outbound`]: no internal
//! address unless the operator named it, no redirects followed.

use std::time::Duration;

use oauth2::basic::{BasicClient, BasicErrorResponseType};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken,
    RequestTokenError, Scope, StandardErrorResponse, TokenResponse, TokenUrl,
};
use reqwest::Url;
use serde::Deserialize;

use crate::outbound::{self, InternalHosts};

/// An app's endpoints and client, as the exchanges need them.
pub(super) struct Endpoints<'a> {
    pub authorize_url: &'a str,
    pub token_url: &'a str,
    pub revoke_url: Option<&'a str>,
    pub client_id: &'a str,
    pub client_secret: Option<String>,
}

/// Tokens as a grant returned them.
pub(super) struct Granted {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_at: Option<i64>,
    /// What the provider granted; `None` when it did not say (then: as asked).
    pub scopes: Option<Vec<String>>,
}

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum Upstream {
    /// The provider refused the grant (`invalid_grant`: a refresh token that
    /// expired or was revoked): the person has to connect again.
    #[error("the provider refused: {0}")]
    Refused(String),
    /// The provider could not be reached or answered nonsense: try later.
    #[error("the provider could not be reached: {0}")]
    Unreachable(String),
}

pub(super) fn http(internal: &InternalHosts) -> reqwest::Client {
    outbound::client_builder(internal).timeout(Duration::from_secs(10)).build().unwrap_or_default()
}

fn checked(internal: &InternalHosts, raw: &str) -> Result<Url, Upstream> {
    let url = Url::parse(raw).map_err(|e| Upstream::Unreachable(format!("{raw}: {e}")))?;
    outbound::check_url(internal, &url).map_err(Upstream::Unreachable)?;
    Ok(url)
}

type Client = oauth2::Client<
    oauth2::basic::BasicErrorResponse,
    oauth2::basic::BasicTokenResponse,
    oauth2::basic::BasicTokenIntrospectionResponse,
    oauth2::StandardRevocableToken,
    oauth2::basic::BasicRevocationErrorResponse,
    oauth2::EndpointSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
>;

fn client(internal: &InternalHosts, e: &Endpoints<'_>, redirect: &str) -> Result<Client, Upstream> {
    let auth = AuthUrl::from_url(checked(internal, e.authorize_url)?);
    let token = TokenUrl::from_url(checked(internal, e.token_url)?);
    let redirect = RedirectUrl::new(redirect.to_owned()).map_err(|err| Upstream::Unreachable(err.to_string()))?;
    let client = BasicClient::new(ClientId::new(e.client_id.to_owned())).set_auth_uri(auth).set_token_uri(token).set_redirect_uri(redirect);
    Ok(match &e.client_secret {
        Some(secret) => client.set_client_secret(ClientSecret::new(secret.clone())),
        None => client,
    })
}

/// Where to send the person, the `state` that must come back, and the PKCE
/// verifier the code is exchanged with.
pub(super) fn authorization(
    internal: &InternalHosts,
    e: &Endpoints<'_>,
    redirect: &str,
    scopes: &[String],
) -> Result<(Url, String, String), Upstream> {
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state) = client(internal, e, redirect)?
        .authorize_url(CsrfToken::new_random)
        .add_scopes(scopes.iter().map(|s| Scope::new(s.clone())))
        .set_pkce_challenge(challenge)
        .url();
    Ok((url, state.secret().clone(), verifier.secret().clone()))
}

fn granted(response: &oauth2::basic::BasicTokenResponse, now_ms: i64) -> Granted {
    Granted {
        access_token: response.access_token().secret().clone(),
        refresh_token: response.refresh_token().map(|t| t.secret().clone()),
        expires_at: response.expires_in().map(|d| now_ms + d.as_millis() as i64),
        scopes: response.scopes().map(|s| s.iter().map(|s| s.to_string()).collect()),
    }
}

type TokenError = RequestTokenError<oauth2::HttpClientError<reqwest::Error>, StandardErrorResponse<BasicErrorResponseType>>;

fn failure(error: TokenError) -> Upstream {
    match error {
        RequestTokenError::ServerResponse(r) => {
            let said = r.error_description().map(|d| format!("{}: {d}", r.error())).unwrap_or_else(|| r.error().to_string());
            // Only a grant the provider no longer honours needs the person;
            // a wrong client secret or a provider in trouble is not theirs to mend.
            match r.error() {
                BasicErrorResponseType::InvalidGrant => Upstream::Refused(said),
                _ => Upstream::Unreachable(said),
            }
        }
        RequestTokenError::Request(e) => Upstream::Unreachable(match &e {
            oauth2::HttpClientError::Reqwest(inner) => outbound::describe(inner),
            other => other.to_string(),
        }),
        other => Upstream::Unreachable(other.to_string()),
    }
}

pub(super) async fn exchange_code(
    internal: &InternalHosts,
    e: &Endpoints<'_>,
    redirect: &str,
    code: &str,
    verifier: &str,
    now_ms: i64,
) -> Result<Granted, Upstream> {
    let response = client(internal, e, redirect)?
        .exchange_code(AuthorizationCode::new(code.to_owned()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_owned()))
        .request_async(&http(internal))
        .await
        .map_err(failure)?;
    Ok(granted(&response, now_ms))
}

pub(super) async fn refresh(
    internal: &InternalHosts,
    e: &Endpoints<'_>,
    redirect: &str,
    refresh_token: &str,
    now_ms: i64,
) -> Result<Granted, Upstream> {
    let token = RefreshToken::new(refresh_token.to_owned());
    let response = client(internal, e, redirect)?.exchange_refresh_token(&token).request_async(&http(internal)).await.map_err(failure)?;
    Ok(granted(&response, now_ms))
}

/// Revokes `token` at the app's revocation endpoint. By hand rather than
/// through `oauth2`, which refuses a revocation endpoint on plain http (an
/// internal provider's, or a test's on loopback).
pub(super) async fn revoke(internal: &InternalHosts, e: &Endpoints<'_>, token: &str, hint: &str) -> Result<(), Upstream> {
    let Some(url) = e.revoke_url else { return Ok(()) };
    let url = checked(internal, url)?;
    let mut form = vec![("token", token), ("token_type_hint", hint)];
    let mut request = http(internal).post(url);
    request = match &e.client_secret {
        Some(secret) => request.basic_auth(e.client_id, Some(secret)),
        None => {
            form.push(("client_id", e.client_id));
            request
        }
    };
    let response = request.form(&form).send().await.map_err(|err| Upstream::Unreachable(outbound::describe(&err)))?;
    match response.status().as_u16() {
        // RFC 7009: 200 whether or not the token was valid.
        200 => Ok(()),
        status => Err(Upstream::Refused(format!("the revocation endpoint answered HTTP {status}"))),
    }
}

/// What discovery fills in.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Discovered {
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
}

/// The endpoints `issuer` publishes: its OAuth metadata (RFC 8414), else its
/// OpenID Connect configuration.
pub(super) async fn discover(internal: &InternalHosts, issuer: &str) -> Result<Discovered, Upstream> {
    let issuer = issuer.trim_end_matches('/');
    let http = http(internal);
    let mut last = String::new();
    for document in ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"] {
        let url = checked(internal, &format!("{issuer}{document}"))?;
        match http.get(url).send().await {
            Ok(r) if r.status().is_success() => {
                return r.json::<Discovered>().await.map_err(|e| Upstream::Unreachable(format!("{issuer}{document}: {e}")));
            }
            Ok(r) => last = format!("{issuer}{document} answered HTTP {}", r.status().as_u16()),
            Err(e) => last = outbound::describe(&e),
        }
    }
    Err(Upstream::Unreachable(last))
}
