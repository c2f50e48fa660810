//! Accounts: who am I, sign in and out, register, change password.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use super::{DepartmentView, Me};
use crate::error::AppError;

#[server(endpoint = "me")]
pub async fn current_user() -> Result<Option<Me>, AppError> {
    Ok(server::current_user().await?.as_ref().map(server::me))
}

#[server(endpoint = "departments")]
pub async fn departments() -> Result<Vec<DepartmentView>, AppError> {
    let list = server::toolshed()?.departments().await.map_err(server::fail)?;
    Ok(list.into_iter().map(|d| DepartmentView { name: d.name, title: d.title }).collect())
}

#[server(endpoint = "login")]
pub async fn login(username: String, password: String, next: Option<String>) -> Result<(), AppError> {
    let ts = server::toolshed()?;
    let from = server::sign_in_from().await?;
    let signed_in = ts.sign_in(&username, &password, &from).await.map_err(server::fail)?;
    server::keep_device(&signed_in.device);
    let user = signed_in.user;
    let session = server::session().await?;
    ts.start_session(&session, &user).await.map_err(server::fail)?;
    tracing::info!(user = %user.username, "signed in");
    leptos_axum::redirect(&server::safe_next(next));
    Ok(())
}

#[server(endpoint = "logout")]
pub async fn logout() -> Result<(), AppError> {
    let session = server::session().await?;
    server::toolshed()?.end_session(&session).await.map_err(server::fail)?;
    leptos_axum::redirect("/");
    Ok(())
}

#[server(endpoint = "register")]
pub async fn register(
    username: String,
    display_name: String,
    department: String,
    new_department: Option<String>,
    password: String,
    password_confirm: String,
) -> Result<(), AppError> {
    use toolshed_domain::accounts::Registration;
    if password != password_confirm {
        return Err(server::fail(AppError::Invalid("The two passwords do not match.".into())));
    }
    // "Create a new department" is a separate field so the list stays a plain <select>.
    let department = match new_department.as_deref().map(str::trim) {
        Some(d) if !d.is_empty() => d.to_owned(),
        _ => department,
    };
    let reg = Registration::parse(&username, &display_name, &department, &password).map_err(server::fail)?;
    let ts = server::toolshed()?;
    let user = ts.register(reg, None).await.map_err(server::fail)?;
    let session = server::session().await?;
    ts.start_session(&session, &user).await.map_err(server::fail)?;
    tracing::info!(user = %user.username, department = %user.department.name, "registered");
    leptos_axum::redirect("/");
    Ok(())
}

#[server(endpoint = "change_password")]
pub async fn change_password(current: String, new: String, confirm: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    if new != confirm {
        return Err(server::fail(AppError::Invalid("The two new passwords do not match.".into())));
    }
    let ts = server::toolshed()?;
    let updated = ts.change_password(user.id, &current, &new).await.map_err(server::fail)?;
    // Other sessions are now stale; this one carries on under the new epoch.
    let session = server::session().await?;
    ts.start_session(&session, &updated).await.map_err(server::fail)?;
    leptos_axum::redirect("/account?changed=1");
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenView {
    pub id: i64,
    pub name: String,
    pub prefix: String,
    pub scope: Vec<String>,
    /// May publish through the REST API.
    pub publish: bool,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked: bool,
    pub created_at: i64,
}

#[server(endpoint = "tokens")]
pub async fn my_tokens() -> Result<Vec<TokenView>, AppError> {
    let user = server::require_user().await?;
    let tokens = server::toolshed()?.tokens(&user).await.map_err(server::fail)?;
    Ok(tokens
        .into_iter()
        .map(|t| TokenView {
            id: t.id,
            name: t.name,
            prefix: t.prefix,
            scope: t.scope,
            publish: t.publish,
            expires_at: t.expires_at,
            last_used_at: t.last_used_at,
            revoked: t.revoked_at.is_some(),
            created_at: t.created_at,
        })
        .collect())
}

/// Creates a token and returns it: the only time it is ever shown.
#[server(endpoint = "tokens/create")]
/// `publish` is the checkbox: present ("on") when ticked.
pub async fn create_token(name: String, expires_in_days: String, scope: String, publish: Option<String>) -> Result<String, AppError> {
    let user = server::require_user().await?;
    let days = match expires_in_days.trim() {
        "" | "never" => None,
        d => Some(d.parse::<u32>().map_err(|_| server::fail(AppError::Invalid("Expiry: a number of days".into())))?),
    };
    let scope: Vec<String> = scope.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect();
    let (_, token) = server::toolshed()?.create_token(&user, &name, days, scope, publish.is_some()).await.map_err(server::fail)?;
    Ok(token)
}

#[server(endpoint = "tokens/revoke")]
pub async fn revoke_token(id: i64) -> Result<(), AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.revoke_token(&user, id).await.map_err(server::fail)
}
