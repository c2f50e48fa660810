//! What every MCP call reads and almost nothing changes (the token with its
//! user, the listing, the tool's `$env` with the admin policy), kept in memory
//! so that a call makes no database round trip: on SQLite each one is a hop to
//! a worker thread and back, which cost more CPU than the call's own work.
//!
//! It is only a cache: every write that changes those rows also writes an
//! audit row ([`crate::audit::record`]), and an audit row empties it
//! - on this replica at once: `audit::record` moves [`EPOCH`], and an entry
//!   loaded while the epoch moved is never trusted;
//! - on other replicas (and after `toolshed admin` commands) when the change
//!   feed poller ([`crate::changes`]) sees the row, within its poll interval;
//! - and in any case after [`TTL`], which bounds the one race left (a read that
//!   starts inside a writer's transaction, before its commit) even if the
//!   poller is down.
//!
//! Entries hold rows, not verdicts: expiry, revocation, visibility and status
//! are still checked on every call.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Moved by every audited write in this process and by every audit row the
/// change feed sees. Process-wide, so every `Toolshed` in the process honours it.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// The longest an entry is trusted, whatever else happens.
pub const TTL: Duration = Duration::from_secs(1);

/// Bounds memory: a full map starts over rather than tracking recency.
const MAX_ENTRIES: usize = 10_000;

/// Invalidates every cached entry in the process.
pub(crate) fn invalidate_all() {
    EPOCH.fetch_add(1, Ordering::AcqRel);
}

struct Entry<V> {
    value: V,
    epoch: u64,
    loaded: Instant,
}

pub(crate) struct Cached<K, V> {
    entries: Mutex<HashMap<K, Entry<V>>>,
    epoch: &'static AtomicU64,
}

impl<K, V> Default for Cached<K, V> {
    fn default() -> Self {
        Self { entries: Mutex::new(HashMap::new()), epoch: &EPOCH }
    }
}

impl<K: Eq + Hash, V: Clone> Cached<K, V> {
    /// Taken before loading what will be inserted (see [`Cached::insert`]).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
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
#[derive(Default)]
pub(crate) struct CallCache {
    /// By token hash: the token's row and its user's.
    pub tokens: Cached<String, (crate::User, crate::tokens::TokenInfo)>,
    /// By kind, department and name: the listing's row, before any visibility check.
    pub listings: Cached<(crate::tools::ListingKind, String, String), crate::tools::Tool>,
    /// By tool: its `$env` and the admin policy.
    pub envs: Cached<crate::ids::ToolId, (std::sync::Arc<crate::tools::Env>, crate::policy::Policy)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache with an epoch of its own, so tests running beside it cannot move it.
    fn cache<V: Clone>(epoch: &'static AtomicU64) -> Cached<u8, V> {
        Cached { entries: Mutex::new(HashMap::new()), epoch }
    }

    #[test]
    fn an_entry_is_served_until_something_is_written() {
        static E: AtomicU64 = AtomicU64::new(0);
        let cache = cache(&E);
        cache.insert(1, "row", cache.epoch());
        assert_eq!(cache.get(&1), Some("row"));
        E.fetch_add(1, Ordering::AcqRel);
        assert_eq!(cache.get(&1), None);
    }

    #[test]
    fn an_entry_loaded_while_something_was_written_is_never_served() {
        static E: AtomicU64 = AtomicU64::new(0);
        let cache = cache(&E);
        let at = cache.epoch();
        E.fetch_add(1, Ordering::AcqRel); // a write lands while the row is being read
        cache.insert(1, "maybe old", at);
        assert_eq!(cache.get(&1), None);
    }

    #[test]
    fn invalidate_all_empties_every_cache_in_the_process() {
        let cache = Cached::<u8, &str>::default();
        cache.insert(1, "row", cache.epoch());
        invalidate_all();
        assert_eq!(cache.get(&1), None);
    }

    #[test]
    fn update_changes_the_value_but_not_its_age() {
        static E: AtomicU64 = AtomicU64::new(0);
        let cache = cache(&E);
        cache.insert(1, 1, cache.epoch());
        cache.update(&1, |v| *v = 2);
        assert_eq!(cache.get(&1), Some(2));
        cache.update(&7, |v| *v = 3);
        assert_eq!(cache.get(&7), None);
    }
}
