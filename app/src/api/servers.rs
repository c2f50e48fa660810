//! External MCP servers: the servers page's data, registering, editing,
//! refreshing and removing a server, and which departments' authors may
//! register servers. The domain checks who may do what; a server's
//! credential value never comes back from here (only whether one is set).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use crate::error::AppError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerAdminView {
    pub id: i64,
    pub department: String,
    pub name: String,
    pub url: String,
    /// `streamable_http` or `sse`.
    pub transport: String,
    /// `none`, `header` or `query`.
    pub credential_kind: String,
    pub credential_name: String,
    pub credential_set: bool,
    pub timeout_ms: i64,
    pub refreshed_at: Option<i64>,
    pub last_error: Option<String>,
    pub tool_count: i64,
    pub may_manage: bool,
    /// Tools whose definitions wait for approval, unserved meanwhile.
    pub held: Vec<HeldDefinitionView>,
}

/// A tool of an external server whose definition waits for approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldDefinitionView {
    /// `server__tool`, as models would see it.
    pub exposed_name: String,
    pub tool: String,
    pub title: String,
    pub description: String,
    /// Its schemas and annotations, pretty-printed: models read them too,
    /// and an approval pins them with the rest.
    pub input_schema: String,
    pub output_schema: Option<String>,
    pub annotations: Option<String>,
    /// What an approval pins.
    pub fingerprint: String,
    /// Another definition was approved before: the server changed it.
    pub changed: bool,
    /// A unified diff from the approved definition to this one, when it was kept.
    pub changes: Option<String>,
    pub findings: Vec<crate::api::FindingView>,
    pub since_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerRegistrationSetting {
    pub department: String,
    pub authors_may_register: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServersPage {
    pub servers: Vec<ServerAdminView>,
    /// Departments the viewer may register servers for.
    pub may_register_in: Vec<String>,
    /// Admins only: each department's setting.
    pub settings: Vec<ServerRegistrationSetting>,
}

#[cfg(feature = "ssr")]
fn view(s: toolshed_domain::upstream::ServerView) -> ServerAdminView {
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let held = s
        .held
        .into_iter()
        .map(|h| HeldDefinitionView {
            exposed_name: toolshed_domain::upstream::exposed_name(&s.name, &h.tool.name),
            input_schema: pretty(&h.tool.input_schema),
            output_schema: h.tool.output_schema.as_ref().map(pretty),
            annotations: h.tool.annotations.as_ref().map(pretty),
            tool: h.tool.name,
            title: h.tool.title,
            description: h.tool.description,
            fingerprint: h.fingerprint,
            changed: h.changed,
            changes: h.changes,
            findings: h.findings.iter().map(crate::api::finding_view).collect(),
            since_ms: h.since,
        })
        .collect();
    ServerAdminView {
        id: s.id,
        department: s.department,
        name: s.name,
        url: s.url,
        transport: s.transport.as_str().to_owned(),
        credential_kind: s.credential_kind,
        credential_name: s.credential_name,
        credential_set: s.credential_set,
        timeout_ms: s.timeout_ms,
        refreshed_at: s.refreshed_at,
        last_error: s.last_error,
        tool_count: s.tool_count,
        may_manage: s.may_manage,
        held,
    }
}

#[server(endpoint = "servers")]
pub async fn external_servers() -> Result<ServersPage, AppError> {
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let servers = ts.upstreams().mcp_servers(&user).await.map_err(server::fail)?.into_iter().map(view).collect();
    let settings: Vec<ServerRegistrationSetting> = if user.is_admin {
        ts.upstreams()
            .server_registration_settings(&user)
            .await
            .map_err(server::fail)?
            .into_iter()
            .map(|(department, authors_may_register)| ServerRegistrationSetting { department, authors_may_register })
            .collect()
    } else {
        Vec::new()
    };
    let may_register_in = if user.is_admin {
        settings.iter().map(|s| s.department.clone()).collect()
    } else if ts.upstreams().may_register_servers(&user).await.map_err(server::fail)? {
        vec![user.department.name.clone()]
    } else {
        Vec::new()
    };
    Ok(ServersPage { servers, may_register_in, settings })
}

#[cfg(feature = "ssr")]
fn spec(
    url: &str,
    transport: &str,
    credential_kind: &str,
    credential_name: &str,
    credential_value: &str,
    timeout_ms: i64,
) -> Result<toolshed_domain::upstream::ServerSpec, AppError> {
    use toolshed_domain::upstream::{parse_timeout, parse_url, CredentialChange, ServerSpec, Transport};
    let invalid = |e: toolshed_domain::names::Invalid| server::fail(AppError::Invalid(e.to_string()));
    let transport =
        Transport::parse(transport).ok_or_else(|| server::fail(AppError::Invalid("Transport: must be streamable_http or sse".into())))?;
    Ok(ServerSpec {
        url: parse_url(url).map_err(invalid)?,
        transport,
        credential: CredentialChange::parse(credential_kind, credential_name, credential_value).map_err(invalid)?,
        timeout_ms: parse_timeout(timeout_ms).map_err(invalid)?,
    })
}

/// Registers a server and imports its tools; a server that cannot be reached
/// is registered all the same, its status saying why.
#[allow(clippy::too_many_arguments)]
#[server(endpoint = "servers/register")]
pub async fn register_server(
    department: String,
    name: String,
    url: String,
    transport: String,
    credential_kind: String,
    credential_name: String,
    credential_value: String,
    timeout_ms: i64,
) -> Result<ServerAdminView, AppError> {
    let user = server::require_user().await?;
    let department =
        toolshed_domain::names::DepartmentName::parse(&department).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    let name = toolshed_domain::upstream::ServerName::parse(&name).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    let spec = spec(&url, &transport, &credential_kind, &credential_name, &credential_value, timeout_ms)?;
    server::toolshed()?.upstreams().register_mcp_server(&user, &department, &name, spec).await.map(view).map_err(server::fail)
}

/// `credential_kind` `keep` leaves the stored credential as it is.
#[server(endpoint = "servers/update")]
pub async fn update_server(
    id: i64,
    url: String,
    transport: String,
    credential_kind: String,
    credential_name: String,
    credential_value: String,
    timeout_ms: i64,
) -> Result<ServerAdminView, AppError> {
    let user = server::require_user().await?;
    let spec = spec(&url, &transport, &credential_kind, &credential_name, &credential_value, timeout_ms)?;
    server::toolshed()?.upstreams().update_mcp_server(&user, id, spec).await.map(view).map_err(server::fail)
}

#[server(endpoint = "servers/refresh")]
pub async fn refresh_server(id: i64) -> Result<ServerAdminView, AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.upstreams().refresh_mcp_server(&user, id).await.map(view).map_err(server::fail)
}

/// Approves the definition of a held tool, as it was shown (`fingerprint`):
/// its bundles serve it from now on.
#[server(endpoint = "servers/approve_definition")]
pub async fn approve_definition(id: i64, tool: String, fingerprint: String) -> Result<ServerAdminView, AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.upstreams().approve_definition(&user, id, &tool, &fingerprint).await.map(view).map_err(server::fail)
}

#[server(endpoint = "servers/remove")]
pub async fn remove_server(id: i64) -> Result<(), AppError> {
    let user = server::require_user().await?;
    server::toolshed()?.upstreams().remove_mcp_server(&user, id).await.map_err(server::fail)
}

/// `allowed`: `yes` or `no` (a plain form's select).
#[server(endpoint = "servers/registration")]
pub async fn set_server_registration(department: String, allowed: String) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let department =
        toolshed_domain::names::DepartmentName::parse(&department).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    server::toolshed()?.upstreams().set_authors_register_servers(&user, &department, allowed == "yes").await.map_err(server::fail)
}
