//! Moderation: reporting a listing (anyone signed in), the admins' queue, their
//! actions on a listing and their reviews (admins only, checked in the domain).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use crate::error::AppError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportView {
    pub reporter: String,
    pub reason: String,
    pub at_ms: i64,
}

/// A listing in the moderation queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueItemView {
    pub tool: i64,
    pub department: String,
    pub name: String,
    pub title: String,
    pub owner: String,
    pub status: String,
    pub published_version: Option<i64>,
    pub pending_version: Option<i64>,
    pub reports: Vec<ReportView>,
    pub held: Option<HeldView>,
    /// What approving would change: in what models read (title, description,
    /// arguments' schema) and in the code, as unified diffs.
    pub review: Option<(String, String)>,
    /// A new title and description wait (with or without a version).
    pub text_waiting: bool,
}

/// A publish held for what the scan found in the texts models read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldView {
    pub version: i64,
    pub requested_by: String,
    pub at_ms: i64,
    pub findings: Vec<FindingView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingView {
    pub field: String,
    /// What kind of hiding, for people: "invisible character", "addressed to the model".
    pub kind: String,
    /// The excerpt, cut around exactly what was found (`marked`).
    pub before: String,
    pub marked: String,
    pub after: String,
}

#[cfg(feature = "ssr")]
pub fn finding_view(f: &toolshed_domain::scan::Finding) -> FindingView {
    let (before, marked, after) = f.marked();
    FindingView {
        field: f.field.clone(),
        kind: f.kind.label().to_owned(),
        before: before.into(),
        marked: marked.into(),
        after: after.into(),
    }
}

/// A held publish as pages show it.
#[cfg(feature = "ssr")]
pub fn held_view(h: toolshed_domain::moderation::HeldPublish) -> HeldView {
    HeldView { version: h.version, requested_by: h.requested_by, at_ms: h.at_ms, findings: h.findings.iter().map(finding_view).collect() }
}

#[cfg(feature = "ssr")]
fn tool_id(id: i64) -> toolshed_domain::ids::ToolId {
    toolshed_domain::ids::ToolId(id)
}

#[cfg(feature = "ssr")]
fn note(raw: &str) -> Result<toolshed_domain::names::ModerationNote, AppError> {
    toolshed_domain::names::ModerationNote::parse(raw).map_err(|e| server::fail(AppError::Invalid(e.to_string())))
}

/// Reports a listing the user can see to the admins.
#[server(endpoint = "moderation/report")]
pub async fn report_listing(tool: i64, reason: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    let reason = toolshed_domain::names::ReportReason::parse(&reason).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    server::toolshed()?.moderation().report(&user, tool_id(tool), &reason).await.map_err(server::fail)
}

#[server(endpoint = "moderation/queue")]
pub async fn moderation_queue() -> Result<Vec<QueueItemView>, AppError> {
    let user = server::require_admin().await?;
    let items = server::toolshed()?.moderation().moderation_queue(&user).await.map_err(server::fail)?;
    Ok(items
        .into_iter()
        .map(|i| QueueItemView {
            tool: i.tool.id.0,
            department: i.tool.department.clone(),
            name: i.tool.name.clone(),
            title: i.tool.title.clone(),
            owner: i.tool.owner_display_name.clone(),
            status: i.tool.status.as_str().to_owned(),
            published_version: i.tool.published_version,
            pending_version: i.tool.pending_version,
            reports: i.reports.into_iter().map(|r| ReportView { reporter: r.reporter, reason: r.reason, at_ms: r.at_ms }).collect(),
            review: i.review.map(|r| (r.texts, r.code)),
            text_waiting: i.tool.pending_text.is_some(),
            held: i.held.map(held_view),
        })
        .collect())
}

/// hide, disable, restore, delete, feature, unfeature or dismiss, with a required note.
#[server(endpoint = "moderation/act")]
pub async fn moderate(tool: i64, action: String, note: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let action = toolshed_domain::moderation::Action::parse(&action).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    let note = self::note(&note)?;
    server::toolshed()?.moderation().moderate(&user, tool_id(tool), action, &note).await.map_err(server::fail)?;
    Ok(())
}

/// Accepts what the scan found in a held publish (its author may then publish
/// it), with a required note.
#[server(endpoint = "moderation/accept_findings")]
pub async fn accept_findings(tool: i64, note: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let note = self::note(&note)?;
    server::toolshed()?.moderation().accept_findings(&user, tool_id(tool), &note).await.map_err(server::fail)?;
    Ok(())
}

/// `decision`: approve or reject the version waiting for review, with a required note.
#[server(endpoint = "moderation/review")]
pub async fn review_version(tool: i64, decision: String, note: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let note = self::note(&note)?;
    let ts = server::toolshed()?;
    match decision.as_str() {
        "approve" => ts.moderation().approve_version(&user, tool_id(tool), &note).await,
        "reject" => ts.moderation().reject_version(&user, tool_id(tool), &note).await,
        _ => return Err(server::fail(AppError::Invalid("Decision: must be approve or reject".into()))),
    }
    .map_err(server::fail)?;
    Ok(())
}
