//! Connecting a person's account at an upstream OAuth app, in their browser.
//!
//! `GET /connect/{app}` (the link a call that needs the account answers
//! with) starts the authorization code flow with PKCE; the flow waits in the
//! browser's session (SameSite=Lax, so the provider's redirect back carries
//! it), beside the few others the person may have started in other tabs, and
//! is used once: the callback takes the one its `state` names. `GET /connect/callback` hands the code to the domain
//! (`Connections::finish`), which exchanges it and seals the tokens. Both
//! end on the Account page: `?connected=APP`, or `?connect=failed` with the
//! reason kept in the session for the page to say once.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use toolshed_domain::connections::{ConnectionError, Flow, CALLBACK_PATH, FAILURE_KEY};
use toolshed_domain::Toolshed;
use tower_sessions::Session;
use tracing::Instrument;

const FLOW_KEY: &str = "connect.flows";
/// Flows a session keeps under way at once (tabs, a link followed twice); the oldest goes first.
const MAX_FLOWS: usize = 4;

pub fn routes<S: Clone + Send + Sync + 'static>(toolshed: Toolshed) -> Router<S> {
    // The callback's own route wins over `{app}`: no app can be named "callback" anyway.
    Router::new().route(CALLBACK_PATH, get(callback)).route("/connect/{app}", get(start)).with_state(toolshed)
}

async fn start(State(toolshed): State<Toolshed>, session: Session, Path(app): Path<String>) -> Response {
    let user = match toolshed.sessions().session_user(&session).await {
        Ok(Some(user)) => user,
        Ok(None) => {
            let next: String = url::form_urlencoded::byte_serialize(format!("/connect/{app}").as_bytes()).collect();
            return Redirect::to(&format!("/login?next={next}")).into_response();
        }
        Err(e) => return failed(&session, e.to_string()).await,
    };
    // Only a name an app could have goes further (and into a message).
    if toolshed_domain::connections::AppName::parse(&app).is_err() {
        return failed(&session, "There is no such app to connect.".into()).await;
    }
    let begun = toolshed.connections().begin(&user, &app).await;
    match begun {
        Ok((url, flow)) => match session.insert(FLOW_KEY, with_flow(flows(&session).await, flow)).await {
            Ok(()) => Redirect::to(&url).into_response(),
            Err(_) => failed(&session, "Your session could not be stored. Try again.".into()).await,
        },
        Err(e) => failed(&session, e.to_string()).await,
    }
}

#[derive(Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

async fn callback(State(toolshed): State<Toolshed>, session: Session, Query(q): Query<CallbackQuery>) -> Response {
    match finish(&toolshed, &session, q).instrument(tracing::info_span!("connect_callback")).await {
        Ok(app) => Redirect::to(&format!("/account?connected={app}#connected-accounts")).into_response(),
        Err(e) => {
            tracing::warn!(reason = %e, "connecting an account failed");
            failed(&session, e.to_string()).await
        }
    }
}

async fn flows(session: &Session) -> Vec<Flow> {
    session.get(FLOW_KEY).await.ok().flatten().unwrap_or_default()
}

fn with_flow(mut flows: Vec<Flow>, flow: Flow) -> Vec<Flow> {
    flows.push(flow);
    let extra = flows.len().saturating_sub(MAX_FLOWS);
    flows.drain(..extra);
    flows
}

async fn finish(toolshed: &Toolshed, session: &Session, q: CallbackQuery) -> Result<String, ConnectionError> {
    let state = q.state.ok_or(ConnectionError::FlowLost)?;
    // Used once, whatever happens next; the others wait on.
    let mut flows = flows(session).await;
    let flow = flows.iter().position(|f| f.is_for(&state)).map(|at| flows.remove(at)).ok_or(ConnectionError::FlowLost)?;
    session.insert(FLOW_KEY, flows).await.map_err(|_| ConnectionError::FlowLost)?;
    let user = toolshed.sessions().session_user(session).await.ok().flatten().ok_or(ConnectionError::FlowLost)?;
    let code = match (q.code, q.error) {
        (Some(code), None) => Ok(code),
        (_, error) => {
            let said = q.error_description.or(error).unwrap_or_else(|| "no code came back".into());
            Err(said.chars().filter(|c| !c.is_control()).take(200).collect())
        }
    };
    toolshed.connections().finish(&user, flow, &state, code.as_deref().map_err(Clone::clone)).await
}

async fn failed(session: &Session, reason: String) -> Response {
    if session.insert(FAILURE_KEY, reason).await.is_err() {
        tracing::warn!("could not keep the connection failure for the Account page");
    }
    Redirect::to("/account?connect=failed#connected-accounts").into_response()
}
