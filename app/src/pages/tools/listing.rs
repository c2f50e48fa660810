//! The listing page of a tool: what it does, its arguments, its usage, its
//! versions, its forks, and a Run panel on the published version. The parts
//! every listing has (head, versions, lineage) serve bundle pages too.

use std::future::Future;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::api_card::ApiCard;
use super::mcp_debugger::ConnectPanel;
use super::run_panel::RunPanel;
use super::versions::VersionDiff;
use super::{ago, now_ms};
use crate::api::{
    listing_api, listing_usage, tool_detail, ForkListing, ListingApiView, Moderate, PermissionsView, ReportListing, RunTarget,
    SetFavourite, ToolInfo, UsageView,
};
use crate::args::{ArgDef, ArgType};
use crate::components::{Findings, FormError, RequireUser};
use crate::error::AppError;
use crate::pages::market::{HealthCard, UsageChart};

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
                            <td>{if a.required { "required" } else { "optional" }}</td>
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
pub fn ModerationNotice(tool: ToolInfo) -> impl IntoView {
    let m = tool.moderation.clone();
    let status = match tool.status.as_str() {
        "hidden" => Some(
            "Hidden by an administrator: it is out of browse and search, and only its authors and admins can open it or call its endpoint.",
        ),
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
        {m.pending_text.is_some().then(|| view! {
            <p class="alert warn review-notice">"A new title and description wait for an administrator’s review; models read the approved ones until then."</p>
        })}
        {m.review_note.clone().map(|n| view! { <p class="alert error review-notice">"The last version sent for review was not approved: " {n}</p> })}
        {m.held.clone().map(|h| view! {
            <div class="alert warn held-publish">
                <p><strong>{format!("Publishing v{} is held for an administrator.", h.version)}</strong>
                    " What models would read has what a person reading this page would not see, or words addressed to the model; the marked text is why:"</p>
                <Findings findings=h.findings />
                <p>"Change these texts and publish again, or wait until an administrator accepts them."</p>
            </div>
        })}
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

/// Admins' moderation form (for admins), and the report form (for everyone).
#[component]
pub fn ListingActions(tool: ToolInfo) -> impl IntoView {
    let id = tool.id;
    view! {
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
    }
}

/// The top of a listing page: title, address, author, tags, Edit for
/// editors, and what admins decided about it.
#[component]
pub fn ListingHead(tool: ToolInfo) -> impl IntoView {
    let edit_href = format!("{}/edit", tool.href());
    view! {
        <Title text=tool.title.clone() />
        <div class="page-head">
            <div>
                <h1>
                    {tool.title.clone()} {(tool.kind == "bundle").then(|| view! { <span class="badge kind">"bundle"</span> })}
                    {(tool.serves != "tool").then(|| view! { <span class="badge kind">{tool.serves.clone()}</span> })}
                </h1>
                <p class="muted">
                    <code>{tool.slug()}</code>
                    {(!tool.resource_uri.is_empty()).then(|| {
                        let mime = format!(" ({})", tool.resource_mime);
                        view! { <span>" · at " <code>{tool.resource_uri.clone()}</code> {mime}</span> }
                    })}
                    " · by " {tool.owner.clone()}
                    {tool.published_version.map(|v| format!(" · v{v} published"))}
                </p>
                <div class="tags">{tool.tags.iter().map(|t| view! { <span class="tag">{t.clone()}</span> }).collect_view()}</div>
                {tool.permissions.clone().map(|permissions| view! { <PermissionBadges permissions /> })}
            </div>
            <div class="head-actions">
                {(tool.kind == "tool" && tool.published_version.is_some()).then(|| view! { <FavouriteButton tool=tool.id starred=tool.favourite /> })}
                {tool.can_edit.then(|| view! { <a class="button secondary" href=edit_href>"Edit"</a> })}
            </div>
        </div>
        <ModerationNotice tool=tool.clone() />
    }
}

/// The tool's permissions label: computed by Toolshed from its settings, not
/// claimed by its author, and enforced (a read-only tool's `$fetch` sends only
/// GET and HEAD).
#[component]
fn PermissionBadges(permissions: PermissionsView) -> impl IntoView {
    let network = if permissions.hosts.is_empty() { "No network".to_owned() } else { format!("Reaches {}", permissions.hosts.join(", ")) };
    view! {
        <ul class="permissions" aria-label="What this tool can do, as Toolshed enforces it">
            {if permissions.writes {
                view! { <li class="pill warn">"May write"</li> }.into_any()
            } else {
                view! { <li class="pill good" title="Its $fetch sends only GET and HEAD requests">"Read-only"</li> }.into_any()
            }}
            <li class=if permissions.hosts.is_empty() { "pill good" } else { "pill neutral" }>{network}</li>
            {(!permissions.secrets.is_empty()).then(|| view! {
                <li class="pill neutral">{format!("Secrets: {}", permissions.secrets.join(", "))}</li>
            })}
            {permissions.accounts.into_iter().map(|(app, scopes)| {
                let scopes = if scopes.is_empty() { String::new() } else { format!(" ({})", scopes.join(" ")) };
                view! {
                    <li class="pill warn acts-as" title="Calls use the caller's own account at this app; you connect yours on your Account page">
                        {format!("Acts as you at {app}{scopes}")}
                    </li>
                }
            }).collect_view()}
        </ul>
    }
}

/// Stars the tool for the signed-in person: their personal MCP endpoint
/// lists starred tools directly. A plain form: it works before the wasm loads.
#[component]
fn FavouriteButton(tool: i64, starred: bool) -> impl IntoView {
    let action = ServerAction::<SetFavourite>::new();
    let starred = Signal::derive(move || match action.value().get() {
        Some(Ok(now)) => now,
        _ => starred,
    });
    let error = Signal::derive(move || action.value().get().and_then(Result::err));
    view! {
        <ActionForm action attr:class="inline-form favourite-form">
            <input type="hidden" name="tool" value=tool />
            <input type="hidden" name="favourite" value=move || (!starred.get()).to_string() />
            <button type="submit" class="button secondary favourite" aria-pressed=move || starred.get().to_string()
                title="Starred tools are listed directly on your personal MCP endpoint (see your Account page)"
                disabled=move || action.pending().get()>
                {move || if starred.get() { "★ Starred" } else { "☆ Star" }}
            </button>
            <FormError error />
        </ActionForm>
    }
}

/// The published version's line and every saved version, newest first.
#[component]
pub fn VersionList(tool: ToolInfo) -> impl IntoView {
    let now = now_ms();
    view! {
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
    }
}

/// Where the listing came from (and what changed there since), its forks,
/// the bundles serving it, and a form to fork it.
#[component]
pub fn Lineage(tool: ToolInfo) -> impl IntoView {
    let fork = ServerAction::<ForkListing>::new();
    let error = Signal::derive(move || fork.value().get().and_then(Result::err));
    let bundle = tool.kind == "bundle";
    let upstream = tool.upstream.clone().map(|u| {
        let newer = u.newer.clone().map(|d| {
            let to = d.to;
            view! {
                <div class="alert warn upstream-newer">
                    {format!("{} has published v{to} since this was forked from v{}.", u.source.slug, u.forked_version)}
                    <details>
                        <summary>{format!("What changed from v{} to v{to}", u.forked_version)}</summary>
                        <VersionDiff diff=d bundle />
                    </details>
                </div>
            }
        });
        view! {
            <p class="forked-from">"Forked from " <a href=u.source.href.clone()>{format!("{}@v{}", u.source.slug, u.forked_version)}</a></p>
            {newer}
        }
    });
    let published = tool.published_version.is_some();
    view! {
        <section class="card lineage">
            <h2>"Forks"</h2>
            {upstream}
            {if tool.forks.is_empty() {
                view! { <p class="muted small">"No forks yet."</p> }.into_any()
            } else {
                view! {
                    <ul class="fork-list">
                        {tool.forks.iter().map(|f| view! {
                            <li><a href=f.href()>{format!("{}/{}", f.department, f.name)}</a> <span class="muted">{format!(" · {} · by {}", f.title, f.author)}</span></li>
                        }).collect_view()}
                    </ul>
                }.into_any()
            }}
            {(!tool.in_bundles.is_empty()).then(|| view! {
                <h3>"In bundles"</h3>
                <ul class="bundle-list">
                    {tool.in_bundles.iter().map(|b| view! { <li><a href=b.href.clone()>{b.slug.clone()}</a> <span class="muted">{format!(" · {}", b.title)}</span></li> }).collect_view()}
                </ul>
            })}
            {published.then(|| view! {
                <FormError error />
                <ActionForm action=fork attr:class="inline-form fork-form">
                    <input type="hidden" name="listing" value=tool.id />
                    <label class="small">"Fork into your department as"
                        <input name="name" required maxlength="64" pattern="[A-Za-z0-9_\\-]+" value=tool.name.clone() />
                    </label>
                    <button type="submit" class="button secondary" disabled=move || fork.pending().get()>"Fork"</button>
                </ActionForm>
            })}
        </section>
    }
}

#[component]
fn Listing(tool: ToolInfo, usage: UsageView, api: Option<ListingApiView>) -> impl IntoView {
    let args = tool.published_args.clone();
    let id = tool.id;
    view! {
        <ListingHead tool=tool.clone() />
        // Three areas: what it is, how to use it (aside), what it has done. On a
        // laptop the aside stands beside both; on a phone it comes second, before
        // the history (tools.css).
        <div class="two-col listing-layout">
            <div class="listing-about">
                <section class="card">
                    <div class="markdown" inner_html=tool.description_html.clone()></div>
                </section>
                <section class="card">
                    <h2>"Arguments"</h2>
                    <ArgTable args=args.clone() />
                </section>
                {api.map(|api| view! { <ApiCard api /> })}
            </div>
            <div class="listing-history">
                <section class="card">
                    <h2>"Usage, last 30 days"</h2>
                    {usage.kept_failures.filter(|n| *n > 0).map(|n| view! {
                        <p class="small kept-failures">
                            <a href=format!("/tools/{}/{}/edit", tool.department, tool.name)>
                                {if n == 1 { "1 failed call".to_owned() } else { format!("{n} failed calls") }}
                            </a>
                            " of the last 14 days can be replayed in the editor."
                        </p>
                    })}
                    <UsageChart usage=usage.clone() />
                </section>
                {usage.health.map(|health| view! {
                    <HealthCard health editor=format!("/tools/{}/{}/edit", tool.department, tool.name) />
                })}
                <VersionList tool=tool.clone() />
                <Lineage tool=tool.clone() />
            </div>
            <aside>
                {tool.published_version.is_some().then(|| view! {
                    <ConnectPanel endpoint=tool.endpoint.clone() clients=tool.connect.clone() pinned=tool.published_version.map(|n| (n, tool.connect_pinned.clone())) tools=vec![(tool.name.clone(), tool.published_args.clone())] serves=(tool.serves.clone(), tool.resource_uri.clone()) />
                })}
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
                <ListingActions tool=tool.clone() />
            </aside>
        </div>
    }
}

/// A listing page: the listing the URL names (`:department/:name`), its usage
/// and (once published) its API, loaded in one resource so hydration finds them
/// ready; "not found" for anything the user may not see.
#[component]
pub fn ListingPage<T, Fut>(
    load: fn(String, String) -> Fut,
    listing: fn(&T) -> &ToolInfo,
    render: fn(T, UsageView, Option<ListingApiView>) -> AnyView,
) -> impl IntoView
where
    T: Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
    Fut: Future<Output = Result<T, AppError>> + Send + 'static,
{
    let params = use_params_map();
    let page = Resource::new(
        move || (params.read().get("department").unwrap_or_default(), params.read().get("name").unwrap_or_default()),
        move |(d, n)| async move {
            let page = load(d, n).await?;
            let (id, published) = {
                let l = listing(&page);
                (l.id, l.published_version.is_some())
            };
            let usage = listing_usage(id).await?;
            let api = if published { Some(listing_api(id).await?) } else { None };
            Ok::<_, AppError>((page, usage, api))
        },
    );
    view! {
        <RequireUser>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match page.await {
                        Ok((listing, usage, api)) => render(listing, usage, api),
                        Err(_) => view! { <crate::pages::NotFound /> }.into_any(),
                    }
                })}
            </Suspense>
        </RequireUser>
    }
}

#[component]
pub fn ToolListing() -> impl IntoView {
    view! { <ListingPage load=tool_detail listing=|t: &ToolInfo| t render=|tool, usage, api| view! { <Listing tool usage api /> }.into_any() /> }
}
