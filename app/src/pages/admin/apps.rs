//! Upstream OAuth apps for connected accounts: tools that act as their
//! caller at Jira, GitHub, … send each person's own token. Admins manage
//! every app on the Admin page; a department's maintainers, where an admin
//! allows it, manage their department's on People. The client secret is
//! write-only: the card shows whether one is set, never it.

use leptos::prelude::*;

use crate::api::{oauth_apps, AppView, RegisterApp, RemoveApp, UpdateApp};
use crate::components::first_error;

/// `department`: the one department whose apps the card manages (a
/// maintainer's); `None`: every app, for any department or all (an admin's).
#[component]
pub fn AppsCard(#[prop(optional)] department: Option<String>) -> impl IntoView {
    let register = ServerAction::<RegisterApp>::new();
    let update = ServerAction::<UpdateApp>::new();
    let remove = ServerAction::<RemoveApp>::new();
    let apps = Resource::new(move || (register.version().get(), update.version().get(), remove.version().get()), |_| oauth_apps());
    let error = move || {
        first_error([
            register.value().get().and_then(Result::err),
            update.value().get().and_then(Result::err),
            remove.value().get().and_then(Result::err),
        ])
    };
    let saved = move || {
        update.value().get().and_then(Result::ok).map(|app| {
            view! { <p class="alert ok" role="status">{format!("Saved “{}”.", app.name)}</p> }
        })
    };
    // Once registered, the form is emptied: the secret typed into it should not linger in the page.
    let form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if let (Some(Ok(_)), Some(form)) = (register.value().get(), form.get()) {
            form.reset();
        }
    });
    let (title, whose) = match &department {
        Some(d) => (format!("Apps of {d} for connected accounts"), format!("Registered here, an app serves {d}'s tools only. ")),
        None => ("Apps for connected accounts".to_owned(), String::new()),
    };
    let department_field = match department {
        Some(d) => view! { <input type="hidden" name="department" value=d /> }.into_any(),
        None => view! {
            <label>"For the department (empty: every department)" <input name="department" maxlength="64" placeholder="" /></label>
        }
        .into_any(),
    };
    view! {
        <section class="card oauth-apps" id="apps">
            <h2>{title}</h2>
            <p class="muted small">
                "A tool that calls " <code>"$fetch(url, {account: 'name'})"</code> " sends its caller's own token for the app, "
                "to the app's hosts only; each person connects their account on their Account page. " {whose}
                "Client secrets are stored encrypted."
            </p>
            {error}
            {saved}
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let list = apps.await.unwrap_or_default();
                    if list.is_empty() {
                        return view! { <p class="muted">"No app yet."</p> }.into_any();
                    }
                    view! {
                        <table class="admin-table apps-table stacked">
                            <thead><tr><th>"Name"</th><th>"Endpoints"</th><th>"Scopes and hosts"</th><th></th></tr></thead>
                            <tbody>{list.into_iter().map(|a| view! { <AppRow app=a update remove /> }).collect_view()}</tbody>
                        </table>
                    }.into_any()
                })}
            </Transition>
            <h3>"Register an app"</h3>
            <ActionForm action=register node_ref=form attr:class="stack register-app">
                <div class="row">
                    <label>"Name tools use" <input name="name" required maxlength="40" pattern="[a-z][a-z0-9_]*" placeholder="jira" /></label>
                    {department_field}
                </div>
                <AppFields app=None />
                <button type="submit" class="button secondary">"Register app"</button>
            </ActionForm>
        </section>
    }
}

/// The endpoints, client, scopes and hosts of a form that registers an app,
/// or (`app`) changes one: its values filled in, and its secret kept unless
/// a new one is typed.
#[component]
fn AppFields(app: Option<AppView>) -> impl IntoView {
    let value = |f: fn(&AppView) -> String| app.as_ref().map(f).unwrap_or_default();
    let secret_hint = match &app {
        Some(a) if a.secret_set => "Client secret (empty: keep the stored one)",
        _ => "Client secret",
    };
    let clear = app.as_ref().is_some_and(|a| a.secret_set).then(|| {
        view! { <label class="inline"><input type="checkbox" name="clear_secret" value="yes" />" remove the stored secret"</label> }
    });
    // Changing an app gives its endpoints; registering one may discover them instead.
    let issuer = match app {
        Some(_) => view! { <input type="hidden" name="issuer" value="" /> }.into_any(),
        None => view! {
            <label>"Issuer, to discover the endpoints from"
                <input name="issuer" type="url" placeholder="https://auth.example.com" /></label>
            <p class="muted small">"… or, without an issuer, the endpoints themselves:"</p>
        }
        .into_any(),
    };
    view! {
        {issuer}
        <div class="row">
            <label>"Authorization endpoint" <input name="authorize_url" type="url" value=value(|a| a.authorize_url.clone()) /></label>
            <label>"Token endpoint" <input name="token_url" type="url" value=value(|a| a.token_url.clone()) /></label>
            <label>"Revocation endpoint (optional)" <input name="revoke_url" type="url" value=value(|a| a.revoke_url.clone().unwrap_or_default()) /></label>
        </div>
        <div class="row">
            <label>"Client ID" <input name="client_id" required maxlength="500" value=value(|a| a.client_id.clone()) /></label>
            <label>{secret_hint} <input name="client_secret" type="password" autocomplete="off" maxlength="4000" /></label>
            {clear}
        </div>
        <div class="row">
            <label>"Scopes (space-separated)" <input name="scopes" placeholder="read:jira-work offline_access" value=value(|a| a.scopes.join(" ")) /></label>
            <label>"Hosts its tokens may be sent to" <input name="hosts" required placeholder="api.atlassian.com" value=value(|a| a.hosts.join(" ")) /></label>
        </div>
    }
}

#[component]
fn AppRow(app: AppView, update: ServerAction<UpdateApp>, remove: ServerAction<RemoveApp>) -> impl IntoView {
    let (name, for_remove, for_update) = (app.name.clone(), app.name.clone(), app.name.clone());
    let summary = format!("Change “{name}”");
    let department = if app.department.is_empty() { "every department".to_owned() } else { app.department.clone() };
    let editing = app.clone();
    view! {
        <tr data-app=app.name.clone()>
            <td><code>{app.name.clone()}</code><br /><span class="muted small">{department}</span></td>
            <td class="small" data-label="Endpoints">"authorize " <code>{app.authorize_url.clone()}</code><br />"token " <code>{app.token_url.clone()}</code>
                {app.revoke_url.clone().map(|r| view! { <br />"revoke " <code>{r}</code> })}
                <br />"client " <code>{app.client_id.clone()}</code>{if app.secret_set { " · secret set" } else { " · no secret" }}</td>
            <td class="small" data-label="Scopes">{if app.scopes.is_empty() { "no scopes".to_owned() } else { app.scopes.join(" ") }}<br />
                <span class="muted">"to " {app.hosts.join(", ")}</span></td>
            <td>
                <ActionForm action=remove attr:class="inline-form">
                    <input type="hidden" name="name" value=for_remove />
                    <button type="submit" class="link-button danger">"Remove"</button>
                </ActionForm>
            </td>
        </tr>
        <tr class="edit-app" data-edit-app=name>
            <td colspan="4">
                <details>
                    <summary>{summary}</summary>
                    <p class="muted small">
                        "Its name and department stay: tools name it. A new host asks everyone connected to connect again; a new client ID or endpoint disconnects everyone (revoked at the old endpoints) and clears the secret unless you type it again."
                    </p>
                    <ActionForm action=update attr:class="stack update-app">
                        <input type="hidden" name="name" value=for_update />
                        <AppFields app=Some(editing) />
                        <button type="submit" class="button secondary small">"Save changes"</button>
                    </ActionForm>
                </details>
            </td>
        </tr>
    }
}
