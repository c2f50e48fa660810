//! The legacy HTTP+SSE transport (MCP 2024-11-05) for clients that predate
//! Streamable HTTP: `GET …/sse` opens an event stream whose first `endpoint`
//! event names the URL to POST messages to, and every reply travels back on
//! that stream. rmcp no longer ships this transport, so it is built here on
//! rmcp's transport traits: each stream is a (Sink, Stream) pair served by the
//! same [`ListingHandler`] as Streamable HTTP.
//!
//! A stream lives in the replica that opened it, so its POSTs must reach that
//! replica (sticky routing); a POST for a stream this replica does not hold is
//! answered 404, and the client opens a new stream.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, Request, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use tokio::sync::{mpsc, watch};
use toolshed_domain::mcp_sessions::SessionOwner;

use super::handler::{ListingHandler, Transport};
use super::{Caller, McpState, MAX_MESSAGE_BYTES};

/// The legacy streams open in this process, by session id.
#[derive(Clone, Default)]
pub struct SseSessions {
    open: Arc<Mutex<HashMap<String, Inbox>>>,
}

struct Inbox {
    tx: mpsc::Sender<ClientJsonRpcMessage>,
    /// A session answers only the user who opened it, on that listing.
    owner: SessionOwner,
    /// Requests whose answer is still due on the stream: at shutdown the stream
    /// ends only once they are delivered.
    due: Arc<watch::Sender<usize>>,
}

impl SseSessions {
    fn inbox(&self, id: &str, owner: SessionOwner) -> Option<(mpsc::Sender<ClientJsonRpcMessage>, Arc<watch::Sender<usize>>)> {
        let open = self.open.lock().expect("sse sessions lock");
        open.get(id).filter(|i| i.owner == owner).map(|i| (i.tx.clone(), i.due.clone()))
    }
}

/// Forgets a session when its event stream is dropped (the client went away):
/// the inbox closes, and with it the session's MCP service.
struct CloseOnDrop {
    sessions: SseSessions,
    id: String,
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.sessions.open.lock().expect("sse sessions lock").remove(&self.id);
    }
}

/// `GET …/sse`: opens a session and its event stream.
pub async fn open_stream(State(state): State<McpState>, req: Request) -> Response {
    let Some(caller) = req.extensions().get::<Caller>().cloned() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let id = super::new_session_id();
    let (inbox_tx, inbox_rx) = mpsc::channel::<ClientJsonRpcMessage>(32);
    let (outbox_tx, outbox_rx) = futures::channel::mpsc::channel::<ServerJsonRpcMessage>(32);
    let due = Arc::new(watch::Sender::new(0usize));
    state.sse.open.lock().expect("sse sessions lock").insert(id.clone(), Inbox { tx: inbox_tx, owner: caller.owner(), due: due.clone() });

    let handler = ListingHandler::new(state.toolshed.clone(), Transport::Sse, state.closing.clone());
    let incoming = Box::pin(stream::unfold(inbox_rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) }));
    tokio::spawn(async move {
        // Ends when the client closes the stream (the inbox closes) or never initializes.
        match rmcp::serve_server(handler, (outbox_tx, incoming)).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::debug!(error = %e, "legacy SSE session ended before it was initialized"),
        }
    });

    // Clients that could only be given a URL carry the token in it: the
    // message URL must carry it too.
    let token =
        req.uri().query().and_then(|q| q.split('&').find(|kv| kv.starts_with("token="))).map(|kv| format!("&{kv}")).unwrap_or_default();
    let endpoint = format!("{}/messages?session_id={id}{token}", req.uri().path().trim_end_matches("/sse"));
    let guard = CloseOnDrop { sessions: state.sse.clone(), id };
    let open = state.toolshed.mcp_stream_opened("sse");
    let first = stream::once(async move { Ok::<_, Infallible>(Event::default().event("endpoint").data(endpoint)) });
    let answered = due.clone();
    let replies = outbox_rx.map(move |msg| {
        let (_keep_session_open, _counted_until_it_ends) = (&guard, &open);
        if matches!(msg, ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)) {
            answered.send_modify(|n| *n = n.saturating_sub(1));
        }
        let json = serde_json::to_string(&msg).unwrap_or_else(|e| {
            serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32603, "message": e.to_string()}}).to_string()
        });
        Ok(Event::default().event("message").data(json))
    });
    // At shutdown the stream ends once the answers it owes are out (an idle one at
    // once); the client reconnects to another replica or after the restart.
    let closing = state.closing.clone();
    let replies = replies.take_until(async move {
        closing.cancelled().await;
        let _ = due.subscribe().wait_for(|n| *n == 0).await;
    });
    Sse::new(first.chain(replies)).keep_alive(KeepAlive::default()).into_response()
}

#[derive(serde::Deserialize)]
pub struct SessionQuery {
    session_id: String,
}

/// `POST …/messages?session_id=…`: hands one JSON-RPC message to the session;
/// the reply goes out on its event stream.
pub async fn post_message(State(state): State<McpState>, Query(q): Query<SessionQuery>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Some(caller) = parts.extensions.get::<Caller>() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let Some((inbox, due)) = state.sse.inbox(&q.session_id, caller.owner()) else {
        return (StatusCode::NOT_FOUND, "Unknown or closed session: open the SSE stream again.\n").into_response();
    };
    let bytes = match axum::body::to_bytes(body, MAX_MESSAGE_BYTES).await {
        Ok(b) => b,
        Err(_) => return (StatusCode::PAYLOAD_TOO_LARGE, "The message is too large.\n").into_response(),
    };
    let mut message: ClientJsonRpcMessage = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => return super::parse_error(&e),
    };
    message.insert_extension(parts);
    let request = matches!(message, ClientJsonRpcMessage::Request(_));
    if request {
        due.send_modify(|n| *n += 1);
    }
    match inbox.send(message).await {
        Ok(()) => (StatusCode::ACCEPTED, "Accepted\n").into_response(),
        Err(_) => {
            if request {
                due.send_modify(|n| *n = n.saturating_sub(1));
            }
            (StatusCode::NOT_FOUND, "Unknown or closed session: open the SSE stream again.\n").into_response()
        }
    }
}
