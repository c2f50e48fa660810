use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_query_map;

use crate::api::{
    connected_accounts, my_grants, my_tasks, my_tokens, personal_endpoint, CancelMyTask, ChangePassword, CreateToken, DisconnectAccount,
    RevokeGrant, RevokeToken, TaskView,
};
use crate::components::FormError;
use crate::pages::tools::ConnectPanel;
use crate::Auth;

#[component]
pub fn Account() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let change_password = ServerAction::<ChangePassword>::new();
    let query = use_query_map();
    let changed = move || query.read().get("changed").is_some() && change_password.value().get().is_none_or(|r| r.is_ok());
    let error = Signal::derive(move || change_password.value().get().and_then(Result::err));
    let has_password = Resource::new(|| (), |()| crate::api::has_password());
    view! {
        <Title text="Account" />
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                // Accounts made by single sign-on (and everyone, with passwords off) have no password here.
                let has_password = has_password.await.unwrap_or(true);
                match auth.me.await {
                    Ok(Some(me)) => view! {
                        <section class="narrow card">
                            <h1>{me.display_name.clone()}</h1>
                            <dl class="facts">
                                <dt>"Username"</dt><dd>{me.username.clone()}</dd>
                                <dt>"Department"</dt><dd>{me.department_title.clone()}</dd>
                                <dt>"Role"</dt><dd>{me.role_title()}</dd>
                            </dl>
                        </section>
                        {has_password.then(|| view! {
                            <section class="narrow card form-card">
                                <h2>"Change password"</h2>
                                <p class="muted">"Changing it signs you out everywhere else."</p>
                                {move || changed().then(|| view! { <p class="alert ok" role="status">"Password changed."</p> })}
                                <FormError error />
                                <ActionForm action=change_password attr:class="stack">
                                    <label>"Current password"
                                        <input name="current" type="password" autocomplete="current-password" required maxlength="256" />
                                    </label>
                                    <label>"New password"
                                        <input name="new" type="password" autocomplete="new-password" required minlength="10" maxlength="256" />
                                    </label>
                                    <label>"Repeat the new password"
                                        <input name="confirm" type="password" autocomplete="new-password" required maxlength="256" />
                                    </label>
                                    <button type="submit" class="button">"Change password"</button>
                                </ActionForm>
                            </section>
                        })}
                    }.into_any(),
                    _ => view! { <Redirect path="/login?next=/account" /> }.into_any(),
                }
            })}
        </Transition>
        // Outside the Transition, so its resource is created at once (see `RequireUser`).
        <PersonalEndpointCard />
        <ConnectedAccountsCard />
        <TasksCard />
        <TokensCard />
        <GrantsCard />
    }
}

/// The person's accounts at upstream apps, which tools that act as their
/// caller use. Connecting is a plain link (a redirect to the provider and
/// back), disconnecting a plain form: both work before the wasm loads.
#[component]
fn ConnectedAccountsCard() -> impl IntoView {
    let disconnect = ServerAction::<DisconnectAccount>::new();
    let card = Resource::new(move || disconnect.version().get(), |_| connected_accounts());
    let query = use_query_map();
    let just = move || query.read().get("connected");
    let now = crate::pages::tools::now_ms();
    view! {
        <section class="narrow-wide card connected-accounts" id="connected-accounts">
            <h2>"Connected accounts"</h2>
            <p class="muted">"Tools that act as you at another service (Jira, GitHub, …) use your own account there, never someone else's. "
                "Connect one here, or from the link a tool answers with; disconnecting revokes it at the service."</p>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let Ok(card) = card.await else { return ().into_any() };
                    let failure = card.failure.map(|f| view! { <p class="alert error" role="alert">{f}</p> });
                    let connected = just().filter(|app| card.accounts.iter().any(|a| &a.app == app && a.status == "connected"))
                        .map(|app| view! { <p class="alert ok" role="status">{format!("Your {app} account is connected: call the tool again.")}</p> });
                    if card.accounts.is_empty() {
                        return view! { {failure} <p class="muted small">"No app is registered for your department yet."</p> }.into_any();
                    }
                    view! {
                        {failure}
                        {connected}
                        <table class="admin-table accounts-table stacked">
                            <tbody>
                                {card.accounts.into_iter().map(|a| {
                                    let href = format!("/connect/{}", a.app);
                                    let app = a.app.clone();
                                    let (status, action) = match a.status.as_str() {
                                        "connected" => (format!("connected {}", a.connected_at.map(|t| crate::pages::tools::ago(t, now.max(t))).unwrap_or_default()), None),
                                        "reconnect" => ("needs connecting again".to_owned(), Some("Reconnect")),
                                        _ => ("not connected".to_owned(), Some("Connect")),
                                    };
                                    let scopes = if a.status == "connected" { a.granted.clone() } else { a.scopes.clone() };
                                    view! {
                                        <tr data-account=a.app.clone()>
                                            <td><strong>{a.app.clone()}</strong><br /><span class="muted small">{a.hosts.join(", ")}</span></td>
                                            <td class="small" data-label="Scopes">{if scopes.is_empty() { "no scopes".to_owned() } else { scopes.join(" ") }}</td>
                                            <td class="small status" data-label="Status">{status}</td>
                                            <td>
                                                {action.map(|label| view! { <a class="button secondary small connect" href=href.clone() rel="external">{label}</a> })}
                                                {(a.status != "none").then(|| view! {
                                                    <ActionForm action=disconnect attr:class="inline-form">
                                                        <input type="hidden" name="app" value=app.clone() />
                                                        <button type="submit" class="link-button danger disconnect">"Disconnect"</button>
                                                    </ActionForm>
                                                })}
                                            </td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any()
                })}
            </Transition>
        </section>
    }
}

/// Long MCP calls running on as tasks, newest first: refreshed every second
/// while one runs; a running one can be cancelled (a plain form).
#[component]
fn TasksCard() -> impl IntoView {
    let cancel = ServerAction::<CancelMyTask>::new();
    let tick = RwSignal::new(0u32);
    let tasks = Resource::new(move || (cancel.version().get(), tick.get()), |_| my_tasks());
    Effect::new(move |_| {
        if tasks.get().and_then(Result::ok).is_some_and(|list| list.iter().any(TaskView::running)) {
            set_timeout(move || tick.update(|n| *n += 1), std::time::Duration::from_secs(1));
        }
    });
    view! {
        <section class="narrow-wide card tasks">
            <h2>"Tasks"</h2>
            <p class="muted">"Long calls your MCP clients started as tasks: they run on here while the client checks back for the result. Kept for a day."</p>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let list = tasks.await.unwrap_or_default();
                    if list.is_empty() {
                        return view! { <p class="muted small">"None in the last day."</p> }.into_any();
                    }
                    let now = crate::pages::tools::now_ms();
                    view! {
                        <table class="tokens-table tasks-table">
                            <tbody>
                                {list.into_iter().map(|t| view! { <TaskRow task=t now cancel /> }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any()
                })}
            </Transition>
        </section>
    }
}

#[component]
fn TaskRow(task: TaskView, now: i64, cancel: ServerAction<CancelMyTask>) -> impl IntoView {
    let label = match task.status.as_str() {
        "working" => "Working…",
        "input_required" => "Waiting for answers",
        "completed" if task.is_error => "Ended with an error",
        "completed" => "Done",
        "failed" => "Failed",
        _ => "Cancelled",
    };
    let bad = task.is_error || task.status == "failed";
    let running = task.running();
    let id = task.id.clone();
    view! {
        <tr data-task=task.id.clone()>
            <td>
                <strong class="mono">{task.tool.clone()}</strong>
                {task.listing.clone().map(|(href, slug)| view! { <br /><a class="small" href=href>{slug}</a> })}
            </td>
            <td>
                <span class=format!("badge task-status task-{}", task.status)>{running.then(|| view! { <span class="spinner" aria-hidden="true"></span> })}{label}</span>
                // Progress says where a run is; once it ended, its outcome does.
                {task.status_message.clone().filter(|_| running).map(|m| view! { <br /><span class="small muted">{m}</span> })}
                {task.outcome.clone().map(|o| view! { <div class=if bad { "task-outcome small mono error" } else { "task-outcome small mono" }>{o}</div> })}
            </td>
            <td class="small muted">"started " {crate::pages::tools::ago(task.created_at, now.max(task.created_at))}</td>
            <td>
                {running.then(|| view! {
                    <ActionForm action=cancel>
                        <input type="hidden" name="id" value=id.clone() />
                        <button type="submit" class="link-button danger">"Cancel"</button>
                    </ActionForm>
                })}
            </td>
        </tr>
    }
}

/// The person's own MCP endpoint: every tool they may use, behind four tools
/// (search, describe, call, run code), with their starred tools listed directly.
#[component]
fn PersonalEndpointCard() -> impl IntoView {
    let endpoint = Resource::new(|| (), |()| personal_endpoint());
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                endpoint.await.ok().map(|p| view! {
                    <div class="narrow-wide personal-endpoint">
                        <ConnectPanel endpoint=p.endpoint clients=p.connect pinned=None tools=Vec::new() personal=true />
                    </div>
                })
            })}
        </Transition>
    }
}

/// MCP clients connected with OAuth: which listing each may use, revocable at once.
#[component]
fn GrantsCard() -> impl IntoView {
    let revoke = ServerAction::<RevokeGrant>::new();
    let grants = Resource::new(move || revoke.version().get(), |_| my_grants());
    let now = crate::pages::tools::now_ms();
    view! {
        <section class="narrow-wide card grants">
            <h2>"Connected applications"</h2>
            <p class="muted">"MCP clients you allowed through OAuth (“Allow” on the consent page). Revoking one ends its access at its next request."</p>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let list = grants.await.unwrap_or_default();
                    if list.is_empty() {
                        return view! { <p class="muted small">"None yet."</p> }.into_any();
                    }
                    view! {
                        <table class="tokens-table grants-table">
                            <tbody>
                                {list.into_iter().map(|g| {
                                    let id = g.id;
                                    let href = g.href.clone();
                                    let used = g.last_used_at.map(|t| crate::pages::tools::ago(t, now.max(t))).unwrap_or_else(|| "never".into());
                                    view! {
                                        <tr>
                                            <td><strong>{g.client_name.clone()}</strong></td>
                                            <td class="small"><a href=href>{g.listing.clone()}</a>
                                                {if g.may_call { " · list and run" } else { " · list only" }}</td>
                                            <td class="small muted">"allowed " {crate::pages::tools::ago(g.created_at, now.max(g.created_at))}<br />"used " {used}</td>
                                            <td><button type="button" class="link-button danger" on:click=move |_| { revoke.dispatch(RevokeGrant { id }); }>"Revoke"</button></td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any()
                })}
            </Transition>
        </section>
    }
}

/// Personal API tokens for MCP clients: created here, shown once, revocable.
#[component]
fn TokensCard() -> impl IntoView {
    let create = ServerAction::<CreateToken>::new();
    let revoke = ServerAction::<RevokeToken>::new();
    let tokens = Resource::new(move || (create.version().get(), revoke.version().get()), |_| my_tokens());
    let now = crate::pages::tools::now_ms();
    let when = move |t: Option<i64>| t.map(|t| crate::pages::tools::ago(t, now.max(t))).unwrap_or_else(|| "never".into());
    view! {
        <section class="narrow-wide card form-card tokens">
            <h2>"API tokens"</h2>
            <p class="muted">"MCP clients connect to Toolshed with a personal token, sent as " <code>"Authorization: Bearer …"</code> ". A token is shown once; keep it like a password."</p>
            {move || create.value().get().map(|r| match r {
                Ok(token) => view! {
                    <div class="alert ok new-token">
                        <strong>"Your new token (copy it now, it will not be shown again):"</strong>
                        <code class="token-value">{token}</code>
                    </div>
                }.into_any(),
                Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
            })}
            <ActionForm action=create attr:class="stack">
                <div class="row">
                    <label>"Name" <input name="name" required maxlength="80" placeholder="e.g. Claude Desktop on my laptop" /></label>
                    <label>"Expires"
                        <select name="expires_in_days">
                            <option value="30">"in 30 days"</option>
                            <option value="90" selected=true>"in 90 days"</option>
                            <option value="365">"in a year"</option>
                            <option value="never">"never"</option>
                        </select>
                    </label>
                </div>
                <label>"Only these listings (department/name, one per line; empty: everything you can see)"
                    <textarea name="scope" rows="2" class="mono"></textarea>
                </label>
                <label class="inline">
                    <input type="checkbox" name="publish" value="on" />
                    " May publish: save, test and publish tools from CI (" <code>"toolshed push"</code> ", " <code>"/api/v1"</code> ")"
                </label>
                <button type="submit" class="button secondary">"Create token"</button>
            </ActionForm>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let list = tokens.await.unwrap_or_default();
                    view! {
                        <table class="tokens-table">
                            <tbody>
                                {list.into_iter().map(|t| {
                                    let id = t.id;
                                    let mut scope = if t.scope.is_empty() { "all listings".to_owned() } else { t.scope.join(", ") };
                                    if t.publish {
                                        scope.push_str(" · may publish");
                                    }
                                    view! {
                                        <tr class:revoked=t.revoked>
                                            <td><strong>{t.name.clone()}</strong><br /><code class="small">{t.prefix.clone()}</code></td>
                                            <td class="small">{scope}</td>
                                            <td class="small muted">"used " {when(t.last_used_at)}<br />
                                                {if t.revoked { "revoked".to_owned() } else { t.expires_at.map(|e| format!("expires {}", if e < now { "— expired".to_owned() } else { crate::pages::tools::until(e, now) })).unwrap_or_else(|| "no expiry".into()) }}
                                            </td>
                                            <td>{(!t.revoked).then(|| view! {
                                                <button type="button" class="link-button danger" on:click=move |_| { revoke.dispatch(RevokeToken { id }); }>"Revoke"</button>
                                            })}</td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    }
                })}
            </Transition>
        </section>
    }
}
