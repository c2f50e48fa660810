//! The playground's chat route, `POST /playground/chat`: a signed-in browser
//! sends the conversation (`TurnRequest` JSON) and reads the turn as it happens,
//! one server-sent event per `PlaygroundEvent` (`data: {"type": …}`). The
//! domain runs the turn; this only finds the user, checks the request before
//! the stream starts (so refusals are plain HTTP errors), and forwards events.
//! It sits behind the same cross-site check as server functions (`web.rs`).

use std::convert::Infallible;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{post, MethodRouter};
use axum::Json;
use toolshed_domain::playground::{PlaygroundError, PlaygroundEvent, TurnRequest};
use toolshed_domain::Toolshed;

pub const PATH: &str = "/playground/chat";

/// A conversation is text; this is far more than a long one.
const MAX_BODY_BYTES: usize = 512 * 1024;

pub fn route<S>() -> MethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Toolshed: axum::extract::FromRef<S>,
{
    post(chat).layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// A refusal before the stream starts: one status and `{"error": message}`.
fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

fn refused(e: PlaygroundError) -> Response {
    let status = match &e {
        PlaygroundError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
        PlaygroundError::Forbidden | PlaygroundError::Disabled => StatusCode::FORBIDDEN,
        PlaygroundError::UnknownEndpoint | PlaygroundError::NotFound => StatusCode::NOT_FOUND,
        PlaygroundError::NameTaken(_) => StatusCode::CONFLICT,
        PlaygroundError::Unreadable(_) => StatusCode::INTERNAL_SERVER_ERROR,
        PlaygroundError::Store(e) => {
            tracing::error!(error = %e, "store failure");
            return refuse(StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong on our side. Please try again.");
        }
    };
    refuse(status, e.to_string())
}

async fn chat(
    State(toolshed): State<Toolshed>,
    session: tower_sessions::Session,
    body: Result<Json<TurnRequest>, JsonRejection>,
) -> Response {
    let user = match toolshed.sessions().session_user(&session).await {
        Ok(Some(user)) => user,
        Ok(None) => return refuse(StatusCode::UNAUTHORIZED, "Please sign in first."),
        Err(e) => {
            tracing::error!(error = %e, "session lookup failed");
            return refuse(StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong on our side. Please try again.");
        }
    };
    let request = match body {
        Ok(Json(r)) => r,
        Err(e) => return refuse(e.status(), e.body_text()),
    };
    let turn = match toolshed.playground().playground_turn(&user, request).await {
        Ok(t) => t,
        Err(e) => return refused(e),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<PlaygroundEvent>(64);
    // The turn ends early when the browser goes away (the receiver is dropped with the response).
    tokio::spawn(turn.run(tx));
    let events = futures::stream::unfold(rx, |mut rx| async move {
        let event = rx.recv().await?;
        let data = serde_json::to_string(&event).expect("events always serialize");
        Some((Ok::<_, Infallible>(Event::default().data(data)), rx))
    });
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}
