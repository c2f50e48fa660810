//! MCP sessions kept in the database, so that any replica can resume a session
//! another one started (behind a load balancer without sticky routing). The
//! state is opaque here: the MCP layer stores the client's `initialize`
//! parameters as JSON, and the logging level the client asked for.

use std::collections::HashSet;

use sqlx::Row;

use crate::ids::{ToolId, UserId};
use crate::now_ms;
use crate::store::StoreError;

handle! {
    /// MCP sessions kept in the database, so any replica serves them.
    McpSessions
}

/// Sessions unused for this long are forgotten; their clients initialize again.
pub const IDLE_LIMIT_MS: i64 = 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    pub state_json: String,
    pub log_level: Option<String>,
    /// The resources it subscribed to.
    pub subscribed: Vec<String>,
}

/// Who may use a session: the user who opened it, on the listing it was
/// opened on (`None`: their personal endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOwner {
    pub user: UserId,
    pub listing: Option<ToolId>,
}

impl McpSessions<'_> {
    /// Records who opened a session (before its id reaches the client, so no
    /// request can name the session before its owner is known).
    pub async fn set_mcp_session_owner(self, id: &str, owner: SessionOwner) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO mcp_session_owners (session_id, user_id, listing_id, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (session_id) DO NOTHING",
        )
        .bind(id)
        .bind(owner.user.0)
        .bind(owner.listing.map(|l| l.0))
        .bind(now_ms())
        .execute(self.core.db().pool())
        .await?;
        Ok(())
    }

    /// The owner of a session; `None` for a session that never was, or has ended.
    pub async fn mcp_session_owner(self, id: &str) -> Result<Option<SessionOwner>, StoreError> {
        let row = sqlx::query("SELECT user_id, listing_id FROM mcp_session_owners WHERE session_id = $1")
            .bind(id)
            .fetch_optional(self.core.db().pool())
            .await?;
        row.map(|r| {
            Ok(SessionOwner { user: UserId(r.try_get("user_id")?), listing: r.try_get::<Option<i64>, _>("listing_id")?.map(ToolId) })
        })
        .transpose()
    }

    pub async fn save_mcp_session(self, id: &str, state_json: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO mcp_sessions (id, state_json, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET state_json = excluded.state_json, updated_at = excluded.updated_at",
        )
        .bind(id)
        .bind(state_json)
        .bind(now_ms())
        .execute(self.core.db().pool())
        .await?;
        Ok(())
    }

    /// A live session's state; touching it keeps it alive.
    pub async fn load_mcp_session(self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let now = now_ms();
        let row = sqlx::query(
            "UPDATE mcp_sessions SET updated_at = $1 WHERE id = $2 AND updated_at > $3 RETURNING state_json, log_level, subscribed",
        )
        .bind(now)
        .bind(id)
        .bind(now - IDLE_LIMIT_MS)
        .fetch_optional(self.core.db().pool())
        .await?;
        row.map(|r| {
            let subscribed: Option<String> = r.try_get("subscribed")?;
            let subscribed = subscribed.unwrap_or_default().lines().map(str::to_owned).collect();
            Ok(StoredSession { state_json: r.try_get("state_json")?, log_level: r.try_get("log_level")?, subscribed })
        })
        .transpose()
    }

    pub async fn set_mcp_session_subscriptions(self, id: &str, uris: &[String]) -> Result<(), StoreError> {
        sqlx::query("UPDATE mcp_sessions SET subscribed = $1, updated_at = $2 WHERE id = $3")
            .bind(uris.join("\n"))
            .bind(now_ms())
            .bind(id)
            .execute(self.core.db().pool())
            .await?;
        Ok(())
    }

    pub async fn set_mcp_session_log_level(self, id: &str, level: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE mcp_sessions SET log_level = $1, updated_at = $2 WHERE id = $3")
            .bind(level)
            .bind(now_ms())
            .bind(id)
            .execute(self.core.db().pool())
            .await?;
        Ok(())
    }

    /// Which of `ids` are still live sessions (not ended by a DELETE on any
    /// replica, nor forgotten when idle).
    pub async fn live_mcp_sessions(self, ids: &[&str]) -> Result<HashSet<String>, StoreError> {
        let mut live = HashSet::new();
        // Bounded statements: far below either database's parameter limit.
        for chunk in ids.chunks(500) {
            let params: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!("SELECT id FROM mcp_sessions WHERE id IN ({})", params.join(", "));
            let mut query = sqlx::query(&sql);
            for id in chunk {
                query = query.bind(*id);
            }
            for row in query.fetch_all(self.core.db().pool()).await? {
                live.insert(row.try_get("id")?);
            }
        }
        Ok(live)
    }

    pub async fn delete_mcp_session(self, id: &str) -> Result<(), StoreError> {
        let mut tx = self.core.db().begin().await?;
        sqlx::query("DELETE FROM mcp_sessions WHERE id = $1").bind(id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM mcp_session_owners WHERE session_id = $1").bind(id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Forgets sessions idle past [`IDLE_LIMIT_MS`]; returns how many.
    pub async fn delete_idle_mcp_sessions(self) -> Result<u64, StoreError> {
        let now = now_ms();
        let mut tx = self.core.db().begin().await?;
        let done = sqlx::query("DELETE FROM mcp_sessions WHERE updated_at <= $1").bind(now - IDLE_LIMIT_MS).execute(&mut *tx).await?;
        // An owner outlives its session only while the session is being created.
        sqlx::query(
            "DELETE FROM mcp_session_owners WHERE created_at <= $1 \
             AND NOT EXISTS (SELECT 1 FROM mcp_sessions s WHERE s.id = mcp_session_owners.session_id)",
        )
        .bind(now - 60_000)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }
}
