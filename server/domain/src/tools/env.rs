//! Per-tool configuration, exposed to the code as `$env`. Secret values are
//! write-only: never listed back, and blanked out of results and console lines.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::ToolError;
use crate::accounts::User;
use crate::ids::ToolId;
use crate::names::Invalid;
use crate::policy::{Policy, POLICY_ROWS};
use crate::sandbox::{RunOutcome, ToolValue};
use crate::{audit, Toolshed};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvVar {
    pub name: String,
    /// `None` for secrets.
    pub value: Option<String>,
    pub secret: bool,
}

/// What the sandbox gets: every value, and which ones to blank out afterwards.
pub(crate) struct Env {
    pub values: std::collections::BTreeMap<String, String>,
    pub secrets: Vec<String>,
}

const MASK: &str = "••••••";

fn check_name(name: &str) -> Result<(), Invalid> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Invalid { field: "Variable name", reason: "letters, digits and _, starting with a letter (at most 64)".into() })
    }
}

impl Env {
    /// Blanks secret values out of everything the run hands back.
    pub fn redact(&self, outcome: &mut RunOutcome) {
        // Very short secrets would blank out ordinary text; such values are not secrets worth the name.
        let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).filter(|s| s.len() >= 4).collect();
        if secrets.is_empty() {
            return;
        }
        let clean = |text: &str| secrets.iter().fold(text.to_owned(), |t, s| t.replace(s, MASK));
        for line in &mut outcome.console {
            line.message = clean(&line.message);
        }
        if let Ok(value) = &mut outcome.result {
            *value = match value {
                ToolValue::Text(t) => ToolValue::Text(clean(t)),
                ToolValue::Json(v) => {
                    let text = clean(&v.to_string());
                    ToolValue::Json(serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
                }
            };
        }
    }
}

impl Toolshed {
    /// What a run needs besides its code: the tool's `$env` and the admin's
    /// policy (on every call's path, so through the call cache; both change
    /// only by audited writes).
    pub(super) async fn env_and_policy(&self, id: ToolId) -> Result<(Arc<Env>, Policy), ToolError> {
        let cache = &self.call_cache().envs;
        if let Some(found) = cache.get(&id) {
            return Ok(found);
        }
        let at = cache.epoch();
        let (env, policy) = self.load_env_and_policy(id).await?;
        let found = (Arc::new(env), policy);
        cache.insert(id, found.clone(), at);
        Ok(found)
    }

    /// One statement for both.
    async fn load_env_and_policy(&self, id: ToolId) -> Result<(Env, Policy), ToolError> {
        let sql = format!(
            "SELECT 0 AS is_policy, name, value, secret FROM tool_env WHERE tool_id = $1 \
             UNION ALL SELECT 1, key, value, 0 FROM settings WHERE {POLICY_ROWS}"
        );
        let rows = sqlx::query(&sql).bind(id.0).fetch_all(self.db.pool()).await?;
        let mut env = Env { values: Default::default(), secrets: Vec::new() };
        let mut policy = Policy::default();
        for r in rows {
            let (name, value): (String, String) = (r.try_get("name")?, r.try_get("value")?);
            if r.try_get::<i64, _>("is_policy")? != 0 {
                policy.apply(&name, value);
                continue;
            }
            if r.try_get::<i64, _>("secret")? != 0 {
                env.secrets.push(value.clone());
            }
            env.values.insert(name, value);
        }
        Ok((env, policy))
    }

    /// The tool's variables for its editors; secret values are left out.
    pub async fn env_vars(&self, user: &User, id: ToolId) -> Result<Vec<EnvVar>, ToolError> {
        self.code_tool_for_edit(user, id).await?;
        let rows = sqlx::query("SELECT name, value, secret FROM tool_env WHERE tool_id = $1 ORDER BY name")
            .bind(id.0)
            .fetch_all(self.db.pool())
            .await?;
        rows.iter()
            .map(|r| {
                let secret = r.try_get::<i64, _>("secret")? != 0;
                Ok(EnvVar { name: r.try_get("name")?, value: if secret { None } else { Some(r.try_get("value")?) }, secret })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    pub async fn set_env_var(&self, user: &User, id: ToolId, name: &str, value: &str, secret: bool) -> Result<(), ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        let name = name.trim();
        check_name(name)?;
        if value.len() > 4096 {
            return Err(Invalid { field: "Variable value", reason: "must be at most 4096 bytes".into() }.into());
        }
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO tool_env (tool_id, name, value, secret) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (tool_id, name) DO UPDATE SET value = excluded.value, secret = excluded.secret",
        )
        .bind(id.0)
        .bind(name)
        .bind(value)
        .bind(i64::from(secret))
        .execute(&mut *tx)
        .await?;
        // The audit log records that a variable changed, never its value.
        audit::record(
            &mut tx,
            Some(user.id),
            "tool.env_set",
            &tool.audit_target(),
            None,
            Some(serde_json::json!({"name": name, "secret": secret})),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn delete_env_var(&self, user: &User, id: ToolId, name: &str) -> Result<(), ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM tool_env WHERE tool_id = $1 AND name = $2").bind(id.0).bind(name).execute(&mut *tx).await?;
        audit::record(&mut tx, Some(user.id), "tool.env_deleted", &tool.audit_target(), Some(serde_json::json!({"name": name})), None)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
