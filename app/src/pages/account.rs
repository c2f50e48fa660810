use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_query_map;

use crate::api::ChangePassword;
use crate::components::FormError;
use crate::Auth;

#[component]
pub fn Account() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let change_password = ServerAction::<ChangePassword>::new();
    let query = use_query_map();
    let changed = move || query.read().get("changed").is_some() && change_password.value().get().is_none_or(|r| r.is_ok());
    let error = Signal::derive(move || change_password.value().get().and_then(Result::err));
    view! {
        <Title text="Account" />
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match auth.me.await {
                    Ok(Some(me)) => view! {
                        <section class="narrow card">
                            <h1>{me.display_name.clone()}</h1>
                            <dl class="facts">
                                <dt>"Username"</dt><dd>{me.username.clone()}</dd>
                                <dt>"Department"</dt><dd>{me.department_title.clone()}</dd>
                                <dt>"Role"</dt><dd>{if me.is_admin { "Administrator" } else { "Member" }}</dd>
                            </dl>
                        </section>
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
                    }.into_any(),
                    _ => view! { <Redirect path="/login?next=/account" /> }.into_any(),
                }
            })}
        </Transition>
    }
}
