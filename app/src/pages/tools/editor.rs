//! The authoring page: code editor, visual argument editor with a live JSON
//! Schema preview, draft autosave, versions (save, publish, roll back, diff),
//! the Run panel on the unsaved draft, test cases and settings.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use super::args_editor::ArgsEditor;
use super::failed_calls::FailedCallsCard;
use super::run_panel::RunPanel;
use super::versions::{TestResultItem, VersionsPanel};
use super::{ago, now_ms};
use crate::api::{
    editor_data, env_vars, DeleteEnvVar, DeleteTestCase, EditorState, EnvKindView, EnvVarView, LoadVersion, Publish, RowsFromSchema,
    RunTarget, RunTestCases, SaveDraft, SaveTestCase, SaveVersion, SchemaPreview, SetEnvVar, TestCases, ToolInfo, UpdateToolSettings,
};
use crate::args::{to_defs, to_rows};
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

#[derive(Clone, Copy, PartialEq)]
enum SaveState {
    Saved(Option<i64>),
    Dirty,
    Saving,
    Failed,
}

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
    let revision = RwSignal::new(0u64);
    let error_line = RwSignal::new(None::<u32>);
    let save_state = RwSignal::new(SaveState::Saved(draft.autosaved_at));
    let defs = Memo::new(move |_| to_defs(&rows.get()));

    // --- Autosave: debounce edits, keep retrying after failures. ---
    let save_draft = ServerAction::<SaveDraft>::new();
    let pending_timer = StoredValue::new(None::<TimeoutHandle>);
    let schedule_save = move || {
        save_state.set(SaveState::Dirty);
        if let Some(h) = pending_timer.get_value() {
            h.clear();
        }
        let handle = set_timeout_with_handle(
            move || {
                save_state.set(SaveState::Saving);
                save_draft.dispatch(SaveDraft { tool: id, code: code.get_untracked(), args: defs.get_untracked() });
            },
            std::time::Duration::from_millis(700),
        )
        .ok();
        pending_timer.set_value(handle);
    };
    // Leaving the page (client-side) within the debounce: save now, not never,
    // and not from a timer that would find this page's signals gone.
    on_cleanup(move || {
        if let Some(h) = pending_timer.try_get_value().flatten() {
            h.clear();
            if let (Some(SaveState::Dirty), Some(code), Some(args)) =
                (save_state.try_get_untracked(), code.try_get_untracked(), defs.try_get_untracked())
            {
                leptos::task::spawn_local(async move {
                    let _ = crate::api::save_draft(id, code, args).await;
                });
            }
        }
    });
    Effect::new(move |first: Option<()>| {
        code.track();
        defs.track();
        if first.is_some() {
            schedule_save();
        }
    });
    Effect::new(move |_| match save_draft.value().get() {
        Some(Ok(at)) if save_state.get_untracked() == SaveState::Saving => save_state.set(SaveState::Saved(Some(at))),
        Some(Err(_)) => {
            save_state.set(SaveState::Failed);
            // A network blip: try again shortly; the text stays in the editor meanwhile.
            set_timeout(
                move || {
                    if save_state.try_get_untracked() == Some(SaveState::Failed) {
                        schedule_save()
                    }
                },
                std::time::Duration::from_secs(3),
            );
        }
        _ => {}
    });
    // Warn before leaving with unsaved text.
    // The listener lives on the window, past this page: remove it with the page, or
    // the next `beforeunload` (a search form on Browse fires one) reads a disposed signal.
    #[cfg(feature = "hydrate")]
    {
        let unload = window_event_listener(leptos::ev::beforeunload, move |ev| {
            if matches!(save_state.try_get_untracked(), Some(SaveState::Dirty | SaveState::Saving | SaveState::Failed)) {
                ev.prevent_default();
            }
        });
        on_cleanup(move || unload.remove());
    }

    // --- Schema preview and pasted schemas. ---
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

    // --- Versions. ---
    let changelog = RwSignal::new(String::new());
    let save_version = ServerAction::<SaveVersion>::new();
    let publish = ServerAction::<Publish>::new();
    // What the last Save or Publish did, in one line (a roll back replaces "Saved version 2.").
    let notice = RwSignal::new(None::<Result<String, String>>);
    Effect::new(move |_| {
        if let Some(r) = save_version.value().get() {
            notice.set(Some(r.map(|n| format!("Saved version {n}.")).map_err(|e| e.to_string())));
        }
    });
    Effect::new(move |_| {
        if let Some(r) = publish.value().get() {
            let done = r.map(|t| match (t.moderation.pending_version, t.published_version) {
                (Some(n), _) => format!("Version {n} waits for an administrator's review; the endpoint keeps serving the published one."),
                (None, Some(n)) => format!("Version {n} is published: the endpoint serves it now."),
                (None, None) => "Nothing is published.".to_owned(),
            });
            notice.set(Some(done.map_err(|e| e.to_string())));
        }
    });

    let load_version = ServerAction::<LoadVersion>::new();
    let refresh = move || {
        let (d, n) = tool.with_untracked(|t| (t.department.clone(), t.name.clone()));
        leptos::task::spawn_local(async move {
            if let Ok(fresh) = crate::api::tool_detail(d, n).await {
                tool.set(fresh);
            }
        });
    };
    Effect::new(move |_| {
        if let Some(Ok(_)) = save_version.value().get() {
            changelog.set(String::new());
            save_state.set(SaveState::Saved(None));
            refresh();
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(fresh)) = publish.value().get() {
            tool.set(fresh);
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(v)) = load_version.value().get() {
            code.set(v.code);
            rows.set(to_rows(&v.args));
            revision.update(|r| *r += 1);
        }
    });

    // --- Test cases. ---
    let run_input = RwSignal::new("{}".to_owned());
    let cases = RwSignal::new(test_cases);
    let case_name = RwSignal::new(String::new());
    let case_expected = RwSignal::new(String::new());
    let case_check = RwSignal::new("succeeds".to_owned());
    let case_path = RwSignal::new(String::new());
    let save_case = ServerAction::<SaveTestCase>::new();
    let delete_case = ServerAction::<DeleteTestCase>::new();
    let list_cases = ServerAction::<TestCases>::new();
    let run_cases = ServerAction::<RunTestCases>::new();
    Effect::new(move |_| {
        if save_case.version().get() + delete_case.version().get() > 0 {
            list_cases.dispatch(TestCases { tool: id });
        }
    });
    // A saved case is in the list: the form is ready for the next one.
    Effect::new(move |_| {
        if let Some(Ok(())) = save_case.value().get() {
            case_name.set(String::new());
            case_expected.set(String::new());
            case_path.set(String::new());
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(list)) = list_cases.value().get() {
            cases.set(list);
        }
    });

    let draft_target = Callback::new(move |_| RunTarget::Draft { code: code.get_untracked(), args: defs.get_untracked() });
    let on_result = Callback::new(move |run: crate::api::RunView| {
        error_line.set(run.error.and_then(|e| e.line));
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
                <span class="save-state" data-state=move || match save_state.get() {
                    SaveState::Saved(_) => "saved", SaveState::Dirty => "dirty", SaveState::Saving => "saving", SaveState::Failed => "failed" }>
                    {move || match save_state.get() {
                        SaveState::Saved(Some(at)) => format!("Draft autosaved {}", ago(at, now_ms().max(at))),
                        SaveState::Saved(None) => "All changes saved".to_owned(),
                        SaveState::Dirty => "Unsaved changes…".to_owned(),
                        SaveState::Saving => "Saving draft…".to_owned(),
                        SaveState::Failed => "Could not save the draft; retrying…".to_owned(),
                    }}
                </span>
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

                <section class="card">
                    <h2>"Save and publish"</h2>
                    <div class="inline-form">
                        <input placeholder="What changed (changelog line)" aria-label="What changed (changelog line)" maxlength="500" prop:value=move || changelog.get()
                            on:input=move |ev| changelog.set(event_target_value(&ev)) />
                        <button type="button" class="button save-version" disabled=move || save_version.pending().get()
                            on:click=move |_| { save_version.dispatch(SaveVersion { tool: id, code: code.get_untracked(), args: defs.get_untracked(), changelog: changelog.get_untracked() }); }>
                            "Save version"
                        </button>
                    </div>
                    {move || notice.get().map(|r| match r {
                        Ok(text) => view! { <p class="alert ok" role="status">{text}</p> }.into_any(),
                        Err(text) => view! { <p class="alert error" role="alert">{text}</p> }.into_any(),
                    })}
                    <VersionsPanel tool publish load=Callback::new(move |n| { load_version.dispatch(LoadVersion { tool: id, version: n }); }) />
                </section>

                <SettingsCard tool />
                <EnvCard tool=id vars=env />
            </div>

            <aside class="editor-side">
                <section class="card">
                    <h2>"Run the draft"</h2>
                    <RunPanel tool=id args=Signal::derive(move || defs.get()) target=draft_target on_result input=run_input />
                </section>
                <section class="card">
                    <h2>"Test cases"</h2>
                    <div class="stack tight">
                        <input placeholder="Name these arguments" aria-label="Test case name" maxlength="80" prop:value=move || case_name.get()
                            on:input=move |ev| case_name.set(event_target_value(&ev)) />
                        <label class="small">"Check"
                            <select aria-label="Check" prop:value=move || case_check.get() on:change=move |ev| case_check.set(event_target_value(&ev))>
                                <option value="succeeds">"runs without an error"</option>
                                <option value="equals">"result equals"</option>
                                <option value="contains">"result contains"</option>
                                <option value="json_path">"value at a JSON path equals"</option>
                                <option value="schema">"result matches a JSON Schema"</option>
                            </select>
                        </label>
                        <Show when=move || case_check.get() == "json_path">
                            <input class="mono" placeholder="$.total" aria-label="JSON path" prop:value=move || case_path.get()
                                on:input=move |ev| case_path.set(event_target_value(&ev)) />
                        </Show>
                        <Show when=move || case_check.get() != "succeeds">
                            <textarea class="mono" rows="2" aria-label=move || match case_check.get().as_str() {
                                    "contains" => "Text the result contains",
                                    "json_path" => "Value expected at the path (JSON)",
                                    "schema" => "JSON Schema the result matches",
                                    _ => "Expected result",
                                }
                                placeholder=move || match case_check.get().as_str() {
                                    "contains" => "text the result contains",
                                    "json_path" => "3, \"text\" or [1, 2]",
                                    "schema" => "{\"type\": \"object\", \"required\": [\"total\"]}",
                                    _ => "the whole result",
                                }
                                prop:value=move || case_expected.get() on:input=move |ev| case_expected.set(event_target_value(&ev))></textarea>
                        </Show>
                        <button type="button" class="button secondary small" on:click=move |_| {
                            let check = case_check.get_untracked();
                            let expected = Some(case_expected.get_untracked()).filter(|e| !e.is_empty() && check != "succeeds");
                            let path = Some(case_path.get_untracked()).filter(|p| !p.is_empty() && check == "json_path");
                            save_case.dispatch(SaveTestCase { tool: id, name: case_name.get_untracked(), args: run_input.get_untracked(), check, path, expected, from_call: None });
                        }>"Save the Run arguments as a test case"</button>
                        {move || save_case.value().get().and_then(Result::err).map(|e| view! { <p class="alert error">{e.to_string()}</p> })}
                    </div>
                    <ul class="test-cases">
                        {move || cases.get().into_iter().map(|c| {
                            let case_id = c.id;
                            view! {
                                <li>
                                    <strong>{c.name.clone()}</strong>
                                    <code class="small">{c.args.replace('\n', " ")}</code>
                                    {c.expected.clone().map(|e| view! { <span class="muted small">" → " {e}</span> })}
                                    {c.recorded.then(|| view! { <span class="pill" title="$fetch answers from the failed call it was made from: no network">"recorded $fetch"</span> })}
                                    <button type="button" class="link-button danger" on:click=move |_| { delete_case.dispatch(DeleteTestCase { tool: id, case: case_id }); }>"delete"</button>
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                    <button type="button" class="button small" disabled=move || cases.with(Vec::is_empty) || run_cases.pending().get()
                        on:click=move |_| { run_cases.dispatch(RunTestCases { tool: id, target: draft_target.run(()) }); }>
                        {move || if run_cases.pending().get() { "Running…" } else { "Run all test cases" }}
                    </button>
                    {move || run_cases.value().get().map(|r| match r {
                        Ok(results) => {
                            let passed = results.iter().filter(|r| r.passed).count();
                            let total = results.len();
                            view! {
                                <p class=if passed == total { "alert ok" } else { "alert error" }>{format!("{passed} of {total} passed")}</p>
                                <ul class="test-results">
                                    {results.into_iter().map(|r| view! { <TestResultItem result=r /> }).collect_view()}
                                </ul>
                            }.into_any()
                        }
                        Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                    })}
                </section>
                <FailedCallsCard tool=id target=draft_target on_test_saved=move |_| { list_cases.dispatch(TestCases { tool: id }); } />
            </aside>
        </div>
    }
    .into_any()
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
                    }.into_any()
                } else {
                    view! {
                        <LimitInputs timeout_ms=t.timeout_ms memory_mib=t.memory_mib what="" />
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
    }
}

/// The time and memory limit fields of the settings form.
#[component]
fn LimitInputs(timeout_ms: i64, memory_mib: i64, what: &'static str) -> impl IntoView {
    view! {
        <div class="row">
            <label>{format!("{what}Time limit (ms)")} <input name="timeout_ms" type="number" min="100" max="30000" value=timeout_ms /></label>
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
