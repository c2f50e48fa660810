use leptos::prelude::*;
use leptos_meta::Title;

use super::{ago, now_ms};
use crate::api::{my_tools, ToolCard};
use crate::components::RequireUser;
use crate::error::AppError;

#[component]
fn Card(tool: ToolCard, href: String) -> impl IntoView {
    let now = now_ms();
    let status = match (tool.published_version, tool.latest_version) {
        (Some(p), _) => format!("v{p} published"),
        (None, Some(l)) => format!("v{l} saved, not published"),
        (None, None) => "draft".to_owned(),
    };
    view! {
        <a class="card tool-card" href=href>
            <div class="tool-card-head">
                <h3>{tool.title.clone()} {(tool.kind == "bundle").then(|| view! { <span class="badge kind">"bundle"</span> })}</h3>
                <span class="slug">{format!("{}/{}", tool.department, tool.name)}</span>
            </div>
            <p class="muted">{tool.summary.clone()}</p>
            <div class="tags">
                {tool.tags.iter().map(|t| view! { <span class="tag">{t.clone()}</span> }).collect_view()}
            </div>
            <div class="tool-card-foot muted">
                <span>{tool.owner.clone()}</span>
                <span>{status}</span>
                <span>{ago(tool.updated_at, now)}</span>
                {(tool.visibility != "everyone").then(|| view! { <span class="badge">{tool.visibility.clone()}</span> })}
                {(tool.status != "active").then(|| view! { <span class="badge warn">{tool.status.clone()}</span> })}
            </div>
        </a>
    }
}

/// Cards for `tools`, each linking where `link` says, or `empty` when there are none.
fn grid(tools: Result<Vec<ToolCard>, AppError>, link: fn(&ToolCard) -> String, empty: AnyView) -> AnyView {
    match tools {
        Ok(list) if list.is_empty() => empty,
        Ok(list) => view! {
            <div class="grid">
                {list.into_iter().map(|t| { let href = link(&t); view! { <Card tool=t href /> } }).collect_view()}
            </div>
        }
        .into_any(),
        Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
    }
}

#[component]
pub fn MyTools() -> impl IntoView {
    let tools = Resource::new(|| (), |_| my_tools());
    view! {
        <Title text="My tools" />
        <RequireUser>
            <div class="page-head">
                <h1>"My tools"</h1>
                <div class="actions">
                    <a class="button secondary" href="/bundles/new">"New bundle"</a>
                    <a class="button" href="/tools/new">"New tool"</a>
                </div>
            </div>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    let empty = view! {
                        <div class="card empty">
                            <h3>"No tools yet"</h3>
                            <p class="muted">"Tools you and your department write show up here."</p>
                            <a class="button" href="/tools/new">"Write your first tool"</a>
                        </div>
                    };
                    grid(tools.await, |t| format!("/{}s/{}/{}/edit", t.kind, t.department, t.name), empty.into_any())
                })}
            </Suspense>
        </RequireUser>
    }
}
