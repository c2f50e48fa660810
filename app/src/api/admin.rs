//! Administration: accounts and the audit log (admins only, checked on the server).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use crate::error::AppError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserAdminView {
    pub username: String,
    pub display_name: String,
    pub department: String,
    pub is_admin: bool,
    pub is_active: bool,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditView {
    pub at_ms: i64,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub change: String,
}

#[server(endpoint = "admin/users")]
pub async fn admin_users() -> Result<Vec<UserAdminView>, AppError> {
    let user = server::require_user().await?;
    let rows = server::toolshed()?.all_users(&user).await.map_err(server::fail)?;
    Ok(rows
        .into_iter()
        .map(|u| UserAdminView {
            username: u.username,
            display_name: u.display_name,
            department: u.department,
            is_admin: u.is_admin,
            is_active: u.is_active,
            created_at: u.created_at,
        })
        .collect())
}

#[server(endpoint = "admin/audit")]
pub async fn admin_audit(action: String) -> Result<Vec<AuditView>, AppError> {
    let user = server::require_user().await?;
    let rows = server::toolshed()?.audit_log(&user, &action, 200).await.map_err(server::fail)?;
    Ok(rows
        .into_iter()
        .map(|a| AuditView {
            at_ms: a.at_ms,
            actor: a.actor.unwrap_or_else(|| "system".into()),
            action: a.action,
            target: a.target,
            change: match (a.before, a.after) {
                (Some(b), Some(a)) => format!("{b} → {a}"),
                (None, Some(a)) => a,
                (Some(b), None) => format!("was {b}"),
                (None, None) => String::new(),
            },
        })
        .collect())
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyView {
    pub max_timeout_ms: i64,
    pub max_memory_mib: i64,
    pub fetch_hosts: Vec<String>,
}

#[server(endpoint = "admin/policy")]
pub async fn admin_policy() -> Result<PolicyView, AppError> {
    let user = server::require_user().await?;
    if !user.is_admin {
        return Err(server::fail(AppError::Forbidden));
    }
    let p = server::toolshed()?.policy().await.map_err(|e| {
        tracing::error!(error = %e, "policy");
        server::fail(AppError::Internal)
    })?;
    Ok(PolicyView { max_timeout_ms: p.max_timeout_ms, max_memory_mib: p.max_memory_mib, fetch_hosts: p.fetch_hosts })
}

#[server(endpoint = "admin/policy/set")]
pub async fn set_admin_policy(max_timeout_ms: i64, max_memory_mib: i64, fetch_hosts: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    let fetch_hosts = toolshed_domain::tools::parse_fetch_allow(&fetch_hosts).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    let policy = toolshed_domain::policy::Policy { max_timeout_ms, max_memory_mib, fetch_hosts };
    server::toolshed()?.set_policy(&user, policy).await.map_err(server::fail)
}
