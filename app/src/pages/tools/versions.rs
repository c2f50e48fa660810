//! A listing's saved versions for its editors: publish or roll back any of
//! them (a tool's after showing what changes for its callers, and a breaking
//! change only once confirmed), load one into the editor, and diff two.

use leptos::prelude::*;

use super::{ago, now_ms};
use crate::api::{
    DiffVersions, DiffView, DraftView, ImpactOfPublish, ImpactView, LoadVersion, Publish, SaveVersion, TestResultView, ToolInfo,
};
use crate::args::ArgDef;

/// Save the draft as a version with a changelog line, and the versions under
/// it. `on_saved` hears of a saved version; `on_loaded` gets one loaded into
/// the editor.
#[component]
pub fn SaveCard(
    tool: RwSignal<ToolInfo>,
    code: RwSignal<String>,
    defs: Memo<Vec<ArgDef>>,
    on_saved: Callback<()>,
    on_loaded: Callback<DraftView>,
) -> impl IntoView {
    let id = tool.get_untracked().id;
    let changelog = RwSignal::new(String::new());
    let save_version = ServerAction::<SaveVersion>::new();
    let publish = ServerAction::<Publish>::new();
    let load_version = ServerAction::<LoadVersion>::new();
    // What the last Save or Publish did, in one line (a roll back replaces "Saved version 2.").
    let notice = RwSignal::new(None::<Result<String, String>>);
    let refresh = move || {
        let (d, n) = tool.with_untracked(|t| (t.department.clone(), t.name.clone()));
        leptos::task::spawn_local(async move {
            if let Ok(fresh) = crate::api::tool_detail(d, n).await {
                tool.set(fresh);
            }
        });
    };
    Effect::new(move |_| {
        if let Some(r) = save_version.value().get() {
            if r.is_ok() {
                changelog.set(String::new());
                on_saved.run(());
                refresh();
            }
            notice.set(Some(r.map(|n| format!("Saved version {n}.")).map_err(|e| e.to_string())));
        }
    });
    Effect::new(move |_| {
        if let Some(r) = publish.value().get() {
            let done = r.map(|t| {
                let line = match (t.moderation.pending_version, t.published_version) {
                    (Some(n), _) => {
                        format!("Version {n} waits for an administrator's review; the endpoint keeps serving the published one.")
                    }
                    (None, Some(n)) => format!("Version {n} is published: the endpoint serves it now."),
                    (None, None) => "Nothing is published.".to_owned(),
                };
                tool.set(t);
                line
            });
            notice.set(Some(done.map_err(|e| e.to_string())));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(v)) = load_version.value().get() {
            on_loaded.run(v);
        }
    });
    view! {
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
    }
}

/// The versions table with Publish / Roll back / Load buttons, and a diff of any two.
#[component]
pub fn VersionsPanel(tool: RwSignal<ToolInfo>, publish: ServerAction<Publish>, load: Callback<i64>) -> impl IntoView {
    let now = now_ms();
    let id = tool.get_untracked().id;
    let diff = ServerAction::<DiffVersions>::new();
    let diff_from = RwSignal::new(0i64);
    let diff_to = RwSignal::new(0i64);
    let is_tool = tool.get_untracked().kind == "tool";
    // A tool's Publish first asks what changes for its callers: nothing, and it
    // publishes; something, and the person sees it and decides.
    let impact = ServerAction::<ImpactOfPublish>::new();
    let checking = RwSignal::new(None::<ImpactView>);
    Effect::new(move |_| {
        if let Some(Ok(found)) = impact.value().get() {
            if found.changes.is_empty() && found.tests_pass() {
                publish.dispatch(Publish { tool: id, version: found.to, confirm_breaking: false });
            } else {
                checking.set(Some(found));
            }
        }
    });
    let start_publish = move |n: i64| {
        checking.set(None);
        if is_tool {
            impact.dispatch(ImpactOfPublish { tool: id, version: n });
        } else {
            publish.dispatch(Publish { tool: id, version: n, confirm_breaking: false });
        }
    };
    view! {
        <h3>"Versions"</h3>
        {move || {
            let t: ToolInfo = tool.get();
            if t.versions.is_empty() {
                return view! { <p class="muted small">"No versions yet: save one to publish it."</p> }.into_any();
            }
            view! {
                <table class="versions-table">
                    <tbody>
                    {t.versions.iter().map(|v| {
                        let n = v.version;
                        let published = t.published_version == Some(n);
                        let waiting = t.moderation.pending_version == Some(n);
                        let label = match t.published_version {
                            Some(p) if n < p => "Roll back",
                            _ => "Publish",
                        };
                        view! {
                            <tr class:published=published data-version=n>
                                <td><strong>{format!("v{n}")}</strong></td>
                                <td>{v.changelog.clone()}</td>
                                <td class="muted">{format!("{} · {}", v.created_by, ago(v.created_at, now.max(v.created_at)))}</td>
                                <td class="actions">
                                    <button type="button" class="link-button" on:click=move |_| load.run(n)>"Load"</button>
                                    {if published {
                                        view! { <span class="pill good">"published"</span> }.into_any()
                                    } else if waiting {
                                        view! { <span class="pill warn">"waiting for review"</span> }.into_any()
                                    } else {
                                        view! { <button type="button" class="button small publish" on:click=move |_| start_publish(n)>{label}</button> }.into_any()
                                    }}
                                </td>
                            </tr>
                        }
                    }).collect_view()}
                    </tbody>
                </table>
                <div class="inline-form diff-form">
                    "Diff"
                    <select aria-label="Diff from version" on:change=move |ev| diff_from.set(event_target_value(&ev).parse().unwrap_or(0))>
                        <option value="0">"from…"</option>
                        {t.versions.iter().map(|v| view! { <option value=v.version>{format!("v{}", v.version)}</option> }).collect_view()}
                    </select>
                    <select aria-label="Diff to version" on:change=move |ev| diff_to.set(event_target_value(&ev).parse().unwrap_or(0))>
                        <option value="0">"to…"</option>
                        {t.versions.iter().map(|v| view! { <option value=v.version>{format!("v{}", v.version)}</option> }).collect_view()}
                    </select>
                    <button type="button" class="button secondary small" disabled=move || diff_from.get() == 0 || diff_to.get() == 0
                        on:click=move |_| { diff.dispatch(DiffVersions { tool: id, from: diff_from.get_untracked(), to: diff_to.get_untracked() }); }>
                        "Show diff"
                    </button>
                </div>
            }.into_any()
        }}
        {move || impact.value().get().and_then(Result::err).map(|e| view! { <p class="alert error">{e.to_string()}</p> })}
        {move || checking.get().map(|found| view! { <PublishCheck impact=found publish tool=id checking /> })}
        {move || diff.value().get().map(|r| match r {
            Ok(d) => view! { <VersionDiff diff=d bundle=tool.get_untracked().kind == "bundle" /> }.into_any(),
            Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
        })}
    }
}

/// What publishing a version changes for the tool's callers, argument by
/// argument, and who they are, and how its required test cases did; Publish,
/// once a breaking change is confirmed and the required tests pass.
#[component]
fn PublishCheck(impact: ImpactView, publish: ServerAction<Publish>, tool: i64, checking: RwSignal<Option<ImpactView>>) -> impl IntoView {
    let breaking = impact.breaking();
    let tests_pass = impact.tests_pass();
    let confirmed = RwSignal::new(!breaking);
    let to = impact.to;
    let against = impact.from.map_or_else(|| "nothing published".to_owned(), |f| format!("v{f}, published now"));
    let bundles = match impact.following_bundles.as_slice() {
        [] => "No bundle follows this tool".to_owned(),
        names => format!("Bundles that follow this tool: {}", names.join(", ")),
    };
    let callers = match impact.recent_callers {
        0 => "nobody called it in the last 30 days.".to_owned(),
        1 => "1 person called it in the last 30 days.".to_owned(),
        n => format!("{n} people called it in the last 30 days."),
    };
    let changes = (!impact.changes.is_empty()).then(|| view! {
        <h4>{format!("Publishing v{to} changes what callers send (against {against})")}</h4>
        <ul class="schema-changes">
            {impact.changes.into_iter().map(|c| view! {
                <li class:breaking=c.breaking>
                    <span class=if c.breaking { "pill bad" } else { "pill good" }>{if c.breaking { "breaking" } else { "compatible" }}</span>
                    " " <code>{c.path}</code> " " {c.what}
                </li>
            }).collect_view()}
        </ul>
        <p class="small">{format!("{bundles}; {callers}")}</p>
    });
    view! {
        <section class="publish-check" class:breaking=breaking || !tests_pass aria-live="polite">
            {changes}
            {impact.tests.map(|results| view! { <RequiredTests version=to results /> })}
            {breaking.then(|| view! {
                <label class="inline"><input type="checkbox" name="confirm_breaking" on:change=move |ev| confirmed.set(event_target_checked(&ev)) />
                    " I understand that calls made the way the published version expects may fail"</label>
            })}
            <div class="row">
                <button type="button" class="button publish-confirm" disabled=move || !confirmed.get() || !tests_pass
                    on:click=move |_| { publish.dispatch(Publish { tool, version: to, confirm_breaking: breaking }); checking.set(None); }>
                    {format!("Publish v{to}")}
                </button>
                <button type="button" class="button secondary" on:click=move |_| checking.set(None)>"Cancel"</button>
            </div>
        </section>
    }
}

/// The test cases a publish here needs, as they did against the version.
#[component]
fn RequiredTests(version: i64, results: Vec<TestResultView>) -> impl IntoView {
    let failed = results.iter().filter(|r| !r.passed).count();
    let summary = match (results.len(), failed) {
        (0, _) => {
            "Publishing here needs at least one test case, and this tool has none: save the Run arguments as a test case first.".to_owned()
        }
        (n, 0) => format!("Test cases: all {n} pass against v{version}."),
        (n, f) => format!("Test cases: {f} of {n} fail against v{version}; publishing here needs every one to pass."),
    };
    view! {
        <div class="required-tests">
            <h4>"Tests required before publishing"</h4>
            <p class=if failed == 0 && !results.is_empty() { "alert ok" } else { "alert error" } role="status">{summary}</p>
            <ul class="test-results">
                {results.into_iter().map(|r| view! { <TestResultItem result=r /> }).collect_view()}
            </ul>
        </div>
    }
}

/// One test case's outcome: its name and time, and for a failure why, what
/// was expected and what came back.
#[component]
pub fn TestResultItem(result: TestResultView) -> impl IntoView {
    let r = result;
    view! {
        <li class:pass=r.passed class:fail=!r.passed>
            {if r.passed { "✓ " } else { "✗ " }} <strong>{r.name}</strong>
            <span class="muted small">{format!(" {:.1} ms", r.duration_ms)}</span>
            {(!r.passed).then(|| view! {
                <div class="small">{r.reason.clone()}</div>
                <div class="small mono">"got: " {r.actual.clone()} {r.expected.clone().map(|e| format!("  expected: {e}"))}</div>
            })}
        </li>
    }
}

/// What changed between two versions: code and arguments, or a bundle's members.
#[component]
pub fn VersionDiff(diff: DiffView, bundle: bool) -> impl IntoView {
    if bundle {
        return view! { <div class="diff"><h4>"Members"</h4><DiffText text=diff.code /></div> }.into_any();
    }
    view! {
        <div class="diff">
            <h4>"Code"</h4>
            <DiffText text=diff.code />
            <h4>"Arguments"</h4>
            <DiffText text=diff.args />
        </div>
    }
    .into_any()
}

/// A unified diff, lines coloured by what happened to them.
#[component]
pub fn DiffText(text: String) -> impl IntoView {
    if text.trim().is_empty() {
        return view! { <p class="muted small">"No differences."</p> }.into_any();
    }
    view! {
        <pre class="diff-text mono" tabindex="0">
            {text.lines().map(|l| {
                let class = match l.chars().next() {
                    Some('+') if !l.starts_with("+++") => "add",
                    Some('-') if !l.starts_with("---") => "del",
                    Some('@') => "hunk",
                    _ => "",
                };
                view! { <span class=class>{format!("{l}\n")}</span> }
            }).collect_view()}
        </pre>
    }
    .into_any()
}
