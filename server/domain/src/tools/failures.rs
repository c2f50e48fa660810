//! Failed calls, kept so that a tool's editors can replay them: a call whose
//! code failed (threw, timed out, ran out of memory, ...) is stored with its
//! arguments, console and `$fetch` exchanges, and a replay runs the editor's
//! draft with the same arguments while `$fetch` answers from the recording,
//! so the failure reproduces without the network.
//!
//! What is kept is redacted first: `$env` secrets (as in any outcome),
//! outbound secrets (the recording holds their placeholders), credential
//! headers, and the values of arguments marked sensitive, wherever they
//! appear. Kept [`KEPT_DAYS`] days, at most [`KEPT_PER_TOOL`] a tool, and at most
//! [`PER_MINUTE`] a tool a minute (a tool failing on every call would
//! otherwise write its traffic into the database).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::Row;

use super::Tools;
use super::{RunReport, RunSource, Tool, ToolError, Via};
use crate::accounts::User;
use crate::ids::ToolId;
use crate::now_ms;
use crate::sandbox::REDACTED;
use crate::schema::{ArgDef, ArgType};
use crate::store::StoreError;
use crate::usage::{FailureRecord, KeptCall, DAY_MS, KEPT_DAYS, KEPT_PER_TOOL};

/// A failed call as its tool's editors see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedCall {
    pub id: i64,
    /// Who called (their username).
    pub caller: String,
    #[serde(flatten)]
    pub call: KeptCall,
}

const PER_MINUTE: u32 = 20;

/// How many failed calls each tool kept this minute (per process: a bound,
/// not an exact count).
#[derive(Default)]
pub(crate) struct FailureBudget(Mutex<(i64, HashMap<i64, u32>)>);

impl FailureBudget {
    fn take(&self, tool: i64, now_ms: i64) -> bool {
        let mut guard = self.0.lock().expect("failure budget lock");
        let (minute, counts) = &mut *guard;
        if *minute != now_ms / 60_000 {
            *minute = now_ms / 60_000;
            counts.clear();
        }
        let count = counts.entry(tool).or_default();
        *count += 1;
        *count <= PER_MINUTE
    }
}

/// Replaces the values of sensitive arguments (at any depth) with a marker,
/// and returns those values, to be masked wherever else they appear.
fn redact_arguments(defs: &[ArgDef], args: &mut Value) -> Vec<String> {
    fn walk(defs: &[ArgDef], value: &mut Value, found: &mut Vec<String>) {
        let Some(object) = value.as_object_mut() else { return };
        for def in defs {
            let Some(v) = object.get_mut(&def.name) else { continue };
            if def.sensitive {
                collect(v, found);
                *v = Value::String(REDACTED.into());
                continue;
            }
            match &def.ty {
                ArgType::Object { fields } => walk(fields, v, found),
                ArgType::Array { items } => {
                    if let ArgType::Object { fields } = items.as_ref() {
                        v.as_array_mut().into_iter().flatten().for_each(|item| walk(fields, item, found));
                    }
                }
                _ => {}
            }
        }
    }
    fn collect(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::String(s) => found.push(s.clone()),
            Value::Number(n) => found.push(n.to_string()),
            Value::Array(items) => items.iter().for_each(|v| collect(v, found)),
            Value::Object(map) => map.values().for_each(|v| collect(v, found)),
            Value::Bool(_) | Value::Null => {}
        }
    }
    let mut found = Vec::new();
    walk(defs, args, &mut found);
    found
}

/// Blanks `values` out of `text` in every encoding they took on the way
/// (a URL's percent-encoding, a form, base64, JSON: `redact`).
fn mask(text: &mut String, values: &[String]) {
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    crate::redact::blank_out(text, &values, REDACTED);
}

impl FailureRecord {
    /// The record of a failed run of version `version`, redacted with
    /// `defs` (the version's arguments); `None` when the run did not fail.
    pub(crate) fn of(tool: &Tool, user: &User, via: Via<'_>, mut args: Value, report: &RunReport, defs: &[ArgDef]) -> Option<Self> {
        let error = report.outcome.result.as_ref().err()?;
        let version = report.version?;
        let values = redact_arguments(defs, &mut args);
        let mut error = error.to_string();
        mask(&mut error, &values);
        let mut console = report.outcome.console.clone();
        console.iter_mut().for_each(|line| mask(&mut line.message, &values));
        // What a tool that acts as its caller fetched came with the caller's
        // own account: their data, not its editors'. Such a failure keeps no exchanges.
        let mut fetches = if tool.accounts.is_empty() { report.outcome.fetches.clone() } else { Vec::new() };
        fetches.iter_mut().for_each(|f| f.clean_texts(|text| mask(text, &values)));
        Some(Self {
            tool_id: tool.id.0,
            user_id: user.id.0,
            call: KeptCall {
                version,
                at_ms: now_ms(),
                transport: via.transport.to_owned(),
                error,
                args,
                console,
                fetches,
                duration_ms: report.outcome.duration.as_millis() as i64,
            },
        })
    }
}

impl Tools<'_> {
    /// Hands a failed run to the usage writer, if the tool's budget allows.
    /// Test runs are not calls, and are not kept.
    pub(crate) async fn keep_failure(self, user: &User, tool: &Tool, via: Via<'_>, args: Value, report: &RunReport) {
        let Some(version) = report.version.filter(|_| report.outcome.result.is_err()) else { return };
        if let Ok(runnable) = self.runnable(tool.id, version).await {
            self.keep_failure_of(user, tool, via, args, report, runnable.args());
        }
    }

    /// [`Tools::keep_failure`] with the version's arguments at hand (code
    /// mode's member calls finish on a sandbox thread, where nothing awaits).
    pub(crate) fn keep_failure_of(self, user: &User, tool: &Tool, via: Via<'_>, args: Value, report: &RunReport, defs: &[ArgDef]) {
        if report.outcome.result.is_ok()
            || report.asked()
            || report.outcome.result == Err(crate::sandbox::RunError::Cancelled)
            || via.transport == "test"
            || !self.core.failure_budget().take(tool.id.0, now_ms())
        {
            return;
        }
        if let Some(record) = FailureRecord::of(tool, user, via, args, report, defs) {
            self.core.usage().record_failure(record);
        }
    }

    /// The tool's failed calls of the last [`KEPT_DAYS`] days, newest first,
    /// without their console and exchanges. Its editors only.
    pub async fn failed_calls(self, user: &User, id: ToolId) -> Result<Vec<FailedCall>, ToolError> {
        self.code_tool_for_edit(user, id).await?;
        let rows = sqlx::query(
            "SELECT f.id, f.version, u.username, f.at_ms, f.transport, f.error, f.args_json, f.duration_ms, \
             '[]' AS console_json, '[]' AS fetches_json \
             FROM failed_calls f JOIN users u ON u.id = f.user_id WHERE f.tool_id = $1 AND f.at_ms >= $2 ORDER BY f.id DESC LIMIT $3",
        )
        .bind(id.0)
        .bind(now_ms() - KEPT_DAYS * DAY_MS)
        .bind(KEPT_PER_TOOL)
        .fetch_all(self.core.db().pool())
        .await?;
        rows.iter().map(failed_call).collect::<Result<_, _>>().map_err(|e| StoreError::from(e).into())
    }

    /// How many failed calls of the last [`KEPT_DAYS`] days the tool keeps. Its editors only.
    pub async fn failed_call_count(self, user: &User, id: ToolId) -> Result<i64, ToolError> {
        self.code_tool_for_edit(user, id).await?;
        let count: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM failed_calls WHERE tool_id = $1 AND at_ms >= $2")
            .bind(id.0)
            .bind(now_ms() - KEPT_DAYS * DAY_MS)
            .fetch_one(self.core.db().pool())
            .await?;
        Ok(count.0)
    }

    /// One failed call, whole. Its tool's editors only; another tool's call is not found.
    pub async fn failed_call(self, user: &User, id: ToolId, call: i64) -> Result<FailedCall, ToolError> {
        self.code_tool_for_edit(user, id).await?;
        let row = sqlx::query(
            "SELECT f.id, f.version, u.username, f.at_ms, f.transport, f.error, f.args_json, f.duration_ms, f.console_json, f.fetches_json \
             FROM failed_calls f JOIN users u ON u.id = f.user_id WHERE f.id = $1 AND f.tool_id = $2 AND f.at_ms >= $3",
        )
        .bind(call)
        .bind(id.0)
        .bind(now_ms() - KEPT_DAYS * DAY_MS)
        .fetch_optional(self.core.db().pool())
        .await?
        .ok_or(ToolError::NotFound)?;
        failed_call(&row).map_err(|e| StoreError::from(e).into())
    }

    /// Runs `source` (the editor's draft, or a version) with `input` while
    /// `$fetch` answers from the recording of failed call `call`: the network
    /// is never touched. Not recorded in usage: a replay is not a call.
    pub async fn replay_failed_call(
        self,
        user: &User,
        id: ToolId,
        call: i64,
        source: RunSource,
        input: Value,
    ) -> Result<RunReport, ToolError> {
        let recorded = self.failed_call(user, id, call).await?;
        self.run_tool_replaying(user, id, source, input, Arc::new(recorded.call.fetches)).await
    }
}

fn failed_call(r: &sqlx::any::AnyRow) -> Result<FailedCall, sqlx::Error> {
    let json =
        |column: &str| -> Result<Value, sqlx::Error> { Ok(serde_json::from_str(&r.try_get::<String, _>(column)?).unwrap_or_default()) };
    Ok(FailedCall {
        id: r.try_get("id")?,
        caller: r.try_get("username")?,
        call: KeptCall {
            version: r.try_get("version")?,
            at_ms: r.try_get("at_ms")?,
            transport: r.try_get("transport")?,
            error: r.try_get("error")?,
            args: json("args_json")?,
            console: serde_json::from_value(json("console_json")?).unwrap_or_default(),
            fetches: serde_json::from_value(json("fetches_json")?).unwrap_or_default(),
            duration_ms: r.try_get("duration_ms")?,
        },
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn arg(name: &str, ty: ArgType, sensitive: bool) -> ArgDef {
        ArgDef {
            name: name.into(),
            ty,
            description: String::new(),
            required: false,
            default: None,
            enum_values: vec![],
            example: None,
            sensitive,
        }
    }

    #[test]
    fn sensitive_arguments_are_redacted_at_any_depth_and_their_values_collected() {
        let defs = vec![
            arg("city", ArgType::String, false),
            arg("password", ArgType::String, true),
            arg("pin", ArgType::Integer, true),
            arg(
                "accounts",
                ArgType::Array {
                    items: Box::new(ArgType::Object {
                        fields: vec![arg("iban", ArgType::String, true), arg("bank", ArgType::String, false)],
                    }),
                },
                false,
            ),
        ];
        let mut args = json!({"city": "Lyon", "password": "hunter22", "pin": 12345, "accounts": [{"iban": "FR7630006", "bank": "BNP"}]});
        let values = redact_arguments(&defs, &mut args);
        assert_eq!(
            args,
            json!({"city": "Lyon", "password": "[redacted]", "pin": "[redacted]", "accounts": [{"iban": "[redacted]", "bank": "BNP"}]})
        );
        assert_eq!(values, vec!["hunter22".to_string(), "12345".into(), "FR7630006".into()]);
        let mut line = "login hunter22 for FR7630006 in Lyon".to_string();
        mask(&mut line, &values);
        assert_eq!(line, "login [redacted] for [redacted] in Lyon");
    }

    #[test]
    fn a_tool_keeps_at_most_its_budget_of_failures_a_minute() {
        let budget = FailureBudget::default();
        let kept = (0..30).filter(|_| budget.take(1, 60_000)).count();
        assert_eq!(kept, PER_MINUTE as usize);
        assert!(budget.take(2, 60_000), "another tool has its own budget");
        assert!(budget.take(1, 120_000), "a new minute, a new budget");
    }
}
