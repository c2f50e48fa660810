//! Per-tool configuration, exposed to the code as `$env`, of three kinds
//! ([`EnvKind`]): plain values editors read; secrets that are write-only in
//! the UI but that the code (so anyone who may edit it) reads, blanked out of
//! results, console lines and errors on a best-effort basis; and
//! outbound-only secrets, whose value never enters the sandbox: the code
//! holds a placeholder that `$fetch` fills in for the secret's hosts only
//! (`sandbox::OutboundSecret`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::ToolError;
use super::Tools;
use crate::accounts::User;
use crate::audit;
use crate::ids::ToolId;
use crate::names::parse_host_entry;
use crate::names::Invalid;
use crate::policy::{Policy, POLICY_ROWS};
use crate::redact::blank_out;
use crate::sandbox::{placeholder, OutboundSecret, RunError, RunOutcome, ToolValue};

/// What a variable is, and so who can read its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "hosts", rename_all = "snake_case")]
pub enum EnvKind {
    /// Shown to editors and read by the code.
    Plain,
    /// Never shown again, but read by the code: anyone who may edit the tool
    /// can make the code hand it out.
    Secret,
    /// Never in the sandbox: `$env.NAME` is a placeholder that `$fetch` fills
    /// in, in header values and the URL query, for these hosts only.
    Outbound(SecretHosts),
}

impl EnvKind {
    /// A form's choice: `plain`, `secret`, or `outbound` with its hosts.
    pub fn parse(kind: &str, hosts: &str) -> Result<Self, Invalid> {
        match kind {
            "plain" => Ok(Self::Plain),
            "secret" => Ok(Self::Secret),
            "outbound" => SecretHosts::parse(hosts).map(Self::Outbound),
            other => Err(Invalid { field: "Variable kind", reason: format!("“{other}” is not plain, secret or outbound") }),
        }
    }
}

/// The hosts an outbound-only secret may be sent to: at least one, each in
/// the `$fetch` allow-list's syntax (`api.example.com`, `*.example.com`,
/// `host:8443`), separated by commas, spaces or new lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretHosts(Vec<String>);

impl SecretHosts {
    const FIELD: &'static str = "Secret hosts";

    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let hosts = raw
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|h| !h.is_empty())
            .map(|h| parse_host_entry(Self::FIELD, h))
            .collect::<Result<Vec<_>, _>>()?;
        if hosts.is_empty() {
            return Err(Invalid { field: Self::FIELD, reason: "name at least one host the secret may be sent to".into() });
        }
        Ok(Self(hosts))
    }

    pub fn hosts(&self) -> &[String] {
        &self.0
    }

    /// As stored (`tool_env.outbound_hosts`): one per line, validated when written.
    fn stored(raw: &str) -> Self {
        Self(raw.lines().map(str::to_owned).collect())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvVar {
    pub name: String,
    /// `None` for secrets of either kind.
    pub value: Option<String>,
    pub kind: EnvKind,
}

/// What the sandbox gets: `$env` as the code sees it (outbound-only secrets
/// as placeholders), the values to blank out afterwards, and the
/// outbound-only secrets for `$fetch`.
pub(crate) struct Env {
    pub values: BTreeMap<String, String>,
    pub secrets: Vec<String>,
    pub outbound: Vec<OutboundSecret>,
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

/// Outbound-only values go into header values and URLs, and are recognised
/// in responses to be masked: printable ASCII, long enough not to match
/// ordinary text.
fn check_value(value: &str, kind: &EnvKind) -> Result<(), Invalid> {
    let invalid = |reason: &str| Err(Invalid { field: "Variable value", reason: reason.into() });
    if value.len() > 4096 {
        return invalid("must be at most 4096 bytes");
    }
    if matches!(kind, EnvKind::Outbound(_)) {
        if value.len() < 8 {
            return invalid("an outbound-only secret must be at least 8 characters");
        }
        if !value.bytes().all(|b| (b' '..=b'~').contains(&b)) {
            return invalid("an outbound-only secret is sent in headers and URLs: printable ASCII only");
        }
    }
    Ok(())
}

impl Env {
    /// Blanks secret values, in whatever encoding they appear, out of
    /// everything the run hands back. For outbound-only secrets this is a
    /// second line: their values never entered the sandbox, and `$fetch`
    /// masks what comes back.
    pub fn redact(&self, outcome: &mut RunOutcome) {
        let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        if secrets.is_empty() {
            return;
        }
        let clean = |text: &mut String| blank_out(text, &secrets, MASK);
        for line in &mut outcome.console {
            clean(&mut line.message);
        }
        for exchange in &mut outcome.fetches {
            exchange.clean_texts(clean);
        }
        match &mut outcome.result {
            Ok(ToolValue::Text(text)) => clean(text),
            Ok(ToolValue::Json(value)) => clean_json(value, clean),
            Ok(ToolValue::Content(blocks)) => blocks.iter_mut().for_each(|block| clean_json(block, clean)),
            Err(
                RunError::Syntax { message, .. }
                | RunError::NotSerializable { message }
                | RunError::Internal { message }
                | RunError::OutputMismatch { message },
            ) => clean(message),
            Err(RunError::Thrown { name, message, stack, .. }) => {
                clean(name);
                clean(message);
                stack.iter_mut().for_each(clean);
            }
            // Questions go out as the code asked them: their answers are bound
            // to that wording (a fingerprint), so blanking here would make them
            // unanswerable. (A secret in a question reaches the client.)
            Err(
                RunError::Timeout { .. }
                | RunError::OutOfMemory { .. }
                | RunError::StackOverflow { .. }
                | RunError::OutputTooLarge { .. }
                | RunError::NeverSettled
                | RunError::Cancelled
                | RunError::NeedsInput { .. },
            ) => {}
        }
    }
}

/// Blanks secrets out of a JSON value through its text, where every encoding shows.
fn clean_json(value: &mut serde_json::Value, clean: impl Fn(&mut String)) {
    let mut text = value.to_string();
    clean(&mut text);
    *value = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
}

impl Tools<'_> {
    /// What a run needs besides its code: the tool's `$env` and the admin's
    /// policy (on every call's path, so through the call cache; both change
    /// only by audited writes).
    pub(super) async fn env_and_policy(self, id: ToolId) -> Result<(Arc<Env>, Policy), ToolError> {
        let cache = &self.core.call_cache().envs;
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
    async fn load_env_and_policy(self, id: ToolId) -> Result<(Env, Policy), ToolError> {
        let sql = format!(
            "SELECT 0 AS is_policy, name, value, secret, outbound_hosts FROM tool_env WHERE tool_id = $1 \
             UNION ALL SELECT 1, key, value, 0, NULL FROM settings WHERE {POLICY_ROWS}"
        );
        let rows = sqlx::query(&sql).bind(id.0).fetch_all(self.core.db().pool()).await?;
        let mut env = Env { values: Default::default(), secrets: Vec::new(), outbound: Vec::new() };
        let mut policy = Policy::default();
        for r in rows {
            let (name, value): (String, String) = (r.try_get("name")?, r.try_get("value")?);
            if r.try_get::<i64, _>("is_policy")? != 0 {
                policy.apply(&name, value);
                continue;
            }
            match kind_of(&r)? {
                EnvKind::Plain => {}
                EnvKind::Secret => env.secrets.push(value.clone()),
                EnvKind::Outbound(hosts) => {
                    env.secrets.push(value.clone());
                    env.values.insert(name.clone(), placeholder(&name));
                    env.outbound.push(OutboundSecret::new(name, value, hosts.0));
                    continue;
                }
            }
            env.values.insert(name, value);
        }
        Ok((env, policy))
    }

    /// The tool's variables for its editors; secret values are left out.
    pub async fn env_vars(self, user: &User, id: ToolId) -> Result<Vec<EnvVar>, ToolError> {
        self.code_tool_for_edit(user, id).await?;
        let rows = sqlx::query("SELECT name, value, secret, outbound_hosts FROM tool_env WHERE tool_id = $1 ORDER BY name")
            .bind(id.0)
            .fetch_all(self.core.db().pool())
            .await?;
        rows.iter()
            .map(|r| {
                let kind = kind_of(r)?;
                let value = match kind {
                    EnvKind::Plain => Some(r.try_get("value")?),
                    EnvKind::Secret | EnvKind::Outbound(_) => None,
                };
                Ok(EnvVar { name: r.try_get("name")?, value, kind })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// Sets a variable, value and kind together: an outbound-only secret's
    /// hosts change only with its value, so an editor cannot point a value
    /// they never saw at a host of their own.
    pub async fn set_env_var(self, user: &User, id: ToolId, name: &str, value: &str, kind: EnvKind) -> Result<(), ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        let name = name.trim();
        check_name(name)?;
        check_value(value, &kind)?;
        let hosts = match &kind {
            EnvKind::Outbound(hosts) => Some(hosts.0.join("\n")),
            EnvKind::Plain | EnvKind::Secret => None,
        };
        let secret = kind != EnvKind::Plain;
        let mut tx = self.core.begin().await?;
        sqlx::query(
            "INSERT INTO tool_env (tool_id, name, value, secret, outbound_hosts) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (tool_id, name) DO UPDATE SET value = excluded.value, secret = excluded.secret, \
             outbound_hosts = excluded.outbound_hosts",
        )
        .bind(id.0)
        .bind(name)
        .bind(value)
        .bind(i64::from(secret))
        .bind(hosts)
        .execute(&mut *tx)
        .await?;
        // The audit log records that a variable changed and where it may go, never its value.
        let mut after = serde_json::json!(kind);
        after["name"] = name.into();
        audit::record(&mut tx, Some(user.id), "tool.env_set", &tool.audit_target(), None, Some(after)).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn delete_env_var(self, user: &User, id: ToolId, name: &str) -> Result<(), ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        let mut tx = self.core.begin().await?;
        sqlx::query("DELETE FROM tool_env WHERE tool_id = $1 AND name = $2").bind(id.0).bind(name).execute(&mut *tx).await?;
        audit::record(&mut tx, Some(user.id), "tool.env_deleted", &tool.audit_target(), Some(serde_json::json!({"name": name})), None)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// A row's kind; hosts make it outbound-only whatever `secret` says (fail closed).
fn kind_of(row: &sqlx::any::AnyRow) -> Result<EnvKind, sqlx::Error> {
    Ok(match row.try_get::<Option<String>, _>("outbound_hosts")? {
        Some(hosts) => EnvKind::Outbound(SecretHosts::stored(&hosts)),
        None if row.try_get::<i64, _>("secret")? != 0 => EnvKind::Secret,
        None => EnvKind::Plain,
    })
}
