//! Sign-in and registration. Both are `ActionForm`s: plain HTML forms that post
//! to the server function and work before (or without) the wasm.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{Login, Register, RegistrationOffer, SignInMethods};
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
    let options = Resource::new(|| (), |()| crate::api::sign_in_options());
    view! {
        <Title text="Sign in" />
        <section class="narrow card form-card">
            <h1>"Sign in"</h1>
            {move || query.read().get("requested").map(|department| view! {
                <p class="alert ok notice" role="status">
                    "Your request to join " <strong>{department}</strong> " was sent. "
                    "You can sign in once a maintainer of the department approves it."
                </p>
            })}
            <FormError error />
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    let options = options.await.unwrap_or(SignInMethods { passwords: true, provider: None, failure: None });
                    view! { <SignInChoices options login next=next() /> }
                })}
            </Suspense>
        </section>
    }
}

/// The identity provider's button and the password form, as configured.
#[component]
fn SignInChoices(options: SignInMethods, login: ServerAction<Login>, next: String) -> impl IntoView {
    let show = RwSignal::new(false);
    let sso_href = if next.is_empty() { "/auth/sso".to_owned() } else { format!("/auth/sso?next={}", crate::form_encode(&next)) };
    let both = options.passwords && options.provider.is_some();
    view! {
        {options.failure.map(|failure| view! { <p class="alert error" role="alert">{failure}</p> })}
        {options.provider.map(|provider| view! {
            <a class="button sso-button" href=sso_href rel="external">"Sign in with " {provider}</a>
        })}
        {both.then(|| view! { <p class="or-divider"><span>"or with a password"</span></p> })}
        {options.passwords.then(|| view! {
            <ActionForm action=login attr:class="stack">
                <input type="hidden" name="next" value=next />
                <label>
                    "Username"
                    <input name="username" autocomplete="username" required maxlength="64" autofocus=!both />
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
        })}
    }
}

#[component]
pub fn RegisterPage() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let register = ServerAction::<Register>::new();
    auth.refresh_after(register);
    let query = use_query_map();
    let invite = move || query.read().get("invite");
    let options = Resource::new(invite, crate::api::register_options);
    let error = Signal::derive(move || register.value().get().and_then(Result::err));
    view! {
        <Title text="Register" />
        <section class="narrow card form-card">
            <Suspense fallback=|| view! { <h1>"Create your account"</h1> }>
                {move || Suspend::new(async move {
                    match options.await {
                        Ok(options) => view! { <RegisterForm register options invite=invite().unwrap_or_default() error /> }.into_any(),
                        Err(e) => view! { <h1>"Create your account"</h1> <p class="error">{e.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
            <p class="muted">"Already have an account? " <a href="/login">"Sign in"</a></p>
        </section>
    }
}

/// The form as the registration policy and the link's invitation shape it.
#[component]
fn RegisterForm(
    register: ServerAction<Register>,
    options: RegistrationOffer,
    invite: String,
    error: Signal<Option<crate::error::AppError>>,
) -> impl IntoView {
    if options.policy == "sso" {
        return view! {
            <h1>"Create your account"</h1>
            <p>"Accounts are made by signing in with the company's identity provider."</p>
            <p><a class="button sso-button" href="/auth/sso" rel="external">"Sign in with the identity provider"</a></p>
        }
        .into_any();
    }
    let open = options.policy == "open";
    let (heading, intro, button) = match (&options.invite, open) {
        (Some(inv), _) => (
            format!("Join {}", inv.department_title),
            format!("You are invited to {} as {} {}.", inv.department_title, article(&inv.role), inv.role),
            "Create account",
        ),
        (None, true) => (
            "Create your account".to_owned(),
            "You publish tools for your department; everyone can browse, run and fork.".to_owned(),
            "Create account",
        ),
        (None, false) => (
            "Ask to join".to_owned(),
            "Pick your department: one of its maintainers approves your request before you can sign in. \
             With an invitation link you join at once."
                .to_owned(),
            "Ask to join",
        ),
    };
    let invited = options.invite.is_some();
    view! {
        <h1>{heading}</h1>
        <p class="muted">{intro}</p>
        {options.invite_invalid.then(|| view! {
            <p class="error" role="alert">"This invitation link cannot be used: it was used or withdrawn, or it has expired. Ask for a new one, or ask to join below."</p>
        })}
        <FormError error />
        <ActionForm action=register attr:class="stack">
            <input type="hidden" name="invite" value=if invited { invite } else { String::new() } />
            <label>
                "Username"
                <input name="username" autocomplete="username" required minlength="2" maxlength="32"
                    pattern="[A-Za-z][A-Za-z0-9_\\-]*" title="Letters, digits, - and _, starting with a letter" />
            </label>
            <label>
                "Display name"
                <input name="display_name" autocomplete="name" required maxlength="64" />
            </label>
            {(!invited).then(|| view! { <DepartmentFields open /> })}
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
                {move || if register.pending().get() { "Sending…" } else { button }}
            </button>
        </ActionForm>
    }
    .into_any()
}

fn article(role: &str) -> &'static str {
    if role.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// The department to join; under `open` registration also a new one to create.
#[component]
fn DepartmentFields(open: bool) -> impl IntoView {
    let departments = Resource::new(|| (), |_| crate::api::departments());
    view! {
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
                            list.into_iter().map(|d| view! { <option value=d.name.clone()>{d.title}</option> }).collect_view()
                        })}
                    </Suspense>
                </select>
            </label>
            {open.then(|| view! {
                <label>
                    "…or a new one"
                    <input name="new_department" placeholder="e.g. finance" maxlength="32" />
                </label>
            })}
        </div>
    }
}
