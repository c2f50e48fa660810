//! Connected accounts: tools that act as the person who calls them.
//!
//! An admin (or, where one allows it, a department's maintainer, for their
//! own department) registers an upstream OAuth app (`jira`, `github`, …):
//! its endpoints, client, scopes and the hosts its tokens may go to. Each person
//! connects their own account at it (authorization code with PKCE; the
//! server keeps the flow in their session) and may disconnect. A tool
//! declares the apps it uses; a call of it carries the caller's tokens to
//! the sandbox as outbound-only secrets (`account.NAME`), which
//! `$fetch(url, {account: NAME})` sends as a bearer token to the app's hosts
//! only, hop by hop, and masks wherever a response echoes them: the code,
//! its results, recordings and replays never hold one.
//!
//! Tokens are sealed at rest, bound to their person and app. An access token
//! about to expire is refreshed on use, by compare-and-set on the row's
//! `generation`, so replicas racing to refresh keep one answer; a refresh the
//! provider refuses marks the account for reconnecting. Disconnecting, and
//! deactivation, revoke the tokens upstream where the app has a revocation
//! endpoint.

mod oauth;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sqlx::Row;

pub use oauth::{Discovered, Upstream};

use crate::accounts::User;
use crate::ids::UserId;
use crate::names::{Invalid, Role};
use crate::sandbox::{OutboundSecret, Renew};
use crate::secrets::SecretError;
use crate::store::{StoreError, Tx};
use crate::{audit, now_ms};

handle! {
    /// Upstream OAuth apps and the accounts people connect at them.
    Connections
}

/// Where the provider sends the person back to (under the public URL).
pub const CALLBACK_PATH: &str = "/connect/callback";
/// The session key under which why the last connection failed waits for
/// the Account page to say it, once.
pub const FAILURE_KEY: &str = "connect.failure";
/// A flow left at the provider's page longer than this starts over.
const FLOW_LIFETIME_MS: i64 = 15 * 60 * 1000;
/// An access token this close to its expiry is refreshed before use.
const REFRESH_MARGIN_MS: i64 = 30_000;
/// How long an access token is taken to last, from when it was had, when its
/// provider did not say (`expires_in` is only recommended, RFC 6749 §5.1): an
/// hour, the most common lifetime. Only a token with a refresh token is
/// renewed by it, at most once an hour and only when a call needs it; never
/// renewing would fail every call once the provider let it lapse. One that
/// cannot be renewed is used until the provider refuses it.
const UNSAID_LIFETIME_MS: i64 = 60 * 60 * 1000;
/// The outbound-only secret a connected account's token travels as.
pub const SECRET_PREFIX: &str = "account.";

/// Names the connect routes keep for themselves (`/connect/callback`).
const RESERVED: [&str; 1] = ["callback"];

/// What tools call an app by: lowercase letters, digits and `_`, starting
/// with a letter, at most 40.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppName(String);

impl AppName {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let s = raw.trim();
        let ok = s.len() <= 40
            && s.starts_with(|c: char| c.is_ascii_lowercase())
            && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !ok || RESERVED.contains(&s) {
            return Err(Invalid {
                field: "App name",
                reason: format!("“{s}” must be lowercase letters, digits and _, starting with a letter, at most 40, and not “callback”"),
            });
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How an app's endpoints are given: an issuer to discover them from, or each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointsGiven {
    Issuer(String),
    Each { authorize_url: String, token_url: String, revoke_url: Option<String> },
}

/// An app's endpoints, client, scopes and hosts, as registering or editing
/// it gives them, parsed from the form's fields.
#[derive(Debug, Clone)]
pub struct AppSettings {
    pub endpoints: EndpointsGiven,
    pub client_id: String,
    /// `None`: none (registering), or keep the stored one (editing).
    pub client_secret: Option<String>,
    pub scopes: Vec<String>,
    pub hosts: Vec<String>,
}

/// An app as an admin (or an allowed maintainer) registers it.
#[derive(Debug, Clone)]
pub struct AppRegistration {
    pub name: AppName,
    /// `None`: for every department.
    pub department: Option<String>,
    pub settings: AppSettings,
}

fn http_url(field: &'static str, raw: &str) -> Result<String, Invalid> {
    let url = reqwest::Url::parse(raw.trim()).map_err(|e| Invalid { field, reason: format!("is not a URL: {e}") })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(Invalid { field, reason: "must be an http or https URL with a host".into() });
    }
    Ok(url.to_string())
}

impl AppSettings {
    /// The form's fields: `issuer`, or `authorize_url` and `token_url` (and
    /// optionally `revoke_url`); `scopes` and `hosts` separated by spaces,
    /// commas or lines; an empty secret is `None`.
    #[allow(clippy::too_many_arguments)]
    pub fn parse(
        issuer: &str,
        authorize_url: &str,
        token_url: &str,
        revoke_url: &str,
        client_id: &str,
        client_secret: &str,
        scopes: &str,
        hosts: &str,
    ) -> Result<Self, Invalid> {
        let endpoints = match (issuer.trim(), authorize_url.trim(), token_url.trim()) {
            (issuer, "", "") if !issuer.is_empty() => EndpointsGiven::Issuer(http_url("Issuer", issuer)?),
            ("", authorize, token) if !authorize.is_empty() && !token.is_empty() => EndpointsGiven::Each {
                authorize_url: http_url("Authorization endpoint", authorize)?,
                token_url: http_url("Token endpoint", token)?,
                revoke_url: Some(revoke_url.trim()).filter(|r| !r.is_empty()).map(|r| http_url("Revocation endpoint", r)).transpose()?,
            },
            _ => {
                return Err(Invalid {
                    field: "Endpoints",
                    reason: "give either an issuer to discover them from, or the authorization and token endpoints".into(),
                })
            }
        };
        let client_id = client_id.trim();
        if client_id.is_empty() || client_id.len() > 500 {
            return Err(Invalid { field: "Client ID", reason: "is required (at most 500 characters)".into() });
        }
        let split =
            |raw: &str| raw.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()).map(str::to_owned).collect::<Vec<_>>();
        let hosts = split(hosts).iter().map(|h| crate::names::parse_host_entry("Hosts", h)).collect::<Result<Vec<_>, _>>()?;
        if hosts.is_empty() {
            return Err(Invalid { field: "Hosts", reason: "name at least one host its tokens may be sent to".into() });
        }
        let scopes = split(scopes);
        if scopes.iter().any(|s| !s.chars().all(|c| c.is_ascii_graphic() && c != '"' && c != '\\')) {
            return Err(Invalid { field: "Scopes", reason: "are printable ASCII words".into() });
        }
        Ok(Self {
            endpoints,
            client_id: client_id.to_owned(),
            client_secret: Some(client_secret.trim()).filter(|s| !s.is_empty()).map(str::to_owned),
            scopes,
            hosts,
        })
    }
}

impl AppRegistration {
    /// `department` empty: for every department.
    pub fn parse(name: &str, department: &str, settings: AppSettings) -> Result<Self, Invalid> {
        Ok(Self { name: AppName::parse(name)?, department: Some(department.trim()).filter(|d| !d.is_empty()).map(str::to_owned), settings })
    }
}

/// An account taken away (its app removed or given a new client): its
/// tokens, sealed, to revoke.
struct Taken {
    user: i64,
    access: Vec<u8>,
    refresh: Option<Vec<u8>>,
}

/// An app's settings as stored, its endpoints resolved.
struct Stored {
    authorize_url: String,
    token_url: String,
    revoke_url: Option<String>,
    client_id: String,
    scopes: Vec<String>,
    hosts: Vec<String>,
}

impl From<&App> for Stored {
    fn from(app: &App) -> Self {
        Self {
            authorize_url: app.authorize_url.clone(),
            token_url: app.token_url.clone(),
            revoke_url: app.revoke_url.clone(),
            client_id: app.client_id.clone(),
            scopes: app.scopes.clone(),
            hosts: app.hosts.clone(),
        }
    }
}

/// What a flow must find unchanged to finish: where the code and the
/// tokens go, and what the person saw.
fn fingerprint(app: &App) -> String {
    let revoke = app.revoke_url.as_deref().unwrap_or_default();
    format!("{}\n{}\n{revoke}\n{}\n{}", app.authorize_url, app.token_url, app.client_id, app.hosts.join(" "))
}

/// A registered app, as pages show it (its secret never leaves).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct App {
    pub id: i64,
    pub name: String,
    /// `None`: every department's.
    pub department: Option<String>,
    pub authorize_url: String,
    pub token_url: String,
    pub revoke_url: Option<String>,
    pub client_id: String,
    pub secret_set: bool,
    pub scopes: Vec<String>,
    pub hosts: Vec<String>,
    pub created_at: i64,
}

const APP_COLUMNS: &str = "a.id, a.name, d.name AS dept, a.authorize_url, a.token_url, a.revoke_url, a.client_id, a.client_secret, \
     a.scopes, a.hosts, a.created_at";
const APP_FROM: &str = "oauth_apps a LEFT JOIN departments d ON d.id = a.department_id";

fn app_from_row(r: &sqlx::any::AnyRow) -> Result<App, sqlx::Error> {
    Ok(App {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        department: r.try_get("dept")?,
        authorize_url: r.try_get("authorize_url")?,
        token_url: r.try_get("token_url")?,
        revoke_url: r.try_get("revoke_url")?,
        client_id: r.try_get("client_id")?,
        secret_set: r.try_get::<Option<Vec<u8>>, _>("client_secret")?.is_some(),
        scopes: r.try_get::<String, _>("scopes")?.split_whitespace().map(str::to_owned).collect(),
        hosts: r.try_get::<String, _>("hosts")?.lines().map(str::to_owned).collect(),
        created_at: r.try_get("created_at")?,
    })
}

/// Whether the account may be used or must be connected again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AccountStatus {
    Connected,
    /// A refresh was refused: the person must connect again.
    Reconnect,
}

/// A person's account at an app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connected {
    pub scopes: Vec<String>,
    pub status: AccountStatus,
    pub connected_at: i64,
    pub expires_at: Option<i64>,
}

/// An app as a person sees it on their Account page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountView {
    pub app: String,
    pub department: Option<String>,
    /// What connecting asks for.
    pub scopes: Vec<String>,
    pub hosts: Vec<String>,
    pub connected: Option<Connected>,
}

/// A connection under way, kept in the person's session between the
/// redirect to the provider and the callback.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Flow {
    app: String,
    /// The app's endpoints, client and hosts when the flow began: a flow
    /// begun before a change of them finishes nowhere.
    app_was: String,
    state: String,
    verifier: String,
    user: i64,
    started_at: i64,
}

impl Flow {
    /// Whether the provider's `state` is this flow's.
    pub fn is_for(&self, state: &str) -> bool {
        constant_time_eq(self.state.as_bytes(), state.as_bytes())
    }
}

/// A call of a tool acting as its caller at an app the caller has not
/// connected (or must connect again): where to connect, and then call again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct NotConnected {
    pub app: String,
    pub reconnect: bool,
    /// The absolute address of the page that connects it.
    pub link: String,
}

impl NotConnected {
    fn message(&self) -> String {
        let state = if self.reconnect { "needs connecting again (the provider refused to renew it)" } else { "is not connected yet" };
        format!(
            "This tool acts as you at “{}”, and your account there {state}. Open {} to connect it (it takes you to the provider and back), then call the tool again.",
            self.app, self.link
        )
    }
}

/// The accounts a run found lapsed (refused by an API, and not renewable),
/// noted by its renewal: the run's caller tells a failed run as
/// [`NotConnected`] (a member call of code mode inside the sandbox, too).
#[derive(Clone, Default)]
pub(crate) struct Lapsed(Arc<std::sync::Mutex<Option<NotConnected>>>);

impl Lapsed {
    fn note(&self, missing: NotConnected) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(missing);
    }

    /// The first account the run found lapsed.
    pub(crate) fn first(&self) -> Option<NotConnected> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error(
        "Only administrators, and a department's maintainers where an administrator allows it, may register, change and remove its apps."
    )]
    Forbidden,
    #[error("There is no app “{0}”.")]
    NoSuchApp(String),
    #[error("An app named “{0}” already exists.")]
    NameTaken(String),
    #[error("There is no department “{0}”.")]
    NoSuchDepartment(String),
    #[error("The app was changed meanwhile; look at it again and redo your change.")]
    ChangedMeanwhile,
    /// The browser came back without a flow it started, or too late.
    #[error("This connection was not started here, or took too long; start it again from your Account page.")]
    FlowLost,
    /// The provider said no (the person declined, or the grant was refused).
    #[error("The provider did not connect the account: {0}")]
    Declined(String),
    #[error("Could not reach the app's provider: {0}")]
    Unreachable(String),
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for ConnectionError {
    fn from(e: sqlx::Error) -> Self {
        Self::Store(e.into())
    }
}

impl From<Upstream> for ConnectionError {
    fn from(e: Upstream) -> Self {
        match e {
            Upstream::Refused(said) => Self::Declined(said),
            Upstream::Unreachable(said) => Self::Unreachable(said),
        }
    }
}

/// One app with the caller's account at it, as a call loads them.
struct Held {
    app: App,
    secret: Option<Vec<u8>>,
    access: Vec<u8>,
    refresh: Option<Vec<u8>>,
    expires_at: Option<i64>,
    /// When the access token was had: connected, or last refreshed.
    had_at: i64,
    status: String,
    generation: i64,
}

fn purpose(user: i64, app: i64, which: &str) -> String {
    format!("connected-account:{user}:{app}:{which}")
}

fn client_purpose(app: i64) -> String {
    format!("oauth-app:{app}:client-secret")
}

impl Connections<'_> {
    fn callback(self) -> String {
        format!("{}{CALLBACK_PATH}", self.core.settings().public_url.trim_end_matches('/'))
    }

    fn link(self, app: &str) -> String {
        format!("{}/connect/{app}", self.core.settings().public_url.trim_end_matches('/'))
    }

    fn endpoints<'a>(self, app: &'a App, sealed_secret: Option<&[u8]>) -> Result<oauth::Endpoints<'a>, SecretError> {
        Ok(oauth::Endpoints {
            authorize_url: &app.authorize_url,
            token_url: &app.token_url,
            revoke_url: app.revoke_url.as_deref(),
            client_id: &app.client_id,
            client_secret: sealed_secret.map(|s| self.core.secrets().open(&client_purpose(app.id), s)).transpose()?,
        })
    }

    /// Every app (admins) or those of the viewer's department and the company's.
    pub async fn apps(self, viewer: &User) -> Result<Vec<App>, ConnectionError> {
        let sql =
            format!("SELECT {APP_COLUMNS} FROM {APP_FROM} WHERE $1 = 1 OR a.department_id IS NULL OR a.department_id = $2 ORDER BY a.name");
        let rows = sqlx::query(&sql).bind(i64::from(viewer.is_admin)).bind(viewer.department.id.0).fetch_all(self.core.db().pool()).await?;
        Ok(rows.iter().map(app_from_row).collect::<Result<_, _>>()?)
    }

    /// Whether `user` may register, change and remove apps: admins for any
    /// department (or all), a maintainer for their own where an admin allows.
    pub async fn may_register(self, user: &User) -> Result<bool, ConnectionError> {
        if user.is_admin {
            return Ok(true);
        }
        if user.role != Role::Maintainer {
            return Ok(false);
        }
        let allowed: i64 = sqlx::query_scalar("SELECT maintainers_register_apps FROM departments WHERE id = $1")
            .bind(user.department.id.0)
            .fetch_one(self.core.db().pool())
            .await?;
        Ok(allowed != 0)
    }

    /// Whether `user` may change and remove an app of `department` (`None`:
    /// the company's), given whether they [`may_register`](Self::may_register).
    fn may_manage(user: &User, registers: bool, department: Option<&str>) -> bool {
        user.is_admin || (registers && department == Some(user.department.name.as_str()))
    }

    /// The apps `user` may change: every one (admins), or their own
    /// department's (its maintainers, where an admin allows).
    pub async fn managed_apps(self, user: &User) -> Result<Vec<App>, ConnectionError> {
        let registers = self.may_register(user).await?;
        let mut apps = self.apps(user).await?;
        apps.retain(|app| Self::may_manage(user, registers, app.department.as_deref()));
        Ok(apps)
    }

    async fn app_row(self, name: &str) -> Result<(App, Option<Vec<u8>>), ConnectionError> {
        let sql = format!("SELECT {APP_COLUMNS} FROM {APP_FROM} WHERE a.name = $1");
        let row = sqlx::query(&sql).bind(name).fetch_optional(self.core.db().pool()).await?;
        let row = row.ok_or_else(|| ConnectionError::NoSuchApp(name.to_owned()))?;
        Ok((app_from_row(&row)?, row.try_get("client_secret")?))
    }

    /// The app `name` and its sealed secret, if `user` may change it.
    async fn managed(self, user: &User, name: &str) -> Result<(App, Option<Vec<u8>>), ConnectionError> {
        let (app, secret) = self.app_row(name).await?;
        match Self::may_manage(user, self.may_register(user).await?, app.department.as_deref()) {
            true => Ok((app, secret)),
            false => Err(ConnectionError::Forbidden),
        }
    }

    /// The settings as stored: the endpoints as given, or discovered from
    /// the issuer now; and the secret typed, if any.
    async fn resolve(self, settings: AppSettings) -> Result<(Stored, Option<String>), ConnectionError> {
        let AppSettings { endpoints, client_id, client_secret, scopes, hosts } = settings;
        let (authorize_url, token_url, revoke_url) = match endpoints {
            EndpointsGiven::Each { authorize_url, token_url, revoke_url } => (authorize_url, token_url, revoke_url),
            EndpointsGiven::Issuer(issuer) => {
                let found = oauth::discover(&self.core.settings().internal_hosts, &issuer).await?;
                let check = |field, url: &str| http_url(field, url);
                (
                    check("Authorization endpoint", &found.authorization_endpoint)?,
                    check("Token endpoint", &found.token_endpoint)?,
                    found.revocation_endpoint.as_deref().map(|r| check("Revocation endpoint", r)).transpose()?,
                )
            }
        };
        Ok((Stored { authorize_url, token_url, revoke_url, client_id, scopes, hosts }, client_secret))
    }

    /// Writes app `id`'s settings, if they are still `was` (else it changed
    /// meanwhile); `secret`: `None` keeps the stored one, `Some(None)` clears
    /// it. Answers what `secret` did, for the audit log.
    async fn write(
        self,
        tx: &mut Tx,
        id: i64,
        was: &Stored,
        stored: &Stored,
        secret: Option<Option<&str>>,
    ) -> Result<&'static str, ConnectionError> {
        let written = sqlx::query(
            "UPDATE oauth_apps SET authorize_url = $1, token_url = $2, revoke_url = $3, client_id = $4, scopes = $5, hosts = $6 \
             WHERE id = $7 AND authorize_url = $8 AND token_url = $9 AND COALESCE(revoke_url, '') = $10 AND client_id = $11 AND hosts = $12",
        )
        .bind(&stored.authorize_url)
        .bind(&stored.token_url)
        .bind(stored.revoke_url.as_deref())
        .bind(&stored.client_id)
        .bind(stored.scopes.join(" "))
        .bind(stored.hosts.join("\n"))
        .bind(id)
        .bind(&was.authorize_url)
        .bind(&was.token_url)
        .bind(was.revoke_url.as_deref().unwrap_or_default())
        .bind(&was.client_id)
        .bind(was.hosts.join("\n"))
        .execute(&mut **tx)
        .await?;
        if written.rows_affected() == 0 {
            return Err(ConnectionError::ChangedMeanwhile);
        }
        let Some(secret) = secret else { return Ok("kept") };
        // Sealed under its row's id, so it cannot be moved to another app.
        let sealed = secret.map(|s| self.core.secrets().seal(&client_purpose(id), s));
        sqlx::query("UPDATE oauth_apps SET client_secret = $1 WHERE id = $2").bind(&sealed).bind(id).execute(&mut **tx).await?;
        Ok(if sealed.is_some() { "replaced" } else { "cleared" })
    }

    /// Registers an app; with an issuer, its endpoints are discovered now.
    /// A maintainer registers for their own department only.
    pub async fn register(self, user: &User, reg: AppRegistration) -> Result<App, ConnectionError> {
        let own = reg.department.as_deref() == Some(user.department.name.as_str());
        if !(user.is_admin || (own && self.may_register(user).await?)) {
            return Err(ConnectionError::Forbidden);
        }
        let department_id: Option<i64> = match &reg.department {
            Some(name) => Some(
                sqlx::query("SELECT id FROM departments WHERE name = $1")
                    .bind(name)
                    .fetch_optional(self.core.db().pool())
                    .await?
                    .ok_or_else(|| ConnectionError::NoSuchDepartment(name.clone()))?
                    .try_get("id")?,
            ),
            None => None,
        };
        let (stored, secret) = self.resolve(reg.settings).await?;
        let mut tx = self.core.begin().await?;
        let taken = sqlx::query("SELECT 1 FROM oauth_apps WHERE name = $1").bind(reg.name.as_str()).fetch_optional(&mut *tx).await?;
        if taken.is_some() {
            return Err(ConnectionError::NameTaken(reg.name.as_str().to_owned()));
        }
        // The row first, its settings by the one write that changing them uses too.
        let id: i64 = sqlx::query(
            "INSERT INTO oauth_apps (name, department_id, authorize_url, token_url, client_id, hosts, created_by, created_at) \
             VALUES ($1, $2, '', '', '', '', $3, $4) RETURNING id",
        )
        .bind(reg.name.as_str())
        .bind(department_id)
        .bind(user.id.0)
        .bind(now_ms())
        .fetch_one(&mut *tx)
        .await?
        .try_get("id")?;
        let placeholder = Stored::from(&App::default());
        self.write(&mut tx, id, &placeholder, &stored, secret.as_deref().map(Some)).await?;
        let after = serde_json::json!({"department": reg.department, "token_url": stored.token_url, "scopes": stored.scopes, "hosts": stored.hosts});
        audit::record(&mut tx, Some(user.id), "oauth_app.registered", &format!("oauth_app:{}", reg.name.as_str()), None, Some(after))
            .await?;
        tx.commit().await?;
        Ok(self.app_row(reg.name.as_str()).await?.0)
    }

    /// Changes an app's endpoints, client, scopes or hosts; its name and
    /// department stay (tools name it). The secret is kept unless a new one
    /// is given or `clear_secret`. A new client or authorization server
    /// cannot renew the old one's tokens, and people connected knowing which
    /// hosts their tokens go to: after either change every account at the app
    /// needs connecting again.
    pub async fn update(self, user: &User, name: &str, settings: AppSettings, clear_secret: bool) -> Result<App, ConnectionError> {
        let (before, old_secret) = self.managed(user, name).await?;
        let (stored, typed) = self.resolve(settings).await?;
        let endpoints_moved =
            before.authorize_url != stored.authorize_url || before.token_url != stored.token_url || before.revoke_url != stored.revoke_url;
        let new_client = endpoints_moved || before.client_id != stored.client_id;
        // People connected having seen where their tokens would go; somewhere new asks them again.
        let new_hosts = stored.hosts.iter().any(|h| !before.hosts.contains(h));
        // The secret goes to the token and revocation endpoints: to new ones only if typed again.
        let secret = match (clear_secret, typed.as_deref()) {
            (true, _) => Some(None),
            (false, Some(typed)) => Some(Some(typed)),
            (false, None) if endpoints_moved => Some(None),
            (false, None) => None,
        };
        let mut tx = self.core.begin().await?;
        let secret_change = self.write(&mut tx, before.id, &Stored::from(&before), &stored, secret).await?;
        // A new client or endpoint: no token of the old one may reach the new
        // endpoints, so the accounts are forgotten (revoked at the old ones
        // below, once committed); new hosts only: connecting again shows them.
        let forgotten = match new_client {
            true => self.take_accounts(&mut tx, before.id).await?,
            false => {
                if new_hosts {
                    sqlx::query("UPDATE connected_accounts SET status = 'reconnect', generation = generation + 1 WHERE app_id = $1")
                        .bind(before.id)
                        .execute(&mut *tx)
                        .await?;
                }
                Vec::new()
            }
        };
        let old = serde_json::json!({"authorize_url": before.authorize_url, "token_url": before.token_url, "revoke_url": before.revoke_url,
            "client_id": before.client_id, "scopes": before.scopes, "hosts": before.hosts});
        let new = serde_json::json!({"authorize_url": stored.authorize_url, "token_url": stored.token_url, "revoke_url": stored.revoke_url,
            "client_id": stored.client_id, "scopes": stored.scopes, "hosts": stored.hosts, "client_secret": secret_change,
            "accounts": if new_client { "forgotten" } else if new_hosts { "reconnect" } else { "kept" }});
        audit::record(&mut tx, Some(user.id), "oauth_app.changed", &format!("oauth_app:{name}"), Some(old), Some(new)).await?;
        tx.commit().await?;
        self.revoke_all(&before, old_secret.as_deref(), forgotten).await;
        Ok(self.app_row(name).await?.0)
    }

    /// Deletes every account at app `app_id` in `tx`, answering their tokens
    /// (sealed) for revoking once the deletion is committed.
    async fn take_accounts(self, tx: &mut Tx, app_id: i64) -> Result<Vec<Taken>, ConnectionError> {
        let rows = sqlx::query("SELECT user_id, access_token, refresh_token FROM connected_accounts WHERE app_id = $1")
            .bind(app_id)
            .fetch_all(&mut **tx)
            .await?;
        let taken = rows
            .iter()
            .map(|r| Ok(Taken { user: r.try_get("user_id")?, access: r.try_get("access_token")?, refresh: r.try_get("refresh_token")? }))
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        sqlx::query("DELETE FROM connected_accounts WHERE app_id = $1").bind(app_id).execute(&mut **tx).await?;
        Ok(taken)
    }

    /// Revokes taken accounts' tokens at `app`'s endpoints (as they were), best effort.
    async fn revoke_all(self, app: &App, sealed_secret: Option<&[u8]>, taken: Vec<Taken>) {
        for t in taken {
            self.revoke_tokens(t.user, app, sealed_secret, &t.access, t.refresh.as_deref()).await;
        }
    }

    /// Removes an app and every account connected at it (revoked upstream
    /// once forgotten here: an account connected meanwhile is not missed).
    pub async fn remove(self, user: &User, name: &str) -> Result<(), ConnectionError> {
        let (app, secret) = self.managed(user, name).await?;
        let mut tx = self.core.begin().await?;
        let taken = self.take_accounts(&mut tx, app.id).await?;
        sqlx::query("DELETE FROM oauth_apps WHERE id = $1").bind(app.id).execute(&mut *tx).await?;
        audit::record(&mut tx, Some(user.id), "oauth_app.removed", &format!("oauth_app:{name}"), None, None).await?;
        tx.commit().await?;
        self.revoke_all(&app, secret.as_deref(), taken).await;
        Ok(())
    }

    /// The apps the viewer may connect, with their account at each: the
    /// company's, their department's, and any they connected before.
    pub async fn accounts(self, viewer: &User) -> Result<Vec<AccountView>, ConnectionError> {
        let sql = format!(
            "SELECT {APP_COLUMNS}, c.scopes AS granted, c.status, c.connected_at, c.expires_at FROM {APP_FROM} \
             LEFT JOIN connected_accounts c ON c.app_id = a.id AND c.user_id = $1 \
             WHERE a.department_id IS NULL OR a.department_id = $2 OR c.user_id IS NOT NULL ORDER BY a.name"
        );
        let rows = sqlx::query(&sql).bind(viewer.id.0).bind(viewer.department.id.0).fetch_all(self.core.db().pool()).await?;
        rows.iter()
            .map(|r| {
                let app = app_from_row(r)?;
                let connected = match r.try_get::<Option<i64>, _>("connected_at")? {
                    Some(connected_at) => Some(Connected {
                        scopes: r.try_get::<String, _>("granted")?.split_whitespace().map(str::to_owned).collect(),
                        status: if r.try_get::<String, _>("status")? == "ok" { AccountStatus::Connected } else { AccountStatus::Reconnect },
                        connected_at,
                        expires_at: r.try_get("expires_at")?,
                    }),
                    None => None,
                };
                Ok(AccountView { app: app.name, department: app.department, scopes: app.scopes, hosts: app.hosts, connected })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// Starts connecting `user`'s account at `app`: where to send them, and
    /// the flow to keep in their session until they come back.
    pub async fn begin(self, user: &User, app: &str) -> Result<(String, Flow), ConnectionError> {
        let (app, secret) = self.app_row(app).await?;
        let endpoints = self.endpoints(&app, secret.as_deref())?;
        let (url, state, verifier) = oauth::authorization(&self.core.settings().internal_hosts, &endpoints, &self.callback(), &app.scopes)?;
        let flow = Flow { app: app.name.clone(), app_was: fingerprint(&app), state, verifier, user: user.id.0, started_at: now_ms() };
        Ok((url.to_string(), flow))
    }

    /// Finishes a flow the provider sent the person back from with `state`
    /// and `code` (or the error it said); answers the app's name. The flow is used once whatever
    /// happens (the caller has taken it out of the session).
    pub async fn finish(self, user: &User, flow: Flow, state: &str, code: Result<&str, String>) -> Result<String, ConnectionError> {
        let fresh = now_ms() - flow.started_at < FLOW_LIFETIME_MS;
        let same = flow.user == user.id.0 && flow.is_for(state);
        if !fresh || !same {
            return Err(ConnectionError::FlowLost);
        }
        // Only the provider that was sent the state may say it declined.
        let code = code.map_err(ConnectionError::Declined)?;
        let (app, secret) = self.app_row(&flow.app).await?;
        if fingerprint(&app) != flow.app_was {
            return Err(ConnectionError::FlowLost);
        }
        let endpoints = self.endpoints(&app, secret.as_deref())?;
        let internal = &self.core.settings().internal_hosts;
        let granted = oauth::exchange_code(internal, &endpoints, &self.callback(), code, &flow.verifier, now_ms()).await?;
        let scopes = granted.scopes.clone().unwrap_or_else(|| app.scopes.clone());
        let boxed = self.core.secrets();
        let access = boxed.seal(&purpose(user.id.0, app.id, "access"), &granted.access_token);
        let refresh = granted.refresh_token.as_deref().map(|t| boxed.seal(&purpose(user.id.0, app.id, "refresh"), t));
        let mut tx = self.core.begin().await?;
        // Connecting again moves `generation` on: a refresh begun on the old
        // tokens can then overwrite nothing.
        let replaced = sqlx::query(
            "UPDATE connected_accounts SET access_token = $1, refresh_token = $2, expires_at = $3, scopes = $4, status = 'ok', \
             generation = generation + 1, connected_at = $5, refreshed_at = NULL WHERE user_id = $6 AND app_id = $7",
        )
        .bind(&access)
        .bind(&refresh)
        .bind(granted.expires_at)
        .bind(scopes.join(" "))
        .bind(now_ms())
        .bind(user.id.0)
        .bind(app.id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if replaced == 0 {
            sqlx::query(
                "INSERT INTO connected_accounts (user_id, app_id, access_token, refresh_token, expires_at, scopes, status, generation, connected_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, 'ok', 0, $7)",
            )
            .bind(user.id.0)
            .bind(app.id)
            .bind(access)
            .bind(refresh)
            .bind(granted.expires_at)
            .bind(scopes.join(" "))
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
        }
        let after = serde_json::json!({"app": app.name, "scopes": scopes});
        audit::record(&mut tx, Some(user.id), "account.connected", &format!("user:{}", user.username), None, Some(after)).await?;
        tx.commit().await?;
        Ok(app.name)
    }

    /// Disconnects `user`'s account at `app`: revoked upstream (where the app
    /// can), then forgotten.
    pub async fn disconnect(self, user: &User, app: &str) -> Result<(), ConnectionError> {
        let (found, _) = self.app_row(app).await?;
        self.revoke(user.id.0, app).await;
        let mut tx = self.core.begin().await?;
        let gone = sqlx::query("DELETE FROM connected_accounts WHERE user_id = $1 AND app_id = $2")
            .bind(user.id.0)
            .bind(found.id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if gone > 0 {
            let before = serde_json::json!({"app": app});
            audit::record(&mut tx, Some(user.id), "account.disconnected", &format!("user:{}", user.username), Some(before), None).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A deactivated person's accounts: revoked upstream, then forgotten.
    pub(crate) async fn forget_all(self, user: UserId) -> Result<(), StoreError> {
        let apps: Vec<String> =
            sqlx::query("SELECT a.name FROM connected_accounts c JOIN oauth_apps a ON a.id = c.app_id WHERE c.user_id = $1")
                .bind(user.0)
                .fetch_all(self.core.db().pool())
                .await?
                .iter()
                .map(|r| r.try_get("name"))
                .collect::<Result<_, _>>()?;
        for app in &apps {
            self.revoke(user.0, app).await;
        }
        sqlx::query("DELETE FROM connected_accounts WHERE user_id = $1").bind(user.0).execute(self.core.db().pool()).await?;
        Ok(())
    }

    /// Revokes the account's tokens upstream, best effort: the provider may
    /// be down, and forgetting the tokens here must not wait for it.
    async fn revoke(self, user: i64, app: &str) {
        let Ok(Some(held)) = self.held(user, app).await else { return };
        self.revoke_tokens(user, &held.app, held.secret.as_deref(), &held.access, held.refresh.as_deref()).await;
    }

    async fn revoke_tokens(self, user: i64, app: &App, sealed_secret: Option<&[u8]>, access: &[u8], refresh: Option<&[u8]>) {
        let Ok(endpoints) = self.endpoints(app, sealed_secret) else { return };
        let internal = &self.core.settings().internal_hosts;
        let boxed = self.core.secrets();
        // Revoking the refresh token ends the grant at most providers; the
        // access token is revoked too for those where it lives on.
        for (hint, sealed) in [("refresh_token", refresh), ("access_token", Some(access))] {
            let Some(sealed) = sealed else { continue };
            let Ok(token) = boxed.open(&purpose(user, app.id, hint.trim_end_matches("_token")), sealed) else { continue };
            if let Err(e) = oauth::revoke(internal, &endpoints, &token, hint).await {
                tracing::warn!(app = app.name, error = %e, "revoking a connected account's token failed");
            }
        }
    }

    async fn held(self, user: i64, app: &str) -> Result<Option<Held>, ConnectionError> {
        let sql = format!(
            "SELECT {APP_COLUMNS}, c.access_token, c.refresh_token, c.expires_at, COALESCE(c.refreshed_at, c.connected_at) AS had_at, \
             c.status, c.generation FROM {APP_FROM} \
             JOIN connected_accounts c ON c.app_id = a.id AND c.user_id = $1 WHERE a.name = $2"
        );
        let Some(r) = sqlx::query(&sql).bind(user).bind(app).fetch_optional(self.core.db().pool()).await? else { return Ok(None) };
        Ok(Some(Held {
            app: app_from_row(&r)?,
            secret: r.try_get("client_secret")?,
            access: r.try_get("access_token")?,
            refresh: r.try_get("refresh_token")?,
            expires_at: r.try_get("expires_at")?,
            had_at: r.try_get("had_at")?,
            status: r.try_get("status")?,
            generation: r.try_get("generation")?,
        }))
    }

    /// Each of `names` with the scopes connecting to it asks for (an app
    /// since removed has none).
    pub(crate) async fn scopes_of(self, names: &[String]) -> Result<Vec<(String, Vec<String>)>, ConnectionError> {
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let scopes = match self.app_row(name).await {
                Ok((app, _)) => app.scopes,
                Err(ConnectionError::NoSuchApp(_)) => Vec::new(),
                Err(e) => return Err(e),
            };
            out.push((name.clone(), scopes));
        }
        Ok(out)
    }

    /// Whether `user` has a usable account at `app` (connected, not waiting to reconnect).
    pub async fn is_connected(self, user: UserId, app: &str) -> Result<bool, StoreError> {
        let found = sqlx::query(
            "SELECT 1 FROM connected_accounts c JOIN oauth_apps a ON a.id = c.app_id WHERE c.user_id = $1 AND a.name = $2 AND c.status = 'ok'",
        )
        .bind(user.0)
        .bind(app)
        .fetch_optional(self.core.db().pool())
        .await?;
        Ok(found.is_some())
    }

    /// Waits, at most `within`, until `user` has a usable account at `app`:
    /// woken by each account they connect (on any replica, through the audit
    /// feed), not by polling. True once it is there.
    pub async fn wait_connected(self, user: &User, app: &str, within: std::time::Duration) -> Result<bool, StoreError> {
        // Subscribed before the first look: a connection made between them is still told.
        let mut news = self.core.listing_changes().subscribe_connected().await?;
        let theirs = format!("user:{}", user.username);
        let waiting = async {
            loop {
                if self.is_connected(user.id, app).await? {
                    return Ok(true);
                }
                loop {
                    match news.recv().await {
                        Ok(target) if *target == *theirs => break,
                        Ok(_) => {}
                        // Missed some: look again.
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(false),
                    }
                }
            }
        };
        tokio::time::timeout(within, waiting).await.unwrap_or(Ok(false))
    }

    /// Whether `name` is an app of the company or of department `department_id`.
    pub(crate) async fn usable_in(self, name: &str, department_id: i64) -> Result<bool, StoreError> {
        let found = sqlx::query("SELECT 1 FROM oauth_apps WHERE name = $1 AND (department_id IS NULL OR department_id = $2)")
            .bind(name)
            .bind(department_id)
            .fetch_optional(self.core.db().pool())
            .await?;
        Ok(found.is_some())
    }

    /// The caller's tokens for `apps`, as outbound-only secrets for a run
    /// (`account.APP`, bound to the app's hosts), refreshed where they are
    /// about to expire; or why the first one cannot be had.
    pub(crate) async fn outbound(self, user: &User, apps: &[String]) -> Result<Vec<OutboundSecret>, Unusable> {
        let mut secrets = Vec::with_capacity(apps.len());
        for app in apps {
            let (token, hosts) = self.access_token(user, app, None).await.map_err(|e| match e {
                Access::Missing { reconnect } => Unusable::NotConnected(NotConnected { app: app.clone(), reconnect, link: self.link(app) }),
                Access::Failed(e) => Unusable::Failed(e),
            })?;
            secrets.push(OutboundSecret::new(format!("{SECRET_PREFIX}{app}"), token, hosts));
        }
        Ok(secrets)
    }

    /// Marks the account for reconnecting, unless it changed since `generation`.
    async fn needs_reconnect(self, user: i64, app: i64, generation: i64) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE connected_accounts SET status = 'reconnect' WHERE user_id = $1 AND app_id = $2 AND generation = $3")
            .bind(user)
            .bind(app)
            .bind(generation)
            .execute(self.core.db().pool())
            .await?;
        Ok(())
    }

    /// How a run of `user`'s renews a token of theirs an API refused
    /// (`$fetch` then sends the request once more): the token held now if
    /// another request renewed it meanwhile, else a refreshed one; none when
    /// it cannot be renewed, and then the account needs connecting again.
    /// The work runs on the caller's runtime, where the database's
    /// connections live, not on the sandbox's fetch runtime.
    /// An account that cannot be renewed is noted in `lapsed`.
    pub(crate) fn renewal(self, user: &User, lapsed: &Lapsed) -> Renew {
        let (core, user, runtime) = (self.core.clone(), user.clone(), tokio::runtime::Handle::current());
        let lapsed = lapsed.clone();
        Renew::new(move |app, refused| {
            let (core, user, lapsed) = (core.clone(), user.clone(), lapsed.clone());
            let renewed = runtime.spawn(async move {
                let connections = Connections::new(&core);
                match connections.access_token(&user, &app, Some(&refused)).await {
                    Ok((token, _)) => Some(token),
                    Err(Access::Missing { reconnect }) => {
                        lapsed.note(NotConnected { link: connections.link(&app), app, reconnect });
                        None
                    }
                    Err(Access::Failed(e)) => {
                        tracing::warn!(app, error = %e, "a refused token could not be renewed");
                        None
                    }
                }
            });
            Box::pin(async move { renewed.await.ok().flatten() })
        })
    }

    /// A valid access token of `user` at `app` and the hosts it may go to;
    /// renewed whatever its expiry if it is `refused`, the token an API
    /// refused.
    async fn access_token(self, user: &User, app: &str, refused: Option<&str>) -> Result<(String, Vec<String>), Access> {
        let held = self.held(user.id.0, app).await?.ok_or(Access::Missing { reconnect: false })?;
        if held.status != "ok" {
            return Err(Access::Missing { reconnect: true });
        }
        let boxed = self.core.secrets();
        let (uid, aid) = (user.id.0, held.app.id);
        let expires_at = held.expires_at.or(held.refresh.is_some().then_some(held.had_at + UNSAID_LIFETIME_MS));
        let token = || boxed.open(&purpose(uid, aid, "access"), &held.access).map_err(ConnectionError::from);
        let due = match refused {
            // Another request renewed it since: that one is as good.
            Some(refused) => token()? == refused,
            None => expires_at.is_some_and(|at| at - REFRESH_MARGIN_MS <= now_ms()),
        };
        if !due {
            return Ok((token()?, held.app.hosts));
        }
        let Some(sealed) = held.refresh.as_deref() else {
            // Expired or refused, and nothing to renew it with: the Account page says so too.
            self.needs_reconnect(uid, aid, held.generation).await.map_err(ConnectionError::from)?;
            return Err(Access::Missing { reconnect: true });
        };
        let refresh = boxed.open(&purpose(uid, aid, "refresh"), sealed).map_err(ConnectionError::from)?;
        let endpoints = self.endpoints(&held.app, held.secret.as_deref()).map_err(ConnectionError::from)?;
        let internal = &self.core.settings().internal_hosts;
        match oauth::refresh(internal, &endpoints, &self.callback(), &refresh, now_ms()).await {
            Ok(granted) => {
                let access = boxed.seal(&purpose(uid, aid, "access"), &granted.access_token);
                let rotated = granted.refresh_token.as_deref().map(|t| boxed.seal(&purpose(uid, aid, "refresh"), t));
                // `status` too: a racing refresh the provider refused (this one's
                // rotation made its grant stale) may have marked the account
                // meanwhile, without moving `generation`; this answer stands.
                let stored = sqlx::query(
                    "UPDATE connected_accounts SET access_token = $1, refresh_token = COALESCE($2, refresh_token), expires_at = $3, \
                     status = 'ok', generation = generation + 1, refreshed_at = $4 WHERE user_id = $5 AND app_id = $6 AND generation = $7",
                )
                .bind(access)
                .bind(rotated)
                .bind(granted.expires_at)
                .bind(now_ms())
                .bind(uid)
                .bind(aid)
                .bind(held.generation)
                .execute(self.core.db().pool())
                .await
                .map_err(ConnectionError::from)?;
                if stored.rows_affected() == 0 {
                    tracing::debug!(app, "another replica refreshed this account first; its token is as good");
                }
                Ok((granted.access_token, held.app.hosts))
            }
            Err(Upstream::Refused(said)) => {
                // Another replica may have refreshed first with a token that
                // rotates: then its answer is the one to use.
                if let Some(now) = self.held(uid, app).await? {
                    if now.generation != held.generation && now.status == "ok" {
                        let token = boxed.open(&purpose(uid, aid, "access"), &now.access).map_err(ConnectionError::from)?;
                        return Ok((token, now.app.hosts));
                    }
                }
                tracing::info!(app, reason = %said, "a connected account's refresh was refused; it needs reconnecting");
                self.needs_reconnect(uid, aid, held.generation).await.map_err(ConnectionError::from)?;
                Err(Access::Missing { reconnect: true })
            }
            Err(e @ Upstream::Unreachable(_)) => Err(Access::Failed(e.into())),
        }
    }
}

/// Why no token could be had for a call.
enum Access {
    Missing { reconnect: bool },
    Failed(ConnectionError),
}

impl From<ConnectionError> for Access {
    fn from(e: ConnectionError) -> Self {
        Self::Failed(e)
    }
}

/// Why a call cannot have a token for an app it acts at.
#[derive(Debug)]
pub enum Unusable {
    NotConnected(NotConnected),
    Failed(ConnectionError),
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
