//! Connected accounts: the upstream OAuth apps admins register (the Admin
//! page; allowed maintainers, for their department, on People), each person's accounts at them (the Account page), and
//! the apps a tool acts as its caller at (the editor's settings). Connecting
//! itself is a browser redirect (`/connect/{app}`, served by the server
//! crate); a client secret or token never comes back from here.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use crate::error::AppError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppView {
    pub name: String,
    /// Empty: every department's.
    pub department: String,
    pub authorize_url: String,
    pub token_url: String,
    pub revoke_url: Option<String>,
    pub client_id: String,
    pub secret_set: bool,
    pub scopes: Vec<String>,
    pub hosts: Vec<String>,
}

/// An app and the viewer's account at it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountAtApp {
    pub app: String,
    pub scopes: Vec<String>,
    pub hosts: Vec<String>,
    /// `connected`, `reconnect` or `none`.
    pub status: String,
    /// What the provider granted, once connected.
    pub granted: Vec<String>,
    pub connected_at: Option<i64>,
}

#[cfg(feature = "ssr")]
fn app_view(a: toolshed_domain::connections::App) -> AppView {
    AppView {
        name: a.name,
        department: a.department.unwrap_or_default(),
        authorize_url: a.authorize_url,
        token_url: a.token_url,
        revoke_url: a.revoke_url,
        client_id: a.client_id,
        secret_set: a.secret_set,
        scopes: a.scopes,
        hosts: a.hosts,
    }
}

/// The apps the viewer may change: every one (admins), or their own
/// department's (its maintainers, where an admin allows).
#[server(endpoint = "apps")]
pub async fn oauth_apps() -> Result<Vec<AppView>, AppError> {
    let user = server::require_user().await?;
    let apps = server::toolshed()?.connections().managed_apps(&user).await.map_err(server::fail)?;
    Ok(apps.into_iter().map(app_view).collect())
}

#[cfg(feature = "ssr")]
#[allow(clippy::too_many_arguments)]
fn app_settings(
    issuer: &str,
    authorize_url: &str,
    token_url: &str,
    revoke_url: &str,
    client_id: &str,
    client_secret: &str,
    scopes: &str,
    hosts: &str,
) -> Result<toolshed_domain::connections::AppSettings, AppError> {
    toolshed_domain::connections::AppSettings::parse(issuer, authorize_url, token_url, revoke_url, client_id, client_secret, scopes, hosts)
        .map_err(|e| server::fail(AppError::Invalid(e.to_string())))
}

/// Registers an app: `issuer` to discover its endpoints, or the endpoints
/// themselves. `department` empty: for every department.
#[allow(clippy::too_many_arguments)]
#[server(endpoint = "apps/register")]
pub async fn register_app(
    name: String,
    department: String,
    issuer: String,
    authorize_url: String,
    token_url: String,
    revoke_url: String,
    client_id: String,
    client_secret: String,
    scopes: String,
    hosts: String,
) -> Result<AppView, AppError> {
    use toolshed_domain::connections::AppRegistration;
    let user = server::require_user().await?;
    let settings = app_settings(&issuer, &authorize_url, &token_url, &revoke_url, &client_id, &client_secret, &scopes, &hosts)?;
    let reg = AppRegistration::parse(&name, &department, settings).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    server::toolshed()?.connections().register(&user, reg).await.map(app_view).map_err(server::fail)
}

/// Changes an app's endpoints, client, scopes or hosts. An empty secret
/// keeps the stored one; `clear_secret` (a checkbox, empty when unticked) removes it.
#[allow(clippy::too_many_arguments)]
#[server(endpoint = "apps/update")]
pub async fn update_app(
    name: String,
    issuer: String,
    authorize_url: String,
    token_url: String,
    revoke_url: String,
    client_id: String,
    client_secret: String,
    #[server(default)] clear_secret: String,
    scopes: String,
    hosts: String,
) -> Result<AppView, AppError> {
    let user = server::require_user().await?;
    let settings = app_settings(&issuer, &authorize_url, &token_url, &revoke_url, &client_id, &client_secret, &scopes, &hosts)?;
    let ts = server::toolshed()?;
    ts.connections().update(&user, &name, settings, !clear_secret.is_empty()).await.map(app_view).map_err(server::fail)
}

#[server(endpoint = "apps/remove")]
pub async fn remove_app(name: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.connections().remove(&user, &name).await.map_err(server::fail)
}

/// `allowed`: `yes` or `no` (a plain form's select). Admins only.
#[server(endpoint = "apps/maintainers")]
pub async fn set_app_registration(department: String, allowed: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let department = super::admin::department_name(&department)?;
    server::toolshed()?.admin().set_maintainers_register_apps(&user, &department, allowed == "yes").await.map_err(server::fail)
}

/// The Account page's card: the viewer's accounts, and why their last
/// connection failed (said once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountsCard {
    pub accounts: Vec<AccountAtApp>,
    pub failure: Option<String>,
}

/// The viewer's accounts: every app they may connect, connected or not.
#[server(endpoint = "apps/accounts")]
pub async fn connected_accounts() -> Result<AccountsCard, AppError> {
    use toolshed_domain::connections::{AccountStatus, FAILURE_KEY};
    let user = server::require_user().await?;
    let accounts = server::toolshed()?.connections().accounts(&user).await.map_err(server::fail)?;
    let failure = server::session().await?.remove::<String>(FAILURE_KEY).await.ok().flatten();
    let accounts = accounts
        .into_iter()
        .map(|a| {
            let status = match a.connected.as_ref().map(|c| c.status) {
                Some(AccountStatus::Connected) => "connected",
                Some(AccountStatus::Reconnect) => "reconnect",
                None => "none",
            };
            AccountAtApp {
                app: a.app,
                scopes: a.scopes,
                hosts: a.hosts,
                status: status.into(),
                granted: a.connected.as_ref().map(|c| c.scopes.clone()).unwrap_or_default(),
                connected_at: a.connected.map(|c| c.connected_at),
            }
        })
        .collect();
    Ok(AccountsCard { accounts, failure })
}

/// Disconnects the viewer's account at `app`, revoking it upstream.
#[server(endpoint = "apps/disconnect")]
pub async fn disconnect_account(app: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.connections().disconnect(&user, &app).await.map_err(server::fail)
}

/// Sets the apps a tool acts as its caller at (names separated by spaces or commas).
#[server(endpoint = "tools/accounts")]
pub async fn set_tool_accounts(id: i64, accounts: String) -> Result<Vec<String>, AppError> {
    let user = server::require_user().await?;
    let id = toolshed_domain::ids::ToolId(id);
    server::toolshed()?.tools().set_accounts(&user, id, &accounts).await.map_err(server::fail)
}
