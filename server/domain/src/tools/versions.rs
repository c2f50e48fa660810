//! Drafts (autosaved, one per tool and author), immutable versions, publish
//! and roll back, and diffs between versions.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::Tools;
use super::{Tool, ToolError, STARTER_CODE};
use crate::accounts::User;
use crate::ids::ToolId;
use crate::names::{Code, Invalid};
use crate::schema::ArgDef;
use crate::store::StoreError;
use crate::store::Tx;
use crate::{audit, now_ms};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolVersion {
    pub version: i64,
    pub code: String,
    pub args: Vec<ArgDef>,
    pub output_schema: Option<serde_json::Value>,
    pub changelog: String,
    pub created_by: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionSummary {
    pub version: i64,
    pub changelog: String,
    pub created_by: String,
    pub created_at: i64,
}

/// What the editor opens: the author's autosaved draft, or else the latest
/// version, or else the starter code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Draft {
    pub code: String,
    pub args: Vec<ArgDef>,
    pub output_schema: Option<serde_json::Value>,
    /// When the draft was autosaved; `None` when nothing unsaved exists.
    pub autosaved_at: Option<i64>,
    /// The version the editor content started from, if any.
    pub base_version: Option<i64>,
}

/// A unified diff of code and of the argument definitions between two versions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionDiff {
    pub from: i64,
    pub to: i64,
    pub code: String,
    pub args: String,
}

/// The editor's content, parsed: code within its size limit, argument rows
/// that make a valid schema.
#[derive(Debug, Clone)]
pub struct Source {
    pub code: Code,
    pub args: Vec<ArgDef>,
    pub output_schema: Option<serde_json::Value>,
}

impl Source {
    pub fn parse(code: &str, args: Vec<ArgDef>, output_schema: Option<serde_json::Value>) -> Result<Self, ToolError> {
        crate::schema::check_defs(&args).map_err(|e| Invalid { field: "Arguments", reason: e.to_string() })?;
        if let Some(schema) = &output_schema {
            crate::schema::CompiledSchema::new(schema).map_err(|e| Invalid { field: "Output schema", reason: e.to_string() })?;
        }
        Ok(Self { code: Code::parse(code)?, args, output_schema })
    }

    /// What a bundle version stores in place of code: nothing.
    pub(crate) fn empty() -> Self {
        Self { code: Code::parse("").expect("empty code is within the size limit"), args: Vec::new(), output_schema: None }
    }

    fn args_json(&self) -> String {
        serde_json::to_string(&self.args).expect("argument rows always serialize")
    }

    fn output_schema_json(&self) -> Option<String> {
        self.output_schema.as_ref().map(|v| v.to_string())
    }
}

fn parse_args(json: &str) -> Vec<ArgDef> {
    // Rows were validated when saved; an unreadable row set means a bug, not user input.
    serde_json::from_str(json).unwrap_or_else(|e| {
        tracing::error!(error = %e, "stored argument rows do not parse");
        Vec::new()
    })
}

fn parse_output_schema(json: Option<String>) -> Option<serde_json::Value> {
    json.and_then(|s| serde_json::from_str(&s).ok())
}

pub(super) fn version_from_row(r: &sqlx::any::AnyRow) -> Result<ToolVersion, sqlx::Error> {
    Ok(ToolVersion {
        version: r.try_get("version")?,
        code: r.try_get("code")?,
        args: parse_args(&r.try_get::<String, _>("args_json")?),
        output_schema: parse_output_schema(r.try_get("output_schema_json")?),
        changelog: r.try_get("changelog")?,
        created_by: r.try_get("created_by")?,
        created_at: r.try_get("created_at")?,
    })
}

const VERSION_SELECT: &str =
    "SELECT v.version, v.code, v.args_json, v.output_schema_json, v.changelog, u.username AS created_by, v.created_at \
     FROM tool_versions v JOIN users u ON u.id = v.created_by";

impl Tools<'_> {
    pub async fn draft(self, user: &User, id: ToolId) -> Result<Draft, ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        let row =
            sqlx::query("SELECT code, args_json, output_schema_json, updated_at FROM tool_drafts WHERE tool_id = $1 AND user_id = $2")
                .bind(id.0)
                .bind(user.id.0)
                .fetch_optional(self.core.db().pool())
                .await?;
        if let Some(r) = row {
            return Ok(Draft {
                code: r.try_get("code")?,
                args: parse_args(&r.try_get::<String, _>("args_json")?),
                output_schema: parse_output_schema(r.try_get("output_schema_json")?),
                autosaved_at: Some(r.try_get("updated_at")?),
                base_version: tool.latest_version,
            });
        }
        match tool.latest_version {
            Some(n) => {
                let v = self.version_row(id, n).await?;
                Ok(Draft { code: v.code, args: v.args, output_schema: v.output_schema, autosaved_at: None, base_version: Some(n) })
            }
            None => Ok(Draft {
                code: STARTER_CODE.to_owned(),
                args: crate::schema::starter_args(),
                output_schema: None,
                autosaved_at: None,
                base_version: None,
            }),
        }
    }

    /// Autosave: keeps the author's work in progress; returns when it was saved.
    /// The output schema the editor keeps: the latest version's. Only a push
    /// or a fork sets one; the editor edits code and arguments.
    pub async fn kept_output_schema(self, user: &User, id: ToolId) -> Result<Option<serde_json::Value>, ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        match tool.latest_version {
            Some(n) => Ok(self.version_row(id, n).await?.output_schema),
            None => Ok(None),
        }
    }

    pub async fn save_draft(self, user: &User, id: ToolId, source: Source) -> Result<i64, ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        let now = now_ms();
        let mut tx = self.core.begin().await?;
        sqlx::query(
            "INSERT INTO tool_drafts (tool_id, user_id, code, args_json, output_schema_json, updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (tool_id, user_id) DO UPDATE SET code = excluded.code, args_json = excluded.args_json, \
             output_schema_json = excluded.output_schema_json, updated_at = excluded.updated_at",
        )
        .bind(id.0)
        .bind(user.id.0)
        .bind(source.code.as_str())
        .bind(source.args_json())
        .bind(source.output_schema_json())
        .bind(now)
        .execute(&mut *tx)
        .await?;
        audit::record(&mut tx, Some(user.id), "draft.saved", &tool.audit_target(), None, None).await?;
        tx.commit().await?;
        Ok(now)
    }

    /// Drops the author's draft, so the editor shows the latest version again.
    pub async fn discard_draft(self, user: &User, id: ToolId) -> Result<(), ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        let mut tx = self.core.begin().await?;
        let dropped =
            sqlx::query("DELETE FROM tool_drafts WHERE tool_id = $1 AND user_id = $2").bind(id.0).bind(user.id.0).execute(&mut *tx).await?;
        if dropped.rows_affected() == 0 {
            return Ok(());
        }
        audit::record(&mut tx, Some(user.id), "draft.discarded", &tool.audit_target(), None, None).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Saves an immutable version (numbered 1, 2, …) and clears the author's draft.
    pub async fn save_version(self, user: &User, id: ToolId, source: Source, changelog: &str) -> Result<i64, ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        let changelog = parse_changelog(changelog)?;
        let mut tx = self.core.begin().await?;
        let version = match write_version(&mut tx, user, &tool, &source, &changelog).await {
            Ok(v) => v,
            Err(e) => return Err(super::rolled_back(tx, e).await),
        };
        tx.commit().await?;
        Ok(version)
    }

    pub async fn versions(self, user: &User, id: ToolId) -> Result<Vec<VersionSummary>, ToolError> {
        self.tool(user, id).await?;
        let rows = sqlx::query(
            "SELECT v.version, v.changelog, u.username AS created_by, v.created_at FROM tool_versions v \
             JOIN users u ON u.id = v.created_by WHERE v.tool_id = $1 ORDER BY v.version DESC",
        )
        .bind(id.0)
        .fetch_all(self.core.db().pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(VersionSummary {
                    version: r.try_get("version")?,
                    changelog: r.try_get("changelog")?,
                    created_by: r.try_get("created_by")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    pub(crate) async fn version_row(self, id: ToolId, n: i64) -> Result<ToolVersion, ToolError> {
        let sql = format!("{VERSION_SELECT} WHERE v.tool_id = $1 AND v.version = $2");
        let row = sqlx::query(&sql).bind(id.0).bind(n).fetch_optional(self.core.db().pool()).await?;
        row.as_ref().map(version_from_row).transpose()?.ok_or(ToolError::NoSuchVersion(n))
    }

    pub async fn version(self, user: &User, id: ToolId, n: i64) -> Result<ToolVersion, ToolError> {
        self.tool(user, id).await?;
        self.version_row(id, n).await
    }

    /// Serves version `n` from now on. Publishing an older version is a roll back.
    /// In a department that requires review, an editor's publish waits for an
    /// admin instead (`pending_version`) and the endpoint keeps its version.
    /// Where the department (or the instance) requires tests, a tool's version
    /// is published only if it has test cases and they all pass against it.
    pub async fn publish(self, user: &User, id: ToolId, n: i64) -> Result<Tool, ToolError> {
        self.publish_tested(user, id, n, None).await
    }

    /// [`Tools::publish`], given the results of the tool's test cases
    /// against `n` when the caller has just run them.
    pub(crate) async fn publish_tested(
        self,
        user: &User,
        id: ToolId,
        n: i64,
        tested: Option<Vec<super::TestCaseResult>>,
    ) -> Result<Tool, ToolError> {
        let tool = self.tool_for_edit(user, id).await?;
        let version = self.version_row(id, n).await?;
        let review = match self.publish_gates(user, &tool, (&version).into(), n, tested).await? {
            Gate::Open { review } => review,
            Gate::Held(held) => return Err(self.hold(user, &tool, n, held).await),
        };
        let mut tx = self.core.begin().await?;
        write_publish(&mut tx, user, &tool, n, review).await?;
        tx.commit().await?;
        self.tool(user, id).await
    }

    /// The gates every publish passes, whoever asks (the editor, a roll back,
    /// a push, the demo seed), in order: where the department requires them,
    /// test cases, all passing against that very code (`tested`: their
    /// results, when the caller has just run them); then the hidden-instruction
    /// scan of what models will read of `tool` (with the texts it will have)
    /// serving what `served` says; and whether the publish then waits for an
    /// admin's review. Writes nothing: the caller writes the publish, or the hold.
    pub(crate) async fn publish_gates(
        self,
        user: &User,
        tool: &Tool,
        served: super::gates::Served<'_>,
        n: i64,
        tested: Option<Vec<super::TestCaseResult>>,
    ) -> Result<Gate, ToolError> {
        if let Some(uri) = tool.serves.uri() {
            // A resource that no URI could read would be listed, and refuse every read.
            uri.fits(served.args)?;
        }
        super::test_cases::gate_passed(self.test_gate(user, tool, n, tested).await?)?;
        if let Some(held) = self.unaccepted_findings(tool, served).await? {
            return Ok(Gate::Held(held));
        }
        Ok(Gate::Open { review: !user.is_admin && self.review_required(tool.department_id).await? })
    }

    /// The change from version `from` to `to`: of the code and the argument
    /// schema for a tool, of the member list (in `code`) for a bundle.
    pub async fn diff_versions(self, user: &User, id: ToolId, from: i64, to: i64) -> Result<VersionDiff, ToolError> {
        let tool = self.tool(user, id).await?;
        let (mut a, mut b) = (self.version_row(id, from).await?, self.version_row(id, to).await?);
        if tool.kind == super::ListingKind::Bundle {
            (a.code, b.code) = (self.member_lines(user, id, from).await?, self.member_lines(user, id, to).await?);
        }
        let (x, y) = (format!("v{from}"), format!("v{to}"));
        let code = unified_diff(&a.code, &b.code, &x, &y);
        Ok(VersionDiff { from, to, code, args: unified_diff(&schema_text(&a.args), &schema_text(&b.args), &x, &y) })
    }
}

/// A unified diff of two texts, three lines of context.
pub(crate) fn unified_diff(a: &str, b: &str, from: &str, to: &str) -> String {
    similar::TextDiff::from_lines(a, b).unified_diff().context_radius(3).header(from, to).to_string()
}

/// Argument rows as the JSON Schema clients see, pretty.
pub(crate) fn schema_text(args: &[ArgDef]) -> String {
    serde_json::to_string_pretty(&crate::schema::to_json_schema(args)).unwrap_or_default() + "\n"
}

/// Saves `source` as the tool's next version (1, 2, …) and returns its number.
/// One statement picks the number and inserts it, so two saves cannot both
/// take the same number; saves of one tool wait for each other on the tool's
/// row, and should one still race, it hits the primary key and tries again
/// with the next number (from a savepoint, so the rest of the transaction
/// stands). SQLite's write transactions never race.
pub(crate) async fn insert_version(tx: &mut Tx, user: &User, id: ToolId, source: &Source, changelog: &str) -> Result<i64, ToolError> {
    // Saves of one tool queue here (the row lock lasts until the transaction
    // ends); a race can then only come from a writer that skipped this line.
    sqlx::query("UPDATE tools SET updated_at = updated_at WHERE id = $1").bind(id.0).execute(&mut **tx).await?;
    const ATTEMPTS: usize = 5;
    for _ in 0..ATTEMPTS {
        sqlx::query("SAVEPOINT next_version").execute(&mut **tx).await?;
        let inserted = sqlx::query(
            "INSERT INTO tool_versions (tool_id, version, code, args_json, output_schema_json, changelog, created_by, created_at) \
             SELECT $1, COALESCE(MAX(version), 0) + 1, $2, $3, $4, $5, $6, $7 FROM tool_versions WHERE tool_id = $1 RETURNING version",
        )
        .bind(id.0)
        .bind(source.code.as_str())
        .bind(source.args_json())
        .bind(source.output_schema_json())
        .bind(changelog)
        .bind(user.id.0)
        .bind(now_ms())
        .fetch_one(&mut **tx)
        .await
        .map_err(StoreError::from);
        match inserted {
            Ok(row) => {
                sqlx::query("RELEASE SAVEPOINT next_version").execute(&mut **tx).await?;
                return Ok(row.try_get("version")?);
            }
            Err(e) if e.is_unique_violation() => {
                sqlx::query("ROLLBACK TO SAVEPOINT next_version").execute(&mut **tx).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(ToolError::Conflict("Others saved versions of this tool at the same moment; try again.".into()))
}

/// Where a publish stands once past its gates ([`Tools::publish_gates`]).
pub(crate) enum Gate {
    /// It goes ahead; with `review`, as a request an admin decides (an
    /// editor's publish in a department that requires review).
    Open { review: bool },
    /// What models would read has findings no admin accepted: held.
    Held(super::gates::Held),
}

/// Saves `source` as `tool`'s next version in `tx`, drops `user`'s draft of
/// it and writes the audit row; returns the version's number.
pub(crate) async fn write_version(tx: &mut Tx, user: &User, tool: &Tool, source: &Source, changelog: &str) -> Result<i64, ToolError> {
    let version = insert_version(tx, user, tool.id, source, changelog).await?;
    sqlx::query("DELETE FROM tool_drafts WHERE tool_id = $1 AND user_id = $2").bind(tool.id.0).bind(user.id.0).execute(&mut **tx).await?;
    sqlx::query("UPDATE tools SET updated_at = $1 WHERE id = $2").bind(now_ms()).bind(tool.id.0).execute(&mut **tx).await?;
    let after = serde_json::json!({"version": version, "changelog": changelog});
    audit::record(tx, Some(user.id), "tool.version_saved", &tool.audit_target(), None, Some(after)).await?;
    Ok(version)
}

/// Writes the publish of `tool`'s version `n` in `tx`: served from now on, or,
/// with `review`, waiting for an admin while the endpoint keeps its version.
pub(crate) async fn write_publish(tx: &mut Tx, user: &User, tool: &Tool, n: i64, review: bool) -> Result<(), ToolError> {
    if review {
        return super::gates::request_review(tx, user, tool, n).await;
    }
    let action = tool.publish_action(n);
    sqlx::query("UPDATE tools SET published_version = $1, updated_at = $2 WHERE id = $3")
        .bind(n)
        .bind(now_ms())
        .bind(tool.id.0)
        .execute(&mut **tx)
        .await?;
    mark_published(tx, tool.id, n).await?;
    let (before, after) = (serde_json::json!({"version": tool.published_version}), serde_json::json!({"version": n}));
    audit::record(tx, Some(user.id), &action, &tool.audit_target(), Some(before), Some(after)).await?;
    tracing::info!(listing = %tool.audit_target(), version = n, action = %action, "published");
    Ok(())
}

/// Marks version `n` as served (its first publish or approval): from then on
/// anyone who may see the tool may run it by number or pin it.
pub(crate) async fn mark_published(tx: &mut Tx, id: ToolId, n: i64) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE tool_versions SET published_at = COALESCE(published_at, $1) WHERE tool_id = $2 AND version = $3")
        .bind(now_ms())
        .bind(id.0)
        .bind(n)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl Tools<'_> {
    /// Whether `user` may run version `n` of `tool` by number, or pin it: its
    /// editors any version, everyone else only versions that have been served.
    pub(crate) async fn may_use_version(self, user: &User, tool: &Tool, n: i64) -> Result<bool, ToolError> {
        let row = sqlx::query("SELECT published_at FROM tool_versions WHERE tool_id = $1 AND version = $2")
            .bind(tool.id.0)
            .bind(n)
            .fetch_optional(self.core.db().pool())
            .await?;
        Ok(match row {
            Some(r) => super::can_edit(user, tool) || r.try_get::<Option<i64>, _>("published_at")?.is_some(),
            None => false,
        })
    }

    /// `listing` as an endpoint pinned to its version `n` serves it (`…@vN`):
    /// that version whatever is published later, if it was ever served (its
    /// editors: any saved one).
    pub async fn pinned(self, user: &User, listing: Tool, n: i64) -> Result<Tool, ToolError> {
        if !self.may_use_version(user, &listing, n).await? {
            return Err(ToolError::NoSuchVersion(n));
        }
        Ok(Tool { published_version: Some(n), pinned: true, ..listing })
    }
}

/// A version's changelog: at most 500 characters, "No description" when blank.
pub(crate) fn parse_changelog(raw: &str) -> Result<String, ToolError> {
    let changelog = raw.trim();
    if changelog.chars().count() > 500 {
        return Err(Invalid { field: "Changelog", reason: "must be at most 500 characters".into() }.into());
    }
    Ok(if changelog.is_empty() { "No description" } else { changelog }.to_owned())
}
