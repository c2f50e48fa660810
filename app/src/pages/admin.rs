//! The admin page: every account and the audit log, filterable by action.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{admin_audit, admin_policy, admin_users, SetAdminPolicy};
use crate::components::RequireUser;
use crate::pages::tools::{ago, now_ms};

#[component]
pub fn Admin() -> impl IntoView {
    let users = Resource::new(|| (), |_| admin_users());
    let filter = RwSignal::new(String::new());
    let audit = Resource::new(move || filter.get(), admin_audit);
    let now = now_ms();
    view! {
        <Title text="Admin" />
        <RequireUser>
            <h1>"Administration"</h1>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match users.await {
                        Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                        Ok(list) => view! {
                            <section class="card">
                                <h2>{format!("Users ({})", list.len())}</h2>
                                <table class="admin-table">
                                    <thead><tr><th>"User"</th><th>"Department"</th><th>"Role"</th><th>"Status"</th><th>"Joined"</th></tr></thead>
                                    <tbody>
                                        {list.into_iter().map(|u| view! {
                                            <tr>
                                                <td><strong>{u.display_name}</strong> <span class="muted">"@" {u.username}</span></td>
                                                <td>{u.department}</td>
                                                <td>{if u.is_admin { "admin" } else { "member" }}</td>
                                                <td>{if u.is_active { "active" } else { "deactivated" }}</td>
                                                <td class="muted">{ago(u.created_at, now.max(u.created_at))}</td>
                                            </tr>
                                        }).collect_view()}
                                    </tbody>
                                </table>
                            </section>
                        }.into_any(),
                    }
                })}
            </Suspense>
            <PolicyCard />
            <section class="card">
                <div class="page-head">
                    <h2>"Audit log"</h2>
                    <select on:change=move |ev| filter.set(event_target_value(&ev))>
                        <option value="">"All actions"</option>
                        <option value="user.">"Accounts"</option>
                        <option value="tool.">"Tools"</option>
                        <option value="token.">"Tokens"</option>
                    </select>
                </div>
                <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                    {move || Suspend::new(async move {
                        match audit.await {
                            Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                            Ok(list) => view! {
                                <table class="admin-table audit">
                                    <thead><tr><th>"When"</th><th>"Who"</th><th>"Action"</th><th>"What"</th><th>"Change"</th></tr></thead>
                                    <tbody>
                                        {list.into_iter().map(|a| view! {
                                            <tr>
                                                <td class="muted">{ago(a.at_ms, now_ms().max(a.at_ms))}</td>
                                                <td>{a.actor}</td>
                                                <td><code>{a.action}</code></td>
                                                <td>{a.target}</td>
                                                <td class="mono small">{a.change}</td>
                                            </tr>
                                        }).collect_view()}
                                    </tbody>
                                </table>
                            }.into_any(),
                        }
                    })}
                </Transition>
            </section>
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
                                <label>"Most memory a tool may ask for (MiB)" <input name="max_memory_mib" type="number" min="1" value=p.max_memory_mib /></label>
                            </div>
                            <label>"Hosts tools may reach with $fetch (one per line, *.example.com allowed; empty: any host a tool lists)"
                                <textarea name="fetch_hosts" rows="3" class="mono">{p.fetch_hosts.join("\n")}</textarea>
                            </label>
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
