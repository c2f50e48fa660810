//! Instance-wide limits an administrator sets: the most time and memory any
//! tool may ask for, and the hosts `$fetch` may ever reach.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::accounts::{AccountError, User};
use crate::audit;
use crate::names::Invalid;

handle! {
    /// Instance-wide limits an administrator sets.
    Policies
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub max_timeout_ms: i64,
    /// The most time a tool whose calls may run as tasks may ask for: such a
    /// call outlives its request, so it may run far longer.
    #[serde(default = "default_max_task_timeout_ms")]
    pub max_task_timeout_ms: i64,
    pub max_memory_mib: i64,
    /// Host patterns any tool's allow-list must stay within; empty: no restriction.
    pub fetch_hosts: Vec<String>,
    /// Every department's tools need passing test cases before a publish.
    #[serde(default)]
    pub tests_required: bool,
}

/// Hard ceilings, whatever an admin sets.
pub const CEILING_TIMEOUT_MS: i64 = 120_000;
pub const CEILING_MEMORY_MIB: i64 = 1024;
pub const CEILING_TASK_TIMEOUT_MS: i64 = 3_600_000;

fn default_max_task_timeout_ms() -> i64 {
    600_000
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            max_timeout_ms: 30_000,
            max_task_timeout_ms: default_max_task_timeout_ms(),
            max_memory_mib: 256,
            fetch_hosts: Vec::new(),
            tests_required: false,
        }
    }
}

/// The `settings` rows that make up the policy (a `WHERE` condition).
pub(crate) const POLICY_ROWS: &str = "key LIKE 'policy.%'";

impl Policy {
    /// Takes in one `settings` row; unknown keys and unparsable values keep the default.
    pub(crate) fn apply(&mut self, key: &str, value: String) {
        match key {
            "policy.max_timeout_ms" => self.max_timeout_ms = value.parse().unwrap_or(self.max_timeout_ms),
            "policy.max_task_timeout_ms" => self.max_task_timeout_ms = value.parse().unwrap_or(self.max_task_timeout_ms),
            "policy.max_memory_mib" => self.max_memory_mib = value.parse().unwrap_or(self.max_memory_mib),
            "policy.fetch_hosts" => self.fetch_hosts = value.lines().map(str::to_owned).collect(),
            "policy.tests_required" => self.tests_required = value == "1",
            _ => {}
        }
    }

    /// The most time a tool with `support` may ask for. A call that runs in
    /// its request keeps the usual limit, whatever its tool asks.
    pub fn max_timeout_for(&self, support: crate::names::TaskSupport) -> i64 {
        match support {
            crate::names::TaskSupport::Forbidden => self.max_timeout_ms,
            _ => self.max_task_timeout_ms.max(self.max_timeout_ms),
        }
    }

    /// Does the admin's list let a tool reach `host` (an allow-list entry: an
    /// exact name or `*.domain`, with or without `:port`)?
    pub fn permits_host(&self, host: &str) -> bool {
        if self.fetch_hosts.is_empty() {
            return true;
        }
        let (host, _) = crate::outbound::split_port(host);
        self.fetch_hosts.iter().any(|allowed| match allowed.strip_prefix("*.") {
            Some(domain) => {
                let bare = host.strip_prefix("*.").unwrap_or(host);
                bare == domain || bare.ends_with(&format!(".{domain}"))
            }
            None => allowed == host,
        })
    }
}

impl Policies<'_> {
    pub async fn policy(self) -> Result<Policy, sqlx::Error> {
        let rows = sqlx::query(&format!("SELECT key, value FROM settings WHERE {POLICY_ROWS}")).fetch_all(self.core.db().pool()).await?;
        let mut p = Policy::default();
        for r in rows {
            p.apply(&r.try_get::<String, _>("key")?, r.try_get("value")?);
        }
        Ok(p)
    }

    pub async fn set_policy(self, admin: &User, p: Policy) -> Result<(), AccountError> {
        if !admin.is_admin {
            return Err(AccountError::Forbidden);
        }
        if !(100..=CEILING_TIMEOUT_MS).contains(&p.max_timeout_ms) {
            return Err(Invalid { field: "Maximum time limit", reason: format!("must be between 100 and {CEILING_TIMEOUT_MS} ms") }.into());
        }
        if !(p.max_timeout_ms..=CEILING_TASK_TIMEOUT_MS).contains(&p.max_task_timeout_ms) {
            let reason = format!("must be between the maximum time limit and {CEILING_TASK_TIMEOUT_MS} ms");
            return Err(Invalid { field: "Maximum time limit of tasks", reason }.into());
        }
        if !(1..=CEILING_MEMORY_MIB).contains(&p.max_memory_mib) {
            return Err(Invalid { field: "Maximum memory limit", reason: format!("must be between 1 and {CEILING_MEMORY_MIB} MiB") }.into());
        }
        let before = self.policy().await?;
        let mut tx = self.core.begin().await?;
        for (key, value) in [
            ("policy.max_timeout_ms", p.max_timeout_ms.to_string()),
            ("policy.max_task_timeout_ms", p.max_task_timeout_ms.to_string()),
            ("policy.max_memory_mib", p.max_memory_mib.to_string()),
            ("policy.fetch_hosts", p.fetch_hosts.join("\n")),
            ("policy.tests_required", if p.tests_required { "1" } else { "0" }.to_owned()),
        ] {
            sqlx::query("INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
                .bind(key)
                .bind(value)
                .execute(&mut *tx)
                .await?;
        }
        audit::record(
            &mut tx,
            Some(admin.id),
            "admin.policy_changed",
            "policy",
            serde_json::to_value(&before).ok(),
            serde_json::to_value(&p).ok(),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
