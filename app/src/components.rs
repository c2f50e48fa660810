//! Pieces shared by several pages.

use leptos::prelude::*;
use leptos_router::components::A;

use crate::api::{approvals_waiting, FindingView, Me};
use crate::error::AppError;
use crate::Auth;

#[component]
pub fn Header() -> impl IntoView {
    let auth = expect_context::<Auth>();
    // Calls waiting for this person's decision, counted again on every page
    // and after a decision: a request nobody sees expires unanswered. Not
    // asked for when no one is signed in.
    let location = leptos_router::hooks::use_location();
    let waiting = Resource::new(
        move || (location.pathname.get(), auth.changed.get(), auth.logout.version().get()),
        move |_| async move {
            match auth.me.await {
                Ok(Some(_)) => approvals_waiting().await,
                _ => Ok(0),
            }
        },
    );
    view! {
        <header class="topbar">
            <a class="brand" href="/">
                <span class="brand-mark">"⚒"</span>
                "Toolshed"
            </a>
            <nav class="nav">
                <A href="/browse">"Browse"</A>
                <A href="/tools/mine">"My tools"</A>
                <A href="/tools/new">"New tool"</A>
                <A href="/playground">"Playground"</A>
                <Transition fallback=|| ()>
                    {move || Suspend::new(async move {
                        matches!(auth.me.await, Ok(Some(me)) if me.is_admin).then(|| view! { <A href="/admin">"Admin"</A> })
                    })}
                </Transition>
                <Transition fallback=|| ()>
                    {move || Suspend::new(async move {
                        let n = waiting.await.unwrap_or(0);
                        let label = if n == 1 { "1 call waits for your approval".to_owned() } else { format!("{n} calls wait for your approval") };
                        (n > 0).then(|| view! {
                            <a href="/approvals" class="nav-waiting" title=label.clone() aria-label=label>
                                "Approvals" <span class="count">{n}</span>
                            </a>
                        })
                    })}
                </Transition>
            </nav>
            <div class="topbar-user">
                <Transition fallback=|| ()>
                    {move || Suspend::new(async move {
                        match auth.me.await {
                            Ok(Some(me)) => view! { <UserMenu me /> }.into_any(),
                            _ => view! {
                                <a class="link" href="/login">"Sign in"</a>
                                <a class="button small" href="/register">"Register"</a>
                            }.into_any(),
                        }
                    })}
                </Transition>
            </div>
        </header>
    }
}

/// The signed-in user's menu. Opening it needs the wasm; signing out works
/// without it, since it is a plain form post.
#[component]
fn UserMenu(me: Me) -> impl IntoView {
    let auth = expect_context::<Auth>();
    let open = RwSignal::new(false);
    let initial = me.display_name.chars().next().unwrap_or('?').to_uppercase().to_string();
    // It closes on navigation, on a click anywhere outside it, and on Escape.
    let location = leptos_router::hooks::use_location();
    Effect::new(move |_| {
        location.pathname.track();
        open.set(false);
    });
    #[cfg(feature = "hydrate")]
    {
        let click = window_event_listener(leptos::ev::click, move |ev| {
            use wasm_bindgen::JsCast;
            let element = ev.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok());
            if element.and_then(|e| e.closest(".user-menu").ok().flatten()).is_none() {
                let _ = open.try_set(false);
            }
        });
        let key = window_event_listener(leptos::ev::keydown, move |ev| {
            if ev.key() == "Escape" {
                let _ = open.try_set(false);
            }
        });
        on_cleanup(move || {
            click.remove();
            key.remove();
        });
    }
    view! {
        <div class="user-menu">
            <button
                class="user-button"
                aria-haspopup="true"
                aria-expanded=move || open.get().to_string()
                on:click=move |_| open.update(|o| *o = !*o)
            >
                <span class="avatar">{initial}</span>
                <span class="user-name">{me.display_name.clone()}</span>
                <span class="caret">"▾"</span>
            </button>
            <div class="menu" class:open=move || open.get() role="menu">
                <div class="menu-head">
                    <strong>{me.display_name.clone()}</strong>
                    <span class="muted">"@" {me.username.clone()} " · " {me.department_title.clone()}</span>
                    {me.is_admin.then(|| view! { <span class="badge">"admin"</span> })}
                    {(!me.is_admin).then(|| view! { <span class="badge">{me.role.clone()}</span> })}
                </div>
                <a href="/account" role="menuitem">"Account & password"</a>
                <a href="/approvals" role="menuitem">"Approvals"</a>
                {me.maintains().then(|| view! { <a href="/people" role="menuitem">"People: invite, approve"</a> })}
                <ActionForm action=auth.logout>
                    <button type="submit" class="menu-item" role="menuitem">"Sign out"</button>
                </ActionForm>
            </div>
        </div>
    }
}

/// What a failed browser call says: an `Error`'s message, a thrown string, or its
/// text. Not `{:?}`: the wasm is built without Debug formatting (scripts/build.sh).
#[cfg(feature = "hydrate")]
pub fn js_error(e: wasm_bindgen::JsValue) -> String {
    use wasm_bindgen::JsCast;
    match e.dyn_ref::<js_sys::Error>() {
        Some(error) => String::from(error.message()),
        None => e.as_string().unwrap_or_else(|| String::from(js_sys::JSON::stringify(&e).unwrap_or_default())),
    }
}

/// The first error among a card's actions, as an alert.
pub fn first_error(errors: impl IntoIterator<Item = Option<AppError>>) -> Option<impl IntoView> {
    errors.into_iter().flatten().next().map(|e| view! { <p class="alert error" role="alert">{e.to_string()}</p> })
}

/// What the scan found in a held publish: each finding's kind, field and
/// excerpt, with exactly what was found marked.
#[component]
pub fn Findings(findings: Vec<FindingView>) -> impl IntoView {
    view! {
        <ul class="findings">
            {findings.into_iter().map(|f| view! {
                <li>
                    <span class="pill bad">{f.kind}</span> " in the " {f.field} ": "
                    <code class="mono excerpt">{f.before}<mark>{f.marked}</mark>{f.after}</code>
                </li>
            }).collect_view()}
        </ul>
    }
}

/// The error of the last submission of a form, if any.
#[component]
pub fn FormError(error: Signal<Option<AppError>>) -> impl IntoView {
    move || error.get().map(|e| view! { <p class="alert error" role="alert">{e.to_string()}</p> })
}

/// Renders its children for signed-in users; sends everyone else to sign in,
/// with a way back here.
///
/// The children are created at once, not once the user is known: resources get
/// their ids in the order they are created, and content created inside a
/// `Suspend` is created when that future happens to finish on the server (and
/// again if it re-runs), so a resource there could get another id than the
/// browser gives it and hydrate against the wrong HTML. Created at once, every
/// page's resources are numbered the same on both sides. A signed-out visitor
/// is redirected before any of it shows (a 302 on the server).
#[component]
pub fn RequireUser(children: Children) -> impl IntoView {
    let auth = expect_context::<Auth>();
    let location = leptos_router::hooks::use_location();
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                (!matches!(auth.me.await, Ok(Some(_)))).then(|| {
                    let next = crate::form_encode(&location.pathname.get_untracked());
                    view! { <leptos_router::components::Redirect path=format!("/login?next={next}") /> }
                })
            })}
        </Transition>
        {children()}
    }
}

/// A message whose link to connect an account (`…/connect/APP`, what a call
/// of a tool acting as its caller answers before they connected) is a link
/// to follow; any other text as it is. The link always leads to this site's
/// own connect page, whatever host the text names: a tool's own error text
/// cannot make it point elsewhere.
#[component]
pub fn WithConnectLink(text: String) -> impl IntoView {
    let found = text.split_whitespace().find_map(|word| {
        let rest = word.strip_prefix("https://").or_else(|| word.strip_prefix("http://"))?;
        let app = rest.split_once("/connect/")?.1;
        let app_ok = !app.is_empty() && app.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        app_ok.then(|| (word.to_owned(), format!("/connect/{app}")))
    });
    match found.and_then(|(word, href)| {
        text.split_once(word.as_str()).map(|(before, after)| (word.clone(), href, before.to_owned(), after.to_owned()))
    }) {
        Some((word, href, before, after)) => {
            view! { {before} <a class="connect-link" href=href rel="external" target="_blank">{word}</a> {after} }.into_any()
        }
        None => view! { {text} }.into_any(),
    }
}
