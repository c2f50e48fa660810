//! Administration: accounts, departments, the tool limits and the audit log
//! (admins only: checked here before any input is read, and again in the domain).

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
    pub awaiting_approval: bool,
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
    let user = server::require_admin().await?;
    let rows = server::toolshed()?.admin().all_users(&user).await.map_err(server::fail)?;
    Ok(rows
        .into_iter()
        .map(|u| UserAdminView {
            username: u.username,
            display_name: u.display_name,
            department: u.department,
            is_admin: u.is_admin,
            is_active: u.is_active,
            awaiting_approval: u.awaiting_approval,
            created_at: u.created_at,
        })
        .collect())
}

/// The listings that failed and slowed most over the last 24 hours.
#[server(endpoint = "admin/health")]
pub async fn admin_health() -> Result<super::HealthRanking, AppError> {
    let user = server::require_admin().await?;
    server::toolshed()?.market().health_ranking(&user).await.map_err(server::fail)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPageView {
    pub entries: Vec<AuditView>,
    pub page: i64,
    pub has_more: bool,
}

/// `from` and `to` are dates (`YYYY-MM-DD`, UTC; `to` inclusive), blank for any.
#[cfg(feature = "ssr")]
fn day_ms(field: &'static str, raw: &str, end_of_day: bool) -> Result<Option<i64>, AppError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    let bad = || server::fail(AppError::Invalid(format!("{field}: must be a date like 2026-01-31")));
    let parts: Vec<i64> = raw.split('-').map(|p| p.parse::<i64>().map_err(|_| bad())).collect::<Result<_, _>>()?;
    let [y, m, d] = parts[..] else { return Err(bad()) };
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(bad());
    }
    // Days since 1970-01-01 (Howard Hinnant's days_from_civil).
    let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Ok(Some((days + i64::from(end_of_day)) * 86_400_000))
}

#[server(endpoint = "admin/audit")]
pub async fn admin_audit(
    action: String,
    actor: String,
    target: String,
    from: String,
    to: String,
    page: String,
) -> Result<AuditPageView, AppError> {
    let user = server::require_admin().await?;
    let filter = toolshed_domain::admin::AuditFilter {
        action,
        actor,
        target,
        from_ms: day_ms("From", &from, false)?,
        to_ms: day_ms("To", &to, true)?,
        page: if page.trim().is_empty() {
            1
        } else {
            page.trim().parse().map_err(|_| server::fail(AppError::Invalid("Page: must be a whole number".into())))?
        },
    };
    let found = server::toolshed()?.admin().audit_log(&user, &filter).await.map_err(server::fail)?;
    Ok(AuditPageView {
        page: found.page,
        has_more: found.has_more,
        entries: found
            .entries
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
            .collect(),
    })
}

/// `role`: `admin` or `member`.
#[server(endpoint = "admin/users/role")]
pub async fn set_user_role(username: String, role: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let is_admin = match role.as_str() {
        "admin" => true,
        "member" => false,
        _ => return Err(server::fail(AppError::Invalid("Role: must be admin or member".into()))),
    };
    server::toolshed()?.admin().set_admin(&user, &username, is_admin).await.map_err(server::fail)?;
    Ok(())
}

/// `status`: `active` or `deactivated`. Deactivation ends the user's sessions and tokens at once.
#[server(endpoint = "admin/users/status")]
pub async fn set_user_status(username: String, status: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let active = match status.as_str() {
        "active" => true,
        "deactivated" => false,
        _ => return Err(server::fail(AppError::Invalid("Status: must be active or deactivated".into()))),
    };
    server::toolshed()?.admin().set_active(&user, &username, active).await.map_err(server::fail)?;
    Ok(())
}

#[cfg(feature = "ssr")]
pub(super) fn department_name(raw: &str) -> Result<toolshed_domain::names::DepartmentName, AppError> {
    toolshed_domain::names::DepartmentName::parse(raw).map_err(|e| server::fail(AppError::Invalid(e.to_string())))
}

#[cfg(feature = "ssr")]
fn title(raw: &str) -> Result<toolshed_domain::names::Title, AppError> {
    toolshed_domain::names::Title::parse(raw).map_err(|e| server::fail(AppError::Invalid(e.to_string())))
}

#[server(endpoint = "admin/users/department")]
pub async fn move_user(username: String, department: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let department = department_name(&department)?;
    server::toolshed()?.admin().move_user(&user, &username, &department).await.map_err(server::fail)?;
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepartmentAdminView {
    pub name: String,
    pub title: String,
    pub review_required: bool,
    pub tests_required: bool,
    /// Its maintainers register its apps for connected accounts.
    pub maintainers_register_apps: bool,
    pub members: i64,
}

#[server(endpoint = "admin/departments")]
pub async fn admin_departments() -> Result<Vec<DepartmentAdminView>, AppError> {
    let user = server::require_admin().await?;
    let rows = server::toolshed()?.admin().admin_departments(&user).await.map_err(server::fail)?;
    Ok(rows
        .into_iter()
        .map(|d| DepartmentAdminView {
            name: d.name,
            title: d.title,
            review_required: d.review_required,
            tests_required: d.tests_required,
            maintainers_register_apps: d.maintainers_register_apps,
            members: d.members,
        })
        .collect())
}

#[server(endpoint = "admin/departments/create")]
pub async fn create_department(name: String, title: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let (name, title) = (department_name(&name)?, self::title(&title)?);
    server::toolshed()?.admin().create_department(&user, &name, &title).await.map_err(server::fail)
}

/// Changes the title; the slug (in URLs and endpoints) stays.
#[server(endpoint = "admin/departments/rename")]
pub async fn rename_department(name: String, title: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let (name, title) = (department_name(&name)?, self::title(&title)?);
    server::toolshed()?.admin().rename_department(&user, &name, &title).await.map_err(server::fail)
}

/// `review`: `required` or `off` (a plain form's select).
#[server(endpoint = "admin/departments/review")]
pub async fn set_department_review(name: String, review: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let name = department_name(&name)?;
    server::toolshed()?.admin().set_review_required(&user, &name, review == "required").await.map_err(server::fail)
}

/// `tests`: `required` or `off` (a plain form's select). Admins, or the
/// department's maintainers (the domain decides).
#[server(endpoint = "departments/tests")]
pub async fn set_department_tests(name: String, tests: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    let name = department_name(&name)?;
    server::toolshed()?.admin().set_tests_required(&user, &name, tests == "required").await.map_err(server::fail)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyView {
    pub max_timeout_ms: i64,
    pub max_task_timeout_ms: i64,
    pub max_memory_mib: i64,
    pub fetch_hosts: Vec<String>,
    pub tests_required: bool,
}

#[server(endpoint = "admin/policy")]
pub async fn admin_policy() -> Result<PolicyView, AppError> {
    server::require_admin().await?;
    let p = server::toolshed()?.policies().policy().await.map_err(|e| {
        tracing::error!(error = %e, "policy");
        server::fail(AppError::Internal)
    })?;
    Ok(PolicyView {
        max_timeout_ms: p.max_timeout_ms,
        max_task_timeout_ms: p.max_task_timeout_ms,
        max_memory_mib: p.max_memory_mib,
        fetch_hosts: p.fetch_hosts,
        tests_required: p.tests_required,
    })
}

/// A plain form: the checkbox arrives only when ticked.
#[server(endpoint = "admin/policy/set")]
pub async fn set_admin_policy(
    max_timeout_ms: i64,
    max_task_timeout_ms: i64,
    max_memory_mib: i64,
    fetch_hosts: String,
    tests_required: Option<bool>,
) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let fetch_hosts =
        toolshed_domain::tools::parse_fetch_allow(&fetch_hosts).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    let tests_required = tests_required.unwrap_or(false);
    let policy = toolshed_domain::policy::Policy { max_timeout_ms, max_task_timeout_ms, max_memory_mib, fetch_hosts, tests_required };
    server::toolshed()?.policies().set_policy(&user, policy).await.map_err(server::fail)
}

/// Single sign-on: which provider group puts new accounts in which department.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMappingsView {
    /// The identity provider's name; `None` when single sign-on is off.
    pub provider: Option<String>,
    pub mappings: Vec<GroupMappingView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMappingView {
    pub group: String,
    pub department: String,
    pub department_title: String,
    pub role: String,
}

#[server(endpoint = "admin/sso/groups")]
pub async fn group_mappings() -> Result<GroupMappingsView, AppError> {
    let user = server::require_admin().await?;
    let ts = server::toolshed()?;
    let mappings = ts.sso().group_mappings(&user).await.map_err(server::fail)?;
    Ok(GroupMappingsView {
        provider: ts.settings().sso_provider.clone(),
        mappings: mappings
            .into_iter()
            .map(|m| GroupMappingView {
                group: m.group,
                department: m.department,
                department_title: m.department_title,
                role: m.role.as_str().into(),
            })
            .collect(),
    })
}

#[server(endpoint = "admin/sso/groups/map")]
pub async fn map_group(group: String, department: String, role: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let role = toolshed_domain::names::Role::parse(&role).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    server::toolshed()?.sso().map_group(&user, &group, &department, role).await.map_err(server::fail)
}

#[server(endpoint = "admin/sso/groups/unmap")]
pub async fn unmap_group(group: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    server::toolshed()?.sso().unmap_group(&user, &group).await.map_err(server::fail)
}
