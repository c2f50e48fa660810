//! Moderation: users report listings, admins work through the queue (reports
//! grouped by listing, versions waiting for review) and act on a listing with a
//! required note the author reads.
//!
//! Every action is one transaction with its audit row; the status actions use
//! the names `changes::LIST_CHANGING` watches (`tool.hidden`, `tool.disabled`,
//! `tool.restored`, `tool.deleted`), so open MCP sessions hear of them.
//!
//! **Delete is soft**: `status = 'deleted'` hides the listing from everyone but
//! admins (its owner too) and frees nothing (the name stays taken, versions,
//! usage and audit history stay), so an admin can restore it. Nothing is
//! removed from the database by the UI.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::accounts::User;
use crate::ids::ToolId;
use crate::names::{Invalid, ModerationNote, ReportReason};
use crate::store::StoreError;
use crate::tools::{Status, Tool, ToolError};
use crate::{audit, now_ms, Toolshed};

#[derive(Debug, thiserror::Error)]
pub enum ModerationError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// Also for listings the user may not see, so their existence does not leak.
    #[error("No such listing.")]
    NotFound,
    #[error("Only administrators may do that.")]
    Forbidden,
    #[error("No version of this listing is waiting for review.")]
    NothingToReview,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for ModerationError {
    fn from(e: sqlx::Error) -> Self {
        ModerationError::Store(e.into())
    }
}

impl From<ToolError> for ModerationError {
    fn from(e: ToolError) -> Self {
        match e {
            ToolError::Store(e) => ModerationError::Store(e),
            ToolError::Invalid(e) => ModerationError::Invalid(e),
            ToolError::Forbidden => ModerationError::Forbidden,
            _ => ModerationError::NotFound,
        }
    }
}

/// What an admin does to a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Hide,
    Disable,
    Restore,
    Delete,
    Feature,
    Unfeature,
    /// Closes the open reports and changes nothing else.
    Dismiss,
}

impl Action {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        Ok(match raw.trim() {
            "hide" => Action::Hide,
            "disable" => Action::Disable,
            "restore" => Action::Restore,
            "delete" => Action::Delete,
            "feature" => Action::Feature,
            "unfeature" => Action::Unfeature,
            "dismiss" => Action::Dismiss,
            _ => {
                return Err(Invalid {
                    field: "Action",
                    reason: "must be hide, disable, restore, delete, feature, unfeature or dismiss".into(),
                })
            }
        })
    }

    /// The audit action on `listing`, e.g. `tool.hidden` or `bundle.hidden`
    /// (for status changes, one `changes` listens to).
    pub fn audit_name(self, listing: &Tool) -> String {
        let verb = match self {
            Action::Hide => "hidden",
            Action::Disable => "disabled",
            Action::Restore => "restored",
            Action::Delete => "deleted",
            Action::Feature => "featured",
            Action::Unfeature => "unfeatured",
            Action::Dismiss => return "report.dismissed".into(),
        };
        listing.action(verb)
    }

    fn status(self) -> Option<Status> {
        match self {
            Action::Hide => Some(Status::Hidden),
            Action::Disable => Some(Status::Disabled),
            Action::Restore => Some(Status::Active),
            Action::Delete => Some(Status::Deleted),
            Action::Feature | Action::Unfeature | Action::Dismiss => None,
        }
    }

    /// Featuring is about the home page, not about the reports.
    fn resolves_reports(self) -> bool {
        !matches!(self, Action::Feature | Action::Unfeature)
    }
}

/// One open report, as the queue shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub reporter: String,
    pub reason: String,
    pub at_ms: i64,
}

/// A listing that needs an admin: its open reports, and a version waiting for review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueItem {
    pub tool: Tool,
    /// Oldest first.
    pub reports: Vec<Report>,
}

impl Toolshed {
    /// Files a report on a listing the user can see; a second report by the
    /// same user while the first is open replaces its reason.
    pub async fn report(&self, user: &User, id: ToolId, reason: &ReportReason) -> Result<(), ModerationError> {
        let tool = self.tool(user, id).await?;
        let now = now_ms();
        let mut tx = self.begin().await?;
        let updated =
            sqlx::query("UPDATE reports SET reason = $1, created_at = $2 WHERE tool_id = $3 AND reporter_id = $4 AND resolved_at IS NULL")
                .bind(reason.as_str())
                .bind(now)
                .bind(id.0)
                .bind(user.id.0)
                .execute(&mut *tx)
                .await?;
        if updated.rows_affected() == 0 {
            sqlx::query("INSERT INTO reports (tool_id, reporter_id, reason, created_at) VALUES ($1, $2, $3, $4)")
                .bind(id.0)
                .bind(user.id.0)
                .bind(reason.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        let after = serde_json::json!({"reason": reason.as_str()});
        audit::record(&mut tx, Some(user.id), "report.filed", &tool.audit_target(), None, Some(after)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Listings with open reports or a version waiting for review, the oldest
    /// report first, then the reviews. Admins only.
    pub async fn moderation_queue(&self, admin: &User) -> Result<Vec<QueueItem>, ModerationError> {
        require_admin(admin)?;
        let rows = sqlx::query(
            "SELECT r.tool_id, u.username, r.reason, r.created_at FROM reports r JOIN users u ON u.id = r.reporter_id \
             WHERE r.resolved_at IS NULL ORDER BY r.created_at, r.id",
        )
        .fetch_all(self.db.pool())
        .await?;
        let mut order: Vec<i64> = Vec::new();
        let mut reports: BTreeMap<i64, Vec<Report>> = BTreeMap::new();
        for r in &rows {
            let tool_id: i64 = r.try_get("tool_id")?;
            if !reports.contains_key(&tool_id) {
                order.push(tool_id);
            }
            reports.entry(tool_id).or_default().push(Report {
                reporter: r.try_get("username")?,
                reason: r.try_get("reason")?,
                at_ms: r.try_get("created_at")?,
            });
        }
        let pending =
            sqlx::query("SELECT id FROM tools WHERE pending_version IS NOT NULL ORDER BY updated_at").fetch_all(self.db.pool()).await?;
        for r in &pending {
            let id: i64 = r.try_get("id")?;
            if !reports.contains_key(&id) {
                order.push(id);
            }
        }
        let mut items = Vec::with_capacity(order.len());
        for id in order {
            if let Some(tool) = self.tool_row(ToolId(id)).await? {
                items.push(QueueItem { reports: reports.remove(&id).unwrap_or_default(), tool });
            }
        }
        Ok(items)
    }

    /// Applies an admin's action to a listing, with the note its author will
    /// read; resolves the listing's open reports (except for featuring).
    pub async fn moderate(&self, admin: &User, id: ToolId, action: Action, note: &ModerationNote) -> Result<Tool, ModerationError> {
        require_admin(admin)?;
        let tool = self.tool(admin, id).await?;
        let now = now_ms();
        let mut tx = self.begin().await?;
        let (before, after) = match (action.status(), action) {
            (Some(status), _) => {
                sqlx::query("UPDATE tools SET status = $1, moderation_note = $2, updated_at = $3 WHERE id = $4")
                    .bind(status.as_str())
                    .bind(note.as_str())
                    .bind(now)
                    .bind(id.0)
                    .execute(&mut *tx)
                    .await?;
                (
                    serde_json::json!({"status": tool.status, "note": tool.moderation_note}),
                    serde_json::json!({"status": status, "note": note.as_str()}),
                )
            }
            (None, Action::Feature | Action::Unfeature) => {
                let featured = action == Action::Feature;
                sqlx::query("UPDATE tools SET featured = $1 WHERE id = $2").bind(i64::from(featured)).bind(id.0).execute(&mut *tx).await?;
                (serde_json::json!({"featured": !featured}), serde_json::json!({"featured": featured, "note": note.as_str()}))
            }
            (None, _) => (serde_json::json!({"status": tool.status}), serde_json::json!({"status": tool.status, "note": note.as_str()})),
        };
        if action.resolves_reports() {
            sqlx::query(
                "UPDATE reports SET resolved_at = $1, resolved_by = $2, resolution = $3 WHERE tool_id = $4 AND resolved_at IS NULL",
            )
            .bind(now)
            .bind(admin.id.0)
            .bind(action.audit_name(&tool))
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        }
        audit::record(&mut tx, Some(admin.id), &action.audit_name(&tool), &tool.audit_target(), Some(before), Some(after)).await?;
        tx.commit().await?;
        tracing::info!(listing = %tool.audit_target(), action = %action.audit_name(&tool), admin = %admin.username, "moderated");
        Ok(self.tool(admin, id).await?)
    }

    /// Serves the version waiting for review. Admins only.
    pub async fn approve_version(&self, admin: &User, id: ToolId, note: &ModerationNote) -> Result<Tool, ModerationError> {
        require_admin(admin)?;
        let tool = self.tool(admin, id).await?;
        let n = tool.pending_version.ok_or(ModerationError::NothingToReview)?;
        let action = tool.publish_action(n);
        let mut tx = self.begin().await?;
        // Only the version the admin reviewed: a newer request since is not approved by this.
        let done = sqlx::query(
            "UPDATE tools SET published_version = pending_version, pending_version = NULL, review_note = NULL, updated_at = $1 \
             WHERE id = $2 AND pending_version = $3",
        )
        .bind(now_ms())
        .bind(id.0)
        .bind(n)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            return Err(ModerationError::NothingToReview);
        }
        crate::tools::mark_published(&mut tx, id, n).await?;
        let before = serde_json::json!({"version": tool.published_version});
        let after = serde_json::json!({"version": n, "approved": true, "note": note.as_str()});
        audit::record(&mut tx, Some(admin.id), &action, &tool.audit_target(), Some(before), Some(after)).await?;
        tx.commit().await?;
        Ok(self.tool(admin, id).await?)
    }

    /// Turns down the version waiting for review; the endpoint keeps its version
    /// and the author reads the note. Admins only.
    pub async fn reject_version(&self, admin: &User, id: ToolId, note: &ModerationNote) -> Result<Tool, ModerationError> {
        require_admin(admin)?;
        let tool = self.tool(admin, id).await?;
        let n = tool.pending_version.ok_or(ModerationError::NothingToReview)?;
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE tools SET pending_version = NULL, review_note = $1, updated_at = $2 WHERE id = $3 AND pending_version = $4")
            .bind(note.as_str())
            .bind(now_ms())
            .bind(id.0)
            .bind(n)
            .execute(&mut *tx)
            .await?;
        let before = serde_json::json!({"pending_version": n});
        let after = serde_json::json!({"pending_version": null, "note": note.as_str()});
        audit::record(&mut tx, Some(admin.id), &tool.action("review_rejected"), &tool.audit_target(), Some(before), Some(after)).await?;
        tx.commit().await?;
        Ok(self.tool(admin, id).await?)
    }

    /// Whether publishes in this department wait for an admin.
    pub(crate) async fn review_required(&self, department: i64) -> Result<bool, StoreError> {
        let row =
            sqlx::query("SELECT review_required FROM departments WHERE id = $1").bind(department).fetch_optional(self.db.pool()).await?;
        Ok(match row {
            Some(r) => r.try_get::<i64, _>("review_required")? != 0,
            None => false,
        })
    }

    /// An editor's publish in a department that requires review: version `n`
    /// waits in the queue; what the endpoint serves does not change.
    pub(crate) async fn request_review(&self, user: &User, tool: &Tool, n: i64) -> Result<Tool, ToolError> {
        // Asking for what is already served withdraws any waiting request.
        let pending = (tool.published_version != Some(n)).then_some(n);
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE tools SET pending_version = $1, review_note = NULL, updated_at = $2 WHERE id = $3")
            .bind(pending)
            .bind(now_ms())
            .bind(tool.id.0)
            .execute(&mut *tx)
            .await?;
        let before = serde_json::json!({"version": tool.published_version, "pending_version": tool.pending_version});
        let after = serde_json::json!({"version": tool.published_version, "pending_version": pending});
        audit::record(&mut tx, Some(user.id), &tool.action("publish_requested"), &tool.audit_target(), Some(before), Some(after)).await?;
        tx.commit().await?;
        self.tool(user, tool.id).await
    }
}

fn require_admin(user: &User) -> Result<(), ModerationError> {
    if user.is_admin {
        Ok(())
    } else {
        Err(ModerationError::Forbidden)
    }
}
