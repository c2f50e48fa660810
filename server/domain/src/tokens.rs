//! Personal API tokens for MCP clients and scripts. A token is shown once at
//! creation; the database keeps only its SHA-256, a short prefix to recognise
//! it by, its scope, expiry and last use.

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::accounts::{user_from_row, AccountError, User, USER_COLUMNS};
use crate::names::Invalid;
use crate::{audit, now_ms};

handle! {
    /// Personal API tokens.
    Tokens
}

/// Every token starts with this, so secret scanners and people recognise it.
pub const TOKEN_PREFIX: &str = "tsk_";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub id: i64,
    pub name: String,
    /// `tsk_AbCd…`: enough to tell tokens apart, useless to an attacker.
    pub prefix: String,
    /// Empty: every listing the user can see; else `department/name` slugs.
    pub scope: Vec<String>,
    /// May save and publish versions through the REST API (`/api/v1`), within `scope`.
    pub publish: bool,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub created_at: i64,
}

impl TokenInfo {
    /// May this token be used for the listing `slug`?
    pub fn allows(&self, slug: &str) -> bool {
        self.scope.is_empty() || self.scope.iter().any(|s| s == slug)
    }
}

pub(crate) fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn info_from_row(r: &sqlx::any::AnyRow) -> Result<TokenInfo, sqlx::Error> {
    let scope: String = r.try_get("scope")?;
    Ok(TokenInfo {
        id: r.try_get("token_id")?,
        name: r.try_get("token_name")?,
        prefix: r.try_get("prefix")?,
        scope: scope.lines().map(str::to_owned).collect(),
        publish: r.try_get::<i64, _>("can_publish")? != 0,
        expires_at: r.try_get("expires_at")?,
        last_used_at: r.try_get("last_used_at")?,
        revoked_at: r.try_get("revoked_at")?,
        created_at: r.try_get("token_created_at")?,
    })
}

/// Aliased so a token row can be read beside its user's (`accounts::USER_COLUMNS`).
const TOKEN_COLUMNS: &str =
    "t.id AS token_id, t.name AS token_name, t.prefix, t.scope, t.can_publish, t.expires_at, t.last_used_at, t.revoked_at, \
     t.created_at AS token_created_at";

/// Why a presented token was not accepted; all answer 401 the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRejected {
    Unknown,
    Expired,
    Revoked,
    UserInactive,
}

impl Tokens<'_> {
    /// Creates a token; the returned string is the only time it exists in clear.
    /// `scope` limits it to those listings (empty: all the user sees); `publish`
    /// lets it save and publish versions through the REST API.
    pub async fn create_token(
        self,
        user: &User,
        name: &str,
        expires_in_days: Option<u32>,
        scope: Vec<String>,
        publish: bool,
    ) -> Result<(TokenInfo, String), AccountError> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 80 {
            return Err(Invalid { field: "Token name", reason: "must be 1 to 80 characters".into() }.into());
        }
        if let Some(d) = expires_in_days {
            if !(1..=3650).contains(&d) {
                return Err(Invalid { field: "Expiry", reason: "must be between 1 and 3650 days".into() }.into());
            }
        }
        let bytes: [u8; 32] = rand::random();
        let token = format!("{TOKEN_PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes));
        let prefix = format!("{}…", &token[..TOKEN_PREFIX.len() + 6]);
        let now = now_ms();
        let expires_at = expires_in_days.map(|d| now + i64::from(d) * 86_400_000);
        let mut tx = self.core.begin().await?;
        let row = sqlx::query(
            "INSERT INTO api_tokens (user_id, name, prefix, token_hash, scope, can_publish, expires_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        )
        .bind(user.id.0)
        .bind(name)
        .bind(&prefix)
        .bind(hash(&token))
        .bind(scope.join("\n"))
        .bind(i64::from(publish))
        .bind(expires_at)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        let id: i64 = row.try_get("id")?;
        audit::record(
            &mut tx,
            Some(user.id),
            "token.created",
            &format!("token:{id}"),
            None,
            Some(serde_json::json!({"name": name, "scope": scope, "publish": publish})),
        )
        .await?;
        tx.commit().await?;
        let info = TokenInfo {
            id,
            name: name.to_owned(),
            prefix,
            scope,
            publish,
            expires_at,
            last_used_at: None,
            revoked_at: None,
            created_at: now,
        };
        Ok((info, token))
    }

    pub async fn list(self, user: &User) -> Result<Vec<TokenInfo>, AccountError> {
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM api_tokens t WHERE t.user_id = $1 ORDER BY t.created_at DESC");
        let rows = sqlx::query(&sql).bind(user.id.0).fetch_all(self.core.db().pool()).await?;
        Ok(rows.iter().map(info_from_row).collect::<Result<_, _>>()?)
    }

    /// Revokes one of the user's own tokens (another user's ID matches nothing).
    pub async fn revoke_token(self, user: &User, token_id: i64) -> Result<(), AccountError> {
        let mut tx = self.core.begin().await?;
        let done = sqlx::query("UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND user_id = $3 AND revoked_at IS NULL")
            .bind(now_ms())
            .bind(token_id)
            .bind(user.id.0)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Ok(());
        }
        audit::record(&mut tx, Some(user.id), "token.revoked", &format!("token:{token_id}"), None, None).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The user and token behind a presented token, checked on every request so
    /// revocation, expiry and deactivation take effect at once.
    pub async fn authenticate_token(self, token: &str) -> Result<Result<(User, TokenInfo), TokenRejected>, AccountError> {
        if !token.starts_with(TOKEN_PREFIX) || token.len() > 200 {
            return Ok(Err(TokenRejected::Unknown));
        }
        // One statement for the token and its user: this runs on every MCP request.
        let sql = format!(
            "SELECT {TOKEN_COLUMNS}, {USER_COLUMNS} FROM api_tokens t JOIN users u ON u.id = t.user_id \
             JOIN departments d ON d.id = u.department_id WHERE t.token_hash = $1"
        );
        let key = hash(token);
        let cache = &self.core.call_cache().tokens;
        let (user, info) = match cache.get(&key) {
            Some(found) => found,
            None => {
                let at = cache.epoch();
                let Some(row) = sqlx::query(&sql).bind(&key).fetch_optional(self.core.db().pool()).await? else {
                    return Ok(Err(TokenRejected::Unknown));
                };
                let found = (user_from_row(&row)?, info_from_row(&row)?);
                cache.insert(key.clone(), found.clone(), at);
                found
            }
        };
        let now = now_ms();
        if info.revoked_at.is_some() {
            return Ok(Err(TokenRejected::Revoked));
        }
        if info.expires_at.is_some_and(|e| e <= now) {
            return Ok(Err(TokenRejected::Expired));
        }
        if !user.is_active {
            return Ok(Err(TokenRejected::UserInactive));
        }
        // Last use is for people, to the minute: no write on every call.
        if info.last_used_at.is_none_or(|t| now - t > 60_000) {
            sqlx::query("UPDATE api_tokens SET last_used_at = $1 WHERE id = $2")
                .bind(now)
                .bind(info.id)
                .execute(self.core.db().pool())
                .await?;
            cache.update(&key, |(_, cached)| cached.last_used_at = Some(now));
        }
        Ok(Ok((user, info)))
    }
}
