//! Tools that ask, over MCP. A run that stops with questions
//! ([`RunError::NeedsInput`]) reaches the client the way its revision allows:
//! MCP 2026-07-28 gets an input-required result (the questions, and the
//! answers so far sealed in `requestState`) and calls again; a 2025 session
//! is asked on its own stream (elicitation, sampling, roots) while the call
//! waits, and the tool runs again; a 2025 request without a session cannot
//! be asked anything, and gets a tool error saying so.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, ContentBlock, ErrorCode, GetPromptRequestParams, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, JsonObject, ReadResourceRequestParams, ServerRequest,
};
use rmcp::service::{PeerRequestOptions, RequestContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use toolshed_domain::asking::{AskedCall, MAX_ROUNDS};
use toolshed_domain::connections::NotConnected;
use toolshed_domain::ids::UserId;
use toolshed_domain::sandbox::{Answer, Input, RunError, INPUT_METHODS};
use toolshed_domain::Toolshed;

use super::handler::Transport;
use super::{Caller, Served};

/// How long a person may take over one round of questions on a session.
const ANSWER_WAIT: Duration = Duration::from_secs(300);

/// How questions reach this request's client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asks {
    /// MCP 2026-07-28: an input-required result; the client calls again.
    InResult,
    /// A 2025 session: requests on its stream, answered while the call waits.
    OnSession,
    /// A 2025 request without a session.
    Nowhere,
}

/// A request that may be one round of a call that asks: a `tools/call`,
/// a `prompts/get` or a `resources/read` (named by its URI).
pub(super) struct Round<'a> {
    name: &'a str,
    arguments: JsonObject,
    state: Option<&'a str>,
    responses: Option<InputResponses>,
}

impl<'a> From<&'a CallToolRequestParams> for Round<'a> {
    fn from(r: &'a CallToolRequestParams) -> Self {
        let arguments = r.arguments.clone().unwrap_or_default();
        Self { name: &r.name, arguments, state: r.request_state.as_deref(), responses: r.input_responses.clone() }
    }
}

impl<'a> From<&'a GetPromptRequestParams> for Round<'a> {
    fn from(r: &'a GetPromptRequestParams) -> Self {
        let arguments = r.arguments.clone().unwrap_or_default();
        Self { name: &r.name, arguments, state: r.request_state.as_deref(), responses: r.input_responses.clone() }
    }
}

impl<'a> From<&'a ReadResourceRequestParams> for Round<'a> {
    fn from(r: &'a ReadResourceRequestParams) -> Self {
        Self { name: &r.uri, arguments: JsonObject::new(), state: r.request_state.as_deref(), responses: r.input_responses.clone() }
    }
}

/// A request that may be one round of a call that asks.
pub(super) struct Asking {
    user: UserId,
    endpoint: String,
    tool: String,
    arguments: JsonObject,
    /// Rounds taken before this one.
    pub round: usize,
    /// The answers so far.
    pub input: Input,
    /// What the client declared it can answer.
    pub capabilities: Map<String, Value>,
    /// The key the call's last admitted round was given, or the request it waits on.
    pub approval: Option<String>,
    asks: Asks,
    /// The call already waited for its person to connect an account.
    connect_waited: bool,
}

impl Asking {
    /// The round `request` is: the answers it brings (its `inputResponses`,
    /// over those sealed in its `requestState` by an earlier round). A state
    /// this server did not seal for this very call is refused (-32602).
    pub(super) fn of(
        toolshed: &Toolshed,
        transport: Transport,
        c: &Caller,
        context: &RequestContext<RoleServer>,
        request: Round<'_>,
    ) -> Result<Self, McpError> {
        let asks = match context.protocol_version() {
            Some(v) if !v.has_initialize() => Asks::InResult,
            _ if transport == Transport::Stateless => Asks::Nowhere,
            _ => Asks::OnSession,
        };
        let capabilities = context.client_capabilities().and_then(|caps| serde_json::to_value(caps).ok());
        let capabilities = match capabilities {
            Some(Value::Object(caps)) => caps,
            _ => Map::new(),
        };
        let endpoint = match &c.served {
            Served::Listing(listing) => listing.slug(),
            Served::Catalog => "me".into(),
        };
        let mut asking = Self {
            user: c.user.id,
            endpoint,
            tool: request.name.to_owned(),
            arguments: request.arguments,
            round: 0,
            input: Input::default(),
            capabilities,
            approval: None,
            asks,
            connect_waited: false,
        };
        // Only 2026-07-28 answers in the request; a 2025 client is asked on its session.
        if let (Asks::InResult, Some(state)) = (asks, request.state) {
            let round = asking.call().open(toolshed.secrets(), state).map_err(|e| McpError::invalid_params(e.to_string(), None))?;
            asking.round = round.number;
            asking.approval = round.approval.clone();
            asking.input = round.answered(request.responses.unwrap_or_default());
        }
        Ok(asking)
    }

    fn call(&self) -> AskedCall<'_> {
        AskedCall { user: self.user, endpoint: &self.endpoint, tool: &self.tool, arguments: &self.arguments }
    }

    /// The run asked `requests`: what goes back to the client now, or `None`
    /// once a session's client has answered (run the tool again).
    pub(super) async fn next_round(
        &mut self,
        toolshed: &Toolshed,
        peer: &Peer<RoleServer>,
        requests: Map<String, Value>,
    ) -> Result<Option<CallToolResponse>, McpError> {
        let why = RunError::NeedsInput { requests: requests.clone() }.to_string();
        let tool_error = |text: String| Ok(Some(CallToolResult::error(vec![ContentBlock::text(text)]).into()));
        if self.asks == Asks::Nowhere {
            return tool_error(format!(
                "{why}. Without a session this client cannot be asked: connect with a session, or with MCP 2026-07-28."
            ));
        }
        if let Some(refused) = undeclared(&self.capabilities, &requests) {
            return Err(refused);
        }
        self.round += 1;
        if self.round >= MAX_ROUNDS {
            return tool_error(format!("{why} (the tool has asked in {MAX_ROUNDS} rounds; a call may take no more)"));
        }
        let typed = match input_requests(requests.clone()) {
            Ok(typed) => typed,
            Err(text) => return tool_error(text),
        };
        if self.asks == Asks::InResult {
            let state = self.call().seal(toolshed.secrets(), self.round, (&self.input, self.approval.as_deref()), &requests);
            return Ok(Some(InputRequiredResult::new(Some(typed), Some(state)).into()));
        }
        for (key, request) in typed {
            let answer = ask_on_session(peer, request).await?;
            self.input.give(key.clone(), Answer::to(&requests[&key], answer));
        }
        Ok(None)
    }
}

impl Asking {
    /// The call waits on approval request `id` (`message` says so): a
    /// question that keeps the person in the loop while it waits, when the
    /// client can put one to them (accept: look again; decline: withdraw),
    /// else `None` (the caller answers `message`, and the model calls again).
    pub(super) fn waits_on(&mut self, id: String, message: &str) -> Option<Map<String, Value>> {
        if self.asks == Asks::Nowhere || !self.capabilities.contains_key("elicitation") {
            return None;
        }
        self.approval = Some(id);
        let question = serde_json::json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": format!("{message} Accept once it is approved to run the call; decline to withdraw the request."),
                "requestedSchema": {"type": "object", "properties": {}},
            }
        });
        Some(Map::from_iter([(APPROVAL_KEY.to_owned(), question)]))
    }

    /// The call acts as its caller at an app they have not connected: where
    /// the client can open a URL for its person (URL-mode elicitation), the
    /// question that sends them to connect it, once per call; the call then
    /// runs again (connected meanwhile, it works). Else `None`: the link is
    /// the call's answer, as a tool error.
    pub(super) fn connect_at(&mut self, missing: &NotConnected) -> Option<Map<String, Value>> {
        if self.asks == Asks::Nowhere {
            return None;
        }
        connect_question(&self.capabilities, &self.input, missing)
    }

    /// The person accepted to go and connect an account ([`Asking::connect_at`]):
    /// the call waits for it, once ([`waited_for_connection`]). True: run the call again.
    pub(super) async fn waited_for_connection(&mut self, toolshed: &Toolshed, app: &str, cancelled: &CancellationToken) -> bool {
        if self.connect_waited || !connect_accepted(&self.input) {
            return false;
        }
        self.connect_waited = true;
        waited_for_connection(toolshed, self.user, app, cancelled).await
    }

    /// When the person declined (or dismissed) the question [`Asking::waits_on`]
    /// put: the request is withdrawn, and this is the call's answer.
    pub(super) async fn withdrawn(&self, toolshed: &Toolshed) -> Result<Option<CallToolResponse>, McpError> {
        let declined = self.input.answers().get(APPROVAL_KEY).is_some_and(|a| a.answer["action"] != "accept");
        let Some(id) = self.approval.as_deref().filter(|_| declined) else { return Ok(None) };
        let withdrawn = toolshed.approvals().withdraw(self.user, id).await.map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let text = match withdrawn {
            true => format!("You withdrew approval request {id}; the call did not run."),
            // Decided meanwhile: an approval left unused expires in an hour.
            false => "You declined to go on; the call did not run.".to_owned(),
        };
        Ok(Some(CallToolResult::error(vec![ContentBlock::text(text)]).into()))
    }
}

/// The key of the question a call waiting for approval puts to its client.
const APPROVAL_KEY: &str = "toolshed_approval";
/// The key of the question that sends a caller to connect an account.
const CONNECT_KEY: &str = "toolshed_connect";
/// How long a call waits for its person to finish connecting.
const CONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(180);

/// Where the client can open a URL for its person (URL-mode elicitation)
/// and has not been sent yet in this call: the question that sends them to
/// connect their account at `missing.app`.
pub(super) fn connect_question(capabilities: &Map<String, Value>, input: &Input, missing: &NotConnected) -> Option<Map<String, Value>> {
    let opens_urls = capabilities.get("elicitation").is_some_and(|e| e.get("url").is_some());
    if !opens_urls || input.answers().contains_key(CONNECT_KEY) {
        return None;
    }
    // Unique per call: a client may keep several open.
    let id = format!("connect-{}-{}", missing.app, rand::random::<u64>());
    let question = serde_json::json!({
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "message": format!("Connect your account at “{}”: this tool acts as you there. Accept once you have connected it.", missing.app),
            "url": missing.link,
            "elicitationId": id,
        }
    });
    Some(Map::from_iter([(CONNECT_KEY.to_owned(), question)]))
}

/// Whether the person accepted [`connect_question`].
pub(super) fn connect_accepted(input: &Input) -> bool {
    input.answers().get(CONNECT_KEY).is_some_and(|a| a.answer["action"] == "accept")
}

/// Once the person accepted [`connect_question`]: accepting means they
/// opened the page, not that they finished, so this waits (at most
/// [`CONNECT_WAIT`]) until the account is connected, woken by the connection
/// itself. True: run the call again.
pub(super) async fn waited_for_connection(toolshed: &Toolshed, user: UserId, app: &str, cancelled: &CancellationToken) -> bool {
    let Ok(Some(user)) = toolshed.accounts().user(user).await else { return false };
    tokio::select! {
        connected = toolshed.connections().wait_connected(&user, app, CONNECT_WAIT) => connected.unwrap_or(false),
        () = cancelled.cancelled() => false,
    }
}

/// A question of a kind the client did not declare it can answer: a
/// protocol error (MCP's MissingRequiredClientCapability), whichever way
/// questions would travel. Code that has another way checks
/// `$context.client.capabilities` before asking.
pub(super) fn undeclared(capabilities: &Map<String, Value>, requests: &Map<String, Value>) -> Option<McpError> {
    let missing: Map<String, Value> = requests
        .values()
        .filter_map(|r| INPUT_METHODS.iter().find(|(method, _)| r["method"] == *method))
        .filter(|(_, capability)| !capabilities.contains_key(*capability))
        .map(|(_, capability)| ((*capability).to_owned(), Value::Object(Map::new())))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let names: Vec<&str> = missing.keys().map(String::as_str).collect();
    let message = format!("The tool asks what this client did not declare it can answer (capabilities: {})", names.join(", "));
    let data = serde_json::json!({ "requiredCapabilities": missing });
    Some(McpError::new(ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, message, Some(data)))
}

/// The questions as MCP types; one that does not fit its method's type is
/// the tool's mistake, a tool error.
pub(super) fn input_requests(requests: Map<String, Value>) -> Result<InputRequests, String> {
    requests
        .into_iter()
        .map(|(key, request)| match serde_json::from_value::<InputRequest>(request) {
            Ok(request) => Ok((key, request)),
            Err(e) => Err(format!("The tool's question “{key}” is not a valid MCP request: {e}")),
        })
        .collect()
}

/// Puts one question to a 2025 session's client and waits for its answer.
async fn ask_on_session(peer: &Peer<RoleServer>, request: InputRequest) -> Result<Value, McpError> {
    let request = match request {
        InputRequest::Elicitation(r) => ServerRequest::ElicitRequest(r),
        InputRequest::CreateMessage(r) => ServerRequest::CreateMessageRequest(r),
        InputRequest::ListRoots(r) => ServerRequest::ListRootsRequest(r),
        _ => return Err(McpError::internal_error("a question of a kind this server does not send", None)),
    };
    let mut options = PeerRequestOptions::no_options();
    options.timeout = Some(ANSWER_WAIT);
    let sent = peer.send_request_with_option(request, options).await;
    let answer: Result<ClientResult, _> = match sent {
        Ok(handle) => handle.await_response().await,
        Err(e) => Err(e),
    };
    match answer {
        Ok(result) => serde_json::to_value(result).map_err(|e| McpError::internal_error(e.to_string(), None)),
        // The client refused the question or never answered: the call ends with that.
        Err(e) => Err(McpError::internal_error(format!("the client did not answer the tool's question: {e}"), None)),
    }
}
