//! Usage records: one per tool call. Calls hand records to a channel and move
//! on; one task writes them in batches (a transaction per batch), and a flush
//! at shutdown writes whatever is still queued.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

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
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Timeout => "timeout",
            Outcome::Oom => "oom",
            Outcome::InvalidArguments => "invalid_arguments",
            Outcome::Busy => "busy",
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
    Flush(oneshot::Sender<()>),
}

/// Cheap to clone. Recording never waits for the database.
#[derive(Clone)]
pub struct UsageRecorder {
    tx: mpsc::UnboundedSender<Msg>,
}

const BATCH: usize = 500;
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
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_batches(db, rx));
        Self { tx }
    }

    pub fn record(&self, record: UsageRecord) {
        // Only fails when the writer is gone, i.e. the process is ending anyway.
        let _ = self.tx.send(Msg::Record(record));
    }

    /// Waits until every record handed in before this call is in the database.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

async fn write_batches(db: Db, mut rx: mpsc::UnboundedReceiver<Msg>) {
    let mut batch: Vec<UsageRecord> = Vec::new();
    let mut tick = tokio::time::interval(INTERVAL);
    loop {
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(Msg::Record(r)) => {
                    batch.push(r);
                    if batch.len() >= BATCH {
                        write(&db, &mut batch).await;
                    }
                }
                Some(Msg::Flush(done)) => {
                    write(&db, &mut batch).await;
                    let _ = done.send(());
                }
                None => {
                    write(&db, &mut batch).await;
                    return;
                }
            },
            _ = tick.tick() => write(&db, &mut batch).await,
        }
    }
}

async fn write(db: &Db, batch: &mut Vec<UsageRecord>) {
    if batch.is_empty() {
        return;
    }
    let result: Result<(), sqlx::Error> = async {
        let mut tx = db.pool().begin().await?;
        // Many rows per statement: each statement is a round trip to the database.
        // (Written out because sqlx's QueryBuilder gives `Any` `?` placeholders,
        // which PostgreSQL refuses.)
        for rows in batch.chunks(ROWS_PER_INSERT) {
            let values: Vec<String> = (0..rows.len())
                .map(|i| format!("({})", (1..=COLUMNS.len()).map(|c| format!("${}", i * COLUMNS.len() + c)).collect::<Vec<_>>().join(", ")))
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
        tx.commit().await
    }
    .await;
    match result {
        Ok(()) => batch.clear(),
        // Keep the batch and try again on the next tick; a lost database is logged, not fatal.
        Err(e) => tracing::warn!(error = %e, pending = batch.len(), "could not write usage records; will retry"),
    }
}
