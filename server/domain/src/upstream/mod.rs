//! External MCP servers (`UpstreamError`): registered by an admin (or, where
//! an admin allows it, by a department's authors) with a credential sealed by
//! [`crate::secrets::SecretBox`]; their tool list imported into the database so
//! every replica serves the same one; their tools served by bundles of the
//! same department as `server__tool`, each call proxied with the credential.
//!
//! Refreshing: on demand (the admin page) and every [`REFRESH_EVERY`] by the
//! server's refresher task. Toolshed does not keep a connection open to hear a
//! server's own `notifications/tools/list_changed`: a held stream per server
//! per replica, re-established after every restart of either side, costs more
//! than a periodic `tools/list`, and only one replica would hear it anyway. A
//! refresh that changes the list writes an audit row, which
//! [`crate::changes`] turns into `list_changed` for the bundles serving it.
//!
//! Pinning (trust on first use): each tool is served only while its
//! definition is the approved one. A tool first seen is approved unless the
//! scan finds hidden instructions in it; any other definition (a change, a
//! rewording of a held one) is held until someone who manages the server
//! approves it (an admin, if the scan found something), so a server cannot
//! change what models read unseen. A tool the server stops listing keeps its
//! row (unlisted) and so its approval: coming back changed, it is held too.

pub mod client;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::Row;
use url::Url;

pub use client::{ClientError, Credential, Endpoint, Transport};

use crate::accounts::User;
use crate::ids::DepartmentId;
use crate::names::Role;
use crate::names::{DepartmentName, Invalid, ToolName};
use crate::secrets::SecretError;
use crate::store::StoreError;
use crate::store::Tx;
use crate::tools::Tool;
use crate::tools::Tools;
use crate::usage::{Outcome, UsageRecord};
use crate::{audit, now_ms};

handle! {
    /// External MCP servers a bundle serves tools of.
    Upstreams
}

/// How often the refresher re-imports every server's tool list.
pub const REFRESH_EVERY: Duration = Duration::from_secs(300);
/// The time limit of a server registered without one.
pub const DEFAULT_TIMEOUT_MS: i64 = 30_000;
const MAX_TIMEOUT_MS: i64 = 300_000;

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("You may not manage external servers of this department.")]
    Forbidden,
    /// Also for servers the user may not see.
    #[error("No such external server.")]
    NotFound,
    #[error("An external server named “{0}” already exists.")]
    NameTaken(String),
    #[error("This tool's definition changed since it was shown: look at it again.")]
    DefinitionChanged,
    #[error("The scan found hidden instructions in this definition: only an administrator may approve it.")]
    ApprovalNeedsAdmin,
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for UpstreamError {
    fn from(e: sqlx::Error) -> Self {
        UpstreamError::Store(e.into())
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> UpstreamError {
    UpstreamError::Invalid(Invalid { field, reason: reason.into() })
}

/// A server's name: the `server` in `server__tool`. Lowercase letters, digits,
/// `-` and single `_` (a `__` would make `server__tool` ambiguous), from a letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerName(String);

impl ServerName {
    pub const MAX: usize = 32;

    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let s = raw.trim();
        let bad = |reason: &str| Err(Invalid { field: "Name", reason: reason.into() });
        if s.is_empty() || s.len() > Self::MAX {
            return bad("must be 1 to 32 characters");
        }
        if !s.starts_with(|c: char| c.is_ascii_lowercase())
            || !s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            return bad("must start with a lowercase letter and hold only lowercase letters, digits, '_' and '-'");
        }
        if s.contains("__") || s.ends_with('_') {
            return bad("may not contain “__” or end with “_”: tools are exposed as server__tool");
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An `http(s)` URL with a host and no credentials or fragment in it.
pub fn parse_url(raw: &str) -> Result<Url, Invalid> {
    let bad = |reason: String| Invalid { field: "URL", reason };
    let url = Url::parse(raw.trim()).map_err(|e| bad(format!("is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad("must be an http:// or https:// URL".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("may not hold a user name or password: use the credential fields".into()));
    }
    Ok(url)
}

/// A time limit in milliseconds, from 1 s to 5 minutes.
pub fn parse_timeout(ms: i64) -> Result<i64, Invalid> {
    if (1000..=MAX_TIMEOUT_MS).contains(&ms) {
        Ok(ms)
    } else {
        Err(Invalid { field: "Time limit", reason: format!("must be between 1000 and {MAX_TIMEOUT_MS} ms") })
    }
}

/// What a form says about the credential.
#[derive(Clone, PartialEq, Eq)]
pub enum CredentialChange {
    /// Leave the stored one as it is.
    Keep,
    /// Send none from now on.
    Clear,
    Set(Credential),
}

impl CredentialChange {
    /// `kind` is `keep`, `none`, `header` or `query`; a header or query needs a
    /// name and a value.
    pub fn parse(kind: &str, name: &str, value: &str) -> Result<Self, Invalid> {
        let bad = |reason: &str| Err(Invalid { field: "Credential", reason: reason.into() });
        let (name, value) = (name.trim().to_owned(), value.trim().to_owned());
        let named = |kind: &str| {
            if name.is_empty() || value.is_empty() {
                return Err(Invalid { field: "Credential", reason: format!("a {kind} credential needs a name and a value") });
            }
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) || value.chars().any(char::is_control) {
                return Err(Invalid {
                    field: "Credential",
                    reason: "the name may hold letters, digits, '-', '_' and '.'; the value no line breaks".into(),
                });
            }
            Ok(())
        };
        match kind {
            "keep" => Ok(CredentialChange::Keep),
            "none" => Ok(CredentialChange::Clear),
            "header" => named("header").map(|()| CredentialChange::Set(Credential::Header { name, value })),
            "query" => named("query").map(|()| CredentialChange::Set(Credential::Query { name, value })),
            _ => bad("must be none, header or query"),
        }
    }
}

/// A registration or an edit, parsed.
pub struct ServerSpec {
    pub url: Url,
    pub transport: Transport,
    pub credential: CredentialChange,
    pub timeout_ms: i64,
}

/// A server as the admin page shows it: never its credential's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerView {
    pub id: i64,
    pub department: String,
    pub name: String,
    pub url: String,
    pub transport: Transport,
    /// `none`, `header` or `query`.
    pub credential_kind: String,
    pub credential_name: String,
    pub credential_set: bool,
    pub timeout_ms: i64,
    pub refreshed_at: Option<i64>,
    pub last_error: Option<String>,
    pub tool_count: i64,
    /// Whether the viewer may edit, refresh or remove it.
    pub may_manage: bool,
    /// Its tools whose definitions wait for approval, unserved meanwhile.
    pub held: Vec<HeldDefinition>,
}

/// A tool of an external server whose definition waits for approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldDefinition {
    /// The definition as the server sends it now.
    pub tool: ImportedTool,
    /// What an approval pins.
    pub fingerprint: String,
    /// Another definition of it was approved before: the server changed it.
    pub changed: bool,
    /// What changed since the approved definition, as a unified diff; `None`
    /// when nothing was approved, or the approval predates keeping it.
    pub changes: Option<String>,
    /// What the scan found in it, if anything.
    pub findings: Vec<crate::scan::Finding>,
    pub since: i64,
}

/// An imported tool, as the server described it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportedTool {
    pub name: String,
    pub title: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub annotations: Option<Value>,
}

impl ImportedTool {
    /// `None` for a tool without a usable name (we expose `server__name`, which
    /// must be an MCP tool name).
    fn from_listed(server: &str, t: &Value) -> Option<Self> {
        let name = t.get("name")?.as_str()?;
        ToolName::parse(&exposed_name(server, name)).ok()?;
        let text = |key: &str| t.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        let input_schema = t.get("inputSchema").filter(|s| s.is_object()).cloned().unwrap_or_else(|| serde_json::json!({"type": "object"}));
        let annotations = t.get("annotations").filter(|a| a.is_object()).cloned();
        let title =
            Some(text("title")).filter(|s| !s.is_empty()).or_else(|| annotations.as_ref()?.get("title")?.as_str().map(str::to_owned));
        Some(Self {
            name: name.to_owned(),
            title: title.unwrap_or_default(),
            description: text("description"),
            input_schema,
            output_schema: t.get("outputSchema").filter(|s| s.is_object()).cloned(),
            annotations,
        })
    }

    /// The tools of a `tools/list` a bundle can serve, in order: those with a
    /// usable name, and of those exposed under one name (`mail.send` and
    /// `mail_send` are both `server__mail_send`), the first.
    fn all_listed(server: &str, tools: &[Value]) -> Vec<Self> {
        let mut imported: Vec<Self> = Vec::with_capacity(tools.len());
        for tool in tools.iter().filter_map(|t| Self::from_listed(server, t)) {
            if !imported.iter().any(|i| exposed_name(server, &i.name) == exposed_name(server, &tool.name)) {
                imported.push(tool);
            }
        }
        imported
    }

    /// A hint from the server's annotations.
    pub fn hint(&self, key: &str) -> bool {
        self.annotations.as_ref().and_then(|a| a.get(key)).and_then(Value::as_bool).unwrap_or(false)
    }

    /// Its definition's SHA-256: what an approval pins.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(serde_json::to_vec(self).expect("a definition serializes")))
    }

    /// All of it that models read, as one text for a diff.
    fn model_text(&self) -> String {
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
        let mut text =
            format!("title: {}\n\ndescription:\n{}\n\ninput schema:\n{}\n", self.title, self.description, pretty(&self.input_schema));
        for (label, value) in [("output schema", &self.output_schema), ("annotations", &self.annotations)] {
            if let Some(v) = value {
                text.push_str(&format!("\n{label}:\n{}\n", pretty(v)));
            }
        }
        text
    }

    /// What models read of it.
    fn model_texts(&self) -> Vec<(String, String)> {
        let mut out = vec![("title".to_owned(), self.title.clone()), ("description".to_owned(), self.description.clone())];
        out.extend(crate::scan::name_text("the tool", &self.name));
        // Clients show the annotations' title too; it is the title when there is no other.
        if let Some(title) = self.annotations.as_ref().and_then(|a| a.get("title")).and_then(Value::as_str).filter(|t| *t != self.title) {
            out.push(("annotations title".to_owned(), title.to_owned()));
        }
        out.extend(crate::scan::schema_texts("input schema", &self.input_schema));
        if let Some(schema) = &self.output_schema {
            out.extend(crate::scan::schema_texts("output schema", schema));
        }
        out
    }
}

/// What models read of a tool as a server lists it (an entry of `tools/list`),
/// field by field, as a refresh scans it; nothing for a tool without a usable name.
pub fn listed_texts(listed: &Value) -> Vec<(String, String)> {
    ImportedTool::from_listed("server", listed).map(|t| t.model_texts()).unwrap_or_default()
}

/// The fingerprint of tools imported before pinning: served as they were,
/// and pinned (scanned as first seen) by the first refresh.
const BEFORE_PINNING: &str = "before-pinning";

/// An imported tool as it is kept: its definition, the approved one's
/// fingerprint, and whether the server still lists it.
#[derive(Clone)]
struct Pinned {
    tool: ImportedTool,
    fingerprint: String,
    approved: Option<String>,
    /// The approved definition, when known.
    approved_definition: Option<ImportedTool>,
    findings: Vec<crate::scan::Finding>,
    held_since: Option<i64>,
    listed: bool,
}

impl Pinned {
    fn served(&self) -> bool {
        self.approved.as_deref() == Some(self.fingerprint.as_str())
    }

    fn from_row(r: &sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
        let findings: Option<String> = r.try_get("findings_json")?;
        Ok(Pinned {
            tool: tool_from_row(r)?,
            fingerprint: r.try_get("fingerprint")?,
            approved: r.try_get("approved")?,
            approved_definition: r.try_get::<Option<String>, _>("approved_definition")?.and_then(|d| serde_json::from_str(&d).ok()),
            findings: findings.and_then(|f| serde_json::from_str(&f).ok()).unwrap_or_default(),
            held_since: r.try_get("held_since")?,
            listed: r.try_get::<i64, _>("listed")? != 0,
        })
    }
}

/// How a bundle exposes an external tool: `server__tool`, a dot (which MCP
/// allows in a name, as in `mail.send`, and some clients' models refuse)
/// written `_`. Calls reach the server under the tool's own name.
pub fn exposed_name(server: &str, tool: &str) -> String {
    format!("{server}__{}", tool.replace('.', "_"))
}

/// An external tool a bundle serves.
#[derive(Debug, Clone)]
pub struct ServedExternal {
    /// `server__tool`.
    pub name: String,
    pub server_id: i64,
    pub server: String,
    pub tool: ImportedTool,
}

/// An external tool as a bundle version lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalMember {
    pub server: String,
    pub tool: String,
}

/// What one refresh found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refreshed {
    pub tools: usize,
    pub changed: bool,
}

/// The audit target of a server (and so its change-feed name).
pub fn audit_target(name: &str) -> String {
    format!("mcp_server:{name}")
}

fn purpose(id: i64) -> String {
    format!("mcp_server:{id}")
}

const VIEW_COLUMNS: &str =
    "s.id, d.name AS department, s.department_id, s.name, s.url, s.transport, s.credential_kind, s.credential_name, \
     CASE WHEN s.credential_sealed IS NULL THEN 0 ELSE 1 END AS credential_set, s.timeout_ms, s.refreshed_at, s.last_error, \
     (SELECT COUNT(*) FROM mcp_server_tools t WHERE t.server_id = s.id AND t.listed = 1) AS tool_count, d.authors_register_servers";

impl Upstreams<'_> {
    /// Whether `user` may register and manage servers of `department`.
    async fn may_manage_servers(self, user: &User, department: DepartmentId) -> Result<bool, UpstreamError> {
        let row = sqlx::query("SELECT authors_register_servers FROM departments WHERE id = $1")
            .bind(department.0)
            .fetch_one(self.core.db().pool())
            .await?;
        Ok(may_manage(user, department, row.try_get::<i64, _>("authors_register_servers")? != 0))
    }

    /// Whether the user's own department lets its authors register servers.
    pub async fn may_register_servers(self, user: &User) -> Result<bool, UpstreamError> {
        self.may_manage_servers(user, user.department.id).await
    }

    /// Registers a server and imports its tools. A server that cannot be
    /// reached is registered all the same (it may be down for a moment): its
    /// status shows why, and Refresh tries again.
    #[tracing::instrument(skip_all, fields(department = %user.department.name))]
    pub async fn register_mcp_server(
        self,
        user: &User,
        department: &DepartmentName,
        name: &ServerName,
        spec: ServerSpec,
    ) -> Result<ServerView, UpstreamError> {
        let dept = sqlx::query("SELECT id FROM departments WHERE name = $1")
            .bind(department.as_str())
            .fetch_optional(self.core.db().pool())
            .await?;
        let dept = match dept {
            Some(r) => DepartmentId(r.try_get("id")?),
            None => return Err(invalid("Department", format!("there is no department “{department}”"))),
        };
        if !self.may_manage_servers(user, dept).await? {
            return Err(UpstreamError::Forbidden);
        }
        let now = now_ms();
        let mut tx = self.core.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO mcp_servers (department_id, name, url, transport, timeout_ms, created_by, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7) ON CONFLICT (name) DO NOTHING RETURNING id",
        )
        .bind(dept.0)
        .bind(name.as_str())
        .bind(spec.url.as_str())
        .bind(spec.transport.as_str())
        .bind(spec.timeout_ms)
        .bind(user.id.0)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = inserted else { return Err(UpstreamError::NameTaken(name.as_str().to_owned())) };
        let id: i64 = row.try_get("id")?;
        self.store_credential(&mut tx, id, &spec.credential).await?;
        let after = serde_json::json!({"department": department.as_str(), "url": spec.url.as_str(), "transport": spec.transport.as_str(), "timeout_ms": spec.timeout_ms});
        audit::record(&mut tx, Some(user.id), "mcp_server.registered", &audit_target(name.as_str()), None, Some(after)).await?;
        tx.commit().await?;
        self.refresh_server(id).await?;
        self.mcp_server(user, id).await
    }

    /// Changes a server's address, transport, credential or time limit, then
    /// re-imports its tools.
    /// A new URL clears a kept credential: it was given for the old address,
    /// and must not follow the server wherever someone points it.
    pub async fn update_mcp_server(self, user: &User, id: i64, mut spec: ServerSpec) -> Result<ServerView, UpstreamError> {
        let before = self.managed_server(user, id).await?;
        if spec.url.as_str() != before.url && matches!(spec.credential, CredentialChange::Keep) {
            spec.credential = CredentialChange::Clear;
        }
        let mut tx = self.core.begin().await?;
        sqlx::query("UPDATE mcp_servers SET url = $1, transport = $2, timeout_ms = $3, updated_at = $4 WHERE id = $5")
            .bind(spec.url.as_str())
            .bind(spec.transport.as_str())
            .bind(spec.timeout_ms)
            .bind(now_ms())
            .bind(id)
            .execute(&mut *tx)
            .await?;
        self.store_credential(&mut tx, id, &spec.credential).await?;
        let describe = |url: &str, transport: Transport, timeout: i64| serde_json::json!({"url": url, "transport": transport.as_str(), "timeout_ms": timeout});
        let mut after = describe(spec.url.as_str(), spec.transport, spec.timeout_ms);
        // The audit log says that the credential changed, never what it is.
        after["credential"] = match &spec.credential {
            CredentialChange::Keep => Value::String("kept".into()),
            CredentialChange::Clear => Value::String("cleared".into()),
            CredentialChange::Set(_) => Value::String("replaced".into()),
        };
        let b = describe(&before.url, before.transport, before.timeout_ms);
        audit::record(&mut tx, Some(user.id), "mcp_server.changed", &audit_target(&before.name), Some(b), Some(after)).await?;
        tx.commit().await?;
        self.refresh_server(id).await?;
        self.mcp_server(user, id).await
    }

    async fn store_credential(self, tx: &mut Tx, id: i64, change: &CredentialChange) -> Result<(), UpstreamError> {
        let (kind, name, sealed) = match change {
            CredentialChange::Keep => return Ok(()),
            CredentialChange::Clear => ("none", "", None),
            CredentialChange::Set(Credential::None) => ("none", "", None),
            CredentialChange::Set(Credential::Header { name, value }) => {
                ("header", name.as_str(), Some(self.core.secrets().seal(&purpose(id), value)))
            }
            CredentialChange::Set(Credential::Query { name, value }) => {
                ("query", name.as_str(), Some(self.core.secrets().seal(&purpose(id), value)))
            }
        };
        sqlx::query("UPDATE mcp_servers SET credential_kind = $1, credential_name = $2, credential_sealed = $3 WHERE id = $4")
            .bind(kind)
            .bind(name)
            .bind(sealed)
            .bind(id)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Removes a server and its imported tools; bundles stop serving them.
    pub async fn remove_mcp_server(self, user: &User, id: i64) -> Result<(), UpstreamError> {
        let server = self.managed_server(user, id).await?;
        let mut tx = self.core.begin().await?;
        sqlx::query("DELETE FROM mcp_server_tools WHERE server_id = $1").bind(id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM mcp_servers WHERE id = $1").bind(id).execute(&mut *tx).await?;
        let before = serde_json::json!({"department": server.department, "url": server.url});
        audit::record(&mut tx, Some(user.id), "mcp_server.removed", &audit_target(&server.name), Some(before), None).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Re-imports a server's tools now.
    pub async fn refresh_mcp_server(self, user: &User, id: i64) -> Result<ServerView, UpstreamError> {
        self.managed_server(user, id).await?;
        self.refresh_server(id).await?;
        self.mcp_server(user, id).await
    }

    /// Re-imports every server's tools (the refresher task); one server's
    /// failure is recorded in its status and does not stop the others.
    pub async fn refresh_all_mcp_servers(self) -> Result<(), UpstreamError> {
        let ids = sqlx::query("SELECT id FROM mcp_servers ORDER BY id").fetch_all(self.core.db().pool()).await?;
        for row in ids {
            let id: i64 = row.try_get("id")?;
            if let Err(error) = self.refresh_server(id).await {
                tracing::error!(server = id, %error, "refreshing an external server failed");
            }
        }
        Ok(())
    }

    /// Whether authors of `department` may register servers for it.
    pub async fn set_authors_register_servers(self, admin: &User, department: &DepartmentName, allowed: bool) -> Result<(), UpstreamError> {
        if !admin.is_admin {
            return Err(UpstreamError::Forbidden);
        }
        let mut tx = self.core.begin().await?;
        let changed = sqlx::query("UPDATE departments SET authors_register_servers = $1 WHERE name = $2")
            .bind(i64::from(allowed))
            .bind(department.as_str())
            .execute(&mut *tx)
            .await?;
        if changed.rows_affected() == 0 {
            return Err(invalid("Department", format!("there is no department “{department}”")));
        }
        let after = serde_json::json!({"authors_register_servers": allowed});
        audit::record(
            &mut tx,
            Some(admin.id),
            "department.server_registration_changed",
            &format!("department:{department}"),
            None,
            Some(after),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Every department, and whether its authors may register servers (admins only).
    pub async fn server_registration_settings(self, admin: &User) -> Result<Vec<(String, bool)>, UpstreamError> {
        if !admin.is_admin {
            return Err(UpstreamError::Forbidden);
        }
        let rows =
            sqlx::query("SELECT name, authors_register_servers FROM departments ORDER BY name").fetch_all(self.core.db().pool()).await?;
        rows.iter().map(|r| Ok((r.try_get("name")?, r.try_get::<i64, _>("authors_register_servers")? != 0))).collect()
    }

    /// The external tools an editor of `bundle` may add: those of its department's servers.
    pub async fn external_candidates(
        self,
        user: &User,
        bundle: crate::ids::ToolId,
    ) -> Result<Vec<ServedExternal>, crate::tools::ToolError> {
        let bundle = Tools::new(self.core).tool_for_edit(user, bundle).await?;
        Ok(self.external_tools_of(bundle.department_id).await?)
    }

    /// The servers `user` may see: every one for admins, their department's for others.
    pub async fn mcp_servers(self, user: &User) -> Result<Vec<ServerView>, UpstreamError> {
        let rows = sqlx::query(&format!(
            "SELECT {VIEW_COLUMNS} FROM mcp_servers s JOIN departments d ON d.id = s.department_id \
             WHERE $1 = 1 OR s.department_id = $2 ORDER BY d.name, s.name"
        ))
        .bind(i64::from(user.is_admin))
        .bind(user.department.id.0)
        .fetch_all(self.core.db().pool())
        .await?;
        let views = rows.iter().map(|r| view_from_row(user, r)).collect::<Result<Vec<_>, _>>()?;
        self.with_held(views).await
    }

    /// The views with their held definitions.
    async fn with_held(self, mut views: Vec<ServerView>) -> Result<Vec<ServerView>, UpstreamError> {
        let rows = sqlx::query(
            "SELECT * FROM mcp_server_tools WHERE listed = 1 AND (approved IS NULL OR approved <> fingerprint) ORDER BY server_id, position",
        )
        .fetch_all(self.core.db().pool())
        .await?;
        for r in rows {
            let server_id: i64 = r.try_get("server_id")?;
            let Some(view) = views.iter_mut().find(|v| v.id == server_id) else { continue };
            let pinned = Pinned::from_row(&r)?;
            let changes = pinned
                .approved_definition
                .as_ref()
                .map(|before| crate::tools::unified_diff(&before.model_text(), &pinned.tool.model_text(), "approved", "now"));
            view.held.push(HeldDefinition {
                changed: pinned.approved.is_some(),
                changes,
                since: pinned.held_since.unwrap_or_default(),
                fingerprint: pinned.fingerprint,
                findings: pinned.findings,
                tool: pinned.tool,
            });
        }
        Ok(views)
    }

    /// Approves the definition `fingerprint` of server `id`'s tool `tool`,
    /// as shown to `user`: its bundles serve it from now on. Those who manage
    /// the server may; a definition the scan found something in needs an admin.
    pub async fn approve_definition(self, user: &User, id: i64, tool: &str, fingerprint: &str) -> Result<ServerView, UpstreamError> {
        let server = self.managed_server(user, id).await?;
        let held =
            server.held.iter().find(|h| h.tool.name == tool && h.fingerprint == fingerprint).ok_or(UpstreamError::DefinitionChanged)?;
        if !held.findings.is_empty() && !user.is_admin {
            return Err(UpstreamError::ApprovalNeedsAdmin);
        }
        let mut tx = self.core.begin().await?;
        let approved = sqlx::query(
            "UPDATE mcp_server_tools SET approved = fingerprint, approved_definition = $4, held_since = NULL \
             WHERE server_id = $1 AND name = $2 AND fingerprint = $3 AND listed = 1",
        )
        .bind(id)
        .bind(tool)
        .bind(fingerprint)
        .bind(serde_json::to_string(&held.tool).expect("a definition serializes"))
        .execute(&mut *tx)
        .await?;
        if approved.rows_affected() == 0 {
            return Err(UpstreamError::DefinitionChanged);
        }
        let after =
            serde_json::json!({"tool": tool, "fingerprint": fingerprint, "findings": held.findings, "description": held.tool.description});
        audit::record(&mut tx, Some(user.id), "mcp_server.definition_approved", &audit_target(&server.name), None, Some(after)).await?;
        tx.commit().await?;
        self.mcp_server(user, id).await
    }

    pub async fn mcp_server(self, user: &User, id: i64) -> Result<ServerView, UpstreamError> {
        let row =
            sqlx::query(&format!("SELECT {VIEW_COLUMNS} FROM mcp_servers s JOIN departments d ON d.id = s.department_id WHERE s.id = $1"))
                .bind(id)
                .fetch_optional(self.core.db().pool())
                .await?
                .ok_or(UpstreamError::NotFound)?;
        let view = view_from_row(user, &row)?;
        if user.is_admin || view.department == user.department.name {
            Ok(self.with_held(vec![view]).await?.remove(0))
        } else {
            Err(UpstreamError::NotFound)
        }
    }

    async fn managed_server(self, user: &User, id: i64) -> Result<ServerView, UpstreamError> {
        Some(self.mcp_server(user, id).await?).filter(|s| s.may_manage).ok_or(UpstreamError::Forbidden)
    }

    /// The imported tools of the servers of a department: what its bundles may include.
    pub async fn external_tools_of(self, department_id: i64) -> Result<Vec<ServedExternal>, StoreError> {
        let rows = sqlx::query(
            "SELECT s.name AS server, t.* FROM mcp_server_tools t JOIN mcp_servers s ON s.id = t.server_id \
             WHERE s.department_id = $1 AND t.listed = 1 AND t.approved = t.fingerprint ORDER BY s.name, t.position",
        )
        .bind(department_id)
        .fetch_all(self.core.db().pool())
        .await?;
        let served = |r: &sqlx::any::AnyRow| -> Result<ServedExternal, sqlx::Error> {
            let server: String = r.try_get("server")?;
            let tool = tool_from_row(r)?;
            Ok(ServedExternal { name: exposed_name(&server, &tool.name), server_id: r.try_get("server_id")?, server, tool })
        };
        Ok(rows.iter().map(served).collect::<Result<_, _>>()?)
    }

    /// The external members of version `n` of `bundle`: each with the tool it
    /// serves, if its server (of the bundle's department) still lists it and
    /// its definition is approved.
    pub(crate) async fn external_items(self, bundle: &Tool, n: i64) -> Result<Vec<(ExternalMember, Option<ServedExternal>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT i.tool_name AS item_tool, i.server_id AS item_server, s.name AS server, t.* FROM bundle_external_items i \
             LEFT JOIN mcp_servers s ON s.id = i.server_id AND s.department_id = $3 \
             LEFT JOIN mcp_server_tools t ON t.server_id = s.id AND t.name = i.tool_name AND t.listed = 1 AND t.approved = t.fingerprint \
             WHERE i.bundle_id = $1 AND i.version = $2 ORDER BY i.position",
        )
        .bind(bundle.id.0)
        .bind(n)
        .bind(bundle.department_id)
        .fetch_all(self.core.db().pool())
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let server: Option<String> = r.try_get("server")?;
            let tool: String = r.try_get("item_tool")?;
            let served = match (&server, r.try_get::<Option<String>, _>("name")?) {
                (Some(s), Some(_)) => Some(ServedExternal {
                    name: exposed_name(s, &tool),
                    server_id: r.try_get("item_server")?,
                    server: s.clone(),
                    tool: tool_from_row(&r)?,
                }),
                _ => None,
            };
            let member = ExternalMember { server: server.unwrap_or_else(|| "(removed server)".into()), tool };
            out.push((member, served));
        }
        Ok(out)
    }

    /// The external members of version `n` of a bundle `user` may see, each
    /// with the tool it serves (`None`: its server no longer lists it).
    pub async fn bundle_external_members(
        self,
        user: &User,
        bundle: crate::ids::ToolId,
        n: i64,
    ) -> Result<Vec<(ExternalMember, Option<ServedExternal>)>, crate::tools::ToolError> {
        let bundle = Tools::new(self.core).tool(user, bundle).await?;
        if bundle.kind != crate::tools::ListingKind::Bundle {
            return Err(crate::tools::ToolError::NotFound);
        }
        Ok(self.external_items(&bundle, n).await?)
    }

    /// Resolves the editor's external members against the tools of the
    /// servers of the bundle's department.
    pub(crate) async fn check_external(
        self,
        bundle: &Tool,
        members: &[ExternalMember],
    ) -> Result<Vec<ServedExternal>, crate::tools::ToolError> {
        let available = self.external_tools_of(bundle.department_id).await?;
        members
            .iter()
            .map(|m| {
                available.iter().find(|a| a.server == m.server && a.tool.name == m.tool).cloned().ok_or_else(|| {
                    let reason =
                        format!("{} is not a tool of an external server of {}", exposed_name(&m.server, &m.tool), bundle.department);
                    Invalid { field: "External tools", reason }.into()
                })
            })
            .collect()
    }

    /// Calls an external tool a bundle serves, as `user`, and returns the
    /// server's `CallToolResult` JSON. Every failure is an `isError` result a
    /// model can read (what went wrong, in words), never a hang: the server's
    /// time limit bounds connecting and calling together.
    #[tracing::instrument(skip_all, fields(department = %user.department.name, server = %tool.server, tool = %tool.name))]
    pub async fn call_external(self, user: &User, bundle: &Tool, tool: &ServedExternal, input: Value, via: crate::tools::Via<'_>) -> Value {
        let started = Instant::now();
        let (outcome, result) = self.call_external_unrecorded(tool, input).await;
        self.core.record_call(
            &bundle.slug(),
            UsageRecord {
                at_ms: now_ms(),
                tool_id: bundle.id.0,
                version: None,
                user_id: user.id.0,
                token_id: via.token_id,
                bundle_id: Some(bundle.id.0),
                transport: via.transport.to_owned(),
                duration_us: started.elapsed().as_micros() as i64,
                outcome,
                upstream_server_id: Some(tool.server_id),
                upstream_tool: Some(tool.tool.name.clone()),
            },
        );
        result
    }

    async fn call_external_unrecorded(self, tool: &ServedExternal, input: Value) -> (Outcome, Value) {
        let failed = |outcome, text: String| (outcome, serde_json::json!({"content": [{"type": "text", "text": text}], "isError": true}));
        match crate::schema::CompiledSchema::new(&tool.tool.input_schema) {
            Ok(schema) => {
                if let Err(violations) = schema.validate(&input) {
                    let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
                    return failed(Outcome::InvalidArguments, format!("Invalid arguments: {}", list.join("; ")));
                }
            }
            // The server's schema is its own business; it will judge the arguments itself.
            Err(e) => tracing::debug!(error = %e, "an external tool's input schema does not compile; not validated here"),
        }
        let (endpoint, limit, http) = match self.endpoint(tool.server_id).await.and_then(|(e, l)| Ok((e, l, self.upstream_http()?))) {
            Ok(e) => e,
            Err(e) => return failed(Outcome::ToolError, format!("External server “{}”: {e}", tool.server)),
        };
        let answer = client::within(limit, async {
            let mut conn = client::Connection::open(&http, &endpoint).await?;
            let result = conn.call_tool(&tool.tool.name, input).await;
            tokio::spawn(conn.close());
            result
        })
        .await;
        match answer {
            Ok(result) if result.get("content").is_some_and(Value::is_array) || result.get("structuredContent").is_some() => {
                let outcome = if result.get("isError").and_then(Value::as_bool) == Some(true) { Outcome::ToolError } else { Outcome::Ok };
                (outcome, result)
            }
            Ok(other) => failed(
                Outcome::ToolError,
                format!("External server “{}” answered without a tool result: {}", tool.server, truncate(&other.to_string())),
            ),
            Err(e @ ClientError::Timeout(_)) => failed(Outcome::Timeout, format!("External server “{}”: {e}", tool.server)),
            Err(e) => failed(Outcome::ToolError, format!("External server “{}”: {e}", tool.server)),
        }
    }

    /// The HTTP client for external servers: no redirects to follow blindly
    /// with a credential attached, no cookies kept between servers, no
    /// internal addresses ([`crate::outbound`]).
    fn upstream_http(self) -> Result<reqwest::Client, UpstreamError> {
        static CLIENTS: std::sync::OnceLock<crate::outbound::Clients> = std::sync::OnceLock::new();
        CLIENTS
            .get_or_init(Default::default)
            .get(&self.core.settings().internal_hosts, |b| b.connect_timeout(Duration::from_secs(10)))
            .map_err(|e| invalid("URL", e))
    }

    /// Where and how to reach server `id`, with its credential opened.
    async fn endpoint(self, id: i64) -> Result<(Endpoint, Duration), UpstreamError> {
        let r = sqlx::query(
            "SELECT url, transport, credential_kind, credential_name, credential_sealed, timeout_ms FROM mcp_servers WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(self.core.db().pool())
        .await?
        .ok_or(UpstreamError::NotFound)?;
        let url: String = r.try_get("url")?;
        let sealed: Option<Vec<u8>> = r.try_get("credential_sealed")?;
        let name: String = r.try_get("credential_name")?;
        let value =
            || -> Result<String, UpstreamError> { Ok(self.core.secrets().open(&purpose(id), sealed.as_deref().unwrap_or_default())?) };
        let credential = match r.try_get::<String, _>("credential_kind")?.as_str() {
            "header" => Credential::Header { name, value: value()? },
            "query" => Credential::Query { name, value: value()? },
            _ => Credential::None,
        };
        let transport = Transport::parse(&r.try_get::<String, _>("transport")?).unwrap_or(Transport::StreamableHttp);
        let url = Url::parse(&url).map_err(|e| invalid("URL", e.to_string()))?;
        crate::outbound::check_url(&self.core.settings().internal_hosts, &url).map_err(|e| invalid("URL", e))?;
        let limit = Duration::from_millis(r.try_get::<i64, _>("timeout_ms")?.max(1) as u64);
        Ok((Endpoint { url, transport, credential }, limit))
    }

    /// Imports server `id`'s tool list. A failure keeps the previous list (its
    /// tools stay in bundles, and calls say why they fail) and is shown as
    /// the server's status; a changed list writes the audit row that tells
    /// bundle sessions.
    async fn refresh_server(self, id: i64) -> Result<(), UpstreamError> {
        let listed = match self.endpoint(id).await.and_then(|(e, l)| Ok((e, l, self.upstream_http()?))) {
            Ok((endpoint, limit, http)) => client::within(limit, async {
                let mut conn = client::Connection::open(&http, &endpoint).await?;
                let tools = conn.list_tools().await;
                tokio::spawn(conn.close());
                tools
            })
            .await
            .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let now = now_ms();
        let tools = match listed {
            Ok(tools) => tools,
            Err(error) => {
                tracing::warn!(server = id, %error, "refreshing an external server failed");
                sqlx::query("UPDATE mcp_servers SET last_error = $1 WHERE id = $2")
                    .bind(&error)
                    .bind(id)
                    .execute(self.core.db().pool())
                    .await?;
                return Ok(());
            }
        };
        let Some(row) = sqlx::query("SELECT name FROM mcp_servers WHERE id = $1").bind(id).fetch_optional(self.core.db().pool()).await?
        else {
            return Ok(()); // removed meanwhile
        };
        let server: String = row.try_get("name")?;
        let imported = ImportedTool::all_listed(&server, &tools);
        let skipped = tools.len() - imported.len();
        let note = (skipped > 0).then(|| {
            format!(
                "{skipped} tool(s) skipped: their names are listed twice, are another's with `.` for `_`, \
                 or do not make MCP tool names as {server}__name"
            )
        });
        let stored = sqlx::query("SELECT * FROM mcp_server_tools WHERE server_id = $1 ORDER BY position")
            .bind(id)
            .fetch_all(self.core.db().pool())
            .await?;
        let stored: Vec<Pinned> = stored.iter().map(Pinned::from_row).collect::<Result<_, _>>()?;
        let listed_before = stored.iter().filter(|p| p.listed).map(|p| &p.tool);
        let unpinned = stored.iter().any(|p| p.listed && p.fingerprint == BEFORE_PINNING);
        if unpinned || !listed_before.eq(imported.iter()) {
            let mut pinned = Vec::with_capacity(stored.len().max(imported.len()));
            for tool in &imported {
                pinned.push(self.pin(stored.iter().find(|p| p.tool.name == tool.name), tool.clone(), now).await);
            }
            // No longer listed: kept, unlisted, with the approval they had.
            let dropped = stored.iter().filter(|p| !imported.iter().any(|t| t.name == p.tool.name));
            pinned.extend(dropped.map(|p| Pinned { listed: false, ..p.clone() }));
            // Two refreshes at once write the same list: the later one wins, whole.
            let mut tx = self.core.begin().await?;
            sqlx::query("DELETE FROM mcp_server_tools WHERE server_id = $1").bind(id).execute(&mut *tx).await?;
            for (position, p) in pinned.iter().enumerate() {
                let t = &p.tool;
                sqlx::query(
                    "INSERT INTO mcp_server_tools (server_id, position, name, title, description, input_schema, output_schema, annotations, \
                     fingerprint, approved, approved_definition, findings_json, held_since, listed) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                )
                .bind(id)
                .bind(position as i64)
                .bind(&t.name)
                .bind(&t.title)
                .bind(&t.description)
                .bind(t.input_schema.to_string())
                .bind(t.output_schema.as_ref().map(Value::to_string))
                .bind(t.annotations.as_ref().map(Value::to_string))
                .bind(&p.fingerprint)
                .bind(&p.approved)
                .bind(p.approved_definition.as_ref().map(|d| serde_json::to_string(d).expect("a definition serializes")))
                .bind((!p.findings.is_empty()).then(|| serde_json::to_string(&p.findings).expect("findings serialize")))
                .bind(p.held_since)
                .bind(i64::from(p.listed))
                .execute(&mut *tx)
                .await?;
            }
            let names = |list: &mut dyn Iterator<Item = &Pinned>| list.map(|p| p.tool.name.clone()).collect::<Vec<_>>();
            let held = names(&mut pinned.iter().filter(|p| p.listed && !p.served()));
            if !held.is_empty() {
                tracing::warn!(%server, ?held, "external tool definitions held for approval");
            }
            let b = serde_json::json!({"tools": names(&mut stored.iter().filter(|p| p.listed))});
            let a = serde_json::json!({"tools": names(&mut pinned.iter().filter(|p| p.listed)), "held": held});
            audit::record(&mut tx, None, "mcp_server.tools_changed", &audit_target(&server), Some(b), Some(a)).await?;
            tx.commit().await?;
        }
        // Bookkeeping, like `last_error` above: when the list was last read.
        sqlx::query("UPDATE mcp_servers SET refreshed_at = $1, last_error = $2 WHERE id = $3")
            .bind(now)
            .bind(note)
            .bind(id)
            .execute(self.core.db().pool())
            .await?;
        Ok(())
    }
}

impl Upstreams<'_> {
    /// Pins `tool` as listed now, `before` being how it was kept (listed or
    /// not): the same definition keeps its approval, or its hold; a tool
    /// first seen (or imported before pinning) is approved if the scan finds
    /// nothing in it; any other definition keeps the old approval, if any,
    /// so it is held.
    async fn pin(self, before: Option<&Pinned>, tool: ImportedTool, now: i64) -> Pinned {
        let fingerprint = tool.fingerprint();
        let before = before.filter(|b| b.fingerprint != BEFORE_PINNING);
        if let Some(b) = before.filter(|b| b.tool == tool) {
            // Served: this definition is the approved one (kept from here on if
            // the approval predates keeping definitions).
            let (approved, approved_definition) = match b.served() {
                true => (Some(fingerprint.clone()), Some(tool.clone())),
                false => (b.approved.clone(), b.approved_definition.clone()),
            };
            let (findings, held_since) = (b.findings.clone(), b.held_since);
            return Pinned { tool, fingerprint, approved, approved_definition, findings, held_since, listed: true };
        }
        let (findings, _) = crate::tools::findings_in(self.core, tool.model_texts()).await;
        let (approved, approved_definition) = match before {
            None if findings.is_empty() => (Some(fingerprint.clone()), Some(tool.clone())),
            None => (None, None),
            Some(b) => (b.approved.clone(), b.approved_definition.clone()),
        };
        let held_since = (approved.as_deref() != Some(fingerprint.as_str())).then_some(now);
        Pinned { tool, fingerprint, approved, approved_definition, findings, held_since, listed: true }
    }
}

fn truncate(s: &str) -> String {
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// Admins manage every server; maintainers their department's; authors too,
/// if an admin allows it for the department; members never.
fn may_manage(user: &User, department: DepartmentId, authors_may: bool) -> bool {
    user.is_admin || (user.department.id == department && (user.role == Role::Maintainer || (authors_may && user.role == Role::Author)))
}

fn view_from_row(user: &User, r: &sqlx::any::AnyRow) -> Result<ServerView, UpstreamError> {
    let department_id: i64 = r.try_get("department_id")?;
    let authors_may: i64 = r.try_get("authors_register_servers")?;
    let transport: String = r.try_get("transport")?;
    Ok(ServerView {
        id: r.try_get("id")?,
        department: r.try_get("department")?,
        name: r.try_get("name")?,
        url: r.try_get("url")?,
        transport: Transport::parse(&transport).unwrap_or(Transport::StreamableHttp),
        credential_kind: r.try_get("credential_kind")?,
        credential_name: r.try_get("credential_name")?,
        credential_set: r.try_get::<i64, _>("credential_set")? != 0,
        timeout_ms: r.try_get("timeout_ms")?,
        refreshed_at: r.try_get("refreshed_at")?,
        last_error: r.try_get("last_error")?,
        tool_count: r.try_get("tool_count")?,
        may_manage: may_manage(user, DepartmentId(department_id), authors_may != 0),
        held: Vec::new(),
    })
}

fn tool_from_row(r: &sqlx::any::AnyRow) -> Result<ImportedTool, sqlx::Error> {
    let json = |text: Option<String>| text.and_then(|t| serde_json::from_str(&t).ok());
    Ok(ImportedTool {
        name: r.try_get("name")?,
        title: r.try_get("title")?,
        description: r.try_get("description")?,
        input_schema: json(Some(r.try_get("input_schema")?)).unwrap_or_else(|| serde_json::json!({"type": "object"})),
        output_schema: json(r.try_get("output_schema")?),
        annotations: json(r.try_get("annotations")?),
    })
}

#[cfg(test)]
mod tests {
    use super::{exposed_name, listed_texts, ImportedTool};

    #[test]
    fn a_tool_named_with_a_dot_is_imported_and_exposed_with_an_underscore_but_one_with_a_space_is_not() {
        assert_eq!(exposed_name("crm", "mail.send"), "crm__mail_send");
        let listed = |name: &str| serde_json::json!({ "name": name, "description": "Sends a mail." });
        assert!(!listed_texts(&listed("mail.send")).is_empty());
        assert!(listed_texts(&listed("mail send")).is_empty());
    }

    #[test]
    fn of_tools_listed_twice_or_exposed_under_one_name_the_first_is_imported() {
        let listed = |name: &str, description: &str| serde_json::json!({ "name": name, "description": description });
        let tools = [
            listed("mail.send", "Sends a mail."),
            listed("mail_send", "Also sends a mail."),
            listed("mail.send", "Sends it again."),
            listed("mail send", "Cannot be named."),
            listed("mail_read", "Reads a mail."),
        ];
        let imported: Vec<(String, String)> =
            ImportedTool::all_listed("crm", &tools).into_iter().map(|t| (t.name, t.description)).collect();
        assert_eq!(imported, [("mail.send".into(), "Sends a mail.".into()), ("mail_read".into(), "Reads a mail.".into())]);
    }
}
