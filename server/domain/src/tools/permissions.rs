//! What a tool can do, as the platform knows it rather than as its author
//! says: the hosts its `$fetch` may reach (its allow-list within the admins'
//! policy), the secrets it holds, the apps it acts as its caller at, and
//! whether it may write. A tool marked
//! read-only is held to it: its `$fetch` sends only GET and HEAD
//! (`sandbox::fetch`). MCP clients get the label as tool annotations and in
//! `_meta`; the listing page shows it; browse filters by it.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sqlx::Row;

use super::Tools;
use super::{ListingKind, Tool, ToolError};
use crate::policy::Policies;
use crate::policy::Policy;

/// Where MCP's `_meta` carries the label.
pub const META_KEY: &str = "toolshed/permissions";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permissions {
    /// Hosts `$fetch` may reach (allow-list entries the policy permits); empty: no network.
    pub hosts: Vec<String>,
    /// Names of its secret variables, of either kind (never their values).
    pub secrets: Vec<String>,
    /// `$fetch` may send methods other than GET and HEAD.
    pub writes: bool,
    /// Apps it acts as its caller at, with their caller's own token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accounts: Vec<ActsAt>,
}

/// An app a tool acts as its caller at, and the scopes connecting to it grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActsAt {
    pub app: String,
    pub scopes: Vec<String>,
}

impl Permissions {
    /// What `tool` can do under `policy`, with `secrets` its secret variables'
    /// names and `accounts` the apps it acts at.
    pub fn of(tool: &Tool, policy: &Policy, secrets: Vec<String>, accounts: Vec<ActsAt>) -> Self {
        Permissions {
            hosts: tool.fetch_allow.iter().filter(|h| policy.permits_host(h)).cloned().collect(),
            secrets,
            writes: !tool.read_only_hint,
            accounts,
        }
    }

    /// It may reach the network (MCP's `openWorldHint`).
    pub fn open_world(&self) -> bool {
        !self.hosts.is_empty()
    }

    /// The label as MCP's `_meta` carries it.
    pub fn meta(&self) -> Value {
        let mut label = json!({"hosts": self.hosts, "secrets": self.secrets, "writes": self.writes});
        if !self.accounts.is_empty() {
            label["accounts"] = json!(self.accounts);
        }
        json!({ META_KEY: label })
    }
}

impl Tools<'_> {
    /// What tool `tool` can do now (a bundle has no code, so no permissions of its own).
    pub async fn permissions(self, tool: &Tool) -> Result<Permissions, ToolError> {
        let policy = Policies::new(self.core).policy().await?;
        self.permissions_under(tool, &policy).await
    }

    pub(crate) async fn permissions_under(self, tool: &Tool, policy: &Policy) -> Result<Permissions, ToolError> {
        if tool.kind == ListingKind::Bundle {
            return Ok(Permissions::default());
        }
        let rows = sqlx::query("SELECT name FROM tool_env WHERE tool_id = $1 AND secret = 1 ORDER BY name")
            .bind(tool.id.0)
            .fetch_all(self.core.db().pool())
            .await?;
        let secrets = rows.iter().map(|r| r.try_get("name")).collect::<Result<_, _>>()?;
        let accounts = crate::connections::Connections::new(self.core).scopes_of(&tool.accounts).await.map_err(|e| match e {
            crate::connections::ConnectionError::Store(e) => ToolError::Store(e),
            other => ToolError::Conflict(other.to_string()),
        })?;
        let accounts = accounts.into_iter().map(|(app, scopes)| ActsAt { app, scopes }).collect();
        Ok(Permissions::of(tool, policy, secrets, accounts))
    }
}
