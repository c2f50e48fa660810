//! Server functions: thin. Each finds the current user from the session (never
//! from anything the browser sends), calls the domain layer, and maps the answer.

mod accounts;
mod admin;
mod approvals;
mod apps;
mod bundles;
mod connect;
mod json_args;
mod market;
mod moderation;
mod oauth;
mod people;
mod playground;
mod servers;
mod tasks;
mod tools;

pub use accounts::*;
pub use admin::*;
pub use approvals::*;
pub use apps::*;
pub use bundles::*;
pub use connect::*;
pub use json_args::JsonArgs;
pub use market::*;
pub use moderation::*;
pub use oauth::*;
pub use people::*;
pub use playground::*;
pub use servers::*;
pub use tasks::*;
pub use tools::*;

use serde::{Deserialize, Serialize};

/// What the UI knows about the signed-in user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Me {
    pub username: String,
    pub display_name: String,
    pub department: String,
    pub department_title: String,
    pub is_admin: bool,
    /// `member`, `author` or `maintainer` of their department.
    pub role: String,
}

impl Me {
    /// May manage the people of their department (or of any, as an admin).
    pub fn maintains(&self) -> bool {
        self.is_admin || self.role == "maintainer"
    }

    /// The role as the person reads it: "Administrator", or their role in their department.
    pub fn role_title(&self) -> &'static str {
        match self.role.as_str() {
            _ if self.is_admin => "Administrator",
            "maintainer" => "Maintainer",
            "author" => "Author",
            _ => "Member",
        }
    }
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

    /// The domain handle. Missing only when the render that started this call
    /// was thrown away mid-flight (a resource outliving its owner): then the
    /// answer is discarded anyway, and an error ends the call where a panic
    /// would leave the page waiting.
    pub fn toolshed() -> Result<Toolshed, AppError> {
        use_context::<Toolshed>().ok_or_else(|| {
            tracing::debug!("a server function outlived the render that called it");
            AppError::Internal
        })
    }

    pub async fn session() -> Result<Session, AppError> {
        leptos_axum::extract::<Session>().await.map_err(|e| {
            tracing::error!(error = %e, "no session layer");
            AppError::Internal
        })
    }

    /// Sets the HTTP status of the current response from the error, and returns it.
    /// A plain HTML form post (no wasm yet) keeps the redirect back to its page
    /// instead, which carries the error in its query string.
    pub fn fail(e: impl Into<AppError>) -> AppError {
        let e = e.into();
        let from_html_form = use_context::<http::request::Parts>()
            .is_some_and(|p| p.headers.get(http::header::ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(|a| a.contains("text/html")));
        if from_html_form {
            return e;
        }
        if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
            res.set_status(http::StatusCode::from_u16(e.status()).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR));
        }
        e
    }

    pub async fn current_user() -> Result<Option<User>, AppError> {
        let session = session().await?;
        toolshed()?.sessions().session_user(&session).await.map_err(fail)
    }

    pub async fn require_user() -> Result<User, AppError> {
        current_user().await?.ok_or_else(|| fail(AppError::NotSignedIn))
    }

    /// The signed-in user if they are an admin; 403 for anyone else, before
    /// any input is looked at (the domain checks again).
    pub async fn require_admin() -> Result<User, AppError> {
        let user = require_user().await?;
        if user.is_admin {
            Ok(user)
        } else {
            Err(fail(AppError::Forbidden))
        }
    }

    /// The browser's device cookie: it marks a browser that signed in before,
    /// which keeps signing in while guesses from elsewhere are refused.
    const DEVICE_COOKIE: &str = "toolshed_device";

    /// Where a sign-in comes from: the client's address (behind a trusted
    /// proxy, the one it forwarded) and the device cookie, if any.
    pub async fn sign_in_from() -> Result<toolshed_domain::signin::SignInFrom, AppError> {
        let peer = leptos_axum::extract::<axum::extract::ConnectInfo<std::net::SocketAddr>>().await.map_err(|e| {
            tracing::error!(error = %e, "no peer address");
            AppError::Internal
        })?;
        let parts = use_context::<http::request::Parts>().ok_or(AppError::Internal)?;
        let forwarded: Vec<&str> = parts.headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).collect();
        let client = toolshed()?.settings().trusted_proxies.client(peer.0.ip(), &forwarded);
        let device = parts
            .headers
            .get_all(http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == DEVICE_COOKIE)
            .map(|(_, value)| value.to_owned());
        Ok(toolshed_domain::signin::SignInFrom { client, device })
    }

    /// Gives the browser its device cookie (sent to the sign-in endpoint only).
    pub fn keep_device(token: &str) {
        let secure = use_context::<crate::PublicUrl>().is_some_and(|u| u.0.starts_with("https://"));
        let cookie = format!(
            "{DEVICE_COOKIE}={token}; Path=/api/login; Max-Age={}; HttpOnly; SameSite=Strict{}",
            toolshed_domain::signin::DEVICE_LIFETIME_MS / 1000,
            if secure { "; Secure" } else { "" }
        );
        if let (Some(res), Ok(value)) = (use_context::<leptos_axum::ResponseOptions>(), http::HeaderValue::from_str(&cookie)) {
            res.append_header(http::header::SET_COOKIE, value);
        }
    }

    pub fn me(u: &User) -> super::Me {
        super::Me {
            username: u.username.clone(),
            display_name: u.display_name.clone(),
            department: u.department.name.clone(),
            department_title: u.department.title.clone(),
            is_admin: u.is_admin,
            role: u.role.as_str().to_owned(),
        }
    }
}
