//! The publish gates the domain owns beside the editor's: the
//! hidden-instruction hold (what models would read is scanned; findings no
//! admin accepted hold the publish in the moderation queue) and review (in a
//! department that requires it, an editor's publish waits for an admin).
//! [`Tools::publish_gates`] runs them; `moderation` decides what waits.

use sqlx::Row;

use super::Tools;
use crate::accounts::User;
use crate::scan::{self, Finding};
use crate::schema::{ArgDef, ArgType};
use crate::store::StoreError;
use crate::store::Tx;
use crate::tools::{Tool, ToolError};
use crate::{audit, now_ms};

/// What a version serves besides the listing's texts: its arguments and its
/// output schema, both sent to models in `tools/list`.
#[derive(Clone, Copy)]
pub(crate) struct Served<'a> {
    pub args: &'a [ArgDef],
    pub output_schema: Option<&'a serde_json::Value>,
}

impl<'a> From<&'a super::ToolVersion> for Served<'a> {
    fn from(v: &'a super::ToolVersion) -> Self {
        Served { args: &v.args, output_schema: v.output_schema.as_ref() }
    }
}

impl<'a> From<&'a super::Source> for Served<'a> {
    fn from(s: &'a super::Source) -> Self {
        Served { args: &s.args, output_schema: s.output_schema.as_ref() }
    }
}

/// What models read of a tool: its title, description, each argument's
/// description, name (as words), listed values, default and example (nested ones by path),
/// and every text of its output schema (by JSON pointer).
fn model_texts(tool: &Tool, served: Served) -> Vec<(String, String)> {
    fn walk(args: &[ArgDef], path: &str, out: &mut Vec<(String, String)>) {
        for a in args {
            let at = if path.is_empty() { a.name.clone() } else { format!("{path}.{}", a.name) };
            out.push((format!("argument {at}"), a.description.clone()));
            out.extend(scan::name_text(&format!("argument {at}"), &a.name));
            if !a.enum_values.is_empty() {
                out.push((format!("values of {at}"), a.enum_values.join("\n")));
            }
            // Defaults and examples reach models in the input schema too.
            for (what, value) in [("default", &a.default), ("example", &a.example)] {
                out.extend(value.as_ref().map(|value| (format!("{what} of {at}"), scan::value_lines(value))));
            }
            let mut ty = &a.ty;
            while let ArgType::Array { items } = ty {
                ty = items;
            }
            if let ArgType::Object { fields } = ty {
                walk(fields, &at, out);
            }
        }
    }
    let mut out = vec![("title".to_owned(), tool.title.clone()), ("description".to_owned(), tool.description.clone())];
    walk(served.args, "", &mut out);
    if let Some(schema) = served.output_schema {
        out.extend(scan::schema_texts("output schema", schema));
    }
    out
}

/// Everything the scan finds in `texts` (field, text), by phrase and, where
/// the sentence model is loaded, by meaning; and the texts' fingerprint.
pub(crate) async fn findings_in(core: &crate::Core, texts: Vec<(String, String)>) -> (Vec<Finding>, String) {
    let (mut findings, fingerprint) = scan::scan_all(&texts);
    if let Some(index) = core.semantic() {
        // By meaning, the fields no phrase gave away.
        let unread = texts
            .into_iter()
            .filter(|(field, _)| !findings.iter().any(|f| &f.field == field && f.kind == scan::FindingKind::AddressedToModel));
        findings.extend(index.model().instructions_in(unread.collect()).await);
    }
    (findings, fingerprint)
}

impl Tools<'_> {
    /// Scans what models would read once `tool` serves these arguments (with
    /// `tool`'s title and description): findings an admin has not accepted for
    /// exactly these texts hold the change, wait in the queue, and are the error.
    pub(crate) async fn screen(self, user: &User, tool: &Tool, served: Served<'_>, version: i64) -> Result<(), ToolError> {
        match self.unaccepted_findings(tool, served).await? {
            None => Ok(()),
            Some(held) => Err(self.hold(user, tool, version, held).await),
        }
    }

    /// Holds the publish of `tool`'s version `version` for `held` (its own
    /// transaction) and returns what the author is told.
    pub(crate) async fn hold(self, user: &User, tool: &Tool, version: i64, held: Held) -> ToolError {
        let recorded = async {
            let mut tx = self.core.begin().await?;
            held.record(&mut tx, user, tool, version).await?;
            tx.commit().await?;
            Ok::<_, ToolError>(())
        };
        match recorded.await {
            Ok(()) => held.refusal(),
            Err(e) => e,
        }
    }

    /// What the scan finds in what models would read of `tool` with these
    /// arguments, unless an admin accepted it for exactly these texts.
    pub(crate) async fn unaccepted_findings(self, tool: &Tool, served: Served<'_>) -> Result<Option<Held>, ToolError> {
        let (findings, fingerprint) = findings_in(self.core, model_texts(tool, served)).await;
        if findings.is_empty() {
            return Ok(None);
        }
        let row = sqlx::query("SELECT accepted_at FROM publish_findings WHERE tool_id = $1 AND fingerprint = $2")
            .bind(tool.id.0)
            .bind(&fingerprint)
            .fetch_optional(self.core.db().pool())
            .await?;
        if let Some(r) = &row {
            if r.try_get::<Option<i64>, _>("accepted_at")?.is_some() {
                return Ok(None);
            }
        }
        Ok(Some(Held { findings, fingerprint }))
    }

    /// Whether publishes in this department wait for an admin.
    pub(crate) async fn review_required(self, department: i64) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT review_required FROM departments WHERE id = $1")
            .bind(department)
            .fetch_optional(self.core.db().pool())
            .await?;
        Ok(match row {
            Some(r) => r.try_get::<i64, _>("review_required")? != 0,
            None => false,
        })
    }
}

/// Findings no admin has accepted, in the texts of this fingerprint.
pub(crate) struct Held {
    findings: Vec<Finding>,
    fingerprint: String,
}

impl Held {
    /// Holds the publish of `tool`'s version `version` for an admin, in `tx`:
    /// the listing's one open hold (the newest attempt replaces an older one).
    pub(crate) async fn record(&self, tx: &mut Tx, user: &User, tool: &Tool, version: i64) -> Result<(), ToolError> {
        let json = serde_json::to_string(&self.findings).expect("findings serialize");
        sqlx::query("DELETE FROM publish_findings WHERE tool_id = $1 AND accepted_at IS NULL").bind(tool.id.0).execute(&mut **tx).await?;
        sqlx::query(
            "INSERT INTO publish_findings (tool_id, version, fingerprint, findings_json, requested_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(tool.id.0)
        .bind(version)
        .bind(&self.fingerprint)
        .bind(&json)
        .bind(user.id.0)
        .bind(now_ms())
        .execute(&mut **tx)
        .await?;
        let after = serde_json::json!({"version": version, "findings": self.findings});
        audit::record(tx, Some(user.id), &tool.action("publish_held"), &tool.audit_target(), None, Some(after)).await?;
        tracing::warn!(listing = %tool.audit_target(), version, findings = self.findings.len(), "publish held for hidden instructions");
        Ok(())
    }

    /// What the author is told.
    pub(crate) fn refusal(self) -> ToolError {
        ToolError::HiddenInstructions(self.findings)
    }
}

/// An editor's publish in a department that requires review, in `tx`:
/// version `n` waits in the queue; what the endpoint serves does not change.
pub(crate) async fn request_review(tx: &mut Tx, user: &User, tool: &Tool, n: i64) -> Result<(), ToolError> {
    // Asking for what is already served withdraws any waiting request.
    let pending = (tool.published_version != Some(n)).then_some(n);
    sqlx::query("UPDATE tools SET pending_version = $1, review_note = NULL, updated_at = $2 WHERE id = $3")
        .bind(pending)
        .bind(now_ms())
        .bind(tool.id.0)
        .execute(&mut **tx)
        .await?;
    let before = serde_json::json!({"version": tool.published_version, "pending_version": tool.pending_version});
    let after = serde_json::json!({"version": tool.published_version, "pending_version": pending});
    audit::record(tx, Some(user.id), &tool.action("publish_requested"), &tool.audit_target(), Some(before), Some(after)).await?;
    Ok(())
}
