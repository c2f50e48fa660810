//! `/admin/servers`: external MCP servers whose tools bundles may include.
//! Admins see and manage every server and choose which departments' authors
//! may register their own; such authors manage their department's servers
//! here too. Every action is a plain form, so the page works before the wasm
//! loads. A credential is shown as set or not set, never its value. Tools
//! whose definitions changed (or whose first one the scan found something
//! in) wait here for approval, unserved meanwhile.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{
    external_servers, ApproveDefinition, RefreshServer, RegisterServer, RemoveServer, ServerAdminView, SetServerRegistration, UpdateServer,
};
use crate::components::{Findings, RequireUser};
use crate::pages::tools::{ago, now_ms, DiffText};

/// The transport choice, `selected` preselected.
fn transport_select(selected: &str) -> impl IntoView {
    view! {
        <select name="transport" aria-label="Transport">
            <option value="streamable_http" selected=selected == "streamable_http">"Streamable HTTP"</option>
            <option value="sse" selected=selected == "sse">"Legacy HTTP+SSE"</option>
        </select>
    }
}

/// Credential kind, name and value; `keep` is offered when one is stored.
fn credential_fields(keep: bool) -> impl IntoView {
    view! {
        <div class="row">
            <label>"Credential"
                <select name="credential_kind">
                    {keep.then(|| view! { <option value="keep" selected>"keep the stored one"</option> })}
                    <option value="none">"none"</option>
                    <option value="header" selected=!keep>"header"</option>
                    <option value="query">"query parameter"</option>
                </select>
            </label>
            <label>"Credential's header or parameter name" <input name="credential_name" maxlength="100" placeholder="X-Api-Key" /></label>
            <label>"Credential's secret value" <input name="credential_value" type="password" autocomplete="off" maxlength="4000" /></label>
        </div>
    }
}

#[component]
fn ServerRow(
    s: ServerAdminView,
    refresh: ServerAction<RefreshServer>,
    remove: ServerAction<RemoveServer>,
    update: ServerAction<UpdateServer>,
) -> impl IntoView {
    let now = now_ms();
    let credential = match (s.credential_kind.as_str(), s.credential_set) {
        ("none", _) | (_, false) => "none".to_owned(),
        (kind, true) => format!("{kind} {} (set)", s.credential_name),
    };
    let status = match (&s.last_error, s.refreshed_at) {
        (Some(e), _) => view! { <span class="badge warn">{format!("error: {e}")}</span> }.into_any(),
        (None, Some(at)) => view! { <span>{format!("refreshed {}", ago(at, now.max(at)))}</span> }.into_any(),
        (None, None) => view! { <span class="muted">"never refreshed"</span> }.into_any(),
    };
    let (id, url, transport) = (s.id, s.url.clone(), s.transport.clone());
    view! {
        <tr data-server=s.name.clone()>
            <td><code>{s.name.clone()}</code><br /><span class="muted small">{s.department.clone()}</span></td>
            <td class="small" data-label="Address"><code>{s.url.clone()}</code><br />{if s.transport == "sse" { "legacy SSE" } else { "Streamable HTTP" }}
                {format!(" · {} s", s.timeout_ms / 1000)}</td>
            <td class="small credential" data-label="Credential">{credential}</td>
            <td class="tool-count" data-label="Tools">{s.tool_count}
                {(!s.held.is_empty()).then(|| view! { <br /><span class="badge warn held-count">{format!("{} held", s.held.len())}</span> })}</td>
            <td class="small status" data-label="Status">{status}</td>
            <td>
                {s.may_manage.then(|| view! {
                    <ActionForm action=refresh attr:class="inline-form">
                        <input type="hidden" name="id" value=id />
                        <button type="submit" class="link-button refresh">"Refresh now"</button>
                    </ActionForm>
                    <details class="edit-server">
                        <summary class="link-button">"Edit"</summary>
                        <ActionForm action=update attr:class="stack">
                            <input type="hidden" name="id" value=id />
                            <label>"URL" <input name="url" value=url required maxlength="2000" /></label>
                            <div class="row">
                                <label>"Transport" {transport_select(&transport)}</label>
                                <label>"Time limit (ms)" <input name="timeout_ms" type="number" min="1000" max="300000" value=s.timeout_ms /></label>
                            </div>
                            {credential_fields(true)}
                            <button type="submit" class="button secondary small">"Save"</button>
                        </ActionForm>
                    </details>
                    <ActionForm action=remove attr:class="inline-form">
                        <input type="hidden" name="id" value=id />
                        <button type="submit" class="link-button danger">"Remove"</button>
                    </ActionForm>
                })}
            </td>
        </tr>
    }
}

/// Each held definition as models would read it, what the scan found in it,
/// and Approve for those who manage its server.
#[component]
fn HeldDefinitions(servers: Vec<ServerAdminView>, approve: ServerAction<ApproveDefinition>) -> impl IntoView {
    let now = now_ms();
    let held: Vec<_> = servers.into_iter().flat_map(|s| s.held.into_iter().map(move |h| (s.id, s.may_manage, h))).collect();
    (!held.is_empty()).then(|| view! {
        <section class="card held-definitions">
            <h2>"Definitions waiting for approval"</h2>
            <p class="muted small">"Bundles do not serve these tools until their definitions are approved: a server cannot change what models read unseen."</p>
            {held.into_iter().map(|(id, may_manage, h)| view! {
                <div class="held-definition" data-tool=h.exposed_name.clone()>
                    <h3><code>{h.exposed_name.clone()}</code> " "
                        <span class="muted small">{format!("{} {}", if h.changed { "changed by the server" } else { "new" }, ago(h.since_ms, now.max(h.since_ms)))}</span></h3>
                    {match (h.changed, h.changes.clone()) {
                        (true, Some(changes)) => Some(view! {
                            <div class="diff definition-changes"><h4>"What changed since it was approved"</h4><DiffText text=changes /></div>
                        }.into_any()),
                        (true, None) => Some(view! {
                            <p class="muted small">"The definition approved before was not kept (it was approved before Toolshed kept them): read this one whole."</p>
                        }.into_any()),
                        (false, _) => None,
                    }}
                    {(!h.title.is_empty()).then(|| view! { <p><strong>{h.title.clone()}</strong></p> })}
                    <pre class="definition">{h.description.clone()}</pre>
                    <details><summary class="small">"Input schema"</summary><pre class="definition">{h.input_schema.clone()}</pre></details>
                    {h.output_schema.clone().map(|s| view! {
                        <details><summary class="small">"Output schema"</summary><pre class="definition">{s}</pre></details>
                    })}
                    {h.annotations.clone().map(|a| view! {
                        <details><summary class="small">"Annotations (hints such as read-only or destructive)"</summary><pre class="definition">{a}</pre></details>
                    })}
                    {(!h.findings.is_empty()).then(|| view! {
                        <p class="small">"The scan found, in what models would read (an administrator must approve):"</p>
                        <Findings findings=h.findings.clone() />
                    })}
                    {may_manage.then(|| view! {
                        <ActionForm action=approve attr:class="inline-form approve-definition">
                            <input type="hidden" name="id" value=id />
                            <input type="hidden" name="tool" value=h.tool.clone() />
                            <input type="hidden" name="fingerprint" value=h.fingerprint.clone() />
                            <button type="submit" class="button secondary small">"Approve this definition"</button>
                        </ActionForm>
                    })}
                </div>
            }).collect_view()}
        </section>
    })
}

#[component]
pub fn ExternalServers() -> impl IntoView {
    let register = ServerAction::<RegisterServer>::new();
    let update = ServerAction::<UpdateServer>::new();
    let refresh = ServerAction::<RefreshServer>::new();
    let remove = ServerAction::<RemoveServer>::new();
    let setting = ServerAction::<SetServerRegistration>::new();
    let approve = ServerAction::<ApproveDefinition>::new();
    let page = Resource::new(
        move || {
            let versions =
                [register.version(), update.version(), refresh.version(), remove.version(), setting.version(), approve.version()];
            versions.map(|v| v.get())
        },
        |_| external_servers(),
    );
    let error = move || {
        super::first_error([
            register.value().get().and_then(Result::err),
            update.value().get().and_then(Result::err),
            refresh.value().get().and_then(Result::err),
            remove.value().get().and_then(Result::err),
            setting.value().get().and_then(Result::err),
            approve.value().get().and_then(Result::err),
        ])
    };
    // Registering a server that cannot be reached succeeds: say why it has no tools.
    let registered = move || {
        register.value().get().and_then(Result::ok).map(|s| match s.last_error {
            Some(e) => {
                view! { <p class="alert error">{format!("Registered {}, but importing its tools failed: {e}", s.name)}</p> }.into_any()
            }
            None if s.held.is_empty() => {
                view! { <p class="alert ok">{format!("Registered {}: {} tools imported.", s.name, s.tool_count)}</p> }.into_any()
            }
            None => {
                let text = format!("Registered {}: {} tools imported, {} of them held: see below.", s.name, s.tool_count, s.held.len());
                view! { <p class="alert warn">{text}</p> }.into_any()
            }
        })
    };
    view! {
        <Title text="External MCP servers" />
        <RequireUser>
            <div class="page-head">
                <h1>"External MCP servers"</h1>
                <a class="button secondary" href="/admin">"Administration"</a>
            </div>
            <p class="muted">"Bundles of a server's department can include its tools, exposed as " <code>"server__tool"</code>
                ". Calls are proxied with the stored credential, which is never shown again."</p>
            {error}
            {registered}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match page.await {
                        Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                        Ok(p) => view! {
                            <HeldDefinitions servers=p.servers.clone() approve />
                            <section class="card">
                                <h2>"Servers"</h2>
                                {if p.servers.is_empty() {
                                    view! { <p class="muted">"No external servers yet."</p> }.into_any()
                                } else {
                                    view! {
                                        <table class="admin-table servers stacked">
                                            <thead><tr><th>"Server"</th><th>"Address"</th><th>"Credential"</th><th>"Tools"</th><th>"Status"</th><th></th></tr></thead>
                                            <tbody>
                                                {p.servers.into_iter().map(|s| view! { <ServerRow s refresh remove update /> }).collect_view()}
                                            </tbody>
                                        </table>
                                    }.into_any()
                                }}
                            </section>
                            {(!p.may_register_in.is_empty()).then(|| view! {
                                <section class="card register-server">
                                    <h2>"Register a server"</h2>
                                    <ActionForm action=register attr:class="stack">
                                        <div class="row">
                                            <label>"Department"
                                                <select name="department">
                                                    {p.may_register_in.iter().map(|d| view! { <option value=d.clone()>{d.clone()}</option> }).collect_view()}
                                                </select>
                                            </label>
                                            <label>"Server name (models see its tools as name__tool)" <input name="name" required maxlength="32" placeholder="github" /></label>
                                        </div>
                                        <div class="row">
                                            <label>"URL" <input name="url" required maxlength="2000" placeholder="https://mcp.example.com/mcp" /></label>
                                            <label>"Transport" {transport_select("streamable_http")}</label>
                                            <label>"Time limit (ms)" <input name="timeout_ms" type="number" min="1000" max="300000" value="30000" /></label>
                                        </div>
                                        {credential_fields(false)}
                                        <button type="submit" class="button">"Register and import tools"</button>
                                    </ActionForm>
                                </section>
                            })}
                            {(!p.settings.is_empty()).then(|| view! {
                                <section class="card">
                                    <h2>"Who may register servers"</h2>
                                    <p class="muted small">"Administrators always may, and maintainers for their own department. Allow a department's authors to as well:"</p>
                                    <table class="admin-table">
                                        <thead><tr><th>"Department"</th><th>"Authors may register"</th></tr></thead>
                                        <tbody>
                                            {p.settings.into_iter().map(|d| { let for_form = d.department.clone(); view! {
                                                <tr data-department=d.department.clone()>
                                                    <td><code>{d.department.clone()}</code></td>
                                                    <td>
                                                        <ActionForm action=setting attr:class="inline-form">
                                                            <input type="hidden" name="department" value=for_form />
                                                            <select name="allowed" aria-label="Authors may register">
                                                                <option value="no" selected=!d.authors_may_register>"no"</option>
                                                                <option value="yes" selected=d.authors_may_register>"yes"</option>
                                                            </select>
                                                            <button type="submit" class="link-button">"Save"</button>
                                                        </ActionForm>
                                                    </td>
                                                </tr>
                                            }}).collect_view()}
                                        </tbody>
                                    </table>
                                </section>
                            })}
                        }.into_any(),
                    }
                })}
            </Transition>
        </RequireUser>
    }
}
