//! A department's people: invitations, requests to join and roles. For the
//! department's maintainers and for admins; the domain decides who may do what.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use crate::error::AppError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonView {
    pub username: String,
    pub display_name: String,
    pub department: String,
    pub role: String,
    pub is_admin: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InviteRowView {
    pub id: i64,
    pub department: String,
    pub role: String,
    pub created_by: String,
    pub created_at: i64,
    pub expires_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRequestView {
    pub username: String,
    pub display_name: String,
    pub department: String,
    pub requested_at: i64,
}

/// A new invitation's link: shown once, never stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InviteLink {
    pub url: String,
    pub department: String,
    pub role: String,
    pub expires_at: i64,
}

/// Everything the People page shows, in one round trip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeopleView {
    pub people: Vec<PersonView>,
    pub invites: Vec<InviteRowView>,
    pub requests: Vec<JoinRequestView>,
    /// Departments the viewer may invite to.
    pub departments: Vec<String>,
    /// The viewer's own department and whether its publishes need passing test
    /// cases, where the viewer maintains it.
    pub own_tests_required: Option<(String, bool)>,
    /// The viewer's own department, where they register its apps for
    /// connected accounts (a maintainer an admin allows; admins do it on the
    /// Admin page).
    pub own_apps: Option<String>,
}

#[server(endpoint = "people")]
pub async fn people() -> Result<PeopleView, AppError> {
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let people = ts.membership().people(&user).await.map_err(server::fail)?;
    let invites = ts.membership().open_invites(&user).await.map_err(server::fail)?;
    let requests = ts.membership().join_requests(&user).await.map_err(server::fail)?;
    let own = toolshed_domain::names::DepartmentName::parse(&user.department.name).ok();
    let own_tests_required = match own {
        Some(name) => ts.admin().department_settings(&user, &name).await.ok().map(|d| (d.name, d.tests_required)),
        None => None,
    };
    let registers = !user.is_admin && ts.connections().may_register(&user).await.map_err(server::fail)?;
    let own_apps = registers.then(|| user.department.name.clone());
    let departments = if user.is_admin {
        ts.accounts().departments().await.map_err(server::fail)?.into_iter().map(|d| d.name).collect()
    } else {
        vec![user.department.name.clone()]
    };
    Ok(PeopleView {
        own_tests_required,
        own_apps,
        people: people
            .into_iter()
            .map(|p| PersonView {
                username: p.username,
                display_name: p.display_name,
                department: p.department,
                role: p.role.as_str().to_owned(),
                is_admin: p.is_admin,
            })
            .collect(),
        invites: invites
            .into_iter()
            .map(|i| InviteRowView {
                id: i.id,
                department: i.department,
                role: i.role.as_str().to_owned(),
                created_by: i.created_by,
                created_at: i.created_at,
                expires_at: i.expires_at,
            })
            .collect(),
        requests: requests
            .into_iter()
            .map(|r| JoinRequestView {
                username: r.username,
                display_name: r.display_name,
                department: r.department,
                requested_at: r.requested_at,
            })
            .collect(),
        departments,
    })
}

#[cfg(feature = "ssr")]
fn role(raw: &str) -> Result<toolshed_domain::names::Role, AppError> {
    toolshed_domain::names::Role::parse(raw).map_err(|e| server::fail(AppError::Invalid(e.to_string())))
}

#[server(endpoint = "people/invite")]
pub async fn create_invite(department: String, role: String, days: String) -> Result<InviteLink, AppError> {
    let user = server::require_user().await?;
    let role = self::role(&role)?;
    let days = days.trim().parse::<i64>().map_err(|_| server::fail(AppError::Invalid("Valid for: must be a number of days".into())))?;
    let invite = server::toolshed()?.membership().create_invite(&user, &department, role, days).await.map_err(server::fail)?;
    let base = use_context::<crate::PublicUrl>().map(|p| p.0).unwrap_or_default();
    Ok(InviteLink {
        url: format!("{base}/register?invite={}", invite.token),
        department: department.trim().to_owned(),
        role: role.as_str().to_owned(),
        expires_at: invite.expires_at,
    })
}

#[server(endpoint = "people/invite/withdraw")]
pub async fn withdraw_invite(id: i64) -> Result<(), AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.membership().withdraw_invite(&user, id).await.map_err(server::fail)
}

/// `decision`: the role to approve with, or `decline`.
#[server(endpoint = "people/requests/decide")]
pub async fn decide_request(username: String, decision: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    let role = if decision == "decline" { None } else { Some(role(&decision)?) };
    server::toolshed()?.membership().decide_join_request(&user, &username, role).await.map_err(server::fail)
}

#[server(endpoint = "people/role")]
pub async fn set_department_role(username: String, role: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    let role = self::role(&role)?;
    server::toolshed()?.membership().set_role(&user, &username, role).await.map_err(server::fail)?;
    Ok(())
}
