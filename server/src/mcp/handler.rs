//! The MCP server behind every endpoint: one [`ListingHandler`] per session (per
//! request when stateless), serving through the domain layer whatever
//! transport brought the request: a tool's published version, the members a
//! bundle's published version serves to the caller, or on `/mcp/me` the
//! caller's catalog ([`toolshed_domain::catalog`]).

#![allow(deprecated)] // rmcp marks MCP logging deprecated (SEP-2577); 2025-06-18 and 2025-11-25 clients use it.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock, DiscoverResult, GetPromptRequestParams,
    GetPromptResponse, GetTaskParams, GetTaskResult, Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ReadResourceRequestParams, ReadResourceResponse,
    ResourceUpdatedNotificationParam, ServerCapabilities, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
    Tool as McpTool, ToolAnnotations, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::SessionRestoreMarker;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio::sync::{broadcast, mpsc};
use toolshed_domain::bundles::ServedDef;
use toolshed_domain::calls::{Answer, Callables};
use toolshed_domain::catalog::{favourites_target, CatalogSearch, CALL_TOOL, DESCRIBE_TOOL, SEARCH_TOOLS};
use toolshed_domain::code_mode::transcript;
use toolshed_domain::codegen::{ToolDef, RUN_CODE};
use toolshed_domain::connections::NotConnected;
use toolshed_domain::ids::ToolId;
use toolshed_domain::names::CodeMode;
use toolshed_domain::sandbox::{LogLevel, RunError, RunEvent, RunOutcome, ToolValue};
use toolshed_domain::serves::Serves;
use toolshed_domain::tools::approvals::Held;
use toolshed_domain::tools::{ListingKind, Live, Tool, ToolError, Via};
use toolshed_domain::Toolshed;

use super::asking::{Asking, Round};
use super::prompts;
use super::tasks::{as_task, AsTask, TaskCall, ESCALATE_AFTER};
use super::{Caller, Served};

/// How a request reached the handler; recorded with each call's usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP with sessions: the session can be told of list changes.
    StreamableHttp,
    /// Streamable HTTP, one request at a time: nothing outlives the request.
    Stateless,
    /// The legacy HTTP+SSE transport.
    Sse,
}

impl Transport {
    fn usage_name(self) -> &'static str {
        match self {
            Transport::StreamableHttp | Transport::Stateless => "mcp-http",
            Transport::Sse => "mcp-sse",
        }
    }
}

#[derive(Clone)]
pub struct ListingHandler {
    toolshed: Toolshed,
    transport: Transport,
    session: Arc<Session>,
    /// Cancelled at shutdown: `subscriptions/listen` streams end gracefully.
    closing: tokio_util::sync::CancellationToken,
}

#[derive(Default)]
struct Session {
    /// The listing the session was opened on (`None`: the personal endpoint),
    /// and by whom; later requests must be for it.
    listing: OnceLock<(Option<ToolId>, Caller)>,
    /// Set by `logging/setLevel`; until then console output is not forwarded.
    log_level: Mutex<Option<LoggingLevel>>,
    /// Listing changes from the moment `initialize` was answered: a change the
    /// client makes right after its handshake must not slip past, while
    /// notifications wait for `initialized`.
    changes: Mutex<Option<toolshed_domain::changes::Subscription>>,
    /// Cancelled when the session ends (its last handler is dropped), so what
    /// serves it in the background ends at once and frees the session's memory.
    ended: tokio_util::sync::CancellationToken,
    /// Counts the session in the metrics while it lives (none for a stateless request).
    open: Option<toolshed_domain::metrics::Open>,
    /// The resources a 2025 client subscribed to (`resources/subscribe`).
    subscribed: Arc<Mutex<HashSet<String>>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.ended.cancel();
    }
}

impl ListingHandler {
    pub fn new(toolshed: Toolshed, transport: Transport, closing: tokio_util::sync::CancellationToken) -> Self {
        let mut session = Session::default();
        if !matches!(transport, Transport::Stateless) {
            session.open = Some(toolshed.mcp_session_opened(transport.usage_name()));
        }
        Self { toolshed, transport, session: Arc::new(session), closing }
    }

    /// The caller the token check put in the request, for this session's listing.
    fn caller(&self, ctx_extensions: &rmcp::model::Extensions) -> Result<Caller, McpError> {
        let caller = ctx_extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Caller>())
            .cloned()
            .ok_or_else(|| McpError::internal_error("request reached the MCP handler without a caller", None))?;
        match self.session.listing.get() {
            Some((id, _)) if *id != caller.served.listing_id() => {
                Err(McpError::invalid_request("This session belongs to another endpoint.", None))
            }
            _ => Ok(caller),
        }
    }
}

/// An external server's answer as the MCP client gets it: as the server sent
/// it (content, structuredContent, isError); every failure an `isError` result
/// (the domain says what went wrong).
fn external_result(name: &str, answer: serde_json::Value) -> CallToolResult {
    let mut result = serde_json::from_value::<CallToolResult>(answer.clone()).unwrap_or_else(|e| {
        let text = format!("The external tool “{name}” sent a result that is not a valid MCP tool result ({e}): {answer}");
        CallToolResult::error(vec![ContentBlock::text(text)])
    });
    // As for our own results: structured content that is not an object would make the SDKs refuse the whole result.
    result.structured_content = result.structured_content.filter(serde_json::Value::is_object);
    result
}

/// Calls `notify` whenever what `caller`'s endpoint serves changes (publish,
/// roll back, settings, moderation; for a bundle, of any member too), on any
/// replica, until `until` completes or `notify` says the client is gone.
async fn forward_list_changes<N, F>(
    toolshed: Toolshed,
    caller: Caller,
    mut changes: toolshed_domain::changes::Subscription,
    until: impl Future<Output = ()>,
    mut notify: N,
) where
    N: FnMut() -> F,
    F: Future<Output = bool>,
{
    let mut watched = watched_targets(&toolshed, &caller).await;
    tokio::pin!(until);
    loop {
        let changed = tokio::select! {
            c = changes.recv() => c,
            () = &mut until => return,
        };
        let ours = match changed {
            Ok(t) => watched.contains(&*t),
            // Missed some: a spurious notification is harmless, a missing one is not.
            Err(broadcast::error::RecvError::Lagged(_)) => true,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if ours {
            if !notify().await {
                return;
            }
            // A republished bundle may have other members now.
            watched = watched_targets(&toolshed, &caller).await;
        }
    }
}

/// The audit targets whose changes may change what `c`'s endpoint serves: the
/// listing's own, and for a bundle every member's; on the personal endpoint
/// the caller's favourites and each favourite's own.
async fn watched_targets(toolshed: &Toolshed, c: &Caller) -> HashSet<String> {
    let listing = match &c.served {
        Served::Listing(listing) => listing,
        Served::Catalog => {
            let mut watched = HashSet::from([favourites_target(&c.user)]);
            match toolshed.catalog(&c.user, c.token.as_ref()).favourites().await {
                Ok(favourites) => watched.extend(favourites.iter().map(Tool::audit_target)),
                Err(e) => tracing::warn!(error = %e, "could not read favourites for list_changed"),
            }
            return watched;
        }
    };
    let mut watched = HashSet::from([listing.audit_target()]);
    if listing.kind == ListingKind::Bundle {
        // The bundle as it is now: the session may have started before a republish.
        let bundle = toolshed.tools().tool(&c.user, listing.id).await.unwrap_or_else(|_| (**listing).clone());
        match toolshed.bundles().served_tools(&c.user, &bundle).await {
            Ok(served) => watched.extend(served.member_targets),
            Err(e) => tracing::warn!(error = %e, "could not read a bundle's members for list_changed"),
        }
    }
    watched
}

/// A served tool as MCP describes it, under the name it has in this listing.
fn mcp_tool(t: ToolDef) -> McpTool {
    let schema = match t.input_schema {
        serde_json::Value::Object(map) => map,
        _ => Default::default(),
    };
    let mut annotations = ToolAnnotations::new().read_only(t.read_only).destructive(t.destructive);
    if let Some(p) = &t.permissions {
        annotations = annotations.open_world(p.open_world());
    }
    let mut tool = McpTool::new(t.name, t.description, Arc::new(schema)).with_title(t.title).with_annotations(annotations);
    if let Some(serde_json::Value::Object(meta)) = t.permissions.as_ref().map(|p| p.meta()) {
        tool.meta = Some(rmcp::model::MetaObject(meta));
    }
    if let Some(serde_json::Value::Object(out)) = t.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(out));
    }
    tool
}

fn internal(e: ToolError) -> McpError {
    McpError::internal_error(e.to_string(), None)
}

/// The session a Streamable HTTP request belongs to, from its header.
fn session_id(ctx: &RequestContext<RoleServer>) -> Option<String> {
    let parts = ctx.extensions.get::<axum::http::request::Parts>()?;
    Some(parts.headers.get("mcp-session-id")?.to_str().ok()?.to_owned())
}

/// The server as clients see it: named after the listing, at its published
/// version, with its description as the instructions for the model; the
/// personal endpoint after its owner, with how to use the catalog.
fn describe_server(c: &Caller, mut info: InitializeResult) -> InitializeResult {
    match &c.served {
        Served::Listing(listing) => {
            let version = listing.published_version.map(|v| format!("v{v}")).unwrap_or_default();
            info.server_info = Implementation::new(listing.slug(), version);
            info.instructions = Some(listing.description.clone()).filter(|d| !d.is_empty());
        }
        Served::Catalog => {
            info.server_info = Implementation::new(format!("toolshed-{}", c.user.username), env!("CARGO_PKG_VERSION"));
            info.instructions = Some(CATALOG_INSTRUCTIONS.into());
        }
    }
    info
}

/// What a model is told about the personal endpoint.
const CATALOG_INSTRUCTIONS: &str = "The company's tools that you may use. Tools listed here by name are the \
user's favourites: call them directly. For anything else, search_tools with what you want to do, \
describe_tool the best match to learn its arguments, then call_tool it; run_code combines several \
tools in one step.";

fn mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Log | LogLevel::Info => LoggingLevel::Info,
        LogLevel::Warn => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
    }
}

/// Severity order of MCP levels (RFC 5424), least severe first.
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

fn parse_level(raw: &str) -> Option<LoggingLevel> {
    serde_json::from_value(serde_json::Value::String(raw.to_owned())).ok()
}

/// Sends a running call's console lines (at or above the client's level) and
/// `$progress` reports (when the client gave a progress token) as they happen.
async fn forward_run_events(
    mut events: mpsc::UnboundedReceiver<RunEvent>,
    peer: Peer<RoleServer>,
    level: Option<LoggingLevel>,
    progress: Option<ProgressToken>,
    logger: String,
) {
    while let Some(event) = events.recv().await {
        let sent = match event {
            RunEvent::Console(line) => match level {
                Some(min) if rank(mcp_level(line.level)) >= rank(min) => {
                    let param = LoggingMessageNotificationParam::new(mcp_level(line.level), serde_json::Value::String(line.message))
                        .with_logger(logger.clone());
                    peer.notify_logging_message(param).await
                }
                _ => Ok(()),
            },
            RunEvent::Progress { done, total, message } => match &progress {
                Some(token) => {
                    let mut param = ProgressNotificationParam::new(token.clone(), done);
                    param.total = total;
                    param.message = message;
                    peer.notify_progress(param).await
                }
                None => Ok(()),
            },
        };
        if sent.is_err() {
            return;
        }
    }
}

impl ServerHandler for ListingHandler {
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request)?;
        let c = self.caller(&context.extensions)?;
        let _ = self.session.listing.set((c.served.listing_id(), c.clone()));
        if self.transport != Transport::Stateless {
            match self.toolshed.listing_changes().subscribe().await {
                Ok(changes) => *self.session.changes.lock().expect("changes lock") = Some(changes),
                Err(e) => tracing::warn!(error = %e, "could not listen for list changes"),
            }
        }
        if let Some(restored) = context.extensions.get::<SessionRestoreMarker>() {
            // A session started elsewhere: bring back what the client had set.
            match self.toolshed.mcp_sessions().load_mcp_session(&restored.id).await {
                Ok(Some(s)) => {
                    *self.session.log_level.lock().expect("log level lock") = s.log_level.as_deref().and_then(parse_level);
                    *self.session.subscribed.lock().expect("subscriptions lock") = s.subscribed.into_iter().collect();
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "could not load a resumed MCP session's settings"),
            }
        }
        Ok(describe_server(&c, result))
    }

    /// The 2026-07-28 protocol's handshake-free way to ask what the server is.
    async fn discover(&self, context: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        let c = self.caller(&context.extensions)?;
        Ok(DiscoverResult::from_server_info(self.supported_protocol_versions().into_owned(), describe_server(&c, self.get_info())))
    }

    fn get_info(&self) -> InitializeResult {
        // Lists of prompts and resources are answered, but their changes not
        // told (the tool list's change is); a subscribed resource's update is.
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_logging()
            .enable_tasks()
            .build();
        InitializeResult::new(capabilities)
    }

    async fn get_task(&self, request: GetTaskParams, context: RequestContext<RoleServer>) -> Result<GetTaskResult, McpError> {
        let c = self.caller(&context.extensions)?;
        let task = super::tasks::task_of(&self.toolshed, &c, &request.task_id).await?;
        Ok(GetTaskResult::new(super::tasks::detailed(&task)))
    }

    async fn update_task(&self, request: UpdateTaskParams, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        let c = self.caller(&context.extensions)?;
        super::tasks::task_of(&self.toolshed, &c, &request.task_id).await?;
        let responses = request.input_responses.into_iter().collect();
        match self.toolshed.tasks().answer(&c.user, &request.task_id, responses).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(super::tasks::unknown_task(&request.task_id)),
            Err(e) => Err(McpError::internal_error(e.to_string(), None)),
        }
    }

    async fn cancel_task(&self, request: CancelTaskParams, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        let c = self.caller(&context.extensions)?;
        super::tasks::task_of(&self.toolshed, &c, &request.task_id).await?;
        match self.toolshed.tasks().cancel(&c.user, &request.task_id).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(super::tasks::unknown_task(&request.task_id)),
            Err(e) => Err(McpError::internal_error(e.to_string(), None)),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let defs = self.served_defs(&context).await?;
        let prompts = defs.iter().filter(|d| d.serves == Serves::Prompt).map(prompts::prompt).collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let span = tracing::info_span!("prompts/get", prompt = %request.name, transport = self.transport.usage_name());
        continue_trace(&span, &context);
        let get = async {
            let (c, listing) = self.listing_caller(&context)?;
            let defs = self.toolshed.bundles().served_defs(&c.user, &listing).await.map_err(internal)?;
            let def = defs.into_iter().find(|d| d.serves == Serves::Prompt && d.def.name == request.name);
            let def = def.ok_or_else(|| prompts::no_prompt(&request.name))?.def;
            let input = prompts::arguments(&def.input_schema, request.arguments.clone().unwrap_or_default())?;
            let callables = self.toolshed.calls().callables(&c.user, &listing).await.map_err(internal)?;
            let response = self.render(&c, &callables, &context, (&request).into(), &request.name, input).await?;
            prompts::prompt_result(response, &def.description)
        };
        tracing::Instrument::instrument(get, span).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let defs = self.served_defs(&context).await?;
        Ok(ListResourcesResult::with_all_items(defs.iter().filter_map(prompts::resource).collect()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let defs = self.served_defs(&context).await?;
        Ok(ListResourceTemplatesResult::with_all_items(defs.iter().filter_map(prompts::template).collect()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let span = tracing::info_span!("resources/read", uri = %request.uri, transport = self.transport.usage_name());
        continue_trace(&span, &context);
        let read = async {
            let (c, listing) = self.listing_caller(&context).map_err(|_| prompts::no_resource(&context, &request.uri))?;
            let callables = self.toolshed.calls().callables(&c.user, &listing).await.map_err(internal)?;
            let Some((name, values)) = callables.resource(&request.uri) else { return Err(prompts::no_resource(&context, &request.uri)) };
            let name = name.to_owned();
            let defs = self.toolshed.bundles().served_defs(&c.user, &listing).await.map_err(internal)?;
            let def = defs.into_iter().find(|d| d.def.name == name).ok_or_else(|| prompts::no_resource(&context, &request.uri))?;
            let mime = def.serves.mime().map(|m| m.as_str().to_owned()).unwrap_or_default();
            let input = prompts::arguments(&def.def.input_schema, values)?;
            let response = self.render(&c, &callables, &context, (&request).into(), &name, input).await?;
            prompts::resource_result(response, &request.uri, &mime)
        };
        tracing::Instrument::instrument(read, span).await
    }

    async fn subscribe(&self, request: SubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        if session_id(&context).is_none() {
            return Err(McpError::invalid_request("Subscribing needs a session (or MCP 2026-07-28's subscriptions/listen).", None));
        }
        let (c, listing) = self.listing_caller(&context)?;
        let callables = self.toolshed.calls().callables(&c.user, &listing).await.map_err(internal)?;
        if callables.resource(&request.uri).is_none() {
            return Err(prompts::no_resource(&context, &request.uri));
        }
        let uris = {
            let mut subscribed = self.session.subscribed.lock().expect("subscriptions lock");
            if subscribed.len() >= prompts::MAX_SUBSCRIPTIONS && !subscribed.contains(&request.uri) {
                let message = format!("A session may subscribe to at most {} resources.", prompts::MAX_SUBSCRIPTIONS);
                return Err(McpError::invalid_params(message, None));
            }
            subscribed.insert(request.uri);
            subscribed.iter().cloned().collect::<Vec<_>>()
        };
        self.store_subscriptions(&context, &uris).await
    }

    async fn unsubscribe(&self, request: UnsubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        let uris = {
            let mut subscribed = self.session.subscribed.lock().expect("subscriptions lock");
            subscribed.remove(&request.uri);
            subscribed.iter().cloned().collect::<Vec<_>>()
        };
        self.store_subscriptions(&context, &uris).await
    }

    /// MCP 2026-07-28's subscriptions: a client listens for the tool list's
    /// changes (and its resources' updates) on a stream of its own (there
    /// are no sessions to tell). Subscribes to changes here, before rmcp
    /// sends the acknowledgment: a change the client makes as soon as it
    /// reads it must not slip past.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        *self.session.changes.lock().expect("changes lock") = Some(self.toolshed.listing_changes().subscribe_at_once());
        let mut filter = SubscriptionFilter::builder().tools_list_changed();
        if let Some(uris) = &requested.resource_subscriptions {
            filter = filter.resource_subscriptions(uris.iter().take(prompts::MAX_SUBSCRIPTIONS).cloned());
        }
        Some(filter.build())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        let caller = self.caller(&subscription.request_context().extensions)?;
        let changes = self.session.changes.lock().expect("changes lock").take();
        let changes = changes.unwrap_or_else(|| self.toolshed.listing_changes().subscribe_at_once());
        let sink = subscription.sink().clone();
        let accepted = subscription.accepted().clone();
        let notify = move || {
            let (sink, accepted) = (sink.clone(), accepted.clone());
            async move {
                let sent = async {
                    if accepted.tools_list_changed == Some(true) {
                        sink.notify_tool_list_changed().await?;
                    }
                    for uri in accepted.resource_subscriptions.iter().flatten() {
                        sink.notify_resource_updated(uri.clone()).await?;
                    }
                    Ok::<_, rmcp::service::SubscriptionSendError>(())
                };
                sent.await.is_ok()
            }
        };
        // Ends when the client cancels or goes, or at shutdown (then with the final result).
        let until = async {
            tokio::select! {
                () = subscription.cancelled() => {}
                () = self.closing.cancelled() => {}
            }
        };
        forward_list_changes(self.toolshed.clone(), caller, changes, until, notify).await;
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let changes = self.session.changes.lock().expect("changes lock").take();
        if let (Some((_, caller)), Some(changes)) = (self.session.listing.get(), changes) {
            let (ended, peer) = (self.session.ended.clone().cancelled_owned(), context.peer);
            let subscribed = self.session.subscribed.clone();
            let notify = move || {
                let peer = peer.clone();
                let uris: Vec<String> = subscribed.lock().expect("subscriptions lock").iter().cloned().collect();
                async move {
                    let sent = async {
                        peer.notify_tool_list_changed().await?;
                        // A resource's tool changed, or a member of its bundle: it may read otherwise now.
                        for uri in uris {
                            peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)).await?;
                        }
                        Ok::<_, rmcp::service::ServiceError>(())
                    };
                    sent.await.is_ok()
                }
            };
            tokio::spawn(forward_list_changes(self.toolshed.clone(), caller.clone(), changes, ended, notify));
        }
    }

    async fn set_level(&self, request: SetLevelRequestParams, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        *self.session.log_level.lock().expect("log level lock") = Some(request.level);
        if let Some(id) = session_id(&context) {
            let level = serde_json::to_value(request.level).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            if let Err(e) = self.toolshed.mcp_sessions().set_mcp_session_log_level(&id, &level).await {
                tracing::warn!(error = %e, "could not store an MCP session's logging level");
            }
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let c = self.caller(&context.extensions)?;
        let defs = match &c.served {
            Served::Listing(listing) => self.toolshed.code_mode().mcp_tool_defs(&c.user, listing).await,
            Served::Catalog => self.toolshed.catalog(&c.user, c.token.as_ref()).tool_defs().await,
        };
        Ok(ListToolsResult::with_all_items(defs.map_err(internal)?.into_iter().map(mcp_tool).collect()))
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        let span = tracing::info_span!("tools/call", gen_ai.tool.name = %request.name, transport = self.transport.usage_name());
        continue_trace(&span, &context);
        tracing::Instrument::instrument(self.call(request, context), span).await
    }
}

/// Makes `span` continue the client's trace: the request's `_meta.traceparent`
/// (MCP 2026-07-28), else its HTTP `traceparent` header.
fn continue_trace(span: &tracing::Span, context: &RequestContext<RoleServer>) {
    let meta = |name| context.meta.get(name).and_then(serde_json::Value::as_str);
    if let Some(traceparent) = meta("traceparent") {
        toolshed_domain::sandbox::trace::continue_from(span, traceparent, meta("tracestate"));
    } else if let Some(parts) = context.extensions.get::<axum::http::request::Parts>() {
        crate::telemetry::continue_from_headers(span, &parts.headers);
    }
}

impl ListingHandler {
    async fn call(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        let c = self.caller(&context.extensions)?;
        let listing = match &c.served {
            Served::Listing(listing) => listing,
            Served::Catalog => return self.call_catalog(&c, request, context).await,
        };
        if request.name == RUN_CODE && listing.code_mode != CodeMode::Off {
            let via = self.via(&c, Some(listing.id));
            let outcome = match string_argument(&request.arguments.unwrap_or_default(), "code") {
                Ok(code) => self.toolshed.code_mode().run_code(&c.user, listing, code, via).await,
                Err(e) => Err(e),
            };
            return self.code_result(outcome);
        }
        let unknown = || McpError::invalid_params(format!("Unknown tool: {}", request.name), None);
        // What is not listed is not served: in this mode only `run_code` reaches the members.
        if listing.kind == ListingKind::Bundle && listing.code_mode == CodeMode::Instead {
            return Err(unknown());
        }
        let callables = self.toolshed.calls().callables(&c.user, listing).await.map_err(internal)?;
        let asking = Asking::of(&self.toolshed, self.transport, &c, &context, (&request).into())?;
        let input = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let Some(origin) = callables.origin(&request.name) else { return Err(unknown()) };
        let via = self.via(&c, None);
        let takes_tasks = context.client_capabilities().is_some_and(|caps| caps.supports_tasks());
        let mut when = as_task(callables.task_support(&request.name), takes_tasks)?;
        if takes_tasks && callables.needs_approval(&request.name) {
            // It may wait hours for a person: a task, which no client's timeout ends.
            when = AsTask::Now;
        }
        if !matches!(when, AsTask::No) {
            let call = TaskCall {
                toolshed: self.toolshed.clone(),
                callables: Arc::new(callables),
                name: request.name.to_string(),
                input,
                via,
                capabilities: asking.capabilities.clone(),
                cancel: Default::default(),
                user: c.user.id,
            };
            return self.call_as_task(&c, &context, asking, call, when).await;
        }
        self.answer(&context, asking, &request.name, origin, |live| callables.call(&request.name, input.clone(), via, live)).await
    }
}

impl ListingHandler {
    /// How a call of `c` is recorded in usage (through `bundle`, if any).
    fn via(&self, c: &Caller, bundle: Option<ToolId>) -> Via<'static> {
        Via { transport: self.transport.usage_name(), token_id: c.token.as_ref().map(|t| t.id), bundle_id: bundle }
    }

    /// The caller of a request for a listing's prompts or resources (the
    /// personal endpoint serves none).
    fn listing_caller(&self, context: &RequestContext<RoleServer>) -> Result<(Caller, Box<Tool>), McpError> {
        let c = self.caller(&context.extensions)?;
        match &c.served {
            Served::Listing(listing) => {
                let listing = listing.clone();
                Ok((c, listing))
            }
            Served::Catalog => Err(McpError::invalid_params("The personal endpoint serves tools only.", None)),
        }
    }

    /// Keeps the session's subscriptions with it, for any replica that resumes it.
    async fn store_subscriptions(&self, context: &RequestContext<RoleServer>, uris: &[String]) -> Result<(), McpError> {
        let Some(id) = session_id(context) else { return Ok(()) };
        let stored = self.toolshed.mcp_sessions().set_mcp_session_subscriptions(&id, uris).await;
        stored.map_err(|e| McpError::internal_error(e.to_string(), None))
    }

    /// Everything the request's endpoint serves its caller (nothing but tools on the personal endpoint).
    async fn served_defs(&self, context: &RequestContext<RoleServer>) -> Result<Vec<ServedDef>, McpError> {
        let c = self.caller(&context.extensions)?;
        match &c.served {
            Served::Listing(listing) => self.toolshed.bundles().served_defs(&c.user, listing).await.map_err(internal),
            Served::Catalog => Ok(Vec::new()),
        }
    }

    /// Runs the prompt or resource `name` of `listing` with `input`, as
    /// [`ListingHandler::answer`] runs a call (it may ask its person first).
    async fn render(
        &self,
        c: &Caller,
        callables: &Callables,
        context: &RequestContext<RoleServer>,
        round: Round<'_>,
        name: &str,
        input: serde_json::Value,
    ) -> Result<CallToolResponse, McpError> {
        let asking = Asking::of(&self.toolshed, self.transport, c, context, round)?;
        let origin = callables.origin(name).unwrap_or_else(|| callables.listing().slug());
        let via = self.via(c, None);
        // Arguments the tool refuses are the client's to fix: invalid params, which a prompt's caller expects.
        let refused = Mutex::new(None);
        let response = self
            .answer(context, asking, name, origin, |live| async {
                let answer = callables.render(name, input.clone(), via, live).await;
                if let Err(ToolError::BadArguments(m)) = &answer {
                    *refused.lock().expect("refused lock") = Some(m.clone());
                }
                answer
            })
            .await?;
        match refused.into_inner().expect("refused lock") {
            Some(message) => Err(McpError::invalid_params(message, None)),
            None => Ok(response),
        }
    }

    /// Runs the call of `name` (`call` is handed where to send its console
    /// lines and progress, when the client wants them, as from `origin`, and
    /// what the tool may ask) and answers its result; a tool that asks takes
    /// as many rounds as its client's revision allows in one request (see
    /// [`super::asking`]).
    async fn answer<F, Fut>(
        &self,
        context: &RequestContext<RoleServer>,
        mut asking: Asking,
        name: &str,
        origin: String,
        call: F,
    ) -> Result<CallToolResponse, McpError>
    where
        F: Fn(Live) -> Fut,
        Fut: std::future::Future<Output = Result<Answer, ToolError>>,
    {
        let level = match context.protocol_version() {
            // MCP 2026-07-28: each request says the level it wants, if any.
            Some(v) if !v.has_initialize() => context.meta.log_level(),
            // A stateless request cannot carry a `logging/setLevel` from an earlier
            // one: console output then arrives from `info` up, on the request's stream.
            _ if self.transport == Transport::Stateless => Some(LoggingLevel::Info),
            _ => *self.session.log_level.lock().expect("log level lock"),
        };
        let progress = context.meta.get_progress_token();
        loop {
            if let Some(withdrawn) = asking.withdrawn(&self.toolshed).await? {
                return Ok(withdrawn);
            }
            let (events, forwarder) = if level.is_some() || progress.is_some() {
                let (tx, rx) = mpsc::unbounded_channel();
                (Some(tx), Some(tokio::spawn(forward_run_events(rx, context.peer.clone(), level, progress.clone(), origin.clone()))))
            } else {
                (None, None)
            };
            let live = Live {
                events,
                input: asking.input.clone(),
                capabilities: asking.capabilities.clone(),
                task: None,
                approval: asking.approval.clone(),
            };
            let answer = call(live).await;
            if let Some(forwarder) = forwarder {
                // Log lines and progress go out before the result they belong to.
                let _ = tokio::time::timeout(Duration::from_secs(2), forwarder).await;
            }
            if let Some(response) = self.next(context, &mut asking, step(name, answer)?).await? {
                return Ok(response);
            }
        }
    }

    /// After one run: the response to answer with, or `None` to run the
    /// call again (a session's client answered its questions). A call held
    /// for approval asks its person to wait where the client can ask them.
    async fn next(
        &self,
        context: &RequestContext<RoleServer>,
        asking: &mut Asking,
        step: Step,
    ) -> Result<Option<CallToolResponse>, McpError> {
        let requests = match step {
            Step::Done(result) => return Ok(Some(result.into())),
            Step::Asks { requests, approval } => {
                asking.approval = approval;
                requests
            }
            Step::Held { approval, message } => match asking.waits_on(approval, &message) {
                Some(question) => question,
                None => return Ok(Some(CallToolResult::error(vec![ContentBlock::text(message)]).into())),
            },
            Step::Connect(missing) => {
                if asking.waited_for_connection(&self.toolshed, &missing.app, &context.ct).await {
                    return Ok(None);
                }
                match asking.connect_at(&missing) {
                    Some(question) => question,
                    None => return Ok(Some(CallToolResult::error(vec![ContentBlock::text(missing.to_string())]).into())),
                }
            }
        };
        asking.next_round(&self.toolshed, &context.peer, requests).await
    }

    /// A call that is (or may become) a task: an `optional` tool's runs go on
    /// in the request until one takes [`ESCALATE_AFTER`], asking as any call
    /// would; then (or at once, for a `required` tool) the call becomes a task.
    async fn call_as_task(
        &self,
        c: &Caller,
        context: &RequestContext<RoleServer>,
        mut asking: Asking,
        call: TaskCall,
        when: AsTask,
    ) -> Result<CallToolResponse, McpError> {
        // A call that fails or is cancelled before it is a task stops its run.
        let stop_unless_task = call.cancel.clone().drop_guard();
        loop {
            let mut run = call.round(asking.input.clone(), asking.approval.clone());
            if let AsTask::Later = when {
                tokio::select! {
                    done = run.finished() => {
                        let answer = done.map_err(|e| McpError::internal_error(format!("the run stopped: {e}"), None))?;
                        match step(&call.name, answer)? {
                            // Held: the task waits for the decision (the department began to require approval).
                            Step::Held { .. } => run = call.round(asking.input.clone(), None),
                            step => match self.next(context, &mut asking, step).await? {
                                Some(response) => return Ok(response),
                                None => continue,
                            },
                        }
                    }
                    () = tokio::time::sleep(ESCALATE_AFTER) => {}
                    // rmcp does not drop a cancelled request's handler: it cancels this.
                    () = context.ct.cancelled() => return Err(McpError::invalid_request("The client cancelled the call.", None)),
                }
            }
            if context.ct.is_cancelled() {
                return Err(McpError::invalid_request("The client cancelled the call.", None));
            }
            stop_unless_task.disarm();
            return call.become_task(c.served.listing_id(), &c.user, run, (asking.input, asking.round)).await;
        }
    }

    /// Code mode's `run_code` answer: the console output and returned value
    /// as text, or the error as an `isError` result.
    fn code_result(&self, outcome: Result<RunOutcome, ToolError>) -> Result<CallToolResponse, McpError> {
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => return Ok(refused(e)?.into()),
        };
        if let Err(e @ RunError::Internal { .. }) = &outcome.result {
            return Err(McpError::internal_error(e.to_string(), None));
        }
        let result = match transcript(&outcome) {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        };
        Ok(result.into())
    }

    /// A call on the personal endpoint: one of the four catalog tools, or a favourite by its listed name.
    async fn call_catalog(
        &self,
        c: &Caller,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let catalog = self.toolshed.catalog(&c.user, c.token.as_ref());
        let asking = Asking::of(&self.toolshed, self.transport, c, &context, (&request).into())?;
        let arguments = request.arguments.unwrap_or_default();
        let via = self.via(c, None);
        let result = match request.name.as_ref() {
            SEARCH_TOOLS => match CatalogSearch::parse(&arguments) {
                Ok(q) => match catalog.search(&q).await {
                    Ok(hits) => value_result(ToolValue::Json(serde_json::json!({ "tools": hits }))),
                    Err(e) => readable(e)?,
                },
                Err(invalid) => readable(ToolError::Invalid(invalid))?,
            },
            DESCRIBE_TOOL => match string_argument(&arguments, "name") {
                Ok(name) => match catalog.describe(&name).await {
                    Ok(described) => value_result(ToolValue::Json(described)),
                    Err(e) => readable(e)?,
                },
                Err(e) => readable(e)?,
            },
            CALL_TOOL => {
                let name = match string_argument(&arguments, "name") {
                    Ok(name) => name,
                    Err(e) => return Ok(readable(e)?.into()),
                };
                let input = match arguments.get("arguments") {
                    None | Some(serde_json::Value::Null) => serde_json::Value::Object(Default::default()),
                    Some(v @ serde_json::Value::Object(_)) => v.clone(),
                    Some(_) => return Ok(readable(ToolError::BadArguments("`arguments` must be an object".into()))?.into()),
                };
                match catalog.tool(&name).await {
                    Ok(tool) => {
                        return self
                            .answer(&context, asking, &name, tool.slug(), |live| catalog.call(&name, input.clone(), via, live))
                            .await
                    }
                    Err(e) => readable(e)?,
                }
            }
            RUN_CODE => {
                let outcome = match string_argument(&arguments, "code") {
                    Ok(code) => catalog.run_code(code, via).await,
                    Err(e) => Err(e),
                };
                return self.code_result(outcome);
            }
            // Favourites by their listed names; anything else is not listed, so not served.
            name if !name.contains('/') => match catalog.tool(name).await {
                Ok(tool) => {
                    let input = serde_json::Value::Object(arguments);
                    return self.answer(&context, asking, name, tool.slug(), |live| catalog.call(name, input.clone(), via, live)).await;
                }
                Err(ToolError::UnknownTool(_)) => return Err(McpError::invalid_params(format!("Unknown tool: {name}"), None)),
                Err(e) => refused(e)?,
            },
            name => return Err(McpError::invalid_params(format!("Unknown tool: {name}"), None)),
        };
        Ok(result.into())
    }
}

/// Where a call stands after one run.
pub(super) enum Step {
    /// It ended with this result.
    Done(CallToolResult),
    /// It stopped to ask these questions, by key; its further rounds run
    /// under the approval it ran under, if any.
    Asks { requests: serde_json::Map<String, serde_json::Value>, approval: Option<String> },
    /// It waits for approval request `approval` (`message` says so) and did not run.
    Held { approval: String, message: String },
    /// It acts as its caller at an app they have not connected, and did not run.
    Connect(NotConnected),
}

/// What one run of a call of `name` comes to; a failure of the server's own
/// (not the tool's) is a protocol error.
pub(super) fn step(name: &str, answer: Result<Answer, ToolError>) -> Result<Step, McpError> {
    Ok(match answer {
        Ok(Answer::External(result)) => Step::Done(external_result(name, result)),
        Ok(Answer::Ran(r)) => match r.outcome.result {
            Ok(value) => Step::Done(value_result(value)),
            Err(e @ RunError::Internal { .. }) => return Err(McpError::internal_error(e.to_string(), None)),
            Err(RunError::NeedsInput { requests }) => Step::Asks { requests, approval: r.approval },
            Err(e) => Step::Done(CallToolResult::error(vec![ContentBlock::text(e.to_string())])),
        },
        Err(ToolError::Held(Held::Waiting { id, department })) => {
            let message = Held::Waiting { id: id.clone(), department }.to_string();
            Step::Held { approval: id, message }
        }
        Err(ToolError::NotConnected(missing)) => Step::Connect(missing),
        Err(e) => Step::Done(refused(e)?),
    })
}

/// A tool's value as MCP carries it: text, JSON as text and as
/// `structuredContent`, content blocks as they are (the sandbox checked them).
fn value_result(value: ToolValue) -> CallToolResult {
    match value {
        ToolValue::Text(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        // MCP's structured content is an object: the SDKs reject an array or a
        // number there (the whole result with it), so those travel as text only.
        ToolValue::Json(value) => {
            let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
            result.structured_content = value.is_object().then_some(value);
            result
        }
        ToolValue::Content(blocks) => match serde_json::from_value::<Vec<ContentBlock>>(serde_json::Value::Array(blocks)) {
            Ok(blocks) => CallToolResult::success(blocks),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!("The tool's content is not valid MCP content: {e}"))]),
        },
    }
}

/// What the catalog's own tools answer when they cannot: a result the model
/// reads and acts on (search again, fix the name), not a protocol error.
fn readable(e: ToolError) -> Result<CallToolResult, McpError> {
    match e {
        ToolError::Invalid(_) | ToolError::UnknownTool(_) | ToolError::Disabled | ToolError::NotPublished | ToolError::BadArguments(_) => {
            Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]))
        }
        e => refused(e),
    }
}

/// A required string argument of `run_code` or a catalog tool; its absence
/// is the model's to fix, so an error it can read.
fn string_argument(arguments: &serde_json::Map<String, serde_json::Value>, key: &str) -> Result<String, ToolError> {
    match arguments.get(key) {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        _ if key == "code" => Err(ToolError::BadArguments("Invalid arguments: `code` must be a string of JavaScript".into())),
        _ => Err(ToolError::BadArguments(format!("Invalid arguments: `{key}` must be a string"))),
    }
}

/// A call that ran no code: bad arguments, a busy sandbox and a caller over
/// their share are results the model can read; anything else is a protocol error.
fn refused(e: ToolError) -> Result<CallToolResult, McpError> {
    match e {
        // Bad arguments are the model's to fix: a tool error it can read, not a protocol error.
        ToolError::BadArguments(m) => Ok(CallToolResult::error(vec![ContentBlock::text(m)])),
        // Declined, expired, withdrawn: the caller reads why it did not run.
        ToolError::Held(held) => Ok(CallToolResult::error(vec![ContentBlock::text(held.to_string())])),
        // Not connected at an app it acts at: the text is the link and what to do.
        ToolError::Busy | ToolError::TooManyCalls | ToolError::NotConnected(_) | ToolError::Conflict(_) => {
            Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]))
        }
        ToolError::NotFound | ToolError::NotPublished => Err(McpError::resource_not_found("No such listing.", None)),
        ToolError::UnknownTool(name) => Err(McpError::invalid_params(format!("Unknown tool: {name}"), None)),
        e => Err(McpError::internal_error(e.to_string(), None)),
    }
}
