//! The admin pages: the moderation queue, users, departments, single sign-on's
//! group links, tool limits, the playground's chat endpoints and the apps of
//! connected accounts on `/admin`;
//! the audit log with its filters on `/admin/audit`; external MCP servers on
//! `/admin/servers`; the listings that fail or slow most on `/admin/health`.

mod apps;
mod audit;
mod chat_endpoints;
mod departments;
mod health;
mod moderation;
mod servers;
mod sso;
mod users;

use leptos::prelude::*;
use leptos_meta::Title;

pub(crate) use apps::AppsCard;
pub use audit::AuditLog;
pub use health::ToolHealth;
pub(crate) use moderation::ModerateForm;
pub use servers::ExternalServers;

use crate::api::{admin_policy, SetAdminPolicy};
use crate::components::{first_error, RequireUser};

#[component]
pub fn Admin() -> impl IntoView {
    view! {
        <Title text="Admin" />
        <RequireUser>
            <div class="page-head">
                <h1>"Administration"</h1>
                <a class="button secondary" href="/people">"People: invitations and roles"</a>
                <a class="button secondary" href="/admin/servers">"External MCP servers"</a>
                <a class="button secondary" href="/admin/audit">"Audit log"</a>
                <a class="button secondary" href="/admin/health">"Tool health"</a>
            </div>
            <moderation::Queue />
            <users::UsersCard />
            <departments::DepartmentsCard />
            <sso::GroupsCard />
            <PolicyCard />
            <chat_endpoints::ChatEndpointsCard />
            <AppsCard />
        </RequireUser>
    }
}

/// The limits every tool works within.
#[component]
fn PolicyCard() -> impl IntoView {
    let set = ServerAction::<SetAdminPolicy>::new();
    let policy = Resource::new(move || set.version().get(), |_| admin_policy());
    view! {
        <section class="card">
            <h2>"Tool limits"</h2>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    policy.await.ok().map(|p| view! {
                        <ActionForm action=set attr:class="stack">
                            <div class="row">
                                <label>"Most time a tool may ask for (ms)" <input name="max_timeout_ms" type="number" min="100" value=p.max_timeout_ms /></label>
                                <label>"… when its calls run as tasks (ms)" <input name="max_task_timeout_ms" type="number" min="100" value=p.max_task_timeout_ms /></label>
                                <label>"Most memory a tool may ask for (MiB)" <input name="max_memory_mib" type="number" min="1" value=p.max_memory_mib /></label>
                            </div>
                            <label>"Hosts tools may reach with $fetch (one per line, *.example.com allowed; empty: any host a tool lists)"
                                <textarea name="fetch_hosts" rows="3" class="mono">{p.fetch_hosts.join("\n")}</textarea>
                            </label>
                            <label class="inline"><input type="checkbox" name="tests_required" value="true" checked=p.tests_required />
                                " Every department: a tool is published only with test cases that all pass"</label>
                            <button type="submit" class="button secondary">"Save limits"</button>
                        </ActionForm>
                    })
                })}
            </Suspense>
            {move || set.value().get().map(|r| match r {
                Ok(()) => view! { <p class="alert ok">"Limits saved."</p> }.into_any(),
                Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
            })}
        </section>
    }
}
