//! Chat endpoints for the playground: any OpenAI-compatible chat-completions
//! API. The key is write-only: the page shows whether one is set, never it.

use leptos::prelude::*;

use crate::api::{admin_chat_endpoints, ChatEndpointView, CreateChatEndpoint, DeleteChatEndpoint, UpdateChatEndpoint};

#[component]
pub fn ChatEndpointsCard() -> impl IntoView {
    let create = ServerAction::<CreateChatEndpoint>::new();
    let update = ServerAction::<UpdateChatEndpoint>::new();
    let delete = ServerAction::<DeleteChatEndpoint>::new();
    let list = Resource::new(move || (create.version().get(), update.version().get(), delete.version().get()), |_| admin_chat_endpoints());
    let error = move || {
        super::first_error([
            create.value().get().and_then(Result::err),
            update.value().get().and_then(Result::err),
            delete.value().get().and_then(Result::err),
        ])
    };
    let saved = move || matches!(update.value().get(), Some(Ok(()))).then(|| view! { <p class="alert ok">"Endpoint saved."</p> });
    // Once added, the form is emptied: the key typed into it should not linger in the page.
    let create_form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if let (Some(Ok(())), Some(form)) = (create.value().get(), create_form.get()) {
            form.reset();
        }
    });
    view! {
        <section class="card chat-endpoints" id="chat-endpoints">
            <h2>"Chat endpoints"</h2>
            <p class="muted small">
                "Models the Playground can talk to: any OpenAI-compatible chat-completions API (DeepSeek "
                <code>"https://api.deepseek.com/v1"</code>", Ollama " <code>"http://localhost:11434/v1"</code>
                ", vLLM, Qwen, …). Keys are stored encrypted and never shown again."
            </p>
            {error}
            {saved}
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let rows = list.await.unwrap_or_default();
                    if rows.is_empty() {
                        view! { <p class="muted">"No endpoint yet."</p> }.into_any()
                    } else {
                        rows.into_iter().map(|e| view! { <EndpointRow endpoint=e update delete /> }).collect_view().into_any()
                    }
                })}
            </Transition>
            <h3>"Add an endpoint"</h3>
            <ActionForm action=create node_ref=create_form attr:class="endpoint-form create-endpoint">
                <EndpointFields name=String::new() base_url=String::new() model=String::new() timeout_secs=60 key_placeholder="none (e.g. a local Ollama)" />
                <button type="submit" class="button secondary small">"Add endpoint"</button>
            </ActionForm>
        </section>
    }
}

/// The fields both forms share.
#[component]
fn EndpointFields(name: String, base_url: String, model: String, timeout_secs: i64, key_placeholder: &'static str) -> impl IntoView {
    view! {
        <div class="endpoint-fields">
            <label>"Name" <input name="name" value=name required maxlength="60" placeholder="DeepSeek" /></label>
            <label>"Base URL" <input name="base_url" value=base_url required type="url" placeholder="https://api.deepseek.com/v1" /></label>
            <label>"Model" <input name="model" value=model required maxlength="200" placeholder="deepseek-chat" /></label>
            <label>"API key" <input name="api_key" type="password" autocomplete="off" placeholder=key_placeholder /></label>
            <label>"Timeout (s)" <input name="timeout_secs" type="number" min="1" max="600" value=timeout_secs /></label>
        </div>
    }
}

#[component]
fn EndpointRow(
    endpoint: ChatEndpointView,
    update: ServerAction<UpdateChatEndpoint>,
    delete: ServerAction<DeleteChatEndpoint>,
) -> impl IntoView {
    let key_state = if endpoint.has_key { "set" } else { "not set" };
    let placeholder = if endpoint.has_key { "set (leave blank to keep)" } else { "not set" };
    let ChatEndpointView { id, name, base_url, model, has_key, timeout_secs } = endpoint;
    let label = name.clone();
    view! {
        <div class="endpoint" data-endpoint=label>
            <ActionForm action=update attr:class="endpoint-form">
                <input type="hidden" name="id" value=id />
                <EndpointFields name base_url model timeout_secs key_placeholder=placeholder />
                <div class="row endpoint-actions">
                    <span class="muted small">"Key: " <strong class="key-state">{key_state}</strong></span>
                    {has_key.then(|| view! { <label class="inline"><input type="checkbox" name="clear_key" value="on" />" remove the key"</label> })}
                    <button type="submit" class="button secondary small">"Save"</button>
                </div>
            </ActionForm>
            <ActionForm action=delete attr:class="inline-form">
                <input type="hidden" name="id" value=id />
                <button type="submit" class="link-button danger">"Delete"</button>
            </ActionForm>
        </div>
    }
}
