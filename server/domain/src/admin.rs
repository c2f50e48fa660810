//! What administrators read: every account, and the audit log.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::accounts::{AccountError, User};
use crate::Toolshed;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRow {
    pub username: String,
    pub display_name: String,
    pub department: String,
    pub is_admin: bool,
    pub is_active: bool,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub at_ms: i64,
    pub actor: Option<String>,
    pub action: String,
    pub target: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl Toolshed {
    /// Every account, for admins only (`Forbidden` otherwise).
    pub async fn all_users(&self, admin: &User) -> Result<Vec<UserRow>, AccountError> {
        if !admin.is_admin {
            return Err(AccountError::Forbidden);
        }
        let rows = sqlx::query(
            "SELECT u.username, u.display_name, d.name AS dept, u.is_admin, u.is_active, u.created_at \
             FROM users u JOIN departments d ON d.id = u.department_id ORDER BY u.username",
        )
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows
            .iter()
            .map(|r| {
                Ok(UserRow {
                    username: r.try_get("username")?,
                    display_name: r.try_get("display_name")?,
                    department: r.try_get("dept")?,
                    is_admin: r.try_get::<i64, _>("is_admin")? != 0,
                    is_active: r.try_get::<i64, _>("is_active")? != 0,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()?)
    }

    /// The newest audit entries, optionally only those whose action starts with `action`.
    pub async fn audit_log(&self, admin: &User, action: &str, limit: i64) -> Result<Vec<AuditEntry>, AccountError> {
        if !admin.is_admin {
            return Err(AccountError::Forbidden);
        }
        let rows = sqlx::query(
            "SELECT a.at_ms, u.username AS actor, a.action, a.target, a.before_json, a.after_json FROM audit_log a \
             LEFT JOIN users u ON u.id = a.actor_id WHERE a.action LIKE $1 ORDER BY a.id DESC LIMIT $2",
        )
        .bind(format!("{}%", action.replace(['%', '_'], "")))
        .bind(limit.clamp(1, 500))
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows
            .iter()
            .map(|r| {
                Ok(AuditEntry {
                    at_ms: r.try_get("at_ms")?,
                    actor: r.try_get("actor")?,
                    action: r.try_get("action")?,
                    target: r.try_get("target")?,
                    before: r.try_get("before_json")?,
                    after: r.try_get("after_json")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()?)
    }
}
