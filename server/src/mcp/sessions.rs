//! Streamable HTTP sessions that survive the replica: rmcp keeps a live session
//! in memory and asks this store, on a request for a session it does not hold,
//! for the client's `initialize` parameters, and replays the handshake. So any
//! replica behind a load balancer can answer any session, and a restarted
//! server keeps its clients.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{SessionManager, SessionState, SessionStore, SessionStoreError};
use tokio_util::sync::CancellationToken;
use toolshed_domain::Toolshed;

/// Sessions this replica stored or restored, so in the database then: one
/// of them missing from it later was ended elsewhere. (A session being
/// created is held before it is stored, and must not look ended.)
#[derive(Clone, Default)]
pub struct Stored(Arc<Mutex<HashMap<Arc<str>, Instant>>>);

impl Stored {
    fn add(&self, id: &str) {
        self.0.lock().expect("stored sessions lock").insert(id.into(), Instant::now());
    }

    fn remove(&self, id: &str) {
        self.0.lock().expect("stored sessions lock").remove(id);
    }
}

pub struct DbSessionStore {
    pub toolshed: Toolshed,
    pub stored: Stored,
}

#[async_trait::async_trait]
impl SessionStore for DbSessionStore {
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(stored) = self.toolshed.mcp_sessions().load_mcp_session(id).await? else { return Ok(None) };
        self.stored.add(id);
        Ok(Some(serde_json::from_str(&stored.state_json)?))
    }

    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        self.toolshed.mcp_sessions().save_mcp_session(id, &serde_json::to_string(state)?).await?;
        self.stored.add(id);
        Ok(())
    }

    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        self.stored.remove(id);
        Ok(self.toolshed.mcp_sessions().delete_mcp_session(id).await?)
    }
}

/// How often this replica looks for its sessions ended elsewhere.
const CHECK_ENDED: Duration = Duration::from_millis(500);

/// Sessions held in memory at most; the oldest beyond that leave memory (they
/// live on in the database, and their next request restores them), so clients
/// that never end their sessions cannot grow the process.
pub const MAX_IN_MEMORY: usize = 500;

/// Keeps the sessions this replica holds in memory true and bounded: those gone
/// from the database (a DELETE through another replica, or the idle sweep) end
/// here within [`CHECK_ENDED`], open streams included, and past
/// [`MAX_IN_MEMORY`] the oldest leave memory.
pub async fn keep_sessions(toolshed: Toolshed, sessions: Arc<LocalSessionManager>, stored: Stored, closing: CancellationToken) {
    let mut tick = tokio::time::interval(CHECK_ENDED);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = closing.cancelled() => return,
        }
        let held: std::collections::HashSet<Arc<str>> = sessions.sessions.read().await.keys().cloned().collect();
        let (watched, oldest): (Vec<Arc<str>>, Vec<Arc<str>>) = {
            let mut known = stored.0.lock().expect("stored sessions lock");
            // Forget what this replica no longer holds (after a while: a restore stores before it holds).
            known.retain(|id, at| held.contains(id) || at.elapsed() < Duration::from_secs(10));
            let mut watched: Vec<(Arc<str>, Instant)> =
                known.iter().filter(|(id, _)| held.contains(*id)).map(|(id, at)| (id.clone(), *at)).collect();
            let excess = held.len().saturating_sub(MAX_IN_MEMORY).min(watched.len());
            watched.sort_by_key(|(_, at)| *at);
            let rest = watched.split_off(excess);
            (rest.into_iter().map(|(id, _)| id).collect(), watched.into_iter().map(|(id, _)| id).collect())
        };
        for id in oldest {
            // Only this replica's memory: the session stays in the database.
            stored.remove(&id);
            if let Err(e) = sessions.close_session(&id).await {
                tracing::warn!(error = %e, "could not move an MCP session out of memory");
            }
        }
        if watched.is_empty() {
            continue;
        }
        let live = match toolshed.mcp_sessions().live_mcp_sessions(&watched.iter().map(|id| &**id).collect::<Vec<_>>()).await {
            Ok(live) => live,
            Err(e) => {
                tracing::warn!(error = %e, "could not check which MCP sessions are still live");
                continue;
            }
        };
        for id in watched.into_iter().filter(|id| !live.contains(&**id)) {
            tracing::debug!(session = %id, "an MCP session ended on another replica");
            stored.remove(&id);
            if let Err(e) = sessions.close_session(&id).await {
                tracing::warn!(error = %e, "could not end an MCP session");
            }
        }
    }
}
