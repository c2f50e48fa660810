//! Server functions: thin. Each finds the current user from the session (never
//! from anything the browser sends), calls the domain layer, and maps the answer.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::AppError;

/// What the UI knows about the signed-in user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Me {
    pub username: String,
    pub display_name: String,
    pub department: String,
    pub department_title: String,
    pub is_admin: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepartmentView {
    pub name: String,
    pub title: String,
}

#[cfg(feature = "ssr")]
pub(crate) mod server {
    use leptos::prelude::*;
    use toolshed_domain::{Toolshed, User};
    use tower_sessions::Session;

    use crate::error::AppError;

    pub fn toolshed() -> Toolshed {
        expect_context::<Toolshed>()
    }

    pub async fn session() -> Result<Session, AppError> {
        leptos_axum::extract::<Session>().await.map_err(|e| {
            tracing::error!(error = %e, "no session layer");
            AppError::Internal
        })
    }

    /// Sets the HTTP status of the current response from the error, and returns it.
    pub fn fail(e: impl Into<AppError>) -> AppError {
        let e = e.into();
        if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
            res.set_status(http::StatusCode::from_u16(e.status()).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR));
        }
        e
    }

    pub async fn current_user() -> Result<Option<User>, AppError> {
        let session = session().await?;
        toolshed().session_user(&session).await.map_err(fail)
    }

    pub async fn require_user() -> Result<User, AppError> {
        current_user().await?.ok_or_else(|| fail(AppError::NotSignedIn))
    }

    /// The peer address, for rate limiting sign-ins.
    pub async fn client_address() -> String {
        leptos_axum::extract::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .await
            .map(|c| c.0.ip().to_string())
            .unwrap_or_else(|_| "unknown".into())
    }

    pub fn me(u: &User) -> super::Me {
        super::Me {
            username: u.username.clone(),
            display_name: u.display_name.clone(),
            department: u.department.name.clone(),
            department_title: u.department.title.clone(),
            is_admin: u.is_admin,
        }
    }

    /// Only same-site paths, so a crafted `next` cannot bounce people elsewhere.
    pub fn safe_next(next: Option<String>) -> String {
        match next {
            Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n,
            _ => "/".into(),
        }
    }
}

#[server(endpoint = "me")]
pub async fn current_user() -> Result<Option<Me>, AppError> {
    Ok(server::current_user().await?.as_ref().map(server::me))
}

#[server(endpoint = "departments")]
pub async fn departments() -> Result<Vec<DepartmentView>, AppError> {
    let list = server::toolshed().departments().await.map_err(server::fail)?;
    Ok(list.into_iter().map(|d| DepartmentView { name: d.name, title: d.title }).collect())
}

#[server(endpoint = "login")]
pub async fn login(username: String, password: String, next: Option<String>) -> Result<(), AppError> {
    let ts = server::toolshed();
    let client = server::client_address().await;
    let user = ts.sign_in(&username, &password, &client).await.map_err(server::fail)?;
    let session = server::session().await?;
    ts.start_session(&session, &user).await.map_err(server::fail)?;
    tracing::info!(user = %user.username, "signed in");
    leptos_axum::redirect(&server::safe_next(next));
    Ok(())
}

#[server(endpoint = "logout")]
pub async fn logout() -> Result<(), AppError> {
    let session = server::session().await?;
    server::toolshed().end_session(&session).await.map_err(server::fail)?;
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
    let ts = server::toolshed();
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
    let ts = server::toolshed();
    let updated = ts.change_password(user.id, &current, &new).await.map_err(server::fail)?;
    // Other sessions are now stale; this one carries on under the new epoch.
    let session = server::session().await?;
    ts.start_session(&session, &updated).await.map_err(server::fail)?;
    leptos_axum::redirect("/account?changed=1");
    Ok(())
}
