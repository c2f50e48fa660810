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
use crate::scan::Finding;
use crate::schema::ArgDef;
use crate::store::StoreError;
use crate::tools::Tools;
use crate::tools::{Status, Tool, ToolError};
use crate::{audit, now_ms};

handle! {
    /// Reports, reviews and holds on listings.
    Moderation
}

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
    #[error("No publish of this listing is held for findings.")]
    NothingHeld,
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

/// A publish held for what the scan found in the texts models read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldPublish {
    pub version: i64,
    pub findings: Vec<Finding>,
    pub requested_by: String,
    pub at_ms: i64,
}

/// A listing that needs an admin: its open reports, a version waiting for
/// review, a publish held for findings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueItem {
    pub tool: Tool,
    /// Oldest first.
    pub reports: Vec<Report>,
    pub held: Option<HeldPublish>,
    /// What approving the waiting version or text would change.
    pub review: Option<ReviewDiff>,
}

impl Moderation<'_> {
    /// Files a report on a listing the user can see; a second report by the
    /// same user while the first is open replaces its reason.
    pub async fn report(self, user: &User, id: ToolId, reason: &ReportReason) -> Result<(), ModerationError> {
        let tool = Tools::new(self.core).tool(user, id).await?;
        let now = now_ms();
        let mut tx = self.core.begin().await?;
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
    pub async fn moderation_queue(self, admin: &User) -> Result<Vec<QueueItem>, ModerationError> {
        require_admin(admin)?;
        let rows = sqlx::query(
            "SELECT r.tool_id, u.username, r.reason, r.created_at FROM reports r JOIN users u ON u.id = r.reporter_id \
             WHERE r.resolved_at IS NULL ORDER BY r.created_at, r.id",
        )
        .fetch_all(self.core.db().pool())
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
        let pending = sqlx::query(
            "SELECT id FROM tools WHERE pending_version IS NOT NULL OR pending_title IS NOT NULL \
             UNION SELECT tool_id AS id FROM publish_findings WHERE accepted_at IS NULL",
        )
        .fetch_all(self.core.db().pool())
        .await?;
        for r in &pending {
            let id: i64 = r.try_get("id")?;
            if !reports.contains_key(&id) {
                order.push(id);
            }
        }
        let mut items = Vec::with_capacity(order.len());
        for id in order {
            if let Some(tool) = Tools::new(self.core).tool_row(ToolId(id)).await? {
                let held = self.held_publish(ToolId(id)).await?;
                let review = match tool.pending_version.is_some() || tool.pending_text.is_some() {
                    true => Some(self.review_diff(&tool).await?),
                    false => None,
                };
                items.push(QueueItem { reports: reports.remove(&id).unwrap_or_default(), tool, held, review });
            }
        }
        Ok(items)
    }

    /// Applies an admin's action to a listing, with the note its author will
    /// read; resolves the listing's open reports (except for featuring).
    pub async fn moderate(self, admin: &User, id: ToolId, action: Action, note: &ModerationNote) -> Result<Tool, ModerationError> {
        require_admin(admin)?;
        let tool = Tools::new(self.core).tool(admin, id).await?;
        let now = now_ms();
        let mut tx = self.core.begin().await?;
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
        Ok(Tools::new(self.core).tool(admin, id).await?)
    }

    /// Serves what waits for review: the version, and the new title and
    /// description. Admins only.
    pub async fn approve_version(self, admin: &User, id: ToolId, note: &ModerationNote) -> Result<Tool, ModerationError> {
        require_admin(admin)?;
        let tool = Tools::new(self.core).tool(admin, id).await?;
        if tool.pending_version.is_none() && tool.pending_text.is_none() {
            return Err(ModerationError::NothingToReview);
        }
        let action = match tool.pending_version {
            Some(n) => tool.publish_action(n),
            // New text alone: a settings change taking effect (sessions hear of it).
            None => tool.action("settings_changed"),
        };
        let mut tx = self.core.begin().await?;
        let sql = format!(
            "UPDATE tools SET published_version = COALESCE(pending_version, published_version), pending_version = NULL, \
             title = COALESCE(pending_title, title), description = COALESCE(pending_description, description), \
             pending_title = NULL, pending_description = NULL, review_note = NULL, updated_at = $1, \
             cjk_pairs = CASE WHEN pending_title IS NULL AND pending_description IS NULL THEN cjk_pairs ELSE $6 END \
             WHERE id = $2 AND {REVIEWED}"
        );
        // The waiting text's pairs ({REVIEWED} makes sure it is still the one read);
        // without one, the title stays and so do its pairs.
        let (title, description) = tool.pending_text.as_ref().map_or((&tool.title, &tool.description), |p| (&p.title, &p.description));
        let done = sqlx::query(&sql).bind(now_ms()).bind(id.0);
        let done = reviewed(done, &tool).bind(crate::words::cjk_pairs(title, description)).execute(&mut *tx).await?;
        if done.rows_affected() != 1 {
            return Err(ModerationError::NothingToReview);
        }
        if let Some(n) = tool.pending_version {
            crate::tools::mark_published(&mut tx, id, n).await?;
        }
        let before = serde_json::json!({"version": tool.published_version, "title": tool.title});
        let after = serde_json::json!({
            "version": tool.pending_version.or(tool.published_version),
            "title": tool.pending_text.as_ref().map_or(&tool.title, |p| &p.title),
            "approved": true,
            "note": note.as_str(),
        });
        audit::record(&mut tx, Some(admin.id), &action, &tool.audit_target(), Some(before), Some(after)).await?;
        tx.commit().await?;
        Ok(Tools::new(self.core).tool(admin, id).await?)
    }

    /// Turns down what waits for review; the listing keeps its version and text,
    /// and the author reads the note. Admins only.
    pub async fn reject_version(self, admin: &User, id: ToolId, note: &ModerationNote) -> Result<Tool, ModerationError> {
        require_admin(admin)?;
        let tool = Tools::new(self.core).tool(admin, id).await?;
        if tool.pending_version.is_none() && tool.pending_text.is_none() {
            return Err(ModerationError::NothingToReview);
        }
        let mut tx = self.core.begin().await?;
        let sql = format!(
            "UPDATE tools SET pending_version = NULL, pending_title = NULL, pending_description = NULL, review_note = $1, updated_at = $2 \
             WHERE id = $6 AND {REVIEWED}"
        );
        reviewed(sqlx::query(&sql).bind(note.as_str()).bind(now_ms()), &tool).bind(id.0).execute(&mut *tx).await?;
        let before =
            serde_json::json!({"pending_version": tool.pending_version, "pending_title": tool.pending_text.as_ref().map(|p| &p.title)});
        let after = serde_json::json!({"pending_version": null, "note": note.as_str()});
        audit::record(&mut tx, Some(admin.id), &tool.action("review_rejected"), &tool.audit_target(), Some(before), Some(after)).await?;
        tx.commit().await?;
        Ok(Tools::new(self.core).tool(admin, id).await?)
    }

    /// The publish of `id` held for findings, if one waits.
    pub async fn held_publish(self, id: ToolId) -> Result<Option<HeldPublish>, StoreError> {
        let row = sqlx::query(
            "SELECT f.version, f.findings_json, u.username, f.created_at FROM publish_findings f JOIN users u ON u.id = f.requested_by \
             WHERE f.tool_id = $1 AND f.accepted_at IS NULL",
        )
        .bind(id.0)
        .fetch_optional(self.core.db().pool())
        .await?;
        row.map(|r| {
            Ok(HeldPublish {
                version: r.try_get("version")?,
                findings: serde_json::from_str(&r.try_get::<String, _>("findings_json")?).unwrap_or_default(),
                requested_by: r.try_get("username")?,
                at_ms: r.try_get("created_at")?,
            })
        })
        .transpose()
        .map_err(|e: sqlx::Error| e.into())
    }

    /// Accepts what the scan found in the held publish of `id`: the same texts
    /// pass from now on, and its author may publish again. Admins only.
    pub async fn accept_findings(self, admin: &User, id: ToolId, note: &ModerationNote) -> Result<Tool, ModerationError> {
        require_admin(admin)?;
        let tool = Tools::new(self.core).tool(admin, id).await?;
        let held = self.held_publish(id).await?.ok_or(ModerationError::NothingHeld)?;
        let mut tx = self.core.begin().await?;
        sqlx::query("UPDATE publish_findings SET accepted_by = $1, accepted_at = $2, note = $3 WHERE tool_id = $4 AND accepted_at IS NULL")
            .bind(admin.id.0)
            .bind(now_ms())
            .bind(note.as_str())
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        let after = serde_json::json!({"version": held.version, "findings": held.findings, "note": note.as_str()});
        audit::record(&mut tx, Some(admin.id), &tool.action("findings_accepted"), &tool.audit_target(), None, Some(after)).await?;
        tx.commit().await?;
        Ok(Tools::new(self.core).tool(admin, id).await?)
    }
}

/// Only what the admin reviewed: a newer request since is not decided by
/// this. Its parameters are $3 to $5, bound by [`reviewed`] after the
/// statement's first two.
const REVIEWED: &str = "COALESCE(pending_version, -1) = $3 AND COALESCE(pending_title, '') = $4 AND COALESCE(pending_description, '') = $5";

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// Binds [`REVIEWED`]'s parameters: the version (or -1), title and description (or '') the admin saw.
fn reviewed<'q>(query: AnyQuery<'q>, tool: &'q Tool) -> AnyQuery<'q> {
    query
        .bind(tool.pending_version.unwrap_or(-1))
        .bind(tool.pending_text.as_ref().map_or("", |p| p.title.as_str()))
        .bind(tool.pending_text.as_ref().map_or("", |p| p.description.as_str()))
}

/// What approving a review changes in what models read (title, description,
/// the arguments' JSON Schema) and in the code, as unified diffs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewDiff {
    pub texts: String,
    pub code: String,
}

fn model_text(title: &str, description: &str, args: &[ArgDef]) -> String {
    format!("title: {title}\n\ndescription:\n{description}\n\narguments:\n{}", crate::tools::schema_text(args))
}

impl Moderation<'_> {
    /// The diff an admin reviews for `tool`: served now against what waits.
    async fn review_diff(self, tool: &Tool) -> Result<ReviewDiff, ToolError> {
        let served = match tool.published_version {
            Some(n) => Some(Tools::new(self.core).version_row(tool.id, n).await?),
            None => None,
        };
        let waiting = match tool.pending_version {
            Some(n) => Some(Tools::new(self.core).version_row(tool.id, n).await?),
            None => served.clone(),
        };
        let (args_now, code_now) = served.as_ref().map_or((&[][..], ""), |v| (&v.args[..], v.code.as_str()));
        let (args_then, code_then) = waiting.as_ref().map_or((&[][..], ""), |v| (&v.args[..], v.code.as_str()));
        let text = tool
            .pending_text
            .clone()
            .unwrap_or(crate::tools::PendingText { title: tool.title.clone(), description: tool.description.clone() });
        let now_label = tool.published_version.map_or_else(|| "nothing served".to_owned(), |n| format!("served (v{n})"));
        let then_label = tool.pending_version.map_or_else(|| "waiting for review".to_owned(), |n| format!("waiting for review (v{n})"));
        Ok(ReviewDiff {
            texts: crate::tools::unified_diff(
                &model_text(&tool.title, &tool.description, args_now),
                &model_text(&text.title, &text.description, args_then),
                &now_label,
                &then_label,
            ),
            code: crate::tools::unified_diff(code_now, code_then, &now_label, &then_label),
        })
    }
}

fn require_admin(user: &User) -> Result<(), ModerationError> {
    if user.is_admin {
        Ok(())
    } else {
        Err(ModerationError::Forbidden)
    }
}
