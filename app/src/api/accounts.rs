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
    let list = server::toolshed()?.accounts().departments().await.map_err(server::fail)?;
    Ok(list.into_iter().map(|d| DepartmentView { name: d.name, title: d.title }).collect())
}

#[server(endpoint = "login")]
pub async fn login(username: String, password: String, next: Option<String>) -> Result<(), AppError> {
    let site = use_context::<crate::PublicUrl>().and_then(|p| url::Url::parse(&p.0).ok()).ok_or(AppError::Internal)?;
    let ts = server::toolshed()?;
    let from = server::sign_in_from().await?;
    let signed_in = ts.signin().sign_in(&username, &password, &from).await.map_err(server::fail)?;
    server::keep_device(&signed_in.device);
    let user = signed_in.user;
    let session = server::session().await?;
    ts.sessions().start_session(&session, &user).await.map_err(server::fail)?;
    tracing::info!(user = %user.username, "signed in");
    leptos_axum::redirect(&crate::safe_next(next.as_deref(), &site));
    Ok(())
}

/// How people sign in here, and why the last single sign-on failed (said once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignInMethods {
    pub passwords: bool,
    /// The identity provider's name, when single sign-on is on.
    pub provider: Option<String>,
    pub failure: Option<String>,
}

#[server(endpoint = "login/options")]
pub async fn sign_in_options() -> Result<SignInMethods, AppError> {
    let ts = server::toolshed()?;
    let session = server::session().await?;
    let failure = session.remove::<String>(toolshed_domain::sso::FAILURE_KEY).await.ok().flatten();
    let settings = ts.settings();
    Ok(SignInMethods { passwords: settings.passwords, provider: settings.sso_provider.clone(), failure })
}

#[server(endpoint = "logout")]
pub async fn logout() -> Result<(), AppError> {
    let session = server::session().await?;
    server::toolshed()?.sessions().end_session(&session).await.map_err(server::fail)?;
    leptos_axum::redirect("/");
    Ok(())
}

/// Registers from the form: with `invite` (a link's token) into its department
/// and role, otherwise as the registration policy allows. Someone who asked to
/// join is sent to sign-in, which says their request waits.
#[server(endpoint = "register")]
#[allow(clippy::too_many_arguments)]
pub async fn register(
    username: String,
    display_name: String,
    #[server(default)] department: String,
    new_department: Option<String>,
    password: String,
    password_confirm: String,
    invite: Option<String>,
) -> Result<(), AppError> {
    use toolshed_domain::accounts::Registration;
    use toolshed_domain::membership::Joined;
    if password != password_confirm {
        return Err(server::fail(AppError::Invalid("The two passwords do not match.".into())));
    }
    let ts = server::toolshed()?;
    let invite = invite.filter(|t| !t.trim().is_empty());
    let department = match (&invite, new_department.as_deref().map(str::trim)) {
        // The invitation names the department; the form's fields are not shown.
        (Some(token), _) => match ts.membership().invite_info(token).await.map_err(server::fail)? {
            Some(info) => info.department,
            None => return Err(server::fail(toolshed_domain::AccountError::InvalidInvite)),
        },
        // "Create a new department" is a separate field so the list stays a plain <select>.
        (None, Some(d)) if !d.is_empty() => d.to_owned(),
        (None, _) => department,
    };
    let reg = Registration::parse(&username, &display_name, &department, &password).map_err(server::fail)?;
    match ts.membership().join(reg, invite.as_deref()).await.map_err(server::fail)? {
        Joined::Member(user) => {
            let session = server::session().await?;
            ts.sessions().start_session(&session, &user).await.map_err(server::fail)?;
            tracing::info!(user = %user.username, department = %user.department.name, role = user.role.as_str(), "registered");
            leptos_axum::redirect("/");
        }
        Joined::Pending(department) => {
            tracing::info!(%username, %department, "asked to join");
            leptos_axum::redirect(&format!("/login?requested={}", crate::form_encode(&department)));
        }
    }
    Ok(())
}

/// What the registration form offers: the policy, and the invitation its link carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistrationOffer {
    /// `invite`, `open` or `sso`.
    pub policy: String,
    /// The invitation, when the link carried a usable one.
    pub invite: Option<InviteView>,
    /// The link carried a token that cannot be used (any more).
    pub invite_invalid: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InviteView {
    pub department: String,
    pub department_title: String,
    pub role: String,
}

#[server(endpoint = "register/options")]
pub async fn register_options(invite: Option<String>) -> Result<RegistrationOffer, AppError> {
    use toolshed_domain::membership::RegistrationPolicy;
    let ts = server::toolshed()?;
    let policy = match ts.membership().registration_policy() {
        // Without passwords, accounts come from the identity provider whatever the policy.
        _ if !ts.settings().passwords => "sso",
        RegistrationPolicy::Invite => "invite",
        RegistrationPolicy::Open => "open",
        RegistrationPolicy::Sso => "sso",
    };
    let token = invite.filter(|t| !t.trim().is_empty());
    let info = match &token {
        Some(t) => ts.membership().invite_info(t).await.map_err(server::fail)?,
        None => None,
    };
    Ok(RegistrationOffer {
        policy: policy.to_owned(),
        invite_invalid: token.is_some() && info.is_none(),
        invite: info.map(|i| InviteView {
            department: i.department,
            department_title: i.department_title,
            role: i.role.as_str().to_owned(),
        }),
    })
}

/// Whether the Account page offers to change a password (SSO accounts have none).
#[server(endpoint = "account/password")]
pub async fn has_password() -> Result<bool, AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.accounts().signs_in_with_password(&user).await.map_err(server::fail)
}

#[server(endpoint = "change_password")]
pub async fn change_password(current: String, new: String, confirm: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    if new != confirm {
        return Err(server::fail(AppError::Invalid("The two new passwords do not match.".into())));
    }
    let ts = server::toolshed()?;
    let updated = ts.accounts().change_password(user.id, &current, &new).await.map_err(server::fail)?;
    // Other sessions are now stale; this one carries on under the new epoch.
    let session = server::session().await?;
    ts.sessions().start_session(&session, &updated).await.map_err(server::fail)?;
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
    let tokens = server::toolshed()?.tokens().list(&user).await.map_err(server::fail)?;
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
    let (_, token) = server::toolshed()?.tokens().create_token(&user, &name, days, scope, publish.is_some()).await.map_err(server::fail)?;
    Ok(token)
}

#[server(endpoint = "tokens/revoke")]
pub async fn revoke_token(id: i64) -> Result<(), AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.tokens().revoke_token(&user, id).await.map_err(server::fail)
}
