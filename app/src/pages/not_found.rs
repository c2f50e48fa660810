use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
        res.set_status(http::StatusCode::NOT_FOUND);
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
