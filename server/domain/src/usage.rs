//! Usage records: one per tool call. Calls hand records to a channel and move
//! on; one task writes them in batches (a transaction per batch), and a flush
//! at shutdown writes whatever is still queued. Failed calls kept for replay
//! (`tools::failures`) travel the same way.
//!
//! Bounded both ways: while the database refuses writes (a full disk, an
//! outage) records wait, up to [`QUEUE`] + [`BATCH`] of them, then new ones
//! are counted and dropped; a batch the database can never take (a row it
//! refuses) is written row by row after [`ATTEMPTS`] tries, and what still
//! fails is dropped with a warning.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::now_ms;
use crate::sandbox::{ConsoleLine, FetchExchange};
use crate::store::Db;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    ToolError,
    Timeout,
    Oom,
    InvalidArguments,
    Busy,
    /// Stopped to ask the client something (in the metrics only: usage counts the round that ends the call).
    Asked,
    /// Stopped by its caller (a task cancelled): not the tool's error.
    Cancelled,
}

impl Outcome {
    /// How a run that reached the sandbox ended.
    pub fn of_run(result: &Result<toolshed_sandbox::ToolValue, toolshed_sandbox::RunError>) -> Self {
        use toolshed_sandbox::RunError;
        match result {
            Ok(_) => Outcome::Ok,
            Err(RunError::Timeout { .. }) => Outcome::Timeout,
            Err(RunError::OutOfMemory { .. }) => Outcome::Oom,
            Err(RunError::NeedsInput { .. }) => Outcome::Asked,
            Err(RunError::Cancelled) => Outcome::Cancelled,
            Err(_) => Outcome::ToolError,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Timeout => "timeout",
            Outcome::Oom => "oom",
            Outcome::InvalidArguments => "invalid_arguments",
            Outcome::Busy => "busy",
            Outcome::Asked => "asked",
            Outcome::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    pub at_ms: i64,
    pub tool_id: i64,
    pub version: Option<i64>,
    pub user_id: i64,
    pub token_id: Option<i64>,
    /// The bundle the call came through, if any.
    pub bundle_id: Option<i64>,
    pub transport: String,
    pub duration_us: i64,
    pub outcome: Outcome,
    /// For a call to an external MCP server's tool (`tool_id` is then the bundle's).
    pub upstream_server_id: Option<i64>,
    pub upstream_tool: Option<String>,
}

enum Msg {
    Record(UsageRecord),
    Failure(Box<FailureRecord>),
    Flush(oneshot::Sender<()>),
}

/// Cheap to clone. Recording never waits for the database.
#[derive(Clone)]
pub struct UsageRecorder {
    tx: mpsc::Sender<Msg>,
    dropped: std::sync::Arc<AtomicU64>,
}

const BATCH: usize = 500;
/// Records waiting in the channel while the writer cannot write.
const QUEUE: usize = 50_000;
/// Tries of a batch before it is written row by row.
const ATTEMPTS: u32 = 5;
/// The columns of a record, in the order `write` binds them.
const COLUMNS: [&str; 11] = [
    "at_ms",
    "tool_id",
    "version",
    "user_id",
    "token_id",
    "bundle_id",
    "transport",
    "duration_us",
    "outcome",
    "upstream_server_id",
    "upstream_tool",
];
/// 1,100 parameters a statement: far below SQLite's and PostgreSQL's limits.
const ROWS_PER_INSERT: usize = 100;
const INTERVAL: Duration = Duration::from_millis(250);

impl UsageRecorder {
    /// Starts the writer task on the current tokio runtime.
    pub fn start(db: Db) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(write_batches(db, rx));
        Self { tx, dropped: Default::default() }
    }

    pub fn record(&self, record: UsageRecord) {
        self.send(Msg::Record(record));
    }

    /// A failed call to keep for its editors (written with the usage records).
    pub fn record_failure(&self, record: FailureRecord) {
        self.send(Msg::Failure(Box::new(record)));
    }

    fn send(&self, msg: Msg) {
        match self.tx.try_send(msg) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                // Said once per power of two: an outage would flood the log otherwise.
                if dropped.is_power_of_two() {
                    tracing::error!(dropped, "usage records are being dropped: the database has not taken any for a while");
                }
            }
            // The writer is gone: the process is ending anyway.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// Records dropped since start because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Waits until every record handed in before this call is in the database
    /// (or, while the database refuses them, until one more try).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

async fn write_batches(db: Db, mut rx: mpsc::Receiver<Msg>) {
    let mut pending = Pending::default();
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // While a full batch waits for the database, the channel holds the rest.
            msg = rx.recv(), if pending.len() < BATCH => match msg {
                Some(Msg::Record(r)) => {
                    pending.batch.push(r);
                    if pending.len() >= BATCH {
                        pending.write(&db).await;
                    }
                }
                Some(Msg::Failure(f)) => {
                    pending.failed_calls.push(*f);
                    if pending.len() >= BATCH {
                        pending.write(&db).await;
                    }
                }
                Some(Msg::Flush(done)) => {
                    pending.write(&db).await;
                    let _ = done.send(());
                }
                None => {
                    pending.write(&db).await;
                    return;
                }
            },
            _ = tick.tick() => pending.write(&db).await,
        }
    }
}

/// The batch being written, and how often writing it has failed.
#[derive(Default)]
struct Pending {
    batch: Vec<UsageRecord>,
    failed_calls: Vec<FailureRecord>,
    failures: u32,
}

impl Pending {
    fn len(&self) -> usize {
        self.batch.len() + self.failed_calls.len()
    }

    async fn write(&mut self, db: &Db) {
        if self.len() == 0 {
            return;
        }
        match insert(db, &self.batch, &self.failed_calls).await {
            Ok(()) => {
                self.batch.clear();
                self.failed_calls.clear();
                self.failures = 0;
            }
            Err(e) => {
                self.failures += 1;
                tracing::warn!(error = %e, pending = self.batch.len(), failures = self.failures, "could not write usage records; will retry");
                if self.failures >= ATTEMPTS && refused_rows(&e) {
                    // The rows, not the database, are the problem: keep those it takes.
                    let mut lost = 0;
                    for r in self.batch.drain(..) {
                        if let Err(e) = insert(db, std::slice::from_ref(&r), &[]).await {
                            lost += 1;
                            tracing::error!(error = %e, record = ?r, "dropped a usage record the database refuses");
                        }
                    }
                    for f in self.failed_calls.drain(..) {
                        if let Err(e) = insert(db, &[], std::slice::from_ref(&f)).await {
                            lost += 1;
                            tracing::error!(error = %e, tool = f.tool_id, "dropped a failed call the database refuses");
                        }
                    }
                    tracing::warn!(lost, "wrote a refused usage batch row by row");
                    self.failures = 0;
                }
            }
        }
    }
}

/// Whether the database refused the rows themselves (a constraint), which no
/// retry can fix, rather than failing to write at all (full, locked, gone).
fn refused_rows(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if !matches!(d.kind(), sqlx::error::ErrorKind::Other))
}

async fn insert(db: &Db, records: &[UsageRecord], failed_calls: &[FailureRecord]) -> Result<(), sqlx::Error> {
    let mut tx = db.pool().begin().await?;
    // Many rows per statement: each statement is a round trip to the database.
    // PostgreSQL takes only numbered placeholders; SQLite gets anonymous `?`s,
    // since it looks a numbered one up by a linear scan per bind: with 1,100 of
    // them a batch spent 6 % of the server's CPU on that lookup.
    let placeholder = |n: usize| match db.backend() {
        crate::store::Backend::Postgres => format!("${n}"),
        crate::store::Backend::Sqlite => "?".to_owned(),
    };
    for rows in records.chunks(ROWS_PER_INSERT) {
        let values: Vec<String> = (0..rows.len())
            .map(|i| format!("({})", (1..=COLUMNS.len()).map(|c| placeholder(i * COLUMNS.len() + c)).collect::<Vec<_>>().join(", ")))
            .collect();
        let sql = format!("INSERT INTO usage_records ({}) VALUES {}", COLUMNS.join(", "), values.join(", "));
        let mut insert = sqlx::query(&sql);
        for r in rows {
            insert = insert
                .bind(r.at_ms)
                .bind(r.tool_id)
                .bind(r.version)
                .bind(r.user_id)
                .bind(r.token_id)
                .bind(r.bundle_id)
                .bind(r.transport.as_str())
                .bind(r.duration_us)
                .bind(r.outcome.as_str())
                .bind(r.upstream_server_id)
                .bind(r.upstream_tool.as_deref());
        }
        insert.execute(&mut *tx).await?;
    }
    if !failed_calls.is_empty() {
        insert_failed_calls(&mut tx, failed_calls).await?;
    }
    tx.commit().await
}

/// How long failed calls are kept for replay (`tools::failures`), and how many a tool keeps.
pub const KEPT_DAYS: i64 = 14;
pub const KEPT_PER_TOOL: i64 = 100;
pub(crate) const DAY_MS: i64 = 86_400_000;

/// What is kept of a failed call, redacted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptCall {
    pub version: i64,
    pub at_ms: i64,
    /// `mcp-http`, `mcp-sse`, `api`, `ui`, ...
    pub transport: String,
    /// The error as the caller got it.
    pub error: String,
    pub args: Value,
    pub console: Vec<ConsoleLine>,
    pub fetches: Vec<FetchExchange>,
    pub duration_ms: i64,
}

/// What the usage writer stores (`failed_calls`).
#[derive(Debug, Clone, PartialEq)]
pub struct FailureRecord {
    pub tool_id: i64,
    pub user_id: i64,
    pub call: KeptCall,
}

/// Writes failed calls in the usage writer's transaction, then drops what
/// is past the retention.
pub(crate) async fn insert_failed_calls(tx: &mut sqlx::Transaction<'_, sqlx::Any>, records: &[FailureRecord]) -> Result<(), sqlx::Error> {
    for FailureRecord { tool_id, user_id, call: r } in records {
        sqlx::query(
            "INSERT INTO failed_calls (tool_id, version, user_id, at_ms, transport, error, args_json, console_json, fetches_json, duration_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(tool_id)
        .bind(r.version)
        .bind(user_id)
        .bind(r.at_ms)
        .bind(r.transport.as_str())
        .bind(r.error.as_str())
        .bind(r.args.to_string())
        .bind(json_text(&r.console))
        .bind(json_text(&r.fetches))
        .bind(r.duration_ms)
        .execute(&mut **tx)
        .await?;
    }
    let mut tools: Vec<i64> = records.iter().map(|r| r.tool_id).collect();
    tools.sort_unstable();
    tools.dedup();
    for tool in tools {
        sqlx::query(
            "DELETE FROM failed_calls WHERE tool_id = $1 AND id <= \
             (SELECT id FROM failed_calls WHERE tool_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)",
        )
        .bind(tool)
        .bind(KEPT_PER_TOOL)
        .execute(&mut **tx)
        .await?;
    }
    sqlx::query("DELETE FROM failed_calls WHERE at_ms < $1").bind(now_ms() - KEPT_DAYS * DAY_MS).execute(&mut **tx).await?;
    Ok(())
}

fn json_text<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
