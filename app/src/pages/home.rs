use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{home_listings, HomeListingsView};
use crate::pages::market::ListingCard;
use crate::Auth;

#[component]
pub fn Home() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let listings = Resource::new(move || auth.me.get().map(|me| me.ok().flatten().map(|me| me.username)), |_| home_listings());
    view! {
        <Title text="" />
        <section class="hero">
            <h1>"Write one JavaScript function. Every agent in the company gains a tool."</h1>
            <p class="lead">
                "Toolshed turns a few lines of JavaScript into a live MCP endpoint that Claude Desktop, Cursor, "
                "Cherry Studio and the official SDKs connect to with a personal token. Browse what other departments "
                "built, run it, fork it into your own."
            </p>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    match auth.me.await {
                        Ok(Some(me)) => view! {
                            <p class="welcome">"Welcome back, " <strong>{me.display_name}</strong> "."</p>
                            // A plain GET form: it searches before the wasm has loaded.
                            <form class="home-search" method="get" action="/browse" role="search">
                                <input type="search" name="q" placeholder="Find a tool: what should it do?" maxlength="1000" aria-label="Search tools" />
                                <button type="submit" class="button">"Search"</button>
                            </form>
                        }.into_any(),
                        _ => view! {
                            <div class="cta">
                                <a class="button" href="/register">"Create an account"</a>
                                <a class="button secondary" href="/login">"Sign in"</a>
                            </div>
                        }.into_any(),
                    }
                })}
            </Transition>
        </section>
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                let HomeListingsView { featured, cards } = listings.await.unwrap_or_default();
                (!cards.is_empty()).then(|| view! {
                    <section class="featured">
                        <div class="page-head">
                            <h2>{if featured { "Featured" } else { "Most used" }}</h2>
                            <a href="/browse">"Browse everything →"</a>
                        </div>
                        <div class="grid">
                            {cards.into_iter().map(|card| view! { <ListingCard card /> }).collect_view()}
                        </div>
                    </section>
                })
            })}
        </Transition>
        <section class="steps">
            <article class="card">
                <h3>"1 · Write"</h3>
                <p>"The body of an async function, with your arguments as " <code>"$name"</code> " globals. Describe the arguments in rows; Toolshed writes the JSON Schema."</p>
            </article>
            <article class="card">
                <h3>"2 · Try"</h3>
                <p>"One click runs it in a QuickJS sandbox with mock parameters: result, console output, errors with their line, duration."</p>
            </article>
            <article class="card">
                <h3>"3 · Publish"</h3>
                <p>"Every tool and every bundle is a live MCP endpoint. Roll back to any version in one click."</p>
            </article>
        </section>
    }
}
