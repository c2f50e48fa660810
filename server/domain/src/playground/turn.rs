//! One turn of a playground conversation: the model answers the latest user
//! message, calling the listing's tools as often as it needs (each call run
//! like an MCP call of that listing), until it answers without tool calls.

use std::collections::HashMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use super::client::{ChatClient, Message, ToolCall};
use super::Playground;
use super::{ChatEndpointId, PlaygroundError};
use crate::accounts::User;
use crate::bundles::Bundles;
use crate::calls::Calls;
use crate::calls::{Answer, Callables};
use crate::codegen::openai_functions;
use crate::names::Invalid;
use crate::sandbox::ConsoleLine;
use crate::tools::Tools;
use crate::tools::{ListingKind, Live, ToolError, Via};

/// Model requests in one turn before it is stopped: a model that keeps calling
/// tools without answering would otherwise loop for ever.
pub const MAX_ROUNDS: usize = 8;
/// Most messages a conversation may carry.
pub const MAX_MESSAGES: usize = 200;

/// How usage records name calls made from the playground.
const TRANSPORT: &str = "playground";

/// The listing to chat with, as the page names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListingRef {
    pub kind: ListingKind,
    pub department: String,
    pub name: String,
}

/// What the page sends: the conversation so far, its last message the user's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRequest {
    pub listing: ListingRef,
    pub endpoint: ChatEndpointId,
    pub messages: Vec<Message>,
}

/// What happens during a turn, in order, as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PlaygroundEvent {
    /// More of the model's answer.
    Text { delta: String },
    /// The model asked for a tool; it runs now.
    ToolCall { id: String, name: String, arguments: String },
    /// A tool call's outcome: `output` is what the model is given.
    ToolResult { id: String, name: String, ok: bool, output: String, console: Vec<ConsoleLine>, duration_ms: u64 },
    /// A message to append to the conversation (the model's, or a tool result).
    Message { message: Message },
    /// The model answered without asking for more tools.
    Done,
    /// The turn stopped; the text says why.
    Error { message: String },
}

/// A checked turn, ready to run.
pub struct Turn {
    /// What the listing serves, and the served name of each function name the model sees.
    callables: Callables,
    tools: HashMap<String, String>,
    functions: Value,
    client: ChatClient,
    messages: Vec<Message>,
}

impl Playground<'_> {
    /// Checks a turn before anything streams: the listing must be one `user`
    /// sees and is published, the endpoint must exist, the conversation must
    /// end with the user's message.
    pub async fn playground_turn(self, user: &User, request: TurnRequest) -> Result<Turn, PlaygroundError> {
        let bad = |reason: &str| PlaygroundError::Invalid(Invalid { field: "Conversation", reason: reason.into() });
        if request.messages.len() > MAX_MESSAGES {
            return Err(bad(&format!("has more than {MAX_MESSAGES} messages: start a new one")));
        }
        match request.messages.last() {
            Some(Message::User { content }) if !content.trim().is_empty() => {}
            _ => return Err(bad("must end with your message")),
        }
        let ListingRef { kind, department, name } = &request.listing;
        let listing = Tools::new(self.core).listing_by_slug(user, *kind, department, name).await?;
        if listing.published_version.is_none() {
            return Err(PlaygroundError::NotFound);
        }
        if listing.status == crate::tools::Status::Disabled {
            return Err(PlaygroundError::Disabled);
        }
        let defs = Bundles::new(self.core).tool_defs(user, &listing).await?;
        let prefix = (listing.kind == ListingKind::Bundle).then_some(listing.name.as_str());
        let functions = openai_functions(prefix, &defs);
        let callables = Calls::new(self.core).callables(user, &listing).await?;
        // The model calls tools by their function names (`bundle__tool`, cut to 64).
        let tools = defs
            .iter()
            .zip(functions.as_array().into_iter().flatten())
            .filter_map(|(def, f)| Some((f.pointer("/function/name")?.as_str()?.to_owned(), def.name.clone())))
            .collect();
        let (endpoint, key) = self.chat_endpoint_with_key(request.endpoint).await?;
        let client = ChatClient::new(&endpoint.base_url, &endpoint.model, key, endpoint.timeout_secs, &self.core.settings().internal_hosts);
        Ok(Turn { callables, tools, functions, client, messages: request.messages })
    }
}

impl Turn {
    /// Runs the turn, sending what happens to `events`; stops early when the
    /// receiver is dropped (the page went away).
    pub async fn run(mut self, events: mpsc::Sender<PlaygroundEvent>) {
        let span = tracing::info_span!("playground_turn", listing = %self.callables.listing().slug(), department = %self.callables.user().department.name);
        let outcome = tracing::Instrument::instrument(self.rounds(&events), span).await;
        let last = match outcome {
            Ok(()) => PlaygroundEvent::Done,
            Err(super::EndpointError::Gone) => return,
            Err(e) => PlaygroundEvent::Error { message: e.to_string() },
        };
        let _ = events.send(last).await;
    }

    async fn rounds(&mut self, events: &mpsc::Sender<PlaygroundEvent>) -> Result<(), super::EndpointError> {
        for _ in 0..MAX_ROUNDS {
            let completion = self
                .client
                .complete(&self.messages, &self.functions, |delta| {
                    let events = events.clone();
                    async move { events.send(PlaygroundEvent::Text { delta }).await.is_ok() }
                })
                .await?;
            let calls = completion.tool_calls.clone();
            let content = Some(completion.content).filter(|c| !c.is_empty() || calls.is_empty());
            let answer = Message::Assistant { content, tool_calls: completion.tool_calls };
            self.messages.push(answer.clone());
            send(events, PlaygroundEvent::Message { message: answer }).await?;
            if calls.is_empty() {
                return Ok(());
            }
            for call in calls {
                send(
                    events,
                    PlaygroundEvent::ToolCall {
                        id: call.id.clone(),
                        name: call.function.name.clone(),
                        arguments: call.function.arguments.clone(),
                    },
                )
                .await?;
                let result = self.call(&call).await;
                let message = Message::Tool { tool_call_id: call.id.clone(), content: result.output.clone() };
                send(
                    events,
                    PlaygroundEvent::ToolResult {
                        id: call.id,
                        name: call.function.name,
                        ok: result.ok,
                        output: result.output,
                        console: result.console,
                        duration_ms: result.duration_ms,
                    },
                )
                .await?;
                self.messages.push(message.clone());
                send(events, PlaygroundEvent::Message { message }).await?;
            }
        }
        Err(super::EndpointError::TooManyRounds(MAX_ROUNDS))
    }

    /// Runs one tool call the way an MCP `tools/call` of this listing runs it.
    async fn call(&self, call: &ToolCall) -> CallResult {
        let started = Instant::now();
        let failed =
            |output: String| CallResult { ok: false, output, console: Vec::new(), duration_ms: started.elapsed().as_millis() as u64 };
        let Some(name) = self.tools.get(&call.function.name) else {
            return failed(format!("Error: there is no tool named {}", call.function.name));
        };
        let raw = call.function.arguments.trim();
        let input = if raw.is_empty() { Ok(Value::Null) } else { serde_json::from_str::<Value>(raw) };
        let Ok(input) = input else {
            return failed(format!("Error: the arguments are not valid JSON: {raw}"));
        };
        let via = Via { transport: TRANSPORT, token_id: None, bundle_id: None };
        let answer = self.callables.call(name, input, via, Live::default()).await;
        let duration_ms = started.elapsed().as_millis() as u64;
        match answer {
            Ok(answer) => {
                let (ok, output) = match answer.value() {
                    Ok(value) => (true, value.to_text()),
                    Err(e) => (false, format!("Error: {e}")),
                };
                let console = match answer {
                    Answer::Ran(r) => r.outcome.console,
                    Answer::External(_) => Vec::new(),
                };
                CallResult { ok, output, console, duration_ms }
            }
            Err(e) => {
                if !matches!(
                    e,
                    ToolError::BadArguments(_)
                        | ToolError::Busy
                        | ToolError::TooManyCalls
                        | ToolError::Disabled
                        | ToolError::Held(_)
                        | ToolError::NotConnected(_)
                ) {
                    tracing::warn!(error = %e, tool = %name, "a playground tool call failed");
                }
                failed(format!("Error: {e}"))
            }
        }
    }
}

async fn send(events: &mpsc::Sender<PlaygroundEvent>, event: PlaygroundEvent) -> Result<(), super::EndpointError> {
    events.send(event).await.map_err(|_| super::EndpointError::Gone)
}

struct CallResult {
    ok: bool,
    output: String,
    console: Vec<ConsoleLine>,
    duration_ms: u64,
}
