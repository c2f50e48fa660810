//! The audit log page: a GET form (action prefix, actor, target prefix, date
//! range) whose state lives in the URL, with paging; works without JavaScript.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use leptos_router::params::ParamsMap;

use crate::api::{admin_audit, AuditPageView};
use crate::components::RequireUser;
use crate::pages::market::page_href;
use crate::pages::tools::{ago, now_ms};

#[derive(Debug, Clone, PartialEq, Default)]
struct AuditParams {
    action: String,
    actor: String,
    target: String,
    from: String,
    to: String,
    page: String,
}

impl AuditParams {
    fn from_query(query: &ParamsMap) -> Self {
        let get = |k: &str| query.get(k).unwrap_or_default();
        Self { action: get("action"), actor: get("actor"), target: get("target"), from: get("from"), to: get("to"), page: get("page") }
    }

    fn href(&self, page: i64) -> String {
        let fields = [("action", &self.action), ("actor", &self.actor), ("target", &self.target), ("from", &self.from), ("to", &self.to)];
        page_href("/admin/audit", &fields, page)
    }
}

const ACTIONS: [(&str, &str); 7] = [
    ("", "All actions"),
    ("user.", "Accounts"),
    ("department.", "Departments"),
    ("tool.", "Tools"),
    ("report.", "Reports"),
    ("token.", "Tokens"),
    ("admin.", "Tool limits"),
];

#[component]
fn Filters(params: AuditParams) -> impl IntoView {
    let known = ACTIONS.iter().any(|(v, _)| *v == params.action);
    view! {
        <form class="card audit-form" method="get" action="/admin/audit">
            <div class="row">
                <label>"Action"
                    <select name="action">
                        {ACTIONS.iter().map(|(v, l)| view! { <option value=*v selected=params.action == *v>{*l}</option> }).collect_view()}
                        {(!known).then(|| view! { <option value=params.action.clone() selected=true>{params.action.clone()}</option> })}
                    </select>
                </label>
                <label>"Actor (username)" <input name="actor" value=params.actor.clone() maxlength="32" /></label>
                <label>"Target starts with" <input name="target" value=params.target.clone() maxlength="200" placeholder="tool:finance/ or user:alice" /></label>
                <label>"From" <input type="date" name="from" value=params.from.clone() /></label>
                <label>"To" <input type="date" name="to" value=params.to.clone() /></label>
                <button type="submit" class="button">"Filter"</button>
            </div>
        </form>
    }
}

#[component]
fn Entries(params: AuditParams, found: AuditPageView) -> impl IntoView {
    let now = now_ms();
    let prev = (found.page > 1).then(|| params.href(found.page - 1));
    let next = found.has_more.then(|| params.href(found.page + 1));
    view! {
        <section class="card">
            {if found.entries.is_empty() {
                view! { <p class="muted audit-empty">"No entries match."</p> }.into_any()
            } else {
                view! {
                    <table class="admin-table audit">
                        <thead><tr><th>"When"</th><th>"Who"</th><th>"Action"</th><th>"What"</th><th>"Change"</th></tr></thead>
                        <tbody>
                            {found.entries.into_iter().map(|a| view! {
                                <tr>
                                    <td class="muted" title=a.at_ms.to_string()>{ago(a.at_ms, now.max(a.at_ms))}</td>
                                    <td>{a.actor}</td>
                                    <td><code>{a.action}</code></td>
                                    <td>{a.target}</td>
                                    <td class="mono small">{a.change}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
            <nav class="pager">
                {prev.map(|href| view! { <a class="button secondary small" href=href>"Newer"</a> })}
                <span class="muted">{format!("Page {}", found.page)}</span>
                {next.map(|href| view! { <a class="button secondary small" href=href>"Older"</a> })}
            </nav>
        </section>
    }
}

#[component]
pub fn AuditLog() -> impl IntoView {
    let query = use_query_map();
    let params = Memo::new(move |_| query.with(AuditParams::from_query));
    let found = Resource::new(move || params.get(), |p| admin_audit(p.action, p.actor, p.target, p.from, p.to, p.page));
    view! {
        <Title text="Audit log" />
        <RequireUser>
            <div class="page-head">
                <h1>"Audit log"</h1>
                <a class="button secondary" href="/admin">"Administration"</a>
            </div>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    let params = params.get();
                    let entries = match found.await {
                        Ok(found) => view! { <Entries params=params.clone() found /> }.into_any(),
                        Err(e) => view! { <p class="alert error" role="alert">{e.to_string()}</p> }.into_any(),
                    };
                    view! { <Filters params /> {entries} }
                })}
            </Suspense>
        </RequireUser>
    }
}
