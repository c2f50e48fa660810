//! Streamable HTTP sessions that survive the replica: rmcp keeps a live session
//! in memory and asks this store, on a request for a session it does not hold,
//! for the client's `initialize` parameters, and replays the handshake. So any
//! replica behind a load balancer can answer any session, and a restarted
//! server keeps its clients.

use rmcp::transport::streamable_http_server::session::{SessionState, SessionStore, SessionStoreError};
use toolshed_domain::Toolshed;

pub struct DbSessionStore(pub Toolshed);

#[async_trait::async_trait]
impl SessionStore for DbSessionStore {
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(stored) = self.0.load_mcp_session(id).await? else { return Ok(None) };
        Ok(Some(serde_json::from_str(&stored.state_json)?))
    }

    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        Ok(self.0.save_mcp_session(id, &serde_json::to_string(state)?).await?)
    }

    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        Ok(self.0.delete_mcp_session(id).await?)
    }
}
