//! Listing changes for live MCP sessions (`notifications/tools/list_changed`),
//! and accounts just connected, for calls waiting on one.
//!
//! Every change that alters what a listing serves (publish, roll back, settings,
//! moderation) already writes an audit row in its own transaction, so the audit
//! log *is* the change feed: one poller per process reads new audit rows,
//! broadcasts the targets of those actions, and empties the call cache
//! ([`crate::cache`]) on any. A change made on any replica reaches sessions on
//! every replica, and nothing lives only in memory. A connected account
//! (`account.connected`, whose target is its person) is told on a channel of
//! its own: the provider may send the person back to any replica.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;
use tokio::sync::broadcast;

use crate::store::{Db, StoreError};

/// How often the poller looks for new audit rows.
const POLL: Duration = Duration::from_millis(250);
/// PostgreSQL may commit sequence values out of order: re-read this many ids
/// below the highest one seen, and skip the ones already delivered.
const REORDER_WINDOW: i64 = 64;

/// Audit actions that change what a listing's `tools/list` answers (a `WHERE`
/// condition). Moderation and bundles use these names too.
const LIST_CHANGING: &str = "action IN ('tool.published', 'tool.rolled_back', 'tool.settings_changed', \
     'tool.hidden', 'tool.disabled', 'tool.restored', 'tool.deleted', 'mcp_server.tools_changed', 'mcp_server.definition_approved', 'mcp_server.removed') \
     OR action LIKE 'bundle.%' OR action LIKE 'favourite.%'";

/// A person connected an account (the callback may land on any replica).
const ACCOUNT_CONNECTED: &str = "action = 'account.connected'";

/// A changed listing, as its audit target: `tool:dept/name`, `bundle:dept/name`,
/// an external server's `mcp_server:name`, or a person's `favourites:{user id}`.
pub type Changed = Arc<str>;

/// A change and its audit row's id.
type News = (i64, Changed);

#[derive(Clone)]
pub struct ListingChanges {
    db: Db,
    tx: broadcast::Sender<News>,
    /// Accounts connected: their person's target, `user:{username}`.
    connected: broadcast::Sender<News>,
    /// The call cache's: moved whenever a new audit row appears.
    epoch: crate::store::Epoch,
}

/// Changes made after [`ListingChanges::subscribe`] returned.
pub struct Subscription {
    rx: broadcast::Receiver<News>,
    since: i64,
}

impl Subscription {
    /// The next change; `Lagged` when some were missed.
    pub async fn recv(&mut self) -> Result<Changed, broadcast::error::RecvError> {
        loop {
            let (id, target) = self.rx.recv().await?;
            // The poller may deliver rows written just before the subscription.
            if id > self.since {
                return Ok(target);
            }
        }
    }
}

impl ListingChanges {
    /// Starts the poller, for the life of the runtime: besides the sessions'
    /// list changes it keeps the call cache true to writes made elsewhere.
    pub(crate) fn start(db: Db, epoch: crate::store::Epoch) -> Self {
        let (tx, _) = broadcast::channel(256);
        let (connected, _) = broadcast::channel(64);
        let this = Self { db: db.clone(), tx, connected, epoch };
        let feed = this.clone();
        tokio::spawn(async move {
            // Kept across failures: rows written while the database was away
            // are delivered once it is back.
            let mut cursor = None;
            loop {
                if let Err(e) = feed.poll(&db, &mut cursor).await {
                    tracing::warn!(error = %e, "listing change poller failed; restarting");
                }
                // Rows may have been written meanwhile.
                feed.epoch.invalidate();
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        this
    }

    /// Listens for changes from now on, without asking the database where
    /// "now" is: for a caller that must be subscribed before it answers (MCP's
    /// `subscriptions/listen` acknowledges before it listens). A change made
    /// just before may still be told once: a spurious notification is harmless.
    pub fn subscribe_at_once(&self) -> Subscription {
        Subscription { rx: self.tx.subscribe(), since: i64::MIN }
    }

    /// Listens for changes from now on.
    pub async fn subscribe(&self) -> Result<Subscription, StoreError> {
        Self::from_now(&self.db, &self.tx).await
    }

    /// Listens for accounts connected from now on (their person's target).
    pub(crate) async fn subscribe_connected(&self) -> Result<Subscription, StoreError> {
        Self::from_now(&self.db, &self.connected).await
    }

    async fn from_now(db: &Db, tx: &broadcast::Sender<News>) -> Result<Subscription, StoreError> {
        let rx = tx.subscribe();
        let since = latest_id(db).await?;
        Ok(Subscription { rx, since })
    }

    async fn poll(&self, db: &Db, cursor: &mut Option<Cursor>) -> Result<(), StoreError> {
        let cursor = match cursor {
            Some(c) => c,
            // Changes from before the poller started are nobody's news.
            None => {
                let latest = latest_id(db).await?;
                cursor.insert(Cursor { floor: latest, high: latest, delivered: BTreeSet::new() })
            }
        };
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let rows = sqlx::query(&format!(
                "SELECT id, target, CASE WHEN {LIST_CHANGING} THEN 1 WHEN {ACCOUNT_CONNECTED} THEN 2 ELSE 0 END AS kind \
                 FROM audit_log WHERE id > $1 ORDER BY id"
            ))
            .bind(cursor.high - REORDER_WINDOW)
            .fetch_all(db.pool())
            .await?;
            // Read whole before anything counts as delivered.
            let rows = rows
                .into_iter()
                .map(|r| Ok((r.try_get::<i64, _>("id")?, r.try_get::<String, _>("target")?, r.try_get::<i64, _>("kind")?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            let mut seen_any = false;
            let (mut changed, mut connected) = (Vec::new(), Vec::new());
            for (id, target, kind) in rows {
                if id <= cursor.floor || id <= cursor.high - REORDER_WINDOW || !cursor.delivered.insert(id) {
                    continue;
                }
                cursor.high = cursor.high.max(id);
                seen_any = true;
                match kind {
                    1 => changed.push((id, target)),
                    2 => connected.push((id, target)),
                    _ => {}
                }
            }
            if seen_any {
                // Written on another replica (or here, already invalidated at its commit);
                // before the news goes out, so a session told of a change and calling
                // at once sees it.
                self.epoch.invalidate();
            }
            for (id, target) in changed {
                let _ = self.tx.send((id, target.into()));
            }
            for (id, target) in connected {
                let _ = self.connected.send((id, target.into()));
            }
            cursor.delivered = cursor.delivered.split_off(&(cursor.high - REORDER_WINDOW));
        }
    }
}

/// Where the poller is in the audit log.
struct Cursor {
    /// The highest id when the poller started: older rows are not news.
    floor: i64,
    high: i64,
    /// Ids within [`REORDER_WINDOW`] of `high` already delivered.
    delivered: BTreeSet<i64>,
}

async fn latest_id(db: &Db) -> Result<i64, StoreError> {
    let row = sqlx::query("SELECT COALESCE(MAX(id), 0) AS id FROM audit_log").fetch_one(db.pool()).await?;
    Ok(row.try_get("id")?)
}
