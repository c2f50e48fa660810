//! The OAuth consent page: "VS Code wants to use demo/text_kit as you". A
//! plain form that posts to `/oauth/consent` (the server's `oauth` module),
//! which answers the client with a code or a refusal; it works without wasm.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_query_map;

use crate::api::{consent_question, AccessRequest, ConsentParams};
use crate::error::AppError;

#[component]
pub fn Consent() -> impl IntoView {
    let query = use_query_map();
    let params = move || {
        let q = query.read();
        ConsentParams {
            response_type: q.get("response_type"),
            client_id: q.get("client_id"),
            redirect_uri: q.get("redirect_uri"),
            state: q.get("state"),
            scope: q.get("scope"),
            code_challenge: q.get("code_challenge"),
            code_challenge_method: q.get("code_challenge_method"),
            resource: q.get("resource"),
        }
    };
    let question = Resource::new(params, consent_question);
    let here = move || consent_href(&params());
    // The answer is a redirect to the client's origin, which only this page's
    // own policy allows (`form-action`): reached by client-side navigation
    // (after signing in), the document still has the previous page's policy,
    // so the page loads itself whole. (The first render of a page load runs
    // before hydration marks <body>.)
    #[cfg(feature = "hydrate")]
    if document().body().is_some_and(|b| b.has_attribute("data-hydrated")) {
        let _ = window().location().replace(&here());
    }
    view! {
        <Title text="Allow access" />
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match question.await {
                    Ok(q) => view! { <ConsentForm question=q params=params() /> }.into_any(),
                    Err(AppError::NotSignedIn) => {
                        let next = crate::form_encode(&here());
                        view! { <Redirect path=format!("/login?next={next}") /> }.into_any()
                    }
                    Err(e) => view! {
                        <section class="narrow card consent">
                            <h1>"This request cannot be answered"</h1>
                            <p class="alert error" role="alert">{e.to_string()}</p>
                            <p class="muted">"Go back to the application and connect again. If it keeps failing, the application may not support this server."</p>
                        </section>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// This page's address for `params`, each value encoded again.
fn consent_href(params: &ConsentParams) -> String {
    let query: Vec<String> =
        hidden_fields(params.clone()).into_iter().filter_map(|(k, v)| v.map(|v| format!("{k}={}", crate::form_encode(&v)))).collect();
    format!("/oauth/consent?{}", query.join("&"))
}

/// The request's parameters by name, as the form sends them back.
fn hidden_fields(params: ConsentParams) -> [(&'static str, Option<String>); 8] {
    [
        ("response_type", params.response_type),
        ("client_id", params.client_id),
        ("redirect_uri", params.redirect_uri),
        ("state", params.state),
        ("scope", params.scope),
        ("code_challenge", params.code_challenge),
        ("code_challenge_method", params.code_challenge_method),
        ("resource", params.resource),
    ]
}

#[component]
fn ConsentForm(question: AccessRequest, params: ConsentParams) -> impl IntoView {
    // The answer is a redirect to the client, which the page's policy must allow.
    #[cfg(feature = "ssr")]
    crate::set_page_policy(&question.answer_origin);
    let hidden = hidden_fields(params);
    let listing_href = question.href.clone();
    view! {
        <section class="narrow card consent">
            <h1><strong class="client-name">{question.client_name.clone()}</strong>" wants to use "
                <a href=listing_href>{question.listing.clone()}</a>" as you"</h1>
            <p class="muted">{question.listing_title.clone()}" · signed in as "<strong>{question.username.clone()}</strong></p>
            <p class="small client-site">{match question.client_site.clone() {
                Some(site) => view! { "The application is described by " <strong>{site}</strong> "." }.into_any(),
                None => view! { "The application registered itself: nobody vouches for its name." }.into_any(),
            }}</p>
            <form method="post" action="/oauth/consent" class="stack">
                {hidden.into_iter().filter_map(|(name, value)| value.map(|value| view! { <input type="hidden" name=name value=value /> })).collect_view()}
                <fieldset class="stack">
                    <legend>"It may"</legend>
                    <label class="inline"><input type="checkbox" checked=true disabled=true />" see the tools it offers"</label>
                    {question.asks_to_call.then(|| view! {
                        <label class="inline"><input type="checkbox" name="call" value="on" checked=true />" run them as you (each run is recorded under your name)"</label>
                    })}
                </fieldset>
                <p class="small muted">"Allowing sends you back to " <code>{question.answer_to.clone()}</code>
                    ". You can revoke this access at any time on your " <a href="/account">"Account"</a> " page."</p>
                <div class="row">
                    <button type="submit" name="decision" value="allow" class="button">"Allow"</button>
                    <button type="submit" name="decision" value="deny" class="button secondary">"Deny"</button>
                </div>
            </form>
        </section>
    }
}
