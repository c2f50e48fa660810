//! What every MCP call reads and almost nothing changes (the token with its
//! user, the listing, the tool's `$env` with the admin policy), kept in memory
//! so that a call makes no database round trip: on SQLite each one is a hop to
//! a worker thread and back, which cost more CPU than the call's own work.
//!
//! It is only a cache: every write that changes those rows also writes an
//! audit row ([`crate::audit::record`]) in its transaction, and empties it
//! - on this replica once that transaction commits: committing a
//!   [`crate::store::Tx`] moves the [`Epoch`] the `Toolshed` owns, and an
//!   entry loaded while the epoch moved is never trusted (a read inside the
//!   writer's transaction saw the old row: the move after commit voids it);
//! - on other replicas (and after `toolshed admin` commands) when the change
//!   feed poller ([`crate::changes`]) sees the row, within its poll interval;
//! - and in any case after [`TTL`], even if the poller is down.
//!
//! Entries hold rows, not verdicts: expiry, revocation, visibility and status
//! are still checked on every call.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::store::Epoch;

/// The longest an entry is trusted, whatever else happens.
pub const TTL: Duration = Duration::from_secs(1);

/// Bounds memory: a full map starts over rather than tracking recency.
const MAX_ENTRIES: usize = 10_000;

struct Entry<V> {
    value: V,
    epoch: u64,
    loaded: Instant,
}

pub(crate) struct Cached<K, V> {
    entries: Mutex<HashMap<K, Entry<V>>>,
    epoch: Epoch,
}

impl<K: Eq + Hash, V: Clone> Cached<K, V> {
    fn new(epoch: &Epoch) -> Self {
        Self { entries: Mutex::new(HashMap::new()), epoch: epoch.clone() }
    }

    /// Taken before loading what will be inserted (see [`Cached::insert`]).
    pub fn epoch(&self) -> u64 {
        self.epoch.current()
    }

    pub fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().expect("cache lock");
        let e = entries.get(key)?;
        (e.epoch == self.epoch() && e.loaded.elapsed() < TTL).then(|| e.value.clone())
    }

    /// Keeps `value`, loaded after [`Cached::epoch`] returned `loaded_at`: if
    /// anything was written since, the entry is born stale and never served.
    pub fn insert(&self, key: K, value: V, loaded_at: u64) {
        let mut entries = self.entries.lock().expect("cache lock");
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(key, Entry { value, epoch: loaded_at, loaded: Instant::now() });
    }

    /// Changes a cached value in place (keeping its age), e.g. after this
    /// process wrote a column nobody audits.
    pub fn update(&self, key: &K, f: impl FnOnce(&mut V)) {
        if let Some(e) = self.entries.lock().expect("cache lock").get_mut(key) {
            f(&mut e.value);
        }
    }
}

/// The caches a call reads through.
pub(crate) struct CallCache {
    /// By token hash: the token's row and its user's.
    pub tokens: Cached<String, (crate::User, crate::tokens::TokenInfo)>,
    /// By kind, department and name: the listing's row, before any visibility check.
    pub listings: Cached<(crate::tools::ListingKind, String, String), crate::tools::Tool>,
    /// By tool: its `$env` and the admin policy.
    pub envs: Cached<crate::ids::ToolId, (std::sync::Arc<crate::tools::Env>, crate::policy::Policy)>,
}

impl CallCache {
    pub fn new(epoch: &Epoch) -> Self {
        Self { tokens: Cached::new(epoch), listings: Cached::new(epoch), envs: Cached::new(epoch) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_served_until_something_is_written() {
        let epoch = Epoch::default();
        let cache = Cached::new(&epoch);
        cache.insert(1, "row", cache.epoch());
        assert_eq!(cache.get(&1), Some("row"));
        epoch.invalidate();
        assert_eq!(cache.get(&1), None);
    }

    #[test]
    fn an_entry_loaded_while_something_was_written_is_never_served() {
        let epoch = Epoch::default();
        let cache = Cached::new(&epoch);
        let at = cache.epoch();
        epoch.invalidate(); // a write commits while the row is being read
        cache.insert(1, "maybe old", at);
        assert_eq!(cache.get(&1), None);
    }

    #[test]
    fn an_epoch_empties_only_the_caches_that_share_it() {
        let (mine, other) = (Epoch::default(), Epoch::default());
        let (a, b) = (Cached::new(&mine), Cached::new(&other));
        a.insert(1, "row", a.epoch());
        b.insert(1, "row", b.epoch());
        mine.invalidate();
        assert_eq!((a.get(&1), b.get(&1)), (None, Some("row")));
    }

    #[test]
    fn update_changes_the_value_but_not_its_age() {
        let cache = Cached::new(&Epoch::default());
        cache.insert(1, 1, cache.epoch());
        cache.update(&1, |v| *v = 2);
        assert_eq!(cache.get(&1), Some(2));
        cache.update(&7, |v| *v = 3);
        assert_eq!(cache.get(&7), None);
    }
}
