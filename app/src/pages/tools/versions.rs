//! A listing's saved versions for its editors: publish or roll back any of
//! them, load one into the editor, and diff two.

use leptos::prelude::*;

use super::{ago, now_ms};
use crate::api::{DiffVersions, DiffView, Publish, ToolInfo};

/// The versions table with Publish / Roll back / Load buttons, and a diff of any two.
#[component]
pub fn VersionsPanel(tool: RwSignal<ToolInfo>, publish: ServerAction<Publish>, load: Callback<i64>) -> impl IntoView {
    let now = now_ms();
    let id = tool.get_untracked().id;
    let diff = ServerAction::<DiffVersions>::new();
    let diff_from = RwSignal::new(0i64);
    let diff_to = RwSignal::new(0i64);
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
                                        view! { <button type="button" class="button small publish" on:click=move |_| { publish.dispatch(Publish { tool: id, version: n }); }>{label}</button> }.into_any()
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
        {move || diff.value().get().map(|r| match r {
            Ok(d) => view! { <VersionDiff diff=d bundle=tool.get_untracked().kind == "bundle" /> }.into_any(),
            Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
        })}
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
fn DiffText(text: String) -> impl IntoView {
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
