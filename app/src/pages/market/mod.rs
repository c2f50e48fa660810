//! Marketplace pages: browse and search, the listing card, usage charts.

mod browse;
mod usage_chart;

use leptos::prelude::*;

pub(crate) use browse::page_href;
pub use browse::Browse;
pub(crate) use usage_chart::duration;
pub use usage_chart::{HealthCard, UsageChart};

use crate::api::ListingCardView;

/// A listing as a card: links to the listing page.
#[component]
pub fn ListingCard(card: ListingCardView) -> impl IntoView {
    let href = card.href();
    let plural = |n: i64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    view! {
        <a class="card tool-card listing-card" href=href data-kind=card.kind.clone()>
            <div class="tool-card-head">
                <h3>{card.title.clone()} {(card.kind == "bundle").then(|| view! { <span class="badge kind">"bundle"</span> })}</h3>
                <span class="slug">{format!("{}/{}", card.department, card.name)}</span>
            </div>
            <p class="muted">{card.summary.clone()}</p>
            <div class="tags">
                {card.tags.iter().map(|t| view! { <span class="tag">{t.clone()}</span> }).collect_view()}
            </div>
            <div class="tool-card-foot muted">
                <span class="department">{card.department_title.clone()}</span>
                <span class="author">"by " {card.author.clone()}</span>
                <span class="calls" title="Calls in the last 30 days">{plural(card.calls_30d, "call", "calls")} " / 30 days"</span>
                <span class="forks">{plural(card.fork_count, "fork", "forks")}</span>
                {card.featured.then(|| view! { <span class="badge">"featured"</span> })}
                {(card.visibility != "everyone").then(|| view! { <span class="badge">{card.visibility.clone()}</span> })}
            </div>
        </a>
    }
}
