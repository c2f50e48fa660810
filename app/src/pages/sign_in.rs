//! Sign-in and registration. Both are `ActionForm`s: plain HTML forms that post
//! to the server function and work before (or without) the wasm.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{Login, Register};
use crate::components::FormError;
use crate::Auth;

#[component]
pub fn LoginPage() -> impl IntoView {
    let auth = expect_context::<Auth>();
    // Created here, inside <Routes>: that is where a no-JS post's error arrives.
    let login = ServerAction::<Login>::new();
    auth.refresh_after(login);
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_default();
    let error = Signal::derive(move || login.value().get().and_then(Result::err));
    let show = RwSignal::new(false);
    view! {
        <Title text="Sign in" />
        <section class="narrow card form-card">
            <h1>"Sign in"</h1>
            <FormError error />
            <ActionForm action=login attr:class="stack">
                <input type="hidden" name="next" value=next />
                <label>
                    "Username"
                    <input name="username" autocomplete="username" required maxlength="64" autofocus />
                </label>
                <label>
                    "Password"
                    <span class="with-addon">
                        <input
                            name="password"
                            type=move || if show.get() { "text" } else { "password" }
                            autocomplete="current-password"
                            required
                            maxlength="256"
                        />
                        <button type="button" class="addon" on:click=move |_| show.update(|s| *s = !*s)>
                            {move || if show.get() { "Hide" } else { "Show" }}
                        </button>
                    </span>
                </label>
                <button type="submit" class="button" disabled=move || login.pending().get()>
                    {move || if login.pending().get() { "Signing in…" } else { "Sign in" }}
                </button>
            </ActionForm>
            <p class="muted">"New here? " <a href="/register">"Create an account"</a></p>
        </section>
    }
}

#[component]
pub fn RegisterPage() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let register = ServerAction::<Register>::new();
    auth.refresh_after(register);
    let departments = Resource::new(|| (), |_| crate::api::departments());
    let error = Signal::derive(move || register.value().get().and_then(Result::err));
    view! {
        <Title text="Register" />
        <section class="narrow card form-card">
            <h1>"Create your account"</h1>
            <p class="muted">"You publish tools for your department; everyone can browse, run and fork."</p>
            <FormError error />
            <ActionForm action=register attr:class="stack">
                <label>
                    "Username"
                    <input name="username" autocomplete="username" required minlength="2" maxlength="32"
                        pattern="[A-Za-z][A-Za-z0-9_\\-]*" title="Letters, digits, - and _, starting with a letter" />
                </label>
                <label>
                    "Display name"
                    <input name="display_name" autocomplete="name" required maxlength="64" />
                </label>
                <div class="row">
                    <label>
                        "Department"
                        <select name="department">
                            <Suspense fallback=|| view! { <option value="general">"General"</option> }>
                                {move || Suspend::new(async move {
                                    let list = departments.await.unwrap_or_default();
                                    let list = if list.is_empty() {
                                        vec![crate::api::DepartmentView { name: "general".into(), title: "General".into() }]
                                    } else {
                                        list
                                    };
                                    list.into_iter()
                                        .map(|d| view! { <option value=d.name.clone()>{d.title}</option> })
                                        .collect_view()
                                })}
                            </Suspense>
                        </select>
                    </label>
                    <label>
                        "…or a new one"
                        <input name="new_department" placeholder="e.g. finance" maxlength="32" />
                    </label>
                </div>
                <label>
                    "Password"
                    <input name="password" type="password" autocomplete="new-password" required minlength="10" maxlength="256" />
                    <small class="muted">"At least 10 characters; a short sentence works well."</small>
                </label>
                <label>
                    "Repeat the password"
                    <input name="password_confirm" type="password" autocomplete="new-password" required maxlength="256" />
                </label>
                <button type="submit" class="button" disabled=move || register.pending().get()>
                    {move || if register.pending().get() { "Creating…" } else { "Create account" }}
                </button>
            </ActionForm>
            <p class="muted">"Already have an account? " <a href="/login">"Sign in"</a></p>
        </section>
    }
}
