//! Approvals: calls of tools that write, held until an approver decides
//! (`toolshed_domain::tools::approvals`). The inbox of those who decide, and each
//! person's own requests.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use crate::error::AppError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalView {
    pub id: String,
    /// `department/name`.
    pub tool: String,
    pub tool_title: String,
    /// The version that is to run.
    pub version: i64,
    pub department_title: String,
    pub requester: String,
    pub requester_name: String,
    /// The frozen arguments, pretty-printed.
    pub arguments: String,
    /// `pending`, `approved`, `declined`, `withdrawn`, `used` or `expired`.
    pub status: String,
    pub decided_by: Option<String>,
    pub note: Option<String>,
    pub created_at: i64,
    pub decided_at: Option<i64>,
    pub expires_at: i64,
}

impl ApprovalView {
    pub fn pending(&self) -> bool {
        self.status == "pending"
    }
}

/// The Approvals page in one round trip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalsView {
    /// Requests the viewer may decide: waiting first, then the last week's decisions.
    pub inbox: Vec<ApprovalView>,
    /// The viewer's own requests.
    pub mine: Vec<ApprovalView>,
}

#[cfg(feature = "ssr")]
fn view_of(a: toolshed_domain::tools::approvals::Approval) -> ApprovalView {
    ApprovalView {
        id: a.id,
        tool: a.tool,
        tool_title: a.tool_title,
        version: a.version,
        department_title: a.department_title,
        requester: a.requester,
        requester_name: a.requester_name,
        arguments: serde_json::to_string_pretty(&a.arguments).unwrap_or_default(),
        status: a.status.as_str().to_owned(),
        decided_by: a.decided_by,
        note: a.note,
        created_at: a.created_at,
        decided_at: a.decided_at,
        expires_at: a.expires_at,
    }
}

/// How many requests wait for the signed-in person's decision (none when
/// signed out): the header's count.
#[server(endpoint = "approvals/waiting")]
pub async fn approvals_waiting() -> Result<i64, AppError> {
    let Some(user) = server::current_user().await? else { return Ok(0) };
    server::toolshed()?.approvals().waiting_for(&user).await.map_err(|e| {
        tracing::error!(error = %e, "approvals waiting");
        server::fail(AppError::Internal)
    })
}

#[server(endpoint = "approvals")]
pub async fn approvals() -> Result<ApprovalsView, AppError> {
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let approvals = ts.approvals();
    let failed = |e: toolshed_domain::store::StoreError| {
        tracing::error!(error = %e, "approvals");
        server::fail(AppError::Internal)
    };
    let inbox = approvals.inbox(&user).await.map_err(failed)?;
    let mine = approvals.mine(&user).await.map_err(failed)?;
    Ok(ApprovalsView { inbox: inbox.into_iter().map(view_of).collect(), mine: mine.into_iter().map(view_of).collect() })
}

/// A plain form's post too: `decision` is `approve` or `decline`.
#[server(endpoint = "approvals/decide")]
pub async fn decide_approval(id: String, decision: String, note: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    let approve = match decision.as_str() {
        "approve" => true,
        "decline" => false,
        _ => return Err(server::fail(AppError::Invalid("The decision is approve or decline.".into()))),
    };
    server::toolshed()?.approvals().decide(&user, &id, approve, &note).await.map_err(server::fail)
}

/// Withdraws the person's own request while it waits.
#[server(endpoint = "approvals/withdraw")]
pub async fn withdraw_approval(id: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    match server::toolshed()?.approvals().withdraw(user.id, &id).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(server::fail(AppError::Conflict("This request is no longer waiting.".into()))),
        Err(e) => {
            tracing::error!(error = %e, "withdraw an approval request");
            Err(server::fail(AppError::Internal))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepartmentApprovalView {
    pub department: String,
    pub required: bool,
    /// Usernames; empty: the maintainers decide.
    pub approvers: Vec<String>,
}

/// The viewer's department's approval settings, where they maintain it.
#[server(endpoint = "approvals/settings")]
pub async fn approval_settings() -> Result<Option<DepartmentApprovalView>, AppError> {
    let user = server::require_user().await?;
    let Ok(name) = toolshed_domain::names::DepartmentName::parse(&user.department.name) else { return Ok(None) };
    Ok(server::toolshed()?.admin().department_settings(&user, &name).await.ok().map(|d| DepartmentApprovalView {
        department: d.name,
        required: d.approval_required,
        approvers: d.approvers,
    }))
}

/// `required`: `writes` or `off`; `approvers`: usernames separated by commas or spaces.
#[server(endpoint = "approvals/settings/set")]
pub async fn set_approval_settings(department: String, required: String, approvers: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    let name = toolshed_domain::names::DepartmentName::parse(&department).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    let approvers: Vec<String> = approvers.split([',', ' ', '\n']).filter(|u| !u.trim().is_empty()).map(str::to_owned).collect();
    server::toolshed()?.admin().set_approvals(&user, &name, required == "writes", &approvers).await.map_err(server::fail)
}
