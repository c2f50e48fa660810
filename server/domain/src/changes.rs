//! Listing changes for live MCP sessions (`notifications/tools/list_changed`).
//!
//! Every change that alters what a listing serves (publish, roll back, settings,
//! moderation) already writes an audit row in its own transaction, so the audit
//! log *is* the change feed: one poller per process reads new rows of those
//! actions and broadcasts their targets. A change made on any replica
//! reaches sessions on every replica, and nothing lives only in memory. The
//! poller runs only while someone listens.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;
use tokio::sync::broadcast;

use crate::store::{Db, StoreError};

/// How often the poller looks for new audit rows while sessions listen.
const POLL: Duration = Duration::from_millis(250);
/// PostgreSQL may commit sequence values out of order: re-read this many ids
/// below the highest one seen, and skip the ones already delivered.
const REORDER_WINDOW: i64 = 64;

/// Audit actions that change what a listing's `tools/list` answers (a `WHERE`
/// condition). Moderation and bundles use these names too.
const LIST_CHANGING: &str = "action IN ('tool.published', 'tool.rolled_back', 'tool.settings_changed', \
     'tool.hidden', 'tool.disabled', 'tool.restored', 'tool.deleted', 'mcp_server.tools_changed', 'mcp_server.removed') \
     OR action LIKE 'bundle.%'";

/// A changed listing, as its audit target: `tool:dept/name`, `bundle:dept/name`
/// or an external server's `mcp_server:name`.
pub type Changed = Arc<str>;

#[derive(Clone)]
pub struct ListingChanges {
    db: Db,
    tx: broadcast::Sender<Changed>,
    polling: Arc<AtomicBool>,
}

impl ListingChanges {
    pub fn new(db: Db) -> Self {
        let (tx, _) = broadcast::channel(256);
        Self { db, tx, polling: Arc::new(AtomicBool::new(false)) }
    }

    /// Listens for changes from now on; starts the poller if it is not running.
    pub fn subscribe(&self) -> broadcast::Receiver<Changed> {
        let rx = self.tx.subscribe();
        if !self.polling.swap(true, Ordering::AcqRel) {
            let this = self.clone();
            tokio::spawn(async move {
                if let Err(e) = this.poll().await {
                    tracing::warn!(error = %e, "listing change poller stopped");
                }
                this.polling.store(false, Ordering::Release);
            });
        }
        rx
    }

    async fn poll(&self) -> Result<(), StoreError> {
        let row = sqlx::query("SELECT COALESCE(MAX(id), 0) AS id FROM audit_log").fetch_one(self.db.pool()).await?;
        // Changes from before anyone listened are nobody's news.
        let start: i64 = row.try_get("id")?;
        let mut high = start;
        let mut delivered = BTreeSet::new();
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while self.tx.receiver_count() > 0 {
            tick.tick().await;
            let rows = sqlx::query(&format!("SELECT id, target FROM audit_log WHERE id > $1 AND ({LIST_CHANGING}) ORDER BY id"))
            .bind(high - REORDER_WINDOW)
            .fetch_all(self.db.pool())
            .await?;
            for r in rows {
                let id: i64 = r.try_get("id")?;
                if id <= start || id <= high - REORDER_WINDOW || !delivered.insert(id) {
                    continue;
                }
                high = high.max(id);
                let target: String = r.try_get("target")?;
                let _ = self.tx.send(target.into());
            }
            delivered = delivered.split_off(&(high - REORDER_WINDOW));
        }
        Ok(())
    }
}
