//! The listing page of a tool: what it does, its arguments, its usage, its
//! versions, and a Run panel on the published version.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use super::mcp_debugger::ConnectPanel;
use super::run_panel::RunPanel;
use super::{ago, now_ms};
use crate::api::{listing_usage, tool_detail, Moderate, ReportListing, RunTarget, ToolInfo, UsageView};
use crate::args::{ArgDef, ArgType};
use crate::components::RequireUser;
use crate::pages::market::UsageChart;

pub fn type_label(t: &ArgType) -> String {
    match t {
        ArgType::String => "string".into(),
        ArgType::Number => "number".into(),
        ArgType::Integer => "integer".into(),
        ArgType::Boolean => "boolean".into(),
        ArgType::Enum => "enum".into(),
        ArgType::Array { items } => format!("array of {}", type_label(items)),
        ArgType::Object { .. } => "object".into(),
    }
}

/// The arguments as a table, nested fields indented.
#[component]
pub fn ArgTable(args: Vec<ArgDef>) -> impl IntoView {
    fn rows(args: &[ArgDef], depth: usize, out: &mut Vec<(usize, ArgDef)>) {
        for a in args {
            out.push((depth, a.clone()));
            match &a.ty {
                ArgType::Object { fields } => rows(fields, depth + 1, out),
                ArgType::Array { items } => {
                    if let ArgType::Object { fields } = items.as_ref() {
                        rows(fields, depth + 1, out)
                    }
                }
                _ => {}
            }
        }
    }
    let mut flat = Vec::new();
    rows(&args, 0, &mut flat);
    if flat.is_empty() {
        return view! { <p class="muted">"No arguments."</p> }.into_any();
    }
    view! {
        <table class="arg-table">
            <thead><tr><th>"Name"</th><th>"Type"</th><th>"Required"</th><th>"Description"</th></tr></thead>
            <tbody>
                {flat.into_iter().map(|(depth, a)| {
                    let extra = if a.enum_values.is_empty() { String::new() } else { format!(" ({})", a.enum_values.join(" | ")) };
                    let default = a.default.as_ref().map(|d| format!(" Default: {d}")).unwrap_or_default();
                    view! {
                        <tr>
                            <td style=format!("padding-left: {}rem", 0.6 + depth as f32 * 1.2)><code>{a.name.clone()}</code></td>
                            <td>{type_label(&a.ty)}{extra}</td>
                            <td>{if a.required { "yes" } else { "no" }}</td>
                            <td>{a.description.clone()}<span class="muted">{default}</span></td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

/// What admins decided about a tool, for its authors (and admins): its status
/// with the admin's note, and the state of its review.
#[component]
pub(crate) fn ModerationNotice(tool: ToolInfo) -> impl IntoView {
    let m = tool.moderation.clone();
    let status = match tool.status.as_str() {
        "hidden" => Some("Hidden by an administrator: it is out of browse and search, and only its authors and admins can open it or call its endpoint."),
        "disabled" => Some("Disabled by an administrator: the listing is visible, but its endpoint refuses calls."),
        "deleted" => Some("Deleted by an administrator: only admins can see it."),
        _ => None,
    };
    view! {
        {status.map(|text| view! {
            <div class="alert warn moderation-notice" data-status=tool.status.clone()>
                <strong>{text}</strong>
                {m.note.clone().map(|n| view! { <p class="moderation-note">"Administrator’s note: " {n}</p> })}
            </div>
        })}
        {m.pending_version.map(|v| view! {
            <p class="alert warn review-notice">{format!("v{v} is waiting for an administrator’s review; ")}
                {match tool.published_version { Some(p) => format!("the endpoint serves v{p} until then."), None => "nothing is served until then.".to_owned() }}
            </p>
        })}
        {m.review_note.clone().map(|n| view! { <p class="alert error review-notice">"The last version sent for review was not approved: " {n}</p> })}
    }
}

/// Any reader can report a listing to the admins, with a reason.
#[component]
fn ReportForm(tool: i64) -> impl IntoView {
    let report = ServerAction::<ReportListing>::new();
    view! {
        <details class="card report">
            <summary>"Report this listing"</summary>
            <ActionForm action=report attr:class="stack">
                <input type="hidden" name="tool" value=tool />
                <label>"What is wrong with it?"
                    <textarea name="reason" rows="3" required maxlength="1000"></textarea>
                </label>
                <button type="submit" class="button secondary">"Send report"</button>
            </ActionForm>
            {move || report.value().get().map(|r| match r {
                Ok(()) => view! { <p class="alert ok" role="status">"Thank you: the administrators will look at it."</p> }.into_any(),
                Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
            })}
        </details>
    }
}

#[component]
fn Listing(tool: ToolInfo, usage: UsageView) -> impl IntoView {
    let now = now_ms();
    let edit_href = format!("/tools/{}/{}/edit", tool.department, tool.name);
    let args = tool.published_args.clone();
    let id = tool.id;
    view! {
        <Title text=tool.title.clone() />
        <div class="page-head">
            <div>
                <h1>{tool.title.clone()}</h1>
                <p class="muted">
                    <code>{format!("{}/{}", tool.department, tool.name)}</code>
                    " · by " {tool.owner.clone()}
                    {tool.published_version.map(|v| format!(" · v{v} published"))}
                </p>
                <div class="tags">{tool.tags.iter().map(|t| view! { <span class="tag">{t.clone()}</span> }).collect_view()}</div>
            </div>
            {tool.can_edit.then(|| view! { <a class="button secondary" href=edit_href.clone()>"Edit"</a> })}
        </div>
        <ModerationNotice tool=tool.clone() />
        <div class="two-col">
            <div>
                <section class="card">
                    <div class="markdown" inner_html=tool.description_html.clone()></div>
                </section>
                <section class="card">
                    <h2>"Arguments"</h2>
                    <ArgTable args=args.clone() />
                </section>
                <section class="card">
                    <h2>"Usage, last 30 days"</h2>
                    <UsageChart usage />
                </section>
                <section class="card">
                    <h2>"Versions"</h2>
                    <ul class="versions">
                        {tool.versions.iter().map(|v| {
                            let published = tool.published_version == Some(v.version);
                            view! {
                                <li class:published=published>
                                    <strong>{format!("v{}", v.version)}</strong>
                                    {published.then(|| view! { <span class="pill good">"published"</span> })}
                                    " " {v.changelog.clone()}
                                    <span class="muted">{format!(" · {} · {}", v.created_by, ago(v.created_at, now))}</span>
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                </section>
            </div>
            <aside>
                {tool.published_version.is_some().then(|| view! { <ConnectPanel endpoint=tool.endpoint.clone() name=tool.name.clone() published_args=tool.published_args.clone() /> })}
                <section class="card">
                <h2>"Run"</h2>
                {if tool.status == "disabled" {
                    view! { <p class="alert error run-refused">"This listing has been disabled by an administrator; it refuses calls."</p> }.into_any()
                } else if tool.published_version.is_some() {
                    view! { <RunPanel tool=id args=Signal::stored(args) target=Callback::new(|_| RunTarget::Published) /> }.into_any()
                } else {
                    view! { <p class="muted">"Not published yet."</p> }.into_any()
                }}
                </section>
                {tool.can_moderate.then(|| {
                    let act = ServerAction::<Moderate>::new();
                    // The status and note at the top come from the page's data: read them again.
                    Effect::new(move |_| {
                        if matches!(act.value().get(), Some(Ok(()))) {
                            let _ = window().location().reload();
                        }
                    });
                    view! {
                        <section class="card">
                            <h2>"Moderate"</h2>
                            <crate::pages::admin::ModerateForm action=act tool=id status=tool.status.clone() />
                        </section>
                    }
                })}
                <ReportForm tool=id />
            </aside>
        </div>
    }
}

#[component]
pub fn ToolListing() -> impl IntoView {
    let params = use_params_map();
    let detail = Resource::new(
        move || (params.read().get("department").unwrap_or_default(), params.read().get("name").unwrap_or_default()),
        |(d, n)| async move {
            let tool = tool_detail(d, n).await?;
            let usage = listing_usage(tool.id).await?;
            Ok::<_, crate::error::AppError>((tool, usage))
        },
    );
    view! {
        <RequireUser>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match detail.await {
                        Ok((tool, usage)) => view! { <Listing tool usage /> }.into_any(),
                        Err(_) => view! { <crate::pages::NotFound /> }.into_any(),
                    }
                })}
            </Suspense>
        </RequireUser>
    }
}
