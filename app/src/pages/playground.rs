//! The Playground: chat with a model from a configured endpoint while it calls
//! the tools of a listing you pick. The conversation lives in the page; each
//! turn is posted to `POST /playground/chat` and read as it streams (fetch and
//! a `ReadableStream` reader in the wasm), so text appears as the model writes
//! it and every tool call shows its arguments, console, result and duration.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::{playground_options, ConsoleView, PlaygroundChoices};
use crate::components::{RequireUser, WithConnectLink};
use crate::pages::tools::ConsoleLines;

/// One server-sent event of a turn (the domain's `PlaygroundEvent`).
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ChatEvent {
    Text { delta: String },
    ToolCall { id: String, name: String, arguments: String },
    ToolResult { id: String, ok: bool, output: String, console: Vec<ConsoleView>, duration_ms: u64 },
    Message { message: Value },
    Done,
    Error { message: String },
}

/// What the transcript shows.
#[derive(Debug, Clone)]
enum Entry {
    User(String),
    Assistant(String),
    Tool(ToolEntry),
    Error(String),
}

#[derive(Debug, Clone)]
struct ToolEntry {
    id: String,
    name: String,
    arguments: String,
    /// `None` while it runs.
    outcome: Option<ToolOutcome>,
}

#[derive(Debug, Clone)]
struct ToolOutcome {
    ok: bool,
    output: String,
    console: Vec<ConsoleView>,
    duration_ms: u64,
}

/// The conversation: what is shown, and the messages sent with the next turn.
#[derive(Clone, Copy)]
struct Chat {
    entries: RwSignal<Vec<Entry>>,
    history: RwSignal<Vec<Value>>,
    busy: RwSignal<bool>,
}

impl Chat {
    fn apply(self, event: ChatEvent) {
        match event {
            ChatEvent::Text { delta } => self.entries.update(|e| match e.last_mut() {
                Some(Entry::Assistant(text)) => text.push_str(&delta),
                _ => e.push(Entry::Assistant(delta)),
            }),
            ChatEvent::ToolCall { id, name, arguments } => {
                self.entries.update(|e| e.push(Entry::Tool(ToolEntry { id, name, arguments, outcome: None })))
            }
            ChatEvent::ToolResult { id, ok, output, console, duration_ms } => self.entries.update(|e| {
                if let Some(Entry::Tool(t)) = e.iter_mut().rev().find(|x| matches!(x, Entry::Tool(t) if t.id == id)) {
                    t.outcome = Some(ToolOutcome { ok, output, console, duration_ms });
                }
            }),
            ChatEvent::Message { message } => self.history.update(|h| h.push(message)),
            ChatEvent::Done => {}
            ChatEvent::Error { message } => self.entries.update(|e| e.push(Entry::Error(message))),
        }
    }

    fn send(self, listing: String, endpoint: String, text: String) {
        let Some((kind, slug)) = listing.split_once(':') else { return };
        let Some((department, name)) = slug.split_once('/') else { return };
        let Ok(endpoint) = endpoint.parse::<i64>() else { return };
        self.history.update(|h| h.push(json!({"role": "user", "content": text})));
        self.entries.update(|e| e.push(Entry::User(text)));
        let body = json!({
            "listing": {"kind": kind, "department": department, "name": name},
            "endpoint": endpoint,
            "messages": self.history.get_untracked(),
        })
        .to_string();
        self.busy.set(true);
        leptos::task::spawn_local(async move {
            if let Err(message) = stream_turn(&body, move |event| self.apply(event)).await {
                self.apply(ChatEvent::Error { message });
            }
            self.busy.set(false);
        });
    }
}

#[component]
pub fn Playground() -> impl IntoView {
    view! {
        <Title text="Playground" />
        <RequireUser>
            <div class="page-head">
                <h1>"Playground"</h1>
            </div>
            <p class="muted">"Chat with a model while it calls a tool or bundle's tools. Calls run like MCP calls: validated, sandboxed and counted in usage."</p>
            <PlaygroundBody />
        </RequireUser>
    }
}

#[component]
fn PlaygroundBody() -> impl IntoView {
    let choices = Resource::new(|| (), |_| playground_options());
    view! {
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match choices.await {
                    Ok(c) => view! { <ChatPanel choices=c /> }.into_any(),
                    Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn ChatPanel(choices: PlaygroundChoices) -> impl IntoView {
    let wanted = use_query_map().get_untracked().get("listing").unwrap_or_default();
    let first = choices.listings.iter().map(|l| l.key()).find(|k| *k == wanted).or_else(|| choices.listings.first().map(|l| l.key()));
    let listing = RwSignal::new(first.unwrap_or_default());
    let endpoint = RwSignal::new(choices.endpoints.first().map(|e| e.id.to_string()).unwrap_or_default());
    let input = RwSignal::new(String::new());
    let chat = Chat { entries: RwSignal::new(Vec::new()), history: RwSignal::new(Vec::new()), busy: RwSignal::new(false) };
    let no_endpoints = choices.endpoints.is_empty();
    let submit = move || {
        let text = input.get_untracked().trim().to_owned();
        if text.is_empty() || chat.busy.get_untracked() || endpoint.get_untracked().is_empty() {
            return;
        }
        input.set(String::new());
        chat.send(listing.get_untracked(), endpoint.get_untracked(), text);
    };
    view! {
        <section class="card playground">
            <div class="row playground-pickers">
                <label>"Tool or bundle"
                    <select name="listing" prop:value=move || listing.get() on:change=move |ev| listing.set(event_target_value(&ev))>
                        {choices.listings.iter().map(|l| view! {
                            <option value=l.key()>{format!("{} — {}/{} ({})", l.title, l.department, l.name, l.kind)}</option>
                        }).collect_view()}
                    </select>
                </label>
                <label>"Model"
                    <select name="endpoint" prop:value=move || endpoint.get() on:change=move |ev| endpoint.set(event_target_value(&ev))>
                        {choices.endpoints.iter().map(|e| view! {
                            <option value=e.id.to_string()>{format!("{} · {}", e.name, e.model)}</option>
                        }).collect_view()}
                    </select>
                </label>
                <button type="button" class="button secondary small" disabled=move || chat.busy.get()
                    on:click=move |_| { chat.entries.set(Vec::new()); chat.history.set(Vec::new()); }>
                    "New conversation"
                </button>
            </div>
            {no_endpoints.then(|| view! {
                <p class="alert warn">
                    "No chat endpoint is configured yet. An administrator adds one (an OpenAI-compatible URL, a model and a key) under "
                    <a href="/admin#chat-endpoints">"Admin → Chat endpoints"</a> "."
                </p>
            })}
            <div class="transcript" aria-live="polite">
                <For each=move || chat.entries.get().into_iter().enumerate() key=|(i, e)| (*i, entry_key(e)) let:item>
                    <EntryView entry=item.1 />
                </For>
                {move || chat.busy.get().then(|| view! { <p class="thinking"><span class="spinner"></span>" Waiting for the model…"</p> })}
            </div>
            <form class="chat-input" on:submit=move |ev| { ev.prevent_default(); submit(); }>
                <textarea name="message" rows="3" placeholder="Ask something that needs the tools…" aria-label="Message"
                    prop:value=move || input.get()
                    on:input=move |ev| input.set(event_target_value(&ev))
                    on:keydown=move |ev| if ev.key() == "Enter" && !ev.shift_key() { ev.prevent_default(); submit(); }></textarea>
                <button type="submit" class="button" disabled=move || chat.busy.get() || no_endpoints>
                    {move || if chat.busy.get() { "Working…" } else { "Send" }}
                </button>
            </form>
        </section>
    }
}

/// Changes whenever an entry's rendering must (streamed text, a finished call).
fn entry_key(e: &Entry) -> String {
    match e {
        Entry::User(t) | Entry::Assistant(t) | Entry::Error(t) => format!("{}", t.len()),
        Entry::Tool(t) => format!("{}:{}", t.id, t.outcome.is_some()),
    }
}

#[component]
fn EntryView(entry: Entry) -> impl IntoView {
    match entry {
        Entry::User(text) => view! { <div class="bubble user"><span class="who">"You"</span><p>{text}</p></div> }.into_any(),
        Entry::Assistant(text) => view! { <div class="bubble assistant"><span class="who">"Model"</span><p>{text}</p></div> }.into_any(),
        Entry::Error(text) => view! { <p class="alert error chat-error" role="alert">{text}</p> }.into_any(),
        Entry::Tool(t) => view! { <ToolCallView call=t /> }.into_any(),
    }
}

#[component]
fn ToolCallView(call: ToolEntry) -> impl IntoView {
    let arguments = serde_json::from_str::<Value>(&call.arguments)
        .map(|v| serde_json::to_string_pretty(&v).unwrap_or_default())
        .unwrap_or(call.arguments);
    let (pill, status) = match &call.outcome {
        None => ("pill", "running…".to_owned()),
        Some(o) if o.ok => ("pill good", format!("ok · {} ms", o.duration_ms)),
        Some(o) => ("pill bad", format!("failed · {} ms", o.duration_ms)),
    };
    let (name, label) = (call.name.clone(), call.name);
    view! {
        <div class="tool-call" data-tool=label>
            <div class="tool-call-head">
                <span class="tool-icon">"⚙"</span>
                <code class="tool-name">{name}</code>
                <span class=pill>{status}</span>
            </div>
            <h4>"Arguments"</h4>
            <pre class="result json" tabindex="0">{arguments}</pre>
            {call.outcome.map(|o| view! {
                <h4>"Console"</h4>
                <ConsoleLines console=o.console />
                <h4>{if o.ok { "Result" } else { "Error" }}</h4>
                <pre class=if o.ok { "result tool-output" } else { "result tool-output failed" } tabindex="0">
                    {if o.ok { view! { {o.output} }.into_any() } else { view! { <WithConnectLink text=o.output /> }.into_any() }}
                </pre>
            })}
        </div>
    }
}

/// Posts one turn and hands each event to `on_event` as it arrives.
#[cfg(feature = "hydrate")]
async fn stream_turn(body: &str, mut on_event: impl FnMut(ChatEvent)) -> Result<(), String> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    let js_err = crate::components::js_error;
    let failed = |e: wasm_bindgen::JsValue| format!("Could not reach the server: {}", js_err(e));
    let headers = web_sys::Headers::new().map_err(js_err)?;
    headers.set("Content-Type", "application/json").map_err(js_err)?;
    headers.set("Accept", "text/event-stream").map_err(js_err)?;
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_headers(&headers);
    init.set_body(&wasm_bindgen::JsValue::from_str(body));
    let request = web_sys::Request::new_with_str_and_init("/playground/chat", &init).map_err(js_err)?;
    let response: web_sys::Response = JsFuture::from(window().fetch_with_request(&request)).await.map_err(failed)?.unchecked_into();
    if !response.ok() {
        let text = JsFuture::from(response.text().map_err(js_err)?).await.map_err(failed)?.as_string().unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text).ok().and_then(|v| v["error"].as_str().map(str::to_owned));
        return Err(message.unwrap_or_else(|| format!("The server answered {}.", response.status())));
    }
    let stream = response.body().ok_or("The server's answer has no body.")?;
    let reader: web_sys::ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let chunk = JsFuture::from(reader.read()).await.map_err(failed)?;
        if js_sys::Reflect::get(&chunk, &"done".into()).ok().and_then(|d| d.as_bool()).unwrap_or(true) {
            break;
        }
        let value = js_sys::Reflect::get(&chunk, &"value".into()).map_err(js_err)?;
        pending.extend(js_sys::Uint8Array::new(&value).to_vec());
        // Events end with a blank line; '\n' never occurs inside a UTF-8 sequence.
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = pending.drain(..end + 2).collect();
            for data in String::from_utf8_lossy(&block).lines().filter_map(|l| l.strip_prefix("data:")) {
                if let Ok(event) = serde_json::from_str::<ChatEvent>(data.trim()) {
                    on_event(event);
                }
            }
        }
    }
    Ok(())
}

#[cfg(not(feature = "hydrate"))]
async fn stream_turn(_body: &str, _on_event: impl FnMut(ChatEvent)) -> Result<(), String> {
    Err("The playground needs JavaScript.".into())
}
