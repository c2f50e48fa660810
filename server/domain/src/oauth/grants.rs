//! Grants: what a person allowed a client (one endpoint, a scope), the
//! one-use code that carries it back, and revoking it.

use super::clients::redirect_matches;
use super::*;

impl OAuth<'_> {
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

pub(super) async fn revoke_grant_in(tx: &mut Tx, grant: i64, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE oauth_grants SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
        .bind(now)
        .bind(grant)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Ends `grant` because one of its one-use secrets came back (RFC 9700 §4.14):
/// someone else may hold it.
pub(super) async fn revoke_replayed(tx: &mut Tx, grant: i64, why: &str, now: i64) -> Result<(), StoreError> {
    revoke_grant_in(tx, grant, now).await?;
    audit::record(tx, None, "oauth.revoked", &format!("oauth_grant:{grant}"), None, Some(serde_json::json!({"reason": why}))).await
}
