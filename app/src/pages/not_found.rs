use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
        // A page that also redirects (a signed-out visitor, see `RequireUser`) stays a redirect.
        let redirecting = res.0.read().is_ok_and(|parts| parts.status.is_some_and(|s| s.is_redirection()));
        if !redirecting {
            res.set_status(http::StatusCode::NOT_FOUND);
        }
    }
    view! {
        <Title text="Not found" />
        <section class="narrow center">
            <h1>"Page not found"</h1>
            <p class="muted">"Nothing lives at this address, or you are not allowed to see it."</p>
            <a class="button" href="/">"Back to the start"</a>
        </section>
    }
}
