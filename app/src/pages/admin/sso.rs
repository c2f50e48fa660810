//! Single sign-on: the provider groups that put a new account in a department
//! with a role (the account's first sign-in decides; see `toolshed_domain::sso`).

use leptos::prelude::*;

use crate::api::{admin_departments, group_mappings, MapGroup, UnmapGroup};

#[component]
pub fn GroupsCard() -> impl IntoView {
    let map = ServerAction::<MapGroup>::new();
    let unmap = ServerAction::<UnmapGroup>::new();
    let list = Resource::new(move || (map.version().get(), unmap.version().get()), |_| group_mappings());
    let departments = Resource::new(|| (), |()| admin_departments());
    let group = RwSignal::new(String::new());
    let notice = RwSignal::new(None::<&'static str>);
    Effect::new(move |_| {
        if let Some(Ok(())) = map.value().get() {
            notice.set(Some("Group linked: people in it who sign in for the first time join that department."));
            group.set(String::new());
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(())) = unmap.value().get() {
            notice.set(Some("Link removed. Accounts it made stay where they are."));
        }
    });
    let error = move || super::first_error([map.value().get().and_then(Result::err), unmap.value().get().and_then(Result::err)]);
    view! {
        <section class="card sso-groups">
            <h2>"Single sign-on: groups and departments"</h2>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let view = list.await.ok()?;
                    let intro = match view.provider {
                        Some(provider) => format!(
                            "Someone signing in with {provider} for the first time joins the department of their most powerful linked group. \
                             In no linked group, they get no account."
                        ),
                        None => "Single sign-on is off (set TOOLSHED_OIDC_ISSUER): these links apply once it is on.".to_owned(),
                    };
                    Some(view! {
                        <p class="muted small">{intro}</p>
                        <table class="admin-table">
                            <thead><tr><th>"Group at the provider"</th><th>"Department"</th><th>"Role"</th><th></th></tr></thead>
                            <tbody>
                                {view.mappings.is_empty().then(|| view! { <tr><td colspan="4" class="muted">"No group is linked yet."</td></tr> })}
                                {view.mappings.into_iter().map(|m| {
                                    let (field, label) = (m.group.clone(), format!("Remove the link of {}", m.group));
                                    view! {
                                    <tr data-group=m.group.clone()>
                                        <td><code>{m.group.clone()}</code></td>
                                        <td>{m.department_title}</td>
                                        <td>{m.role}</td>
                                        <td>
                                            <ActionForm action=unmap attr:class="inline-form">
                                                <input type="hidden" name="group" value=field />
                                                <button type="submit" class="link-button" aria-label=label>"Remove"</button>
                                            </ActionForm>
                                        </td>
                                    </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    })
                })}
            </Transition>
            {error}
            {move || notice.get().map(|text| view! { <p class="alert ok" role="status">{text}</p> })}
            <ActionForm action=map attr:class="inline-form map-group">
                <input name="group" required maxlength="256" placeholder="group (e.g. research-team)" aria-label="Group at the provider"
                    prop:value=move || group.get() on:input=move |ev| group.set(event_target_value(&ev)) />
                <select name="department" aria-label="Department" required>
                    <Transition fallback=|| ()>
                        {move || Suspend::new(async move {
                            departments.await.unwrap_or_default().into_iter().map(|d| view! {
                                <option value=d.name.clone()>{d.title}</option>
                            }).collect_view()
                        })}
                    </Transition>
                </select>
                <select name="role" aria-label="Role">
                    <option value="member">"member"</option>
                    <option value="author" selected>"author"</option>
                    <option value="maintainer">"maintainer"</option>
                </select>
                <button type="submit" class="button secondary small">"Link group"</button>
            </ActionForm>
        </section>
    }
}
