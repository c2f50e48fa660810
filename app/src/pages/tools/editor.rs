//! The authoring page: code editor, visual argument editor with a live JSON
//! Schema preview, draft autosave, versions (save, publish, roll back, diff),
//! the Run panel on the unsaved draft, test cases and settings.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use super::args_editor::ArgsEditor;
use super::autosave::{autosave, SaveState, SaveStateBadge};
use super::run_panel::RunPanel;
use super::test_cases::TestCasesCards;
use super::versions::SaveCard;
use crate::api::{
    editor_data, env_vars, DeleteEnvVar, EditorState, EnvKindView, EnvVarView, RowsFromSchema, RunTarget, SchemaPreview, SetEnvVar,
    SetToolAccounts, ToolInfo, UpdateToolSettings,
};
use crate::args::{to_defs, to_rows, ArgDef, Row};
use crate::components::RequireUser;

#[component]
pub fn ToolEditor() -> impl IntoView {
    let params = use_params_map();
    let data = Resource::new(
        move || (params.read().get("department").unwrap_or_default(), params.read().get("name").unwrap_or_default()),
        |(d, n)| editor_data(d, n),
    );
    load_code_editor();
    view! {
        <Title text="Editor" />
        <RequireUser>
            <Suspense fallback=|| view! { <p class="muted">"Loading the editor…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Ok(data) => view! { <Editor data /> }.into_any(),
                        Err(_) => view! { <crate::pages::NotFound /> }.into_any(),
                    }
                })}
            </Suspense>
        </RequireUser>
    }
}

/// CodeMirror (`/pkg/editor.js`) mounts itself on the page's code textarea once
/// the page is live, so it is added then, once per document. Not a leptos_meta
/// `<Script>`: since this page became a lazy route (hydrated once its chunks
/// have loaded), hydrating that head tag panicked on every load.
fn load_code_editor() {
    Effect::new(|_| {
        let document = document();
        let Some(head) = document.head() else { return };
        if document.query_selector(r#"script[src="/pkg/editor.js"]"#).ok().flatten().is_some() {
            return;
        }
        if let Ok(script) = document.create_element("script") {
            let _ = script.set_attribute("type", "module");
            let _ = script.set_attribute("src", "/pkg/editor.js");
            let _ = head.append_child(&script);
        }
    });
}

/// The editor of one tool or bundle: its cards share the draft (`code`,
/// `rows`), which autosaves; the Run panel and the test cases run it unsaved.
#[component]
fn Editor(data: EditorState) -> impl IntoView {
    let EditorState { tool, draft, test_cases, env } = data;
    let id = tool.id;
    if !tool.can_edit {
        return view! { <p class="alert error">"You may not edit this tool."</p> }.into_any();
    }
    let tool = RwSignal::new(tool);
    let code = RwSignal::new(draft.code.clone());
    let rows = RwSignal::new(to_rows(&draft.args));
    // Bumped when a saved version replaces the draft, so the code editor reloads.
    let revision = RwSignal::new(0u64);
    let error_line = RwSignal::new(None::<u32>);
    let defs = Memo::new(move |_| to_defs(&rows.get()));
    let save_state = autosave(id, code, defs, draft.autosaved_at);
    let run_input = RwSignal::new("{}".to_owned());
    let draft_target = Callback::new(move |_| RunTarget::Draft { code: code.get_untracked(), args: defs.get_untracked() });
    let on_result = Callback::new(move |run: crate::api::RunView| {
        error_line.set(run.error.and_then(|e| e.line));
    });
    let on_saved = Callback::new(move |_| save_state.set(SaveState::Saved(None)));
    let on_loaded = Callback::new(move |v: crate::api::DraftView| {
        code.set(v.code);
        rows.set(to_rows(&v.args));
        revision.update(|r| *r += 1);
    });
    view! {
        <div class="page-head">
            <div>
                <h1>{move || tool.with(|t| t.title.clone())}</h1>
                <p class="muted">
                    <code>{move || tool.with(|t| format!("{}/{}", t.department, t.name))}</code>
                    {move || tool.with(|t| match t.published_version {
                        Some(v) => format!(" · v{v} published"),
                        None => " · not published".to_owned(),
                    })}
                    {move || tool.with(|t| t.moderation.pending_version.map(|v| format!(" · v{v} waiting for review")))}
                </p>
                {move || tool.with(|t| view! { <super::listing::ModerationNotice tool=t.clone() /> })}
            </div>
            <div class="head-actions">
                <SaveStateBadge state=save_state />
                <a class="button secondary small" href=move || tool.with(|t| format!("/tools/{}/{}", t.department, t.name))>"View listing"</a>
            </div>
        </div>

        <div class="editor-layout">
            <div class="editor-main">
                <section class="card">
                    <h2>"Code"</h2>
                    <p class="muted small">"The body of an async function. Arguments are globals (" <code>"$name"</code> ") and " <code>"args"</code> "; also " <code>"console"</code> ", " <code>"$fetch"</code> ", " <code>"$json2MarkdownTable"</code> ", " <code>"$env"</code> ", " <code>"$context"</code> "."</p>
                    <textarea id="code" class="code-input mono" data-code-editor="js" rows="18" spellcheck="false" aria-label="Code"
                        prop:value=move || code.get()
                        data-revision=move || revision.get().to_string()
                        data-error-line=move || error_line.get().map(|l| l.to_string()).unwrap_or_default()
                        on:input=move |ev| code.set(event_target_value(&ev))>
                        // Also as text: the server-rendered page (and the editor mounting
                        // on it before hydration finishes) starts from the draft.
                        {code.get_untracked()}
                    </textarea>
                </section>
                <ArgumentsCard rows defs />
                <SaveCard tool code defs on_saved on_loaded />
                <SettingsCard tool />
                <EnvCard tool=id vars=env />
            </div>

            <aside class="editor-side">
                <section class="card">
                    <h2>"Run the draft"</h2>
                    <RunPanel tool=id args=Signal::derive(move || defs.get()) target=draft_target on_result input=run_input />
                </section>
                <TestCasesCards tool=id cases=test_cases run_input draft=draft_target />
            </aside>
        </div>
    }
    .into_any()
}

/// The visual argument editor, the JSON Schema it makes, and a pasted schema
/// turned into rows.
#[component]
fn ArgumentsCard(rows: RwSignal<Vec<Row>>, defs: Memo<Vec<ArgDef>>) -> impl IntoView {
    let preview = ServerAction::<SchemaPreview>::new();
    Effect::new(move |_| {
        preview.dispatch(SchemaPreview { args: defs.get() });
    });
    let pasted = RwSignal::new(String::new());
    let load_rows = ServerAction::<RowsFromSchema>::new();
    Effect::new(move |_| {
        if let Some(Ok(args)) = load_rows.value().get() {
            rows.set(to_rows(&args));
        }
    });
    view! {
        <section class="card">
            <h2>"Arguments"</h2>
            <ArgsEditor rows />
            <details class="schema-preview">
                <summary>"JSON Schema (what MCP clients see)"</summary>
                {move || match preview.value().get() {
                    Some(Ok(schema)) => view! { <pre class="mono" tabindex="0">{schema}</pre> }.into_any(),
                    Some(Err(e)) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                    None => view! { <p class="muted">"…"</p> }.into_any(),
                }}
                <label>
                    "Paste a JSON Schema to load it into the rows"
                    <textarea class="mono" rows="5" prop:value=move || pasted.get() on:input=move |ev| pasted.set(event_target_value(&ev))></textarea>
                </label>
                <button type="button" class="button secondary small" on:click=move |_| { load_rows.dispatch(RowsFromSchema { schema: pasted.get_untracked() }); }>
                    "Load into rows"
                </button>
                {move || load_rows.value().get().and_then(Result::err).map(|e| view! { <p class="alert error">{e.to_string()}</p> })}
            </details>
        </section>
    }
}

/// Title, description, tags, visibility; for tools also hints, the $fetch
/// allow-list and limits.
#[component]
pub fn SettingsCard(tool: RwSignal<ToolInfo>) -> impl IntoView {
    let update = ServerAction::<UpdateToolSettings>::new();
    Effect::new(move |_| {
        if let Some(Ok(fresh)) = update.value().get() {
            tool.set(fresh);
        }
    });
    let t = tool.get_untracked();
    // A text waiting for review is what the author is working on: the form
    // shows it, and sending it again keeps it waiting.
    let (title, description) = t.moderation.pending_text.clone().unwrap_or_else(|| (t.title.clone(), t.description.clone()));
    let is_tool = t.kind != "bundle";
    view! {
        <section class="card">
            <h2>"Settings"</h2>
            <ActionForm action=update attr:class="stack">
                <input type="hidden" name="tool" value=t.id />
                <label>"Title" <input name="title" value=title required maxlength="120" /></label>
                <label>"Description (Markdown; models read it)"
                    <textarea name="description" rows="5" maxlength="20000">{description}</textarea>
                </label>
                <div class="row">
                    <label>"Tags" <input name="tags" value=t.tags.join(", ") /></label>
                    <label>"Visible to"
                        <select name="visibility">
                            <option value="everyone" selected=t.visibility == "everyone">"Everyone"</option>
                            <option value="department" selected=t.visibility == "department">"My department"</option>
                            <option value="private" selected=t.visibility == "private">"Only me"</option>
                        </select>
                    </label>
                </div>
                {if t.kind == "bundle" {
                    // A bundle has no code of its own: its limits bound run_code in code mode.
                    view! {
                        <LimitInputs timeout_ms=t.timeout_ms memory_mib=t.memory_mib what="run_code (code mode): " />
                        <input type="hidden" name="fetch_allow" value=t.fetch_allow.join("\n") />
                        <input type="hidden" name="task_support" value="forbidden" />
                        <input type="hidden" name="serves" value="tool" />
                    }.into_any()
                } else {
                    view! {
                        <ServedAs serves=t.serves.clone() uri=t.resource_uri.clone() mime=t.resource_mime.clone() />
                        <LimitInputs timeout_ms=t.timeout_ms memory_mib=t.memory_mib what="" />
                        <label>"Long calls as tasks (clients that take tasks get a task id at once and poll for the result; the time limit may then go up to the administrator's maximum for tasks)"
                            <select name="task_support">
                                <option value="forbidden" selected=t.task_support == "forbidden">"Never: every call answers in its request"</option>
                                <option value="optional" selected=t.task_support == "optional">"When a call runs longer than half a second"</option>
                                <option value="required" selected=t.task_support == "required">"Always (clients that do not take tasks cannot call it)"</option>
                            </select>
                        </label>
                        <label>"Hosts $fetch may reach: one per line, *.example.com allowed; ports 80 and 443 unless you add one (api.example.com:8443). Internal addresses are always refused."
                            <textarea name="fetch_allow" rows="3" class="mono">{t.fetch_allow.join("\n")}</textarea>
                        </label>
                        <div class="row">
                            <label class="inline"><input type="checkbox" name="read_only_hint" value="true" checked=t.read_only_hint /> "Read-only: its $fetch sends only GET and HEAD (enforced)"</label>
                            <label class="inline"><input type="checkbox" name="destructive_hint" value="true" checked=t.destructive_hint /> "Destructive (hint for clients)"</label>
                        </div>
                    }.into_any()
                }}
                <button type="submit" class="button secondary">"Save settings"</button>
                {move || update.value().get().map(|r| match r {
                    Ok(_) => view! { <p class="alert ok">"Settings saved."</p> }.into_any(),
                    Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                })}
            </ActionForm>
        </section>
        {is_tool.then(|| view! { <AccountsCard tool /> })}
    }
}

/// The apps the tool acts as its caller at: `$fetch(url, {account: name})`
/// sends the caller's own token for each, and a caller who has not connected
/// theirs gets a link to connect it.
#[component]
fn AccountsCard(tool: RwSignal<ToolInfo>) -> impl IntoView {
    let set = ServerAction::<SetToolAccounts>::new();
    Effect::new(move |_| {
        if let Some(Ok(accounts)) = set.value().get() {
            tool.update(|t| t.accounts = accounts);
        }
    });
    let t = tool.get_untracked();
    view! {
        <section class="card tool-accounts">
            <h2>"Connected accounts"</h2>
            <p class="muted small">"Apps this tool acts as its caller at. In the code, "
                <code>"await $fetch(url, {account: 'jira'})"</code>
                " sends the caller's own token for the app (only to its hosts, which must also be on the allow-list); "
                "the token never reaches the code. Test runs use your own account."</p>
            <ActionForm action=set attr:class="row">
                <input type="hidden" name="id" value=t.id />
                <label>"App names (registered by an administrator; spaces or commas between)"
                    <input name="accounts" value=t.accounts.join(" ") placeholder="jira github" /></label>
                <button type="submit" class="button secondary">"Save apps"</button>
            </ActionForm>
            {move || set.value().get().map(|r| match r {
                Ok(list) if list.is_empty() => view! { <p class="alert ok">"This tool acts as nobody."</p> }.into_any(),
                Ok(list) => view! { <p class="alert ok">{format!("Acts as its caller at: {}.", list.join(", "))}</p> }.into_any(),
                Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
            })}
        </section>
    }
}

/// The time and memory limit fields of the settings form.
#[component]
fn LimitInputs(timeout_ms: i64, memory_mib: i64, what: &'static str) -> impl IntoView {
    view! {
        <div class="row">
            <label>{format!("{what}Time limit (ms)")} <input name="timeout_ms" type="number" min="100" value=timeout_ms /></label>
            <label>{format!("{what}Memory limit (MiB)")} <input name="memory_mib" type="number" min="1" max="256" value=memory_mib /></label>
        </div>
    }
}

/// `$env`: configuration values of three kinds (`EnvKindView`); secrets can
/// be replaced but never read back, and the card says which ones the code,
/// and so every editor, can still read.
///
/// The first list comes with the editor's data rather than from a resource of
/// its own: a resource created inside the editor's `Suspense` gets its id when
/// that content happens to render on the server, which is not always in the
/// same order, and a client that looks its value up under another id hydrates
/// against the wrong HTML (the editor's one-load-in-three panic).
#[component]
fn EnvCard(tool: i64, vars: Vec<EnvVarView>) -> impl IntoView {
    let set = ServerAction::<SetEnvVar>::new();
    let delete = ServerAction::<DeleteEnvVar>::new();
    let vars = RwSignal::new(vars);
    Effect::new(move |_| {
        if set.version().get() + delete.version().get() > 0 {
            leptos::task::spawn_local(async move {
                if let Ok(list) = env_vars(tool).await {
                    vars.set(list);
                }
            });
        }
    });
    // Once set, the form is emptied: a secret typed into it should not linger in the page.
    let form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if let (Some(Ok(())), Some(form)) = (set.value().get(), form.get()) {
            form.reset();
        }
    });
    view! {
        <section class="card">
            <h2>"Configuration ($env)"</h2>
            <p class="muted small">
                "Values the code reads as " <code>"$env.NAME"</code> ". Secrets are never shown again, but a secret the code can read is one "
                <strong>"anyone who can edit this tool can read"</strong>
                ": they only need to change the code. Only outbound-only secrets stay out of every editor's reach."
            </p>
            <ul class="env-vars">
                {move || vars.get().into_iter().map(|v| {
                    let name = v.name.clone();
                    let shown = match (v.kind, v.value) {
                        (EnvKindView::Plain, Some(value)) => view! { <span class="mono">{value}</span> }.into_any(),
                        (EnvKindView::Plain | EnvKindView::Secret, _) => {
                            view! { <span class="muted">"secret •••••• (the code, so any editor, can read it)"</span> }.into_any()
                        }
                        (EnvKindView::Outbound, _) => view! {
                            <span class="muted">"outbound-only •••••• sent only to " <span class="mono">{v.hosts.join(", ")}</span>
                                " (the code sees " <code>{format!("{{{{secret:{}}}}}", v.name)}</code> ")"</span>
                        }.into_any(),
                    };
                    view! {
                        <li>
                            <code>{v.name.clone()}</code>
                            " = "
                            {shown}
                            <button type="button" class="link-button danger" on:click=move |_| { delete.dispatch(DeleteEnvVar { tool, name: name.clone() }); }>"remove"</button>
                        </li>
                    }
                }).collect_view()}
            </ul>
            <ActionForm action=set node_ref=form attr:class="env-form">
                <input type="hidden" name="tool" value=tool />
                <div class="inline-form">
                    <label>"Name" <input name="name" placeholder="NAME" required maxlength="64" class="mono" /></label>
                    <label>"Value" <input name="value" placeholder="value" maxlength="4096" /></label>
                </div>
                <fieldset class="env-kinds">
                    <legend>"Kind"</legend>
                    <label class="inline"><input type="radio" name="kind" value="plain" checked /> "Plain — editors can read it"</label>
                    <label class="inline"><input type="radio" name="kind" value="secret" />
                        "Secret — hidden in the UI, but the tool's code (so anyone who can edit this tool) can read it"</label>
                    <label class="inline"><input type="radio" name="kind" value="outbound" />
                        "Outbound-only secret — sent only in $fetch headers or query to the hosts you name; the code never sees it"</label>
                </fieldset>
                <label class="env-hosts">"Hosts (outbound-only secrets)"
                    <input name="hosts" class="mono" placeholder="api.example.com, api.example.com:8443" maxlength="2000" />
                    <span class="muted small">"The code writes " <code>"$env.NAME"</code>
                        " where the value goes, in a header value or the URL query; a request to any other host is refused. Changing the hosts means entering the value again."</span>
                </label>
                <button type="submit" class="button secondary small">"Set"</button>
            </ActionForm>
            {move || set.value().get().and_then(Result::err).map(|e| view! { <p class="alert error">{e.to_string()}</p> })}
        </section>
    }
}

/// What the tool is served as on MCP endpoints: a tool, a prompt (its value
/// is the prompt's messages) or a resource at a URI (its value is the contents).
#[component]
fn ServedAs(serves: String, uri: String, mime: String) -> impl IntoView {
    view! {
        <fieldset class="served-as">
            <legend>"Served on MCP as"</legend>
            <div class="row">
                <label>"Kind"
                    <select name="serves">
                        <option value="tool" selected=serves == "tool">"A tool (tools/call)"</option>
                        <option value="prompt" selected=serves == "prompt">"A prompt: returns its messages (prompts/get)"</option>
                        <option value="resource" selected=serves == "resource">"A resource: returns its contents (resources/read)"</option>
                    </select>
                </label>
                <label>"Resource URI; {name} stands for an argument (resources only)"
                    <input name="resource_uri" value=uri class="mono" placeholder="docs://handbook/{section}" maxlength="500" />
                </label>
                <label>"MIME type (resources only)"
                    <input name="resource_mime" value=mime class="mono" placeholder="text/plain" maxlength="100" />
                </label>
            </div>
            <p class="muted">"A prompt returns a string, content blocks ($content([...]), one message each), or { messages: [{ role, content }] }. A resource returns text (of its MIME type), JSON, or $content with images and audio (sent as blobs)."</p>
        </fieldset>
    }
}
