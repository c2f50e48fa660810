//! `/approvals`: calls of tools that write, held until someone who may decide
//! says yes (`toolshed_domain::tools::approvals`). Approvers see what waits for them,
//! each with the exact arguments the call will run with, and approve or
//! decline it; everyone sees their own requests. Every action is a plain
//! form, so it works before the wasm has loaded; the lists refresh every few
//! seconds while something waits.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{approval_settings, approvals, ApprovalView, ApprovalsView, DecideApproval, SetApprovalSettings, WithdrawApproval};
use crate::components::{first_error, RequireUser};
use crate::pages::tools::{ago, now_ms};

/// How often the page looks again while a request waits.
const REFRESH: std::time::Duration = std::time::Duration::from_secs(3);

#[component]
pub fn Approvals() -> impl IntoView {
    let decide = ServerAction::<DecideApproval>::new();
    let withdraw = ServerAction::<WithdrawApproval>::new();
    // The header's count of calls waiting goes down with each decision.
    expect_context::<crate::Auth>().refresh_after(decide);
    let tick = RwSignal::new(0u32);
    let data = Resource::new(move || (decide.version().get(), withdraw.version().get(), tick.get()), |_| approvals());
    Effect::new(move |_| {
        let waiting = data.get().and_then(Result::ok).is_some_and(|d| d.inbox.iter().chain(&d.mine).any(ApprovalView::pending));
        if waiting {
            set_timeout(move || tick.update(|n| *n += 1), REFRESH);
        }
    });
    let error = move || first_error([decide.value().get().and_then(Result::err), withdraw.value().get().and_then(Result::err)]);
    view! {
        <Title text="Approvals" />
        <RequireUser>
            <div class="page-head"><h1>"Approvals"</h1></div>
            <p class="muted">
                "A department can require that calls of its tools that write (send more than GET or HEAD) wait for a person's yes. "
                "An approval lets exactly those arguments run once, for the person who called; it lasts an hour, a request a day."
            </p>
            {error}
            {move || decide.value().get().and_then(Result::ok).map(|()| view! { <p class="alert ok" role="status">"Decided: the caller's client hears of it when it looks again."</p> })}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                        Ok(ApprovalsView { inbox, mine }) => view! { <Inbox inbox decide /> <Mine mine withdraw /> }.into_any(),
                    }
                })}
            </Transition>
            <ApprovalSettingsCard />
        </RequireUser>
    }
}

fn status_label(status: &str) -> &'static str {
    match status {
        "pending" => "Waiting",
        "approved" => "Approved",
        "declined" => "Declined",
        "withdrawn" => "Withdrawn",
        "used" => "Approved, ran",
        _ => "Expired",
    }
}

fn status_badge(a: &ApprovalView) -> impl IntoView {
    view! { <span class=format!("badge approval-status approval-{}", a.status)>{status_label(&a.status)}</span> }
}

/// What waits for the viewer's decision, then what they (and others) decided lately.
#[component]
fn Inbox(inbox: Vec<ApprovalView>, decide: ServerAction<DecideApproval>) -> impl IntoView {
    let now = now_ms();
    let (waiting, decided): (Vec<_>, Vec<_>) = inbox.into_iter().partition(ApprovalView::pending);
    if waiting.is_empty() && decided.is_empty() {
        return ().into_any();
    }
    view! {
        <section class="card approvals-inbox">
            <h2>{format!("Waiting for your decision ({})", waiting.len())}</h2>
            {waiting.is_empty().then(|| view! { <p class="muted">"Nothing waits for you."</p> })}
            {waiting.into_iter().map(|a| {
                let id = a.id.clone();
                view! {
                    <article class="approval" data-approval=a.id.clone()>
                        <header>
                            <a class="mono" href=format!("/tools/{}", a.tool)><strong>{a.tool.clone()}</strong></a>
                            " " <span class="badge">{format!("v{}", a.version)}</span>
                            " " <span class="muted">{a.tool_title.clone()}</span>
                        </header>
                        <p class="small">
                            <strong>{a.requester_name.clone()}</strong> " " <span class="muted">"@" {a.requester.clone()}</span>
                            {format!(" asked {}; the request expires {}.", ago(a.created_at, now.max(a.created_at)), in_time(a.expires_at, now))}
                        </p>
                        <p class="small muted">{format!("It will run version {} with exactly these arguments:", a.version)}</p>
                        <pre class="approval-arguments mono">{a.arguments.clone()}</pre>
                        <ActionForm action=decide attr:class="approval-decision">
                            <input type="hidden" name="id" value=id />
                            <label class="small">"Note for the caller (optional)" <input name="note" maxlength="500" /></label>
                            <div class="row">
                                <button type="submit" name="decision" value="approve" class="button">"Approve"</button>
                                <button type="submit" name="decision" value="decline" class="button secondary danger">"Decline"</button>
                            </div>
                        </ActionForm>
                    </article>
                }
            }).collect_view()}
            {(!decided.is_empty()).then(|| view! {
                <h3>"Decided in the last week"</h3>
                <table class="admin-table stacked approvals-decided">
                    <thead><tr><th>"Tool"</th><th>"Caller"</th><th>"Arguments"</th><th>"Decision"</th></tr></thead>
                    <tbody>
                        {decided.into_iter().map(|a| view! {
                            <tr data-approval=a.id.clone()>
                                <td class="mono">{a.tool.clone()}</td>
                                <td>"@" {a.requester.clone()}</td>
                                <td><code class="small">{compact(&a.arguments)}</code></td>
                                <td>{status_badge(&a)} {a.decided_by.clone().map(|by| view! { <span class="small muted">" by @" {by}</span> })}
                                    {a.note.clone().map(|n| view! { <br /><span class="small">"“" {n} "”"</span> })}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            })}
        </section>
    }
    .into_any()
}

/// The viewer's own requests, newest first.
#[component]
fn Mine(mine: Vec<ApprovalView>, withdraw: ServerAction<WithdrawApproval>) -> impl IntoView {
    let now = now_ms();
    view! {
        <section class="card approvals-mine">
            <h2>"Your requests"</h2>
            {mine.is_empty().then(|| view! { <p class="muted">"None in the last week. A call that needs approval files one, and says so to the client that called."</p> })}
            {(!mine.is_empty()).then(|| view! {
                <table class="admin-table stacked">
                    <thead><tr><th>"Tool"</th><th>"Arguments"</th><th>"Status"</th><th></th></tr></thead>
                    <tbody>
                        {mine.into_iter().map(|a| {
                            let pending = a.pending();
                            let id = a.id.clone();
                            view! {
                                <tr data-approval=a.id.clone()>
                                    <td><span class="mono">{a.tool.clone()}</span><br /><span class="small muted">{ago(a.created_at, now.max(a.created_at))}</span></td>
                                    <td><code class="small">{compact(&a.arguments)}</code></td>
                                    <td>{status_badge(&a)} {a.decided_by.clone().map(|by| view! { <span class="small muted">" by @" {by}</span> })}
                                        {a.note.clone().map(|n| view! { <br /><span class="small">"“" {n} "”"</span> })}
                                        {(a.status == "approved").then(|| view! { <br /><span class="small">"Call again with the same arguments (your client may already be doing so)."</span> })}</td>
                                    <td>{pending.then(|| view! {
                                        <ActionForm action=withdraw>
                                            <input type="hidden" name="id" value=id.clone() />
                                            <button type="submit" class="link-button danger">"Withdraw"</button>
                                        </ActionForm>
                                    })}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            })}
        </section>
    }
}

/// The department's setting, for its maintainers: whether its tools that
/// write wait for approval, and who decides.
#[component]
fn ApprovalSettingsCard() -> impl IntoView {
    let set = ServerAction::<SetApprovalSettings>::new();
    let settings = Resource::new(move || set.version().get(), |_| approval_settings());
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                settings.await.ok().flatten().map(|s| view! {
                    <section class="card approval-settings">
                        <h2>{format!("Approvals in {}", s.department)}</h2>
                        <ActionForm action=set attr:class="stack">
                            <input type="hidden" name="department" value=s.department.clone() />
                            <label>"Calls of this department's tools that write"
                                <select name="required">
                                    <option value="off" selected=!s.required>"run at once"</option>
                                    <option value="writes" selected=s.required>"wait for approval"</option>
                                </select>
                            </label>
                            <label>"Approvers (usernames; empty: the department's maintainers)"
                                <input name="approvers" value=s.approvers.join(", ") placeholder="e.g. dana, lee" />
                            </label>
                            <button type="submit" class="button secondary small">"Save"</button>
                        </ActionForm>
                        {move || set.value().get().map(|r| match r {
                            Ok(()) => view! { <p class="alert ok" role="status">"Saved: it applies to the next call."</p> }.into_any(),
                            Err(e) => view! { <p class="alert error" role="alert">{e.to_string()}</p> }.into_any(),
                        })}
                    </section>
                })
            })}
        </Transition>
    }
}

/// Arguments on one line, for the lists.
fn compact(pretty: &str) -> String {
    let one_line = serde_json::from_str::<serde_json::Value>(pretty).map(|v| v.to_string()).unwrap_or_else(|_| pretty.to_owned());
    match one_line.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}

/// "in 3 hours", "in 20 minutes", "now".
fn in_time(at: i64, now: i64) -> String {
    match (at - now) / 60_000 {
        ..=0 => "now".into(),
        m @ 1..=59 => format!("in {m} min"),
        m => format!("in {} h", m / 60),
    }
}
