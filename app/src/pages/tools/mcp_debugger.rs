//! The listing page's Connect panel: the endpoint, ready-to-paste client
//! configurations, and a live MCP debugger that speaks JSON-RPC to the real
//! endpoint from the browser (signed in by the session cookie, no token
//! needed) and shows every message both ways.

use leptos::prelude::*;
use serde_json::{json, Value};

use crate::api::{ClientSnippet, MockArguments};
use crate::args::ArgDef;

/// One JSON-RPC message in the debugger's log.
#[derive(Debug, Clone, PartialEq)]
struct Logged {
    outgoing: bool,
    /// The method for requests; HTTP status and what came back for replies.
    note: String,
    body: String,
}

/// How to connect an MCP client: the endpoint and, per client, what to paste
/// (`clients`, made on the server: `api::connect_clients`), following every
/// publish or pinned to the published version (`pinned`: its number and
/// snippets). `tools` are what the endpoint serves (name and arguments), for
/// the debugger to call.
#[component]
pub fn ConnectPanel(
    endpoint: String,
    clients: Vec<ClientSnippet>,
    pinned: Option<(i64, Vec<ClientSnippet>)>,
    tools: Vec<(String, Vec<ArgDef>)>,
    /// The person's own endpoint (`/mcp/me`): headed as such; its tokens are made below it.
    #[prop(optional)]
    personal: bool,
    /// A tool served as a prompt or a resource: `(kind, resource URI)`, for
    /// the debugger to speak `prompts/*` or `resources/*` instead.
    #[prop(optional)]
    serves: Option<(String, String)>,
) -> impl IntoView {
    let first = clients.first().map(|c| c.key.clone()).unwrap_or_default();
    let tab = RwSignal::new(first);
    let copied = RwSignal::new(false);
    let snippet_copied = RwSignal::new(false);
    let use_pinned = RwSignal::new(false);
    let pinned_version = pinned.as_ref().map(|(n, _)| *n);
    let latest = StoredValue::new((endpoint.clone(), clients));
    let pinned = StoredValue::new(pinned.map(|(n, clients)| (format!("{endpoint}@v{n}"), clients)));
    // What the panel shows now: the endpoint and its snippets (a handful: cloning is cheap).
    let shown = move || use_pinned.get().then(|| pinned.get_value()).flatten().unwrap_or_else(|| latest.get_value());
    let shown_endpoint = move || shown().0;
    let sse = format!("{endpoint}/sse");
    let copy = move |_| {
        copy_to_clipboard(&shown_endpoint());
        copied.set(true);
    };
    let current = move || {
        let (_, all) = shown();
        tab.with(|t| all.iter().position(|c| &c.key == t)).and_then(|i| all.get(i).cloned()).or_else(|| all.first().cloned())
    };
    let version_choice = pinned_version.map(|n| {
        let choice = move |pin: bool, label: String| {
            view! {
                <button type="button" role="radio" aria-checked=move || (use_pinned.get() == pin).to_string()
                    class:active=move || use_pinned.get() == pin on:click=move |_| { use_pinned.set(pin); copied.set(false); snippet_copied.set(false); }>{label}</button>
            }
        };
        view! {
            <div class="run-tabs version-choice" role="radiogroup" aria-label="Which version the endpoint serves">
                {choice(false, "Latest".to_owned())}
                {choice(true, format!("Pinned to v{n}"))}
            </div>
            <p class="muted small">{move || if use_pinned.get() {
                format!("This endpoint keeps serving version {n}, whatever is published later.")
            } else {
                "This endpoint serves whatever version is published: clients follow each publish.".to_owned()
            }}</p>
        }
    });
    let client_tabs = latest.with_value(|(_, all)| all.iter().map(|c| (c.key.clone(), c.label.clone())).collect::<Vec<_>>());
    view! {
        <section class="card connect-panel">
            {if personal {
                view! {
                    <h2>"Your MCP endpoint"</h2>
                    <p class="muted">
                        "Every tool you may use, through four tools (search, describe, call, run code): a client needs one "
                        "connection, not one per tool. Tools you star on their pages are listed there directly."
                    </p>
                }.into_any()
            } else {
                view! { <h2>"Connect"</h2> }.into_any()
            }}
            <p class="muted small">
                "An MCP server (Streamable HTTP; legacy SSE at " <code>{sse}</code> "). Clients that support OAuth sign you in "
                "through the browser; for the others, create a token "
                {if personal {
                    view! { "below." }.into_any()
                } else {
                    view! { "on your " <a href="/account">"Account"</a> " page." }.into_any()
                }}
            </p>
            {version_choice}
            <div class="endpoint-row">
                <input class="mono endpoint" readonly prop:value=shown_endpoint value=endpoint.clone() aria-label="MCP endpoint URL" />
                <button type="button" class="button secondary copy-button" on:click=copy>
                    {move || if copied.get() { "Copied" } else { "Copy" }}
                </button>
            </div>
            <div class="run-tabs client-tabs" role="tablist" aria-label="MCP client">
                {client_tabs.into_iter().map(|(key, label)| {
                    let key = StoredValue::new(key);
                    let chosen = move || key.with_value(|k| tab.with(|t| t == k));
                    view! {
                        <button type="button" role="tab" data-client=key.get_value() aria-selected=move || chosen().to_string()
                            class:active=chosen on:click=move |_| { tab.set(key.get_value()); snippet_copied.set(false); }>{label}</button>
                    }
                }).collect_view()}
            </div>
            <p class="muted small client-note">{move || current().map(|c| c.note)}</p>
            <div class="snippet-box">
                <pre class="mono snippet" tabindex="0">{move || current().map(|c| c.snippet)}</pre>
                <button type="button" class="button secondary small copy-snippet" aria-label="Copy this configuration"
                    on:click=move |_| {
                        if let Some(c) = current() {
                            copy_to_clipboard(&c.snippet);
                            snippet_copied.set(true);
                        }
                    }>
                    {move || if snippet_copied.get() { "Copied" } else { "Copy" }}
                </button>
            </div>
            {move || current().and_then(|c| c.link).map(|(label, href)| view! {
                <a class="button secondary small install-link" href=href rel="external">{label}</a>
            })}
            <McpDebugger endpoint=endpoint tools serves=serves.clone().unwrap_or_default() />
        </section>
    }
}

#[cfg(feature = "hydrate")]
pub(super) fn copy_to_clipboard(text: &str) {
    let _ = window().navigator().clipboard().write_text(text);
}

#[cfg(not(feature = "hydrate"))]
pub(super) fn copy_to_clipboard(_text: &str) {}

/// initialize → tools/list → tools/call against the live endpoint, every
/// message shown (for a prompt, prompts/list → prompts/get; for a resource,
/// its list → resources/read at the URI its arguments fill in).
#[component]
fn McpDebugger(endpoint: String, tools: Vec<(String, Vec<ArgDef>)>, serves: (String, String)) -> impl IntoView {
    let speaks = StoredValue::new(Speaks::of(serves));
    let log = RwSignal::new(Vec::<Logged>::new());
    let session = RwSignal::new(None::<String>);
    let connected = RwSignal::new(false);
    let busy = RwSignal::new(false);
    let input = RwSignal::new("{}".to_owned());
    let mock = ServerAction::<MockArguments>::new();
    // The arguments as they were when example ones were asked for: typed over
    // since, they stay (the examples arrive late on a slow connection).
    let before_example = StoredValue::new(String::new());
    Effect::new(move |_| {
        if let Some(Ok(text)) = mock.value().get() {
            if input.with_untracked(|now| *now == before_example.get_value()) {
                input.set(text);
            }
        }
    });
    let next_id = StoredValue::new(1_u64);
    let endpoint = StoredValue::new(endpoint);
    let tools = StoredValue::new(tools);
    let chosen = RwSignal::new(0_usize);
    // Example arguments for the chosen tool, from its argument rows.
    let fill_arguments = move || {
        if let Some((_, args)) = tools.with_value(|t| t.get(chosen.get_untracked()).cloned()) {
            before_example.set_value(input.get_untracked());
            mock.dispatch(MockArguments { args });
        }
    };

    // Sends one message, logs both ways, returns the reply's JSON-RPC messages.
    let exchange = move |method: &'static str, params: Option<Value>, is_request: bool| async move {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        if is_request {
            let id = next_id.get_value();
            next_id.set_value(id + 1);
            msg["id"] = json!(id);
        }
        let body = serde_json::to_string(&msg).unwrap_or_default();
        log.update(|l| l.push(Logged { outgoing: true, note: method.to_owned(), body: pretty(&msg) }));
        match post(&endpoint.get_value(), &body, session.get_untracked()).await {
            Ok(reply) => {
                if let Some(id) = reply.session.clone() {
                    session.set(Some(id));
                }
                let messages = messages_in(&reply.body);
                let http = format!("HTTP {}", reply.status);
                if messages.is_empty() {
                    let note = if reply.body.trim().is_empty() { http.clone() } else { format!("{http} · {}", reply.body.trim()) };
                    log.update(|l| l.push(Logged { outgoing: false, note, body: String::new() }));
                }
                for m in &messages {
                    log.update(|l| l.push(Logged { outgoing: false, note: format!("{http} · {}", kind_of(m)), body: pretty(m) }));
                }
                Ok(messages)
            }
            Err(e) => {
                log.update(|l| l.push(Logged { outgoing: false, note: "network error".into(), body: e.clone() }));
                Err(e)
            }
        }
    };

    let connect = move |_| {
        busy.set(true);
        log.set(Vec::new());
        session.set(None);
        fill_arguments();
        leptos::task::spawn_local(async move {
            let init =
                json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "toolshed-debugger", "version": "1"}});
            if exchange("initialize", Some(init), true).await.is_ok_and(|m| m.iter().any(|m| m.get("result").is_some())) {
                let _ = exchange("notifications/initialized", None, false).await;
                let _ = exchange(speaks.with_value(|s| s.list), None, true).await;
                connected.set(true);
            }
            busy.set(false);
        });
    };
    let call = move |_| {
        let arguments = serde_json::from_str::<Value>(&input.get_untracked()).unwrap_or_else(|_| json!({}));
        let tool = tools.with_value(|t| t.get(chosen.get_untracked()).map(|(n, _)| n.clone())).unwrap_or_default();
        busy.set(true);
        leptos::task::spawn_local(async move {
            let (method, params) = speaks.with_value(|s| (s.run, s.params(tool, arguments)));
            let _ = exchange(method, Some(params), true).await;
            busy.set(false);
        });
    };

    view! {
        <div class="mcp-debugger">
            <h3>"MCP debugger"</h3>
            <p class="muted small">"Talks to the live endpoint as you, and shows every JSON-RPC message."</p>
            <noscript><p class="muted small">"The debugger and the Copy buttons need JavaScript."</p></noscript>
            <div class="debugger-actions">
                <button type="button" class="button secondary debugger-connect" disabled=move || busy.get() on:click=connect>
                    {move || if connected.get() { "Reconnect" } else { "Connect" }}
                </button>
                {move || session.get().map(|s| view! { <span class="muted small mono">"session " {s}</span> })}
            </div>
            <Show when=move || connected.get()>
                {move || (tools.with_value(Vec::len) > 1).then(|| view! {
                    <label class="small">"Tool"
                        <select class="debugger-tool" on:change=move |ev| {
                            chosen.set(event_target_value(&ev).parse().unwrap_or(0));
                            fill_arguments();
                        }>
                            {tools.with_value(|t| t.iter().enumerate().map(|(i, (n, _))| view! { <option value=i>{n.clone()}</option> }).collect_view())}
                        </select>
                    </label>
                })}
                <label class="small">{format!("Arguments for {}", speaks.with_value(|s| s.run))}
                    <textarea class="mono debugger-args" rows="4" prop:value=move || input.get() on:input=move |ev| input.set(event_target_value(&ev))></textarea>
                </label>
                <button type="button" class="button debugger-call" disabled=move || busy.get() on:click=call>{speaks.with_value(|s| s.button)}</button>
            </Show>
            <ol class="debugger-log">
                {move || {
                    let entries = log.get();
                    let newest = entries.len().saturating_sub(2);
                    entries.into_iter().enumerate().map(|(i, m)| view! {
                        <li class:outgoing=m.outgoing class:incoming=!m.outgoing>
                            <details open={i >= newest}>
                                <summary class="direction">{if m.outgoing { "→ " } else { "← " }}{m.note}</summary>
                                <pre class="mono">{m.body}</pre>
                            </details>
                        </li>
                    }).collect_view()
                }}
            </ol>
        </div>
    }
}

/// The methods the debugger speaks to what the endpoint serves.
struct Speaks {
    list: &'static str,
    run: &'static str,
    button: &'static str,
    /// A resource's URI or template (empty for tools and prompts).
    uri: String,
}

impl Speaks {
    fn of((kind, uri): (String, String)) -> Self {
        match kind.as_str() {
            "prompt" => Speaks { list: "prompts/list", run: "prompts/get", button: "Get prompt", uri },
            "resource" if uri.contains('{') => {
                Speaks { list: "resources/templates/list", run: "resources/read", button: "Read resource", uri }
            }
            "resource" => Speaks { list: "resources/list", run: "resources/read", button: "Read resource", uri },
            _ => Speaks { list: "tools/list", run: "tools/call", button: "Call tool", uri },
        }
    }

    /// The request's params: a prompt's arguments travel as strings; a
    /// resource's fill its URI template, percent-encoded.
    fn params(&self, name: String, arguments: Value) -> Value {
        let text = |v: &Value| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string());
        let given = arguments.as_object().cloned().unwrap_or_default();
        match self.run {
            "prompts/get" => {
                let strings: serde_json::Map<String, Value> = given.iter().map(|(k, v)| (k.clone(), Value::String(text(v)))).collect();
                json!({"name": name, "arguments": strings})
            }
            "resources/read" => {
                let uri = given
                    .iter()
                    .fold(self.uri.clone(), |uri, (k, v)| uri.replace(&format!("{{{k}}}"), &crate::api::uri_component(&text(v))));
                json!({"uri": uri})
            }
            _ => json!({"name": name, "arguments": arguments}),
        }
    }
}

/// A reply in a few words: its result, its error, or the notification it is.
fn kind_of(m: &Value) -> String {
    if let Some(e) = m.get("error") {
        format!("error {}: {}", e["code"], e["message"].as_str().unwrap_or_default())
    } else if let Some(method) = m.get("method").and_then(Value::as_str) {
        method.to_owned()
    } else if m.pointer("/result/isError") == Some(&Value::Bool(true)) {
        "result (tool error)".to_owned()
    } else {
        "result".to_owned()
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// The JSON-RPC messages in a reply body: plain JSON, or the `data:` lines of
/// an SSE stream.
fn messages_in(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return vec![v];
    }
    body.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok()).collect()
}

struct Reply {
    status: u16,
    session: Option<String>,
    body: String,
}

#[cfg(feature = "hydrate")]
async fn post(url: &str, body: &str, session: Option<String>) -> Result<Reply, String> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    let js_err = crate::components::js_error;
    let headers = web_sys::Headers::new().map_err(js_err)?;
    headers.set("Content-Type", "application/json").map_err(js_err)?;
    headers.set("Accept", "application/json, text/event-stream").map_err(js_err)?;
    headers.set("MCP-Protocol-Version", "2025-06-18").map_err(js_err)?;
    if let Some(id) = &session {
        headers.set("Mcp-Session-Id", id).map_err(js_err)?;
    }
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_headers(&headers);
    init.set_body(&wasm_bindgen::JsValue::from_str(body));
    let request = web_sys::Request::new_with_str_and_init(url, &init).map_err(js_err)?;
    let response: web_sys::Response = JsFuture::from(window().fetch_with_request(&request)).await.map_err(js_err)?.unchecked_into();
    let text = JsFuture::from(response.text().map_err(js_err)?).await.map_err(js_err)?.as_string().unwrap_or_default();
    let header = |name: &str| response.headers().get(name).ok().flatten();
    Ok(Reply { status: response.status(), session: header("mcp-session-id"), body: text })
}

#[cfg(not(feature = "hydrate"))]
async fn post(_url: &str, _body: &str, _session: Option<String>) -> Result<Reply, String> {
    Err("the debugger runs in the browser".into())
}
