//! The apps a tool acts as its caller at ([`crate::connections`]): declared
//! by its editors, shown in its permissions, and the caller's tokens for
//! them added to each of its runs.

use super::{Tool, ToolError, Tools};
use crate::accounts::User;
use crate::audit;
use crate::connections::{AppName, Connections, Unusable};
use crate::ids::ToolId;
use crate::names::Invalid;
use crate::now_ms;
use crate::sandbox::OutboundSecret;

impl Tools<'_> {
    /// Declares the apps a tool acts as its caller at (names separated by
    /// spaces, commas or lines). Each must be an app of the company or of
    /// the tool's department. Takes effect at once, like the allow-list.
    pub async fn set_accounts(self, user: &User, tool: ToolId, raw: &str) -> Result<Vec<String>, ToolError> {
        let before = self.tool_for_edit(user, tool).await?;
        let mut names = Vec::new();
        for name in raw.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()) {
            let name = AppName::parse(name)?.as_str().to_owned();
            if !Connections::new(self.core).usable_in(&name, before.department_id).await? {
                let reason = format!("there is no app “{name}” for {}; an administrator registers apps", before.department);
                return Err(Invalid { field: "Connected accounts", reason }.into());
            }
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let mut tx = self.core.begin().await?;
        sqlx::query("UPDATE tools SET accounts = $1, updated_at = $2 WHERE id = $3")
            .bind(names.join("\n"))
            .bind(now_ms())
            .bind(tool.0)
            .execute(&mut *tx)
            .await?;
        // What the tool can do changed, its permissions label with it: sessions hear of it.
        audit::record(
            &mut tx,
            Some(user.id),
            &before.action("settings_changed"),
            &before.audit_target(),
            Some(serde_json::json!({"accounts": before.accounts})),
            Some(serde_json::json!({"accounts": names})),
        )
        .await?;
        tx.commit().await?;
        Ok(names)
    }

    /// The caller's tokens for the apps `tool` acts at, for one run.
    pub(super) async fn account_tokens(self, user: &User, tool: &Tool) -> Result<Vec<OutboundSecret>, ToolError> {
        if tool.accounts.is_empty() {
            return Ok(Vec::new());
        }
        Connections::new(self.core).outbound(user, &tool.accounts).await.map_err(|e| match e {
            Unusable::NotConnected(missing) => ToolError::NotConnected(missing),
            Unusable::Failed(crate::connections::ConnectionError::Store(e)) => ToolError::Store(e),
            // The tool could not run now, for a reason the caller should read.
            Unusable::Failed(other) => ToolError::Conflict(format!(
                "This tool acts as you at another service, and your account there could not be used now: {other}"
            )),
        })
    }
}
