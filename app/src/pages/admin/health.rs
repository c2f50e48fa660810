//! `/admin/health`: the listings that failed and slowed most over the last 24
//! hours, each a ranked table with a bar to compare at a glance. Rendered on
//! the server, so it reads the same before the wasm loads.

use leptos::prelude::*;
use leptos_meta::Title;
use toolshed_types::health::{error_rate, ListingHealth};

use crate::api::{admin_health, HealthRanking};
use crate::components::RequireUser;
use crate::pages::market::duration;

/// A bar `share` (0 to 1) of the cell's width.
fn bar(share: f64, class: &'static str) -> impl IntoView {
    let width = format!("{:.1}", (share.clamp(0.0, 1.0) * 100.0).max(1.0));
    view! {
        <svg class="rank-bar" viewBox="0 0 100 10" preserveAspectRatio="none" aria-hidden="true">
            <rect class=class x="0" y="0" width=width height="10" />
        </svg>
    }
}

fn listing_cell(l: &ListingHealth) -> impl IntoView {
    view! {
        <td>
            <a href=l.href.clone()>{l.title.clone()}</a>
            <div class="muted small mono">{l.href.trim_start_matches('/').to_owned()}</div>
        </td>
    }
}

#[component]
fn Failing(listings: Vec<ListingHealth>) -> impl IntoView {
    let most = listings.first().map_or(1, |l| l.errors).max(1);
    let rows = listings
        .into_iter()
        .map(|l| {
            let rate = error_rate(l.calls, l.errors);
            view! {
                <tr>
                    {listing_cell(&l)}
                    <td class="num rank-errors">{l.errors}</td>
                    <td class="num">{l.calls}</td>
                    <td class="num rank-error-rate">{format!("{:.1} %", rate * 100.0)}</td>
                    <td class="rank-chart">{bar(l.errors as f64 / most as f64, "bar-error")}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="admin-table rank failing">
            <thead><tr><th>"Listing"</th><th class="num">"Failed"</th><th class="num">"Calls"</th><th class="num">"Error rate"</th><th>"Failed calls"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

#[component]
fn Slowest(listings: Vec<ListingHealth>) -> impl IntoView {
    let most = listings.first().and_then(|l| l.p95_ms).unwrap_or(0.0).max(f64::MIN_POSITIVE);
    let rows = listings
        .into_iter()
        .map(|l| {
            let share = l.p95_ms.unwrap_or(0.0) / most;
            view! {
                <tr>
                    {listing_cell(&l)}
                    <td class="num rank-p95">{duration(l.p95_ms)}</td>
                    <td class="num">{duration(l.p50_ms)}</td>
                    <td class="num">{l.calls}</td>
                    <td class="rank-chart">{bar(share, "bar")}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="admin-table rank slowest">
            <thead><tr><th>"Listing"</th><th class="num">"p95"</th><th class="num">"p50"</th><th class="num">"Calls"</th><th>"p95 duration"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

#[component]
fn Rankings(ranking: HealthRanking) -> impl IntoView {
    let failing = if ranking.failing.is_empty() {
        view! { <p class="muted">"No listing failed a call in the last 24 hours."</p> }.into_any()
    } else {
        view! { <Failing listings=ranking.failing /> }.into_any()
    };
    let slowest = if ranking.slowest.is_empty() {
        view! { <p class="muted">"No calls in the last 24 hours."</p> }.into_any()
    } else {
        view! { <Slowest listings=ranking.slowest /> }.into_any()
    };
    view! {
        <section class="card" id="failing">
            <h2>"Failing most"</h2>
            <p class="muted small">"Calls that ended in an error, a time-out, the memory limit, bad arguments or a full sandbox. A listing's editors see its commonest errors on its page and replay them in the editor."</p>
            {failing}
        </section>
        <section class="card" id="slowest">
            <h2>"Slowest"</h2>
            <p class="muted small">"By the 95th percentile of call duration: one call in twenty took longer."</p>
            {slowest}
        </section>
    }
}

#[component]
pub fn ToolHealth() -> impl IntoView {
    let ranking = Resource::new(|| (), |_| admin_health());
    view! {
        <Title text="Tool health" />
        <RequireUser>
            <div class="page-head">
                <h1>"Tool health, last 24 hours"</h1>
                <a class="button secondary" href="/admin">"Administration"</a>
            </div>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match ranking.await {
                        Ok(ranking) => view! { <Rankings ranking /> }.into_any(),
                        Err(e) => view! { <p class="alert error" role="alert">{e.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </RequireUser>
    }
}
