//! Long calls as tasks (MCP's tasks extension): a call answered at once with
//! a task id, run on in the background, and polled for its status, its
//! questions and at last its result. Tasks live in the database, so any
//! replica answers for any task: the replica running one writes its progress
//! there and reads cancels and answers from there.
//!
//! Only the person who started a task sees it; to anyone else its id does
//! not exist.

use serde_json::{Map, Value};
use sqlx::Row;

use crate::accounts::User;
use crate::ids::ToolId;
use crate::now_ms;
use crate::sandbox::{Answer, Input};
use crate::store::StoreError;

handle! {
    /// Tasks: calls that outlive their request.
    Tasks
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    fn parse(s: &str) -> Self {
        match s {
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => Self::Working,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// A task as its caller sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    /// The listing whose endpoint it was started on (`None`: the personal endpoint).
    pub listing: Option<ToolId>,
    pub tool_name: String,
    pub status: TaskStatus,
    pub status_message: Option<String>,
    /// `InputRequired`: the questions still unanswered, by key (MCP `inputRequests`).
    pub input_requests: Option<Map<String, Value>>,
    /// `Completed`: the call's result (an MCP `CallToolResult`).
    pub result: Option<Value>,
    /// `Failed`: what went wrong (a JSON-RPC error object).
    pub error: Option<Value>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One of a person's tasks, as their Account page lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSummary {
    pub id: String,
    pub tool_name: String,
    /// The endpoint's listing (kind and `department/name`); `None`: gone.
    pub listing: Option<(crate::tools::ListingKind, String)>,
    pub status: TaskStatus,
    pub status_message: Option<String>,
    /// The start of the result's text, or the error's message.
    pub outcome: Option<String>,
    /// The result is the tool's error.
    pub is_error: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// How much of a result the list shows.
const OUTCOME_CHARS: usize = 200;

/// How long a task and its result are kept after it was created.
pub const TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// How often a client should poll, and the runner looks for cancels and answers.
pub const POLL_INTERVAL_MS: i64 = 500;
/// A running task whose replica has said nothing for this long has stopped
/// with it (a crash, a deploy): it is failed rather than left working forever.
pub const STALE_AFTER_MS: i64 = 30_000;
/// Tasks one person may have running at once: each holds a sandbox worker
/// for as long as it runs (its time limit may be long).
pub const MAX_RUNNING_PER_USER: i64 = 5;

/// Why a task was not started.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("You have {MAX_RUNNING_PER_USER} tasks running already: wait for one to end, or cancel one (Account page), then call again.")]
    TooMany,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for TaskError {
    fn from(e: sqlx::Error) -> Self {
        TaskError::Store(e.into())
    }
}
/// How often the running replica says it still is.
const BEAT_EVERY_MS: i64 = 5_000;

const SELECT: &str = "SELECT id, listing_id, tool_name, status, status_message, input_requests, result, error, created_at, updated_at, \
                      heartbeat_at FROM tasks";

/// A JSON column's value, if any.
fn json_column(r: &sqlx::any::AnyRow, column: &str) -> Result<Option<Value>, sqlx::Error> {
    Ok(r.try_get::<Option<String>, _>(column)?.and_then(|text| serde_json::from_str(&text).ok()))
}

/// A task still running whose replica last said so at `heartbeat` has stopped with it.
fn runner_gone(status: TaskStatus, heartbeat: i64, now: i64) -> bool {
    !status.is_terminal() && now - heartbeat > STALE_AFTER_MS
}

fn task_from_row(r: &sqlx::any::AnyRow) -> Result<Task, sqlx::Error> {
    let json = |column: &str| json_column(r, column);
    Ok(Task {
        id: r.try_get("id")?,
        listing: r.try_get::<Option<i64>, _>("listing_id")?.map(ToolId),
        tool_name: r.try_get("tool_name")?,
        status: TaskStatus::parse(&r.try_get::<String, _>("status")?),
        status_message: r.try_get("status_message")?,
        input_requests: match json("input_requests")? {
            Some(Value::Object(map)) => Some(map),
            _ => None,
        },
        result: json("result")?,
        error: json("error")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// The error a task that lost its runner ends with.
fn runner_stopped() -> Value {
    serde_json::json!({ "code": -32603, "message": "The server running this task stopped before it finished; call the tool again." })
}

impl Tasks<'_> {
    /// Starts a task for `user`'s call of `tool` on `listing`'s endpoint: it
    /// exists (`get` finds it) before its id is returned. Expired tasks go.
    pub async fn create(self, user: &User, listing: Option<ToolId>, tool: &str) -> Result<Task, TaskError> {
        let pool = self.core.db().pool();
        let now = now_ms();
        sqlx::query("DELETE FROM tasks WHERE expires_at < $1").bind(now).execute(pool).await?;
        let running: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM tasks WHERE user_id = $1 AND status IN ('working', 'input_required') AND heartbeat_at > $2",
        )
        .bind(user.id.0)
        .bind(now - STALE_AFTER_MS)
        .fetch_one(pool)
        .await?;
        if running >= MAX_RUNNING_PER_USER {
            return Err(TaskError::TooMany);
        }
        // Unguessable, though only its starter may use it anyway.
        let id = hex::encode(rand::random::<[u8; 16]>());
        sqlx::query(
            "INSERT INTO tasks (id, user_id, listing_id, tool_name, status, created_at, updated_at, heartbeat_at, expires_at) \
             VALUES ($1, $2, $3, $4, 'working', $5, $5, $5, $6)",
        )
        .bind(&id)
        .bind(user.id.0)
        .bind(listing.map(|l| l.0))
        .bind(tool)
        .bind(now)
        .bind(now + TTL_MS)
        .execute(pool)
        .await?;
        Ok(Task {
            id,
            listing,
            tool_name: tool.to_owned(),
            status: TaskStatus::Working,
            status_message: None,
            input_requests: None,
            result: None,
            error: None,
            created_at: now,
            updated_at: now,
        })
    }

    /// `user`'s task `id`; `None` if there is none (or it is someone else's, or expired).
    pub async fn get(self, user: &User, id: &str) -> Result<Option<Task>, StoreError> {
        let pool = self.core.db().pool();
        let now = now_ms();
        let row = sqlx::query(&format!("{SELECT} WHERE id = $1 AND user_id = $2 AND expires_at > $3"))
            .bind(id)
            .bind(user.id.0)
            .bind(now)
            .fetch_optional(pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let mut task = task_from_row(&row)?;
        let heartbeat: i64 = row.try_get("heartbeat_at")?;
        if runner_gone(task.status, heartbeat, now) {
            let error = runner_stopped();
            let stopped = sqlx::query(
                "UPDATE tasks SET status = 'failed', error = $1, input_requests = NULL, updated_at = $2 \
                 WHERE id = $3 AND heartbeat_at = $4 AND status IN ('working', 'input_required')",
            )
            .bind(error.to_string())
            .bind(now)
            .bind(id)
            .bind(heartbeat)
            .execute(pool)
            .await?;
            if stopped.rows_affected() == 1 {
                (task.status, task.error, task.input_requests, task.updated_at) = (TaskStatus::Failed, Some(error), None, now);
            }
        }
        Ok(Some(task))
    }

    /// `user`'s tasks, newest first (the last 50 of those kept).
    pub async fn mine(self, user: &User) -> Result<Vec<TaskSummary>, StoreError> {
        let now = now_ms();
        let rows = sqlx::query(
            "SELECT k.id, k.tool_name, k.status, k.status_message, k.result, k.error, k.created_at, k.updated_at, k.heartbeat_at, \
             t.kind, d.name AS dept, t.name AS listing \
             FROM tasks k LEFT JOIN tools t ON t.id = k.listing_id LEFT JOIN departments d ON d.id = t.department_id \
             WHERE k.user_id = $1 AND k.expires_at > $2 ORDER BY k.created_at DESC, k.id LIMIT 50",
        )
        .bind(user.id.0)
        .bind(now)
        .fetch_all(self.core.db().pool())
        .await?;
        rows.iter()
            .map(|r| {
                let mut status = TaskStatus::parse(&r.try_get::<String, _>("status")?);
                // As `get` would report it.
                if runner_gone(status, r.try_get("heartbeat_at")?, now) {
                    status = TaskStatus::Failed;
                }
                let (result, error) = (json_column(r, "result")?, json_column(r, "error")?);
                let outcome = match (&result, &error) {
                    (Some(result), _) => result["content"]
                        .as_array()
                        .map(|blocks| blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join(" ")),
                    (None, Some(error)) => error["message"].as_str().map(str::to_owned),
                    (None, None) if status == TaskStatus::Failed => runner_stopped()["message"].as_str().map(str::to_owned),
                    _ => None,
                };
                let listing = match (
                    r.try_get::<Option<String>, _>("kind")?,
                    r.try_get::<Option<String>, _>("dept")?,
                    r.try_get::<Option<String>, _>("listing")?,
                ) {
                    (Some(kind), Some(dept), Some(name)) => {
                        crate::tools::ListingKind::parse(&kind).ok().map(|k| (k, format!("{dept}/{name}")))
                    }
                    _ => None,
                };
                Ok(TaskSummary {
                    id: r.try_get("id")?,
                    tool_name: r.try_get("tool_name")?,
                    listing,
                    status,
                    status_message: r.try_get("status_message")?,
                    outcome: outcome.map(|o| o.chars().take(OUTCOME_CHARS).collect()),
                    is_error: result.as_ref().is_some_and(|r| r["isError"] == true),
                    created_at: r.try_get("created_at")?,
                    updated_at: r.try_get("updated_at")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// Cancels `user`'s task `id` unless it has ended; `false` if there is no such task.
    /// The replica running it stops the run when it next looks.
    pub async fn cancel(self, user: &User, id: &str) -> Result<bool, StoreError> {
        if self.get(user, id).await?.is_none() {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE tasks SET status = 'cancelled', input_requests = NULL, updated_at = $1 \
             WHERE id = $2 AND status IN ('working', 'input_required')",
        )
        .bind(now_ms())
        .bind(id)
        .execute(self.core.db().pool())
        .await?;
        Ok(true)
    }

    /// Gives `user`'s task `id` answers to its questions, by key: keys it is
    /// not waiting on are ignored. Once every question has an answer the task
    /// works again. `false` if there is no such task.
    pub async fn answer(self, user: &User, id: &str, responses: Map<String, Value>) -> Result<bool, StoreError> {
        let pool = self.core.db().pool();
        // Two answers at once: the second sees the first's write and tries again.
        for _ in 0..5 {
            let row = sqlx::query("SELECT status, input_requests, answers FROM tasks WHERE id = $1 AND user_id = $2 AND expires_at > $3")
                .bind(id)
                .bind(user.id.0)
                .bind(now_ms())
                .fetch_optional(pool)
                .await?;
            let Some(row) = row else { return Ok(false) };
            let asked: Option<String> = row.try_get("input_requests")?;
            let (Some(asked_text), "input_required") = (asked, row.try_get::<String, _>("status")?.as_str()) else { return Ok(true) };
            let mut asked: Map<String, Value> = serde_json::from_str(&asked_text).unwrap_or_default();
            let answers_text: String = row.try_get("answers")?;
            let mut answers: Input = serde_json::from_str(&answers_text).unwrap_or_default();
            for (key, response) in &responses {
                if let Some(question) = asked.remove(key) {
                    answers.give(key.clone(), Answer::to(&question, response.clone()));
                }
            }
            let (status, still) = match asked.is_empty() {
                true => ("working", None),
                false => ("input_required", Some(Value::Object(asked).to_string())),
            };
            let written = sqlx::query(
                "UPDATE tasks SET status = $1, input_requests = $2, answers = $3, updated_at = $4 \
                 WHERE id = $5 AND status = 'input_required' AND input_requests = $6 AND answers = $7",
            )
            .bind(status)
            .bind(still)
            .bind(serde_json::to_string(&answers).unwrap_or_default())
            .bind(now_ms())
            .bind(id)
            .bind(&asked_text)
            .bind(&answers_text)
            .execute(pool)
            .await?;
            if written.rows_affected() == 1 {
                return Ok(true);
            }
        }
        // Still racing after five tries: the others' answers stand, and the
        // questions this one answered stay open for the client to answer again.
        Ok(true)
    }

    /// For the replica running task `id`: says it still is (every few
    /// seconds), and reads where the task stands and the answers so far.
    pub async fn beat(self, id: &str) -> Result<Option<(TaskStatus, Input)>, StoreError> {
        let pool = self.core.db().pool();
        let now = now_ms();
        sqlx::query("UPDATE tasks SET heartbeat_at = $1 WHERE id = $2 AND heartbeat_at < $3 AND status IN ('working', 'input_required')")
            .bind(now)
            .bind(id)
            .bind(now - BEAT_EVERY_MS)
            .execute(pool)
            .await?;
        let row = sqlx::query("SELECT status, answers FROM tasks WHERE id = $1").bind(id).fetch_optional(pool).await?;
        row.map(|r| {
            let answers = serde_json::from_str(&r.try_get::<String, _>("answers")?).unwrap_or_default();
            Ok((TaskStatus::parse(&r.try_get::<String, _>("status")?), answers))
        })
        .transpose()
    }

    /// The run of task `id` stopped to ask `requests` (by key), with `input` the
    /// answers it had. `false` if the task is no longer working (cancelled).
    pub async fn ask(self, id: &str, requests: &Map<String, Value>, input: &Input) -> Result<bool, StoreError> {
        let asked = sqlx::query(
            "UPDATE tasks SET status = 'input_required', input_requests = $1, answers = $2, updated_at = $3, heartbeat_at = $3 \
             WHERE id = $4 AND status = 'working'",
        )
        .bind(Value::Object(requests.clone()).to_string())
        .bind(serde_json::to_string(input).unwrap_or_default())
        .bind(now_ms())
        .bind(id)
        .execute(self.core.db().pool())
        .await?;
        Ok(asked.rows_affected() == 1)
    }

    /// Reports progress of task `id` as its status message.
    pub async fn say(self, id: &str, message: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE tasks SET status_message = $1, updated_at = $2 WHERE id = $3 AND status = 'working'")
            .bind(message)
            .bind(now_ms())
            .bind(id)
            .execute(self.core.db().pool())
            .await?;
        Ok(())
    }

    /// Task `id` ended with `ending` (unless it was cancelled meanwhile).
    pub async fn settle(self, id: &str, ending: Ending) -> Result<(), StoreError> {
        let (status, result, error) = match ending {
            Ending::Completed(result) => ("completed", Some(result.to_string()), None),
            Ending::Failed(error) => ("failed", None, Some(error.to_string())),
        };
        sqlx::query(
            "UPDATE tasks SET status = $1, result = $2, error = $3, input_requests = NULL, status_message = NULL, updated_at = $4 \
             WHERE id = $5 AND status IN ('working', 'input_required')",
        )
        .bind(status)
        .bind(result)
        .bind(error)
        .bind(now_ms())
        .bind(id)
        .execute(self.core.db().pool())
        .await?;
        Ok(())
    }
}

/// How a task ended, when it was not cancelled.
#[derive(Debug, Clone)]
pub enum Ending {
    /// The call's result (a tool error too: the tool ran).
    Completed(Value),
    /// It could not produce a result: a JSON-RPC error object.
    Failed(Value),
}
