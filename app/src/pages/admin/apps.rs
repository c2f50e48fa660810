//! Upstream OAuth apps for connected accounts: tools that act as their
//! caller at Jira, GitHub, … send each person's own token. The client secret
//! is write-only: the card shows whether one is set, never it.

use leptos::prelude::*;

use crate::api::{oauth_apps, AppView, RegisterApp, RemoveApp};
use crate::components::first_error;

#[component]
pub fn AppsCard() -> impl IntoView {
    let register = ServerAction::<RegisterApp>::new();
    let remove = ServerAction::<RemoveApp>::new();
    let apps = Resource::new(move || (register.version().get(), remove.version().get()), |_| oauth_apps());
    let error = move || first_error([register.value().get().and_then(Result::err), remove.value().get().and_then(Result::err)]);
    // Once registered, the form is emptied: the secret typed into it should not linger in the page.
    let form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if let (Some(Ok(_)), Some(form)) = (register.value().get(), form.get()) {
            form.reset();
        }
    });
    view! {
        <section class="card oauth-apps" id="apps">
            <h2>"Apps for connected accounts"</h2>
            <p class="muted small">
                "A tool that calls " <code>"$fetch(url, {account: 'name'})"</code> " sends its caller's own token for the app, "
                "to the app's hosts only; each person connects their account on their Account page. Client secrets are stored encrypted."
            </p>
            {error}
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let list = apps.await.unwrap_or_default();
                    if list.is_empty() {
                        return view! { <p class="muted">"No app yet."</p> }.into_any();
                    }
                    view! {
                        <table class="admin-table apps-table stacked">
                            <thead><tr><th>"Name"</th><th>"Endpoints"</th><th>"Scopes and hosts"</th><th></th></tr></thead>
                            <tbody>{list.into_iter().map(|a| view! { <AppRow app=a remove /> }).collect_view()}</tbody>
                        </table>
                    }.into_any()
                })}
            </Transition>
            <h3>"Register an app"</h3>
            <ActionForm action=register node_ref=form attr:class="stack register-app">
                <div class="row">
                    <label>"Name tools use" <input name="name" required maxlength="40" pattern="[a-z][a-z0-9_]*" placeholder="jira" /></label>
                    <label>"For the department (empty: every department)" <input name="department" maxlength="64" placeholder="" /></label>
                </div>
                <label>"Issuer, to discover the endpoints from"
                    <input name="issuer" type="url" placeholder="https://auth.example.com" /></label>
                <p class="muted small">"… or, without an issuer, the endpoints themselves:"</p>
                <div class="row">
                    <label>"Authorization endpoint" <input name="authorize_url" type="url" /></label>
                    <label>"Token endpoint" <input name="token_url" type="url" /></label>
                    <label>"Revocation endpoint (optional)" <input name="revoke_url" type="url" /></label>
                </div>
                <div class="row">
                    <label>"Client ID" <input name="client_id" required maxlength="500" /></label>
                    <label>"Client secret" <input name="client_secret" type="password" autocomplete="off" maxlength="4000" /></label>
                </div>
                <div class="row">
                    <label>"Scopes (space-separated)" <input name="scopes" placeholder="read:jira-work offline_access" /></label>
                    <label>"Hosts its tokens may be sent to" <input name="hosts" required placeholder="api.atlassian.com" /></label>
                </div>
                <button type="submit" class="button secondary">"Register app"</button>
            </ActionForm>
        </section>
    }
}

#[component]
fn AppRow(app: AppView, remove: ServerAction<RemoveApp>) -> impl IntoView {
    let name = app.name.clone();
    let department = if app.department.is_empty() { "every department".to_owned() } else { app.department.clone() };
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
                    <input type="hidden" name="name" value=name />
                    <button type="submit" class="link-button danger">"Remove"</button>
                </ActionForm>
            </td>
        </tr>
    }
}
