//! Approvals: a department may require that calls of its tools that write
//! wait for a person's yes. "Writes" is the tool's derived permission (its
//! `$fetch` may send more than GET and HEAD, [`crate::tools::Permissions`]),
//! the label the sandbox enforces, not a hint the author sets.
//!
//! A held call files a request with its arguments frozen; the department's
//! approvers (its named approvers if it has any, else its maintainers; admins
//! always; never the requester) approve or decline it in their inbox. An
//! approval admits exactly those arguments, of that version, for the
//! requester, once: the call that uses it runs, and so do its further rounds
//! when the tool asks its caller questions (each round is given a key that
//! admits the next round once); any other call is held again. Requests
//! expire a day after they were made, approvals an hour after they were
//! given. Every request and decision is in the audit log.
//!
//! The gate sits where every saved version's run is prepared
//! ([`crate::tools::Tools::prepare_run`]): MCP (`/mcp/me` too), the Run
//! panel, code mode's members and the playground are held alike. The tool's
//! editors' own runs (drafts, test cases, replays) are not: approvals
//! constrain who calls a tool, not who may change it.

use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::Row;

use super::{ListingKind, Tool, ToolError};
use crate::accounts::User;
use crate::ids::UserId;
use crate::names::Role;
use crate::sandbox::canonical_json;
use crate::store::StoreError;
use crate::{audit, now_ms};

handle! {
    /// Calls held for a person's approval, and the decisions on them.
    Approvals
}

/// How long a request waits for a decision.
pub const REQUEST_TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// How long an approval waits for the call it admits.
pub const APPROVAL_TTL_MS: i64 = 60 * 60 * 1000;
/// How long after its first use an approval still admits the further rounds
/// of the same call (a tool that asks its caller questions after the gate).
const ROUNDS_WINDOW_MS: i64 = 60 * 60 * 1000;
/// The longest note a decision may carry.
const MAX_NOTE_CHARS: usize = 500;
/// Requests one person may have waiting at once: each is someone's work to read.
pub const MAX_WAITING_PER_USER: i64 = 20;

/// One call at the gate.
struct Call<'a> {
    user: &'a User,
    tool: &'a Tool,
    version: i64,
    hash: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Declined,
    Withdrawn,
    /// Approved, and the call it admitted has run.
    Used,
    /// Pending or approved past its time.
    Expired,
}

impl ApprovalStatus {
    fn of(raw: &str, expires_at: i64, now: i64) -> Self {
        match raw {
            "pending" | "approved" if expires_at <= now => Self::Expired,
            "pending" => Self::Pending,
            "approved" => Self::Approved,
            "declined" => Self::Declined,
            "withdrawn" => Self::Withdrawn,
            "expired" => Self::Expired,
            _ => Self::Used,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Declined => "declined",
            Self::Withdrawn => "withdrawn",
            Self::Used => "used",
            Self::Expired => "expired",
        }
    }
}

/// A request as the inbox and its requester see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub id: String,
    /// The tool's `department/name`, and its title.
    pub tool: String,
    pub tool_title: String,
    /// The version that is to run.
    pub version: i64,
    pub department_title: String,
    pub requester: String,
    pub requester_name: String,
    /// The frozen arguments, as called.
    pub arguments: Value,
    pub status: ApprovalStatus,
    pub decided_by: Option<String>,
    pub note: Option<String>,
    pub created_at: i64,
    pub decided_at: Option<i64>,
    pub expires_at: i64,
}

/// Why a call did not run: it waits for, or was refused, approval. Each is
/// a result the caller (a model, a person) reads, not a failure of the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Held {
    #[error(
        "This call needs approval: {department}'s tools that write run only once an approver says yes. Request {id} is \
         waiting in their inbox (Approvals page); once it is approved, call again with the same arguments."
    )]
    Waiting { id: String, department: String },
    #[error("Approval request {id} was declined by {by}{}. The call did not run.", .note.as_deref().map(|n| format!(": “{n}”")).unwrap_or_default())]
    Declined { id: String, by: String, note: Option<String> },
    #[error("Approval request {id} expired before it was used; call again to ask afresh.")]
    Expired { id: String },
    #[error("Approval request {id} was withdrawn; the call did not run.")]
    Withdrawn { id: String },
    #[error("Approval request {id} admitted one call, which has run; call again to ask afresh.")]
    Spent { id: String },
    #[error("You have {MAX_WAITING_PER_USER} calls waiting for approval: wait for decisions, or withdraw some (Approvals page), then call again.")]
    TooMany,
}

/// Why a decision was not taken.
#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    #[error("There is no such request waiting for you.")]
    NotFound,
    #[error("You cannot decide on your own call: another approver must.")]
    OwnRequest,
    #[error("This request was already decided, withdrawn or has expired.")]
    NotPending,
    #[error("A note may have at most {MAX_NOTE_CHARS} characters.")]
    NoteTooLong,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for DecisionError {
    fn from(e: sqlx::Error) -> Self {
        DecisionError::Store(e.into())
    }
}

/// The hash that binds an approval to its arguments (keys in any order).
fn arguments_hash(arguments: &Value) -> String {
    hex::encode(Sha256::digest(canonical_json(arguments)))
}

const SELECT: &str = "SELECT a.id, a.version, a.arguments, a.status, a.note, a.created_at, a.decided_at, a.expires_at, \
     t.name AS tool_name, t.title AS tool_title, d.name AS dept, d.title AS dept_title, \
     r.username AS requester, r.display_name AS requester_name, x.username AS decider \
     FROM approvals a JOIN tools t ON t.id = a.tool_id JOIN departments d ON d.id = a.department_id \
     JOIN users r ON r.id = a.requester_id LEFT JOIN users x ON x.id = a.decided_by";

fn approval_from_row(r: &sqlx::any::AnyRow, now: i64) -> Result<Approval, sqlx::Error> {
    let expires_at = r.try_get("expires_at")?;
    Ok(Approval {
        id: r.try_get("id")?,
        tool: format!("{}/{}", r.try_get::<String, _>("dept")?, r.try_get::<String, _>("tool_name")?),
        tool_title: r.try_get("tool_title")?,
        version: r.try_get("version")?,
        department_title: r.try_get("dept_title")?,
        requester: r.try_get("requester")?,
        requester_name: r.try_get("requester_name")?,
        arguments: serde_json::from_str(&r.try_get::<String, _>("arguments")?).unwrap_or(Value::Null),
        status: ApprovalStatus::of(&r.try_get::<String, _>("status")?, expires_at, now),
        decided_by: r.try_get("decider")?,
        note: r.try_get("note")?,
        created_at: r.try_get("created_at")?,
        decided_at: r.try_get("decided_at")?,
        expires_at,
    })
}

/// The SQL condition (on `a`) for requests `user` may decide, their own
/// aside: their department's, where it names them or (naming nobody) they
/// maintain it; every one for an admin.
fn decidable_by(user: &User) -> String {
    if user.is_admin {
        return "1 = 1".into();
    }
    let (me, dept) = (user.id.0, user.department.id.0);
    // Named approvers count while they are active members of the department; with none left, its maintainers decide.
    let named = |who: &str| {
        format!(
            "EXISTS (SELECT 1 FROM department_approvers p JOIN users u ON u.id = p.user_id \
             WHERE p.department_id = {dept} AND u.department_id = {dept} AND u.is_active = 1{who})"
        )
    };
    let (named, maintainers) = (named(&format!(" AND p.user_id = {me}")), format!("NOT {}", named("")));
    match user.role {
        Role::Maintainer => format!("a.department_id = {dept} AND ({named} OR {maintainers})"),
        _ => format!("a.department_id = {dept} AND {named}"),
    }
}

impl Approvals<'_> {
    /// Whether calls of `tool` wait for approval: it writes, and its
    /// department requires approval for tools that do.
    pub fn required_for(tool: &Tool) -> bool {
        tool.kind == ListingKind::Tool && !tool.read_only_hint && tool.approval_required
    }

    /// The gate before `user`'s call of `version` of `tool` with `arguments`.
    /// `held`: what an earlier round of this same call carried: the key its
    /// last admitted round was given, or the request it waits on.
    /// `Ok(Some(key))`: admitted; the key admits the call's next round (a
    /// tool that asks its caller questions), once; `Ok(None)`: no approval
    /// needed.
    pub(crate) async fn admit(
        self,
        user: &User,
        (tool, version): (&Tool, i64),
        arguments: &Value,
        held: Option<&str>,
    ) -> Result<Option<String>, ToolError> {
        if !Self::required_for(tool) {
            return Ok(None);
        }
        let call = Call { user, tool, version, hash: arguments_hash(arguments) };
        let pool = self.core.db().pool();
        let now = now_ms();
        // This call's own round key or request (another's, or other arguments', is ignored).
        if let Some(held) = held {
            let row = sqlx::query(
                "SELECT a.id, a.status, a.call_key, a.expires_at, a.used_at, a.finished_at, a.note, x.username AS decider \
                 FROM approvals a LEFT JOIN users x ON x.id = a.decided_by \
                 WHERE (a.id = $1 OR a.call_key = $1) AND a.requester_id = $2 AND a.tool_id = $3 AND a.version = $4 AND a.arguments_hash = $5",
            )
            .bind(held)
            .bind(user.id.0)
            .bind(tool.id.0)
            .bind(version)
            .bind(&call.hash)
            .fetch_optional(pool)
            .await?;
            if let Some(row) = row {
                let id: String = row.try_get("id")?;
                if row.try_get::<Option<String>, _>("call_key")?.as_deref() == Some(held) {
                    // The next round of the admitted call, which has not ended (it asked its caller something).
                    let open = row.try_get::<Option<i64>, _>("finished_at")?.is_none()
                        && row.try_get::<Option<i64>, _>("used_at")?.is_some_and(|at| now - at < ROUNDS_WINDOW_MS);
                    return match open {
                        true => self.next_key(id, Some(held)).await,
                        false => Err(Held::Spent { id }.into()),
                    };
                }
                return match ApprovalStatus::of(&row.try_get::<String, _>("status")?, row.try_get("expires_at")?, now) {
                    ApprovalStatus::Approved => self.next_key(id, None).await,
                    ApprovalStatus::Pending => Err(Held::Waiting { id, department: tool.department.clone() }.into()),
                    ApprovalStatus::Declined => Err(self.told_declined(&row).await?.0.into()),
                    ApprovalStatus::Withdrawn => Err(Held::Withdrawn { id }.into()),
                    // A request id admits a call once; its further rounds carry their key.
                    ApprovalStatus::Used => Err(Held::Spent { id }.into()),
                    ApprovalStatus::Expired => Err(Held::Expired { id }.into()),
                };
            }
        }
        // A retry with the same arguments finds its request: approved, waiting, or declined (told once).
        let row = sqlx::query(
            "SELECT a.id, a.status, a.note, x.username AS decider FROM approvals a LEFT JOIN users x ON x.id = a.decided_by \
             WHERE a.requester_id = $1 AND a.tool_id = $2 AND a.version = $3 AND a.arguments_hash = $4 AND a.expires_at > $5 \
             AND (a.status IN ('pending', 'approved') OR (a.status = 'declined' AND a.reported_at IS NULL)) \
             ORDER BY a.created_at DESC LIMIT 1",
        )
        .bind(user.id.0)
        .bind(tool.id.0)
        .bind(version)
        .bind(&call.hash)
        .bind(now)
        .fetch_optional(pool)
        .await?;
        if let Some(row) = row {
            let id: String = row.try_get("id")?;
            match row.try_get::<String, _>("status")?.as_str() {
                "approved" => return self.next_key(id, None).await,
                "pending" => return Err(Held::Waiting { id, department: tool.department.clone() }.into()),
                // Told once; if another call told it meanwhile, this one asks afresh.
                _ => {
                    if let (declined, true) = self.told_declined(&row).await? {
                        return Err(declined.into());
                    }
                }
            }
        }
        Err(self.request(&call, arguments).await?.into())
    }

    /// Admits a round of request `id`'s call: the approval's first (`from`
    /// `None`: it goes from approved to used) or the next after the round
    /// that was given key `from`. Each round gets a new key, taken by
    /// compare-and-set: of two rounds presenting one key (a `requestState`
    /// sent twice), one runs.
    async fn next_key(self, id: String, from: Option<&str>) -> Result<Option<String>, ToolError> {
        let key = hex::encode(rand::random::<[u8; 16]>());
        let now = now_ms();
        let taken = match from {
            None => sqlx::query(
                "UPDATE approvals SET status = 'used', used_at = $1, call_key = $2 WHERE id = $3 AND status = 'approved' AND expires_at > $1",
            )
            .bind(now)
            .bind(&key)
            .bind(&id),
            Some(from) => sqlx::query("UPDATE approvals SET call_key = $1 WHERE id = $2 AND call_key = $3 AND finished_at IS NULL")
                .bind(&key)
                .bind(&id)
                .bind(from),
        }
        .execute(self.core.db().pool())
        .await?;
        match taken.rows_affected() {
            1 => Ok(Some(key)),
            _ => Err(Held::Spent { id }.into()),
        }
    }

    /// The decline of `row`'s request, marked told, and whether this is the
    /// first time it is (a retry is told a decline once, then asks afresh).
    async fn told_declined(self, row: &sqlx::any::AnyRow) -> Result<(Held, bool), ToolError> {
        let id: String = row.try_get("id")?;
        let told = sqlx::query("UPDATE approvals SET reported_at = $1 WHERE id = $2 AND reported_at IS NULL")
            .bind(now_ms())
            .bind(&id)
            .execute(self.core.db().pool())
            .await?;
        let (by, note) = (row.try_get::<Option<String>, _>("decider")?.unwrap_or_default(), row.try_get("note")?);
        Ok((Held::Declined { id, by, note }, told.rows_affected() == 1))
    }

    /// The call whose round was given `key` has ended: its approval admits
    /// nothing more.
    pub(crate) async fn finish(self, key: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE approvals SET finished_at = $1 WHERE call_key = $2 AND finished_at IS NULL")
            .bind(now_ms())
            .bind(key)
            .execute(self.core.db().pool())
            .await?;
        Ok(())
    }

    /// Files a request for the call (or finds the one a concurrent identical call filed).
    async fn request(self, call: &Call<'_>, arguments: &Value) -> Result<Held, ToolError> {
        let Call { user, tool, version, hash } = call;
        let now = now_ms();
        let mut tx = self.core.begin().await?;
        // One request of a person's at a time, so the cap counts what the
        // others filed: this row lock is held to the commit (SQLite's writer
        // lock does the same), and the count below is read after it.
        sqlx::query("UPDATE users SET updated_at = updated_at WHERE id = $1").bind(user.id.0).execute(&mut *tx).await?;
        let waiting: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM approvals WHERE requester_id = $1 AND status = 'pending' AND expires_at > $2")
                .bind(user.id.0)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
        if waiting >= MAX_WAITING_PER_USER {
            tx.rollback().await?;
            return Err(Held::TooMany.into());
        }
        let id = hex::encode(rand::random::<[u8; 12]>());
        // A request for the same call that nobody decided in time is over: it would hold the one pending place.
        sqlx::query(
            "UPDATE approvals SET status = 'expired' WHERE requester_id = $1 AND tool_id = $2 AND version = $3 AND arguments_hash = $4 \
             AND status = 'pending' AND expires_at <= $5",
        )
        .bind(user.id.0)
        .bind(tool.id.0)
        .bind(version)
        .bind(hash)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let filed = sqlx::query(
            "INSERT INTO approvals (id, tool_id, department_id, requester_id, version, arguments, arguments_hash, status, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9) ON CONFLICT DO NOTHING",
        )
        .bind(&id)
        .bind(tool.id.0)
        .bind(tool.department_id)
        .bind(user.id.0)
        .bind(version)
        .bind(arguments.to_string())
        .bind(hash)
        .bind(now)
        .bind(now + REQUEST_TTL_MS)
        .execute(&mut *tx)
        .await?;
        let department = tool.department.clone();
        if filed.rows_affected() == 0 {
            tx.rollback().await?;
            let id: String = sqlx::query_scalar(
                "SELECT id FROM approvals WHERE requester_id = $1 AND tool_id = $2 AND version = $3 AND arguments_hash = $4 AND status = 'pending'",
            )
            .bind(user.id.0)
            .bind(tool.id.0)
            .bind(version)
            .bind(hash)
            .fetch_one(self.core.db().pool())
            .await?;
            return Ok(Held::Waiting { id, department });
        }
        let after = serde_json::json!({ "approval": id, "version": version, "arguments": arguments });
        audit::record(&mut tx, Some(user.id), "approval.requested", &tool.audit_target(), None, Some(after)).await?;
        tx.commit().await?;
        Ok(Held::Waiting { id, department })
    }

    /// Where request `id` stands, for its requester (a task waiting on it).
    pub async fn status(self, requester: UserId, id: &str) -> Result<Option<ApprovalStatus>, StoreError> {
        let row = sqlx::query("SELECT status, expires_at FROM approvals WHERE id = $1 AND requester_id = $2")
            .bind(id)
            .bind(requester.0)
            .fetch_optional(self.core.db().pool())
            .await?;
        row.map(|r| Ok(ApprovalStatus::of(&r.try_get::<String, _>("status")?, r.try_get("expires_at")?, now_ms()))).transpose()
    }

    /// The requests `user` may decide: those waiting first (oldest first),
    /// then the last week's decisions.
    pub async fn inbox(self, user: &User) -> Result<Vec<Approval>, StoreError> {
        let now = now_ms();
        let rows = sqlx::query(&format!(
            "{SELECT} WHERE {} AND a.requester_id <> $3 AND a.created_at > $1 \
             ORDER BY CASE WHEN a.status = 'pending' AND a.expires_at > $2 THEN 0 ELSE 1 END, \
             CASE WHEN a.status = 'pending' THEN a.created_at ELSE -a.created_at END LIMIT 100",
            decidable_by(user)
        ))
        .bind(now - 7 * REQUEST_TTL_MS)
        .bind(now)
        .bind(user.id.0)
        .fetch_all(self.core.db().pool())
        .await?;
        Ok(rows.iter().map(|r| approval_from_row(r, now)).collect::<Result<_, _>>()?)
    }

    /// How many requests wait for `user`'s decision now: the count the
    /// header shows, so an approver learns of a request before it expires.
    pub async fn waiting_for(self, user: &User) -> Result<i64, StoreError> {
        let sql = format!(
            "SELECT COUNT(*) FROM approvals a WHERE {} AND a.requester_id <> $1 AND a.status = 'pending' AND a.expires_at > $2",
            decidable_by(user)
        );
        Ok(sqlx::query_scalar(&sql).bind(user.id.0).bind(now_ms()).fetch_one(self.core.db().pool()).await?)
    }

    /// `user`'s own requests, newest first (the last 50 of the last week).
    pub async fn mine(self, user: &User) -> Result<Vec<Approval>, StoreError> {
        let now = now_ms();
        let rows = sqlx::query(&format!("{SELECT} WHERE a.requester_id = $1 AND a.created_at > $2 ORDER BY a.created_at DESC LIMIT 50"))
            .bind(user.id.0)
            .bind(now - 7 * REQUEST_TTL_MS)
            .fetch_all(self.core.db().pool())
            .await?;
        Ok(rows.iter().map(|r| approval_from_row(r, now)).collect::<Result<_, _>>()?)
    }

    /// `actor` approves (or declines) request `id`, with an optional note for the requester.
    pub async fn decide(self, actor: &User, id: &str, approve: bool, note: &str) -> Result<(), DecisionError> {
        let note = Some(note.trim()).filter(|n| !n.is_empty());
        if note.is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS) {
            return Err(DecisionError::NoteTooLong);
        }
        let now = now_ms();
        let mut tx = self.core.begin().await?;
        let row = sqlx::query(&format!(
            "SELECT a.requester_id, a.version, a.arguments, t.kind, t.name AS tool_name, d.name AS dept FROM approvals a \
             JOIN tools t ON t.id = a.tool_id JOIN departments d ON d.id = a.department_id WHERE a.id = $1 AND ({})",
            decidable_by(actor)
        ))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Err(DecisionError::NotFound) };
        if row.try_get::<i64, _>("requester_id")? == actor.id.0 {
            return Err(DecisionError::OwnRequest);
        }
        // An approval waits an hour for its call; a decline keeps the request's
        // time, in which the next call with those arguments is told of it.
        let (status, expires_at) = if approve { ("approved", Some(now + APPROVAL_TTL_MS)) } else { ("declined", None) };
        let decided = sqlx::query(
            "UPDATE approvals SET status = $1, decided_by = $2, decided_at = $3, note = $4, expires_at = COALESCE($5, expires_at) \
             WHERE id = $6 AND status = 'pending' AND expires_at > $3",
        )
        .bind(status)
        .bind(actor.id.0)
        .bind(now)
        .bind(note)
        .bind(expires_at)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if decided.rows_affected() != 1 {
            return Err(DecisionError::NotPending);
        }
        let target = format!(
            "{}:{}/{}",
            row.try_get::<String, _>("kind")?,
            row.try_get::<String, _>("dept")?,
            row.try_get::<String, _>("tool_name")?
        );
        let arguments: Value = serde_json::from_str(&row.try_get::<String, _>("arguments")?).unwrap_or(Value::Null);
        let after =
            serde_json::json!({ "approval": id, "version": row.try_get::<i64, _>("version")?, "arguments": arguments, "note": note });
        let action = if approve { "approval.approved" } else { "approval.declined" };
        audit::record(&mut tx, Some(actor.id), action, &target, None, Some(after)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// `user` withdraws their request `id` while it waits (a cancelled task's, a
    /// person who no longer wants the call). `false` if it is not theirs or not waiting.
    pub async fn withdraw(self, user: UserId, id: &str) -> Result<bool, StoreError> {
        let mut tx = self.core.begin().await?;
        let withdrawn = sqlx::query(
            "UPDATE approvals SET status = 'withdrawn', decided_at = $1 WHERE id = $2 AND requester_id = $3 AND status = 'pending'",
        )
        .bind(now_ms())
        .bind(id)
        .bind(user.0)
        .execute(&mut *tx)
        .await?;
        if withdrawn.rows_affected() != 1 {
            return Ok(false);
        }
        audit::record(&mut tx, Some(user), "approval.withdrawn", &format!("approval:{id}"), None, None).await?;
        tx.commit().await?;
        Ok(true)
    }
}

impl From<Held> for ToolError {
    fn from(held: Held) -> Self {
        ToolError::Held(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_in_another_key_order_are_the_same_call() {
        let a = serde_json::json!({"path": "/tmp/x", "force": true});
        let b: Value = serde_json::from_str(r#"{"force": true, "path": "/tmp/x"}"#).unwrap();
        assert_eq!(arguments_hash(&a), arguments_hash(&b));
        assert_ne!(arguments_hash(&a), arguments_hash(&serde_json::json!({"path": "/tmp/y", "force": true})));
    }

    #[test]
    fn a_pending_or_approved_request_past_its_time_is_expired() {
        assert_eq!(ApprovalStatus::of("pending", 100, 100), ApprovalStatus::Expired);
        assert_eq!(ApprovalStatus::of("approved", 100, 101), ApprovalStatus::Expired);
        assert_eq!(ApprovalStatus::of("approved", 100, 99), ApprovalStatus::Approved);
        // A decision stands whenever it was made.
        assert_eq!(ApprovalStatus::of("declined", 100, 200), ApprovalStatus::Declined);
        assert_eq!(ApprovalStatus::of("used", 100, 200), ApprovalStatus::Used);
    }
}
