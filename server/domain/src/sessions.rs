//! Browser sessions: a tower-sessions store in our own database (so every replica
//! sees every session), and the few rules about which user a session stands for.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sqlx::Row;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, SessionStore};
use tower_sessions::Session;

use crate::accounts::Accounts;
use crate::accounts::{AccountError, User};
use crate::ids::UserId;
use crate::store::Db;

handle! {
    /// Browser sessions: who is signed in.
    Sessions
}

#[derive(Debug, Clone)]
pub struct DbSessionStore {
    db: Db,
}

impl DbSessionStore {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    /// Removes expired records; run periodically by the server.
    pub async fn delete_expired(&self) -> Result<u64, sqlx::Error> {
        let done = sqlx::query("DELETE FROM sessions WHERE expiry_ms < $1").bind(crate::now_ms()).execute(self.db.pool()).await?;
        Ok(done.rows_affected())
    }
}

fn backend(e: impl std::fmt::Display) -> session_store::Error {
    session_store::Error::Backend(e.to_string())
}

fn encode(record: &Record) -> session_store::Result<(String, String, i64)> {
    let data = serde_json::to_string(record).map_err(|e| session_store::Error::Encode(e.to_string()))?;
    Ok((record.id.to_string(), data, record.expiry_date.unix_timestamp() * 1000))
}

#[async_trait]
impl SessionStore for DbSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        // Ids are 128 random bits; a collision is astronomically unlikely, but
        // cheap to rule out: the insert fails and we draw again.
        loop {
            let (id, data, expiry) = encode(record)?;
            let done = sqlx::query("INSERT INTO sessions (id, data, expiry_ms) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING")
                .bind(id)
                .bind(data)
                .bind(expiry)
                .execute(self.db.pool())
                .await
                .map_err(backend)?;
            if done.rows_affected() == 1 {
                return Ok(());
            }
            record.id = Id::default();
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        let (id, data, expiry) = encode(record)?;
        sqlx::query(
            "INSERT INTO sessions (id, data, expiry_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET data = excluded.data, expiry_ms = excluded.expiry_ms",
        )
        .bind(id)
        .bind(data)
        .bind(expiry)
        .execute(self.db.pool())
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        let row = sqlx::query("SELECT data FROM sessions WHERE id = $1 AND expiry_ms > $2")
            .bind(id.to_string())
            .bind(crate::now_ms())
            .fetch_optional(self.db.pool())
            .await
            .map_err(backend)?;
        match row {
            None => Ok(None),
            Some(row) => {
                let data: String = row.try_get("data").map_err(backend)?;
                Ok(Some(serde_json::from_str(&data).map_err(|e| session_store::Error::Decode(e.to_string()))?))
            }
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        sqlx::query("DELETE FROM sessions WHERE id = $1").bind(id.to_string()).execute(self.db.pool()).await.map_err(backend)?;
        Ok(())
    }
}

const SESSION_USER_KEY: &str = "user";

/// What a session remembers about its user: who, and which password epoch.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct SessionUser {
    id: UserId,
    epoch: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("session storage failed: {0}")]
    Session(#[from] tower_sessions::session::Error),
    #[error(transparent)]
    Account(#[from] AccountError),
}

impl Sessions<'_> {
    /// Binds the session to `user`, under a fresh session ID (no fixation).
    pub async fn start_session(self, session: &Session, user: &User) -> Result<(), SessionError> {
        session.cycle_id().await?;
        session.insert(SESSION_USER_KEY, SessionUser { id: user.id, epoch: user.session_epoch }).await?;
        Ok(())
    }

    /// The signed-in user, or `None` for anonymous, deleted, deactivated or
    /// stale (password changed elsewhere) sessions; those are flushed.
    pub async fn session_user(self, session: &Session) -> Result<Option<User>, SessionError> {
        let Some(su) = session.get::<SessionUser>(SESSION_USER_KEY).await? else {
            return Ok(None);
        };
        match Accounts::new(self.core).user_for_session(su.id, su.epoch).await? {
            Some(user) => Ok(Some(user)),
            None => {
                session.flush().await?;
                Ok(None)
            }
        }
    }

    pub async fn end_session(self, session: &Session) -> Result<(), SessionError> {
        session.flush().await?;
        Ok(())
    }
}
