//! The marketplace: browse and search, featured listings, a listing's usage.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};
pub use toolshed_types::health::{Health, HealthRanking};

#[cfg(feature = "ssr")]
use super::server;
use crate::error::AppError;

/// A listing as a card, as the browse page and the home page show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListingCardView {
    /// `tool` or `bundle`.
    pub kind: String,
    pub department: String,
    pub department_title: String,
    pub name: String,
    pub title: String,
    pub summary: String,
    pub tags: Vec<String>,
    pub author: String,
    pub visibility: String,
    pub featured: bool,
    pub calls_30d: i64,
    pub fork_count: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrowseView {
    pub cards: Vec<ListingCardView>,
    pub total: i64,
    pub page: i64,
    pub page_count: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DayCallsView {
    pub day_ms: i64,
    pub calls: i64,
    pub errors: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageView {
    pub days: Vec<DayCallsView>,
    pub calls: i64,
    pub error_rate: f64,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    /// For the tool's editors: the failed calls kept to replay (14 days).
    pub kept_failures: Option<i64>,
    /// For the tool's editors: its last 24 hours.
    pub health: Option<Health>,
}

impl ListingCardView {
    /// The listing page: `/tools/dept/name` or `/bundles/dept/name`.
    pub fn href(&self) -> String {
        format!("/{}s/{}/{}", self.kind, self.department, self.name)
    }
}

#[cfg(feature = "ssr")]
pub(crate) fn card(c: toolshed_domain::market::ListingCard) -> ListingCardView {
    ListingCardView {
        kind: c.kind.as_str().to_owned(),
        department: c.department,
        department_title: c.department_title,
        name: c.name,
        title: c.title,
        summary: c.summary,
        tags: c.tags,
        author: c.author,
        visibility: c.visibility,
        featured: c.featured,
        calls_30d: c.calls_30d,
        fork_count: c.fork_count,
    }
}

/// The browse page's fields as they are in its URL.
#[server(endpoint = "market/browse")]
pub async fn browse_listings(
    q: String,
    department: String,
    tag: String,
    kind: String,
    sort: String,
    page: String,
    #[server(default)] can: String,
) -> Result<BrowseView, AppError> {
    use toolshed_domain::market::{BrowseQuery, PermissionFilter};
    let user = server::require_user().await?;
    let invalid = |e: toolshed_domain::names::Invalid| server::fail(AppError::Invalid(e.to_string()));
    let query = BrowseQuery {
        permissions: PermissionFilter::parse(&can).map_err(invalid)?,
        ..BrowseQuery::parse(&q, &department, &tag, &kind, &sort, &page).map_err(invalid)?
    };
    let found = server::toolshed()?.market().browse(&user, &query).await.map_err(server::fail)?;
    let page_count = found.page_count();
    Ok(BrowseView { cards: found.cards.into_iter().map(card).collect(), total: found.total, page: found.page, page_count })
}

/// The home page's listings for the signed-in user: the featured ones or, while
/// none is, the most used; none for visitors.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HomeListingsView {
    pub featured: bool,
    pub cards: Vec<ListingCardView>,
}

#[server(endpoint = "market/featured")]
pub async fn home_listings() -> Result<HomeListingsView, AppError> {
    let Some(user) = server::current_user().await? else { return Ok(HomeListingsView::default()) };
    let (featured, cards) = server::toolshed()?.market().home_listings(&user).await.map_err(server::fail)?;
    Ok(HomeListingsView { featured, cards: cards.into_iter().map(card).collect() })
}

#[server(endpoint = "market/usage")]
pub async fn listing_usage(tool: i64) -> Result<UsageView, AppError> {
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let id = toolshed_domain::ids::ToolId(tool);
    let stats = ts.market().usage_stats(&user, id).await.map_err(server::fail)?;
    // Anyone else is refused: they see no count at all.
    let kept_failures = ts.tools().failed_call_count(&user, id).await.ok();
    let health = ts.market().health(&user, id).await.ok();
    Ok(UsageView {
        kept_failures,
        health,
        error_rate: stats.error_rate(),
        days: stats.days.into_iter().map(|d| DayCallsView { day_ms: d.day_ms, calls: d.calls, errors: d.errors }).collect(),
        calls: stats.calls,
        p50_ms: stats.p50_ms,
        p95_ms: stats.p95_ms,
    })
}
