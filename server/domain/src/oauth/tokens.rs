//! Tokens: the token endpoint's two grants, which spend a one-use secret
//! (a code, a refresh token) for a new access and refresh token; revocation
//! by the client; and the access token checked on every request.

use super::grants::{revoke_grant_in, revoke_replayed};
use super::*;

/// PKCE S256 (RFC 7636 §4.6): BASE64URL(SHA-256(verifier)) equals the challenge.
pub(super) fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let valid = (43..=128).contains(&verifier.len()) && verifier.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    valid && base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) == challenge
}

impl OAuth<'_> {
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
        let tx = self.core.begin().await?;
        let (mut tx, spent) = redeem(tx, OneUse::Code, code, &client, resource, |row| {
            if redirect_uri.is_some_and(|r| r != row.try_get::<String, _>("redirect_uri").unwrap_or_default()) {
                return Err(OAuthError::InvalidGrant("redirect_uri differs from the authorization request's".into()));
            }
            if !pkce_matches(verifier, &row.try_get::<String, _>("code_challenge")?) {
                return Err(OAuthError::InvalidGrant("the PKCE code_verifier does not match the code_challenge".into()));
            }
            Ok(())
        })
        .await?;
        let tokens = issue_tokens(&mut tx, spent.grant, spent.scope, spent.now).await?;
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
        let asked = scope.map(|s| Scope::parse(Some(s))).transpose()?;
        let tx = self.core.begin().await?;
        let (mut tx, spent) = redeem(tx, OneUse::RefreshToken, refresh_token, &client, resource, |row| {
            let granted = Scope::parse(Some(&row.try_get::<String, _>("scope")?))?;
            match asked {
                Some(asked) if !asked.within(granted) => {
                    Err(OAuthError::InvalidScope(format!("this authorization covers {} only", granted.as_string())))
                }
                _ => Ok(()),
            }
        })
        .await?;
        let tokens = issue_tokens(&mut tx, spent.grant, asked.unwrap_or(spent.scope), spent.now).await?;
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
}

/// The one-use secrets the token endpoint takes.
#[derive(Clone, Copy)]
enum OneUse {
    Code,
    RefreshToken,
}

impl OneUse {
    fn name(self) -> &'static str {
        match self {
            OneUse::Code => "code",
            OneUse::RefreshToken => "refresh token",
        }
    }

    /// The secret's row with its grant's: `grant_id`, `expires_at`, `used_at`,
    /// `client_id`, `resource`, `scope`, `revoked_at`, `is_active` (the person's).
    fn lookup(self) -> &'static str {
        match self {
            OneUse::Code => {
                "SELECT c.grant_id, c.expires_at, c.used_at, c.redirect_uri, c.code_challenge, g.client_id, g.resource, g.scope, g.revoked_at, u.is_active \
                 FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id JOIN users u ON u.id = g.user_id WHERE c.code_hash = $1"
            }
            OneUse::RefreshToken => {
                "SELECT t.grant_id, t.expires_at, t.used_at, g.client_id, g.resource, g.scope, g.revoked_at, u.is_active \
                 FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id JOIN users u ON u.id = g.user_id \
                 WHERE t.token_hash = $1 AND t.kind = 'refresh'"
            }
        }
    }

    fn spend(self) -> &'static str {
        match self {
            OneUse::Code => "UPDATE oauth_codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL",
            OneUse::RefreshToken => "UPDATE oauth_tokens SET used_at = $1 WHERE token_hash = $2 AND used_at IS NULL",
        }
    }
}

/// A one-use secret spent: the grant it was issued under, with its scope.
struct Spent {
    grant: i64,
    scope: Scope,
    now: i64,
}

/// Spends `secret` for `client`, in `tx`, after the checks both grants share
/// and the grant's own (`check`, on the secret's row). A secret presented a
/// second time ends its grant, committed before the refusal: someone else may
/// hold it (RFC 9700 §4.14). Of two requests that both read it unspent, only
/// one wins the write.
async fn redeem(
    mut tx: Tx,
    kind: OneUse,
    secret: &str,
    client: &Client,
    resource: Option<&str>,
    check: impl FnOnce(&sqlx::any::AnyRow) -> Result<(), OAuthError>,
) -> Result<(Tx, Spent), OAuthError> {
    let what = kind.name();
    let bad = |m: String| OAuthError::InvalidGrant(m);
    let now = now_ms();
    let Some(row) = sqlx::query(kind.lookup()).bind(hash(secret)).fetch_optional(&mut *tx).await? else {
        return Err(bad(format!("unknown {what}")));
    };
    let grant: i64 = row.try_get("grant_id")?;
    if row.try_get::<Option<i64>, _>("used_at")?.is_some() {
        revoke_replayed(&mut tx, grant, &format!("a spent {what} was presented again"), now).await?;
        tx.commit().await?;
        return Err(bad(format!("this {what} was already used; the authorization is revoked")));
    }
    if row.try_get::<String, _>("client_id")? != client.id {
        return Err(bad(format!("this {what} was issued to another client")));
    }
    if row.try_get::<Option<i64>, _>("revoked_at")?.is_some() || row.try_get::<i64, _>("is_active")? == 0 {
        return Err(bad("this authorization was revoked; authorize again".into()));
    }
    if row.try_get::<i64, _>("expires_at")? <= now {
        return Err(bad(format!("this {what} has expired; authorize again")));
    }
    bound_to(resource, &row.try_get::<String, _>("resource")?)?;
    check(&row)?;
    let scope = Scope::parse(Some(&row.try_get::<String, _>("scope")?))?;
    if sqlx::query(kind.spend()).bind(now).bind(hash(secret)).execute(&mut *tx).await?.rows_affected() != 1 {
        return Err(bad(format!("this {what} was used by another request at the same moment")));
    }
    Ok((tx, Spent { grant, scope, now }))
}

/// A `resource` named at the token endpoint must be the one granted (RFC 8707).
fn bound_to(resource: Option<&str>, granted: &str) -> Result<(), OAuthError> {
    match resource {
        Some(r) if r.trim_end_matches('/') != granted => Err(OAuthError::InvalidTarget(format!("this authorization is for {granted}"))),
        _ => Ok(()),
    }
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
