//! The listing page's API card: the code-mode TypeScript API and the OpenAI
//! function-calling definitions generated from the listing's schemas, ready to
//! copy, and what each form costs a model in tokens.

use leptos::prelude::*;

use super::mcp_debugger::copy_to_clipboard;
use crate::api::ListingApiView;

/// "62% fewer" / "15% more": code mode's `run_code` against the plain tool list.
fn saving(tools_list: usize, code_mode: usize) -> String {
    if tools_list == 0 {
        return String::new();
    }
    let change = (code_mode as f64 - tools_list as f64) / tools_list as f64 * 100.0;
    if change <= 0.0 {
        format!("{:.0}% fewer tokens in code mode", -change)
    } else {
        format!("{change:.0}% more tokens in code mode")
    }
}

#[component]
pub fn ApiCard(api: ListingApiView) -> impl IntoView {
    let tab = RwSignal::new("typescript");
    let copied = RwSignal::new(false);
    let typescript = StoredValue::new(api.typescript);
    let openai = StoredValue::new(api.openai);
    let shown = move || if tab.get() == "openai" { openai.get_value() } else { typescript.get_value() };
    let show = move |t: &'static str| {
        move |_| {
            tab.set(t);
            copied.set(false);
        }
    };
    let copy = move |_| {
        copy_to_clipboard(&shown());
        copied.set(true);
    };
    view! {
        <details class="card api-card">
            <summary><h2>"API for code mode and function calling"</h2></summary>
            <div class="token-cost">
                <div class="stat" data-form="tools-list">
                    <strong>{api.tools_list_tokens}</strong>
                    <span class="muted small">"tokens: MCP tools/list JSON"</span>
                </div>
                <div class="stat" data-form="code-mode">
                    <strong>{api.code_mode_tokens}</strong>
                    <span class="muted small">"tokens: code mode (tools/list with run_code)"</span>
                </div>
                <p class="muted small">{saving(api.tools_list_tokens, api.code_mode_tokens)} " · counted with o200k_base"</p>
            </div>
            <div class="run-tabs">
                <button type="button" class:active=move || tab.get() == "typescript" on:click=show("typescript")>"TypeScript API"</button>
                <button type="button" class:active=move || tab.get() == "openai" on:click=show("openai")>"OpenAI functions"</button>
                <button type="button" class="button secondary copy-button api-copy" on:click=copy>
                    {move || if copied.get() { "Copied" } else { "Copy" }}
                </button>
            </div>
            <noscript><p class="muted small">"Copy and the tabs need JavaScript: select the text to copy it."</p></noscript>
            <pre class="mono snippet api-code" tabindex="0">{shown}</pre>
            <p class="muted small">"The TypeScript API is also served at " <code>{api.typescript_url}</code> " (same token as the MCP endpoint)."</p>
        </details>
    }
}
