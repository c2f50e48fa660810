//! `/people`: a department's people, for its maintainers (and admins, for
//! every department): invite someone, decide requests to join, change roles;
//! and its settings its maintainers decide (tests before publish, and its
//! apps for connected accounts where an admin allows).
//! Every action is a plain form, so it works before the wasm has loaded.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{people, CreateInvite, DecideRequest, InviteLink, PeopleView, SetDepartmentRole, SetDepartmentTests, WithdrawInvite};
use crate::components::{first_error, RequireUser};
use crate::pages::admin::AppsCard;
use crate::pages::tools::{ago, now_ms};

const ROLES: [(&str, &str); 3] = [("member", "Member"), ("author", "Author"), ("maintainer", "Maintainer")];

fn role_options(selected: &str) -> impl IntoView {
    let selected = selected.to_owned();
    ROLES.into_iter().map(|(value, label)| view! { <option value=value selected=value == selected>{label}</option> }).collect_view()
}

fn days_left(expires_at: i64, now: i64) -> String {
    match (expires_at - now + 86_399_999) / 86_400_000 {
        ..=1 => "expires within a day".to_owned(),
        n => format!("expires in {n} days"),
    }
}

#[component]
pub fn People() -> impl IntoView {
    let invite = ServerAction::<CreateInvite>::new();
    let withdraw = ServerAction::<WithdrawInvite>::new();
    let decide = ServerAction::<DecideRequest>::new();
    let set_role = ServerAction::<SetDepartmentRole>::new();
    let data = Resource::new(
        move || (invite.version().get(), withdraw.version().get(), decide.version().get(), set_role.version().get()),
        |_| people(),
    );
    let notice = RwSignal::new(None::<&'static str>);
    Effect::new(move |_| {
        if let Some(Ok(())) = withdraw.value().get() {
            notice.set(Some("Invitation withdrawn: its link no longer works."));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(())) = decide.value().get() {
            notice.set(Some("Request decided."));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(())) = set_role.value().get() {
            notice.set(Some("Role changed."));
        }
    });
    let error = move || {
        first_error([
            invite.value().get().and_then(Result::err),
            withdraw.value().get().and_then(Result::err),
            decide.value().get().and_then(Result::err),
            set_role.value().get().and_then(Result::err),
        ])
    };
    view! {
        <Title text="People" />
        <RequireUser>
            <div class="page-head">
                <h1>"People"</h1>
                <a class="button secondary" href="/admin/servers">"External MCP servers"</a>
            </div>
            {error}
            {move || notice.get().map(|text| view! { <p class="alert ok" role="status">{text}</p> })}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                        Ok(data) => view! { <PeopleCards data invite withdraw decide set_role /> }.into_any(),
                    }
                })}
            </Transition>
        </RequireUser>
    }
}

#[component]
fn PeopleCards(
    data: PeopleView,
    invite: ServerAction<CreateInvite>,
    withdraw: ServerAction<WithdrawInvite>,
    decide: ServerAction<DecideRequest>,
    set_role: ServerAction<SetDepartmentRole>,
) -> impl IntoView {
    let now = now_ms();
    let PeopleView { people, invites, requests, departments, own_tests_required, own_apps } = data;
    view! {
        {own_tests_required.map(|(department, required)| view! { <DepartmentTestsCard department required /> })}
        {own_apps.map(|department| view! { <AppsCard department /> })}
        <section class="card invite">
            <h2>"Invite someone"</h2>
            <p class="muted small">
                "An invitation link works once, for the department and role you pick; send it to the person yourself. "
                "Members browse, run and connect; authors also create and publish; maintainers also invite and approve."
            </p>
            <ActionForm action=invite attr:class="stack">
                <div class="row">
                    <label>"Department"
                        <select name="department">
                            {departments.into_iter().map(|d| view! { <option value=d.clone()>{d.clone()}</option> }).collect_view()}
                        </select>
                    </label>
                    <label>"Role" <select name="role">{role_options("author")}</select></label>
                    <label>"Valid for (days)" <input name="days" type="number" min="1" max="30" value="7" /></label>
                </div>
                <button type="submit" class="button" disabled=move || invite.pending().get()>"Create invitation link"</button>
            </ActionForm>
            {move || invite.value().get().and_then(Result::ok).map(|link: InviteLink| view! {
                <div class="alert ok new-invite" role="status">
                    <p>{format!("Invitation to {} as {} created. Copy the link now: it is shown only once.", link.department, link.role)}</p>
                    <input class="mono" readonly value=link.url aria-label="Invitation link" />
                </div>
            })}
        </section>
        <section class="card requests">
            <h2>{format!("Requests to join ({})", requests.len())}</h2>
            {requests.is_empty().then(|| view! { <p class="muted">"Nobody is waiting."</p> })}
            <ul class="plain">
                {requests.into_iter().map(|r| {
                    let (for_approve, for_decline) = (r.username.clone(), r.username.clone());
                    view! {
                        <li data-request=r.username.clone()>
                            <strong>{r.display_name.clone()}</strong> " " <span class="muted">"@" {r.username.clone()} " → " {r.department.clone()} ", " {ago(r.requested_at, now.max(r.requested_at))}</span>
                            <ActionForm action=decide attr:class="inline-form">
                                <input type="hidden" name="username" value=for_approve />
                                <select name="decision" aria-label="Role">{role_options("member")}</select>
                                <button type="submit" class="link-button">"Approve"</button>
                            </ActionForm>
                            <ActionForm action=decide attr:class="inline-form">
                                <input type="hidden" name="username" value=for_decline />
                                <input type="hidden" name="decision" value="decline" />
                                <button type="submit" class="link-button danger">"Decline"</button>
                            </ActionForm>
                        </li>
                    }
                }).collect_view()}
            </ul>
        </section>
        <section class="card invites">
            <h2>{format!("Open invitations ({})", invites.len())}</h2>
            {invites.is_empty().then(|| view! { <p class="muted">"None."</p> })}
            <ul class="plain">
                {invites.into_iter().map(|i| view! {
                    <li>
                        {format!("{} as {}, by @{}, ", i.department, i.role, i.created_by)}
                        {days_left(i.expires_at, now)}
                        <ActionForm action=withdraw attr:class="inline-form">
                            <input type="hidden" name="id" value=i.id />
                            <button type="submit" class="link-button danger">"Withdraw"</button>
                        </ActionForm>
                    </li>
                }).collect_view()}
            </ul>
        </section>
        <section class="card members">
            <h2>{format!("Members ({})", people.len())}</h2>
            <table class="admin-table stacked">
                <thead><tr><th>"Person"</th><th>"Department"</th><th>"Role"</th></tr></thead>
                <tbody>
                    {people.into_iter().map(|p| {
                        let for_role = p.username.clone();
                        view! {
                            <tr data-person=p.username.clone()>
                                <td><strong>{p.display_name.clone()}</strong> " " <span class="muted">"@" {p.username.clone()}</span>
                                    {p.is_admin.then(|| view! { " " <span class="badge">"admin"</span> })}</td>
                                <td data-label="Department">{p.department.clone()}</td>
                                <td data-label="Role">
                                    <ActionForm action=set_role attr:class="inline-form">
                                        <input type="hidden" name="username" value=for_role />
                                        <select name="role" aria-label="Role">{role_options(&p.role)}</select>
                                        <button type="submit" class="link-button">"Change"</button>
                                    </ActionForm>
                                </td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}

/// Whether the department's tools publish only with passing test cases: its
/// maintainers decide (admins, for any department, on the Admin page).
#[component]
fn DepartmentTestsCard(department: String, required: bool) -> impl IntoView {
    let set = ServerAction::<SetDepartmentTests>::new();
    view! {
        <section class="card department-tests">
            <h2>"Before publishing"</h2>
            <ActionForm action=set attr:class="inline-form">
                <input type="hidden" name="name" value=department.clone() />
                <label>{format!("Tools of {department} publish only with test cases that all pass")}
                    <select name="tests">
                        <option value="off" selected=!required>"not required"</option>
                        <option value="required" selected=required>"required"</option>
                    </select>
                </label>
                <button type="submit" class="button secondary small">"Save"</button>
            </ActionForm>
            {move || set.value().get().map(|r| match r {
                Ok(()) => view! { <p class="alert ok" role="status">"Saved: it applies to the next publish."</p> }.into_any(),
                Err(e) => view! { <p class="alert error" role="alert">{e.to_string()}</p> }.into_any(),
            })}
        </section>
    }
}
