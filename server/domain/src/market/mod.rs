//! The marketplace: browsing and searching listings (tools and bundles),
//! featured listings, and a listing's usage figures.
//!
//! Who may see what is decided in SQL ([`listed_to`]), so totals and pages
//! count only what the user may see. A search ranks best first
//! ([`ranking`]: words and meaning fused) and shows its best [`SEARCH_RESULTS`]. Listings come from *row sources*, one per
//! kind, each producing the same columns; a new kind is a new source.

mod glossary;
mod ranking;
mod registry;
mod search;
mod stats;
mod typos;

pub use registry::{ListedVersion, RegistryEntry, RegistryFilter, ServedVersion};

use serde::{Deserialize, Serialize};
use sqlx::Row;

pub use glossary::Glossary;
pub use search::SearchText;
pub use stats::{CommonError, DayCalls, Health, HealthRanking, ListingHealth, UsageStats, VersionHealth};
pub use typos::Vocabulary;

use crate::accounts::User;
use crate::ids::ToolId;
use crate::names::{DepartmentName, Invalid, Tags};
pub use crate::tools::ListingKind;
use crate::tools::ToolError;
use crate::tools::Tools;
use crate::{audit, now_ms};

handle! {
    /// The marketplace: browsing, featured listings, usage statistics, the registry.
    Market
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BrowseSort {
    /// Best match first; with no search text, the same as `MostUsed`.
    Relevance,
    /// Most calls in the last 30 days.
    MostUsed,
    Newest,
    RecentlyUpdated,
}

impl BrowseSort {
    pub fn as_str(self) -> &'static str {
        match self {
            BrowseSort::Relevance => "relevance",
            BrowseSort::MostUsed => "most_used",
            BrowseSort::Newest => "newest",
            BrowseSort::RecentlyUpdated => "updated",
        }
    }

    fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "relevance" => Ok(BrowseSort::Relevance),
            "most_used" => Ok(BrowseSort::MostUsed),
            "newest" => Ok(BrowseSort::Newest),
            "updated" => Ok(BrowseSort::RecentlyUpdated),
            _ => Err(Invalid { field: "Sort", reason: "must be relevance, most_used, newest or updated".into() }),
        }
    }
}

/// Listings by what they can do (their permissions label, `tools::Permissions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionFilter {
    #[default]
    Any,
    /// Tools held to reading: their `$fetch` sends only GET and HEAD.
    ReadOnly,
    /// Read-only tools that reach no network at all.
    Offline,
}

impl PermissionFilter {
    /// The browse form's `can` field; blank means any.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw.trim() {
            "" => Ok(PermissionFilter::Any),
            "read_only" => Ok(PermissionFilter::ReadOnly),
            "offline" => Ok(PermissionFilter::Offline),
            _ => Err(Invalid { field: "Permissions", reason: "must be read_only or offline".into() }),
        }
    }
}

/// One browse or search request, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowseQuery {
    /// Any word may match, and the meaning too: best first (see [`ranking`]).
    pub text: Option<SearchText>,
    pub department: Option<DepartmentName>,
    /// Every one of these tags must be on the listing.
    pub tags: Tags,
    pub kind: Option<ListingKind>,
    pub sort: BrowseSort,
    /// Only listings an admin featured.
    pub featured_only: bool,
    /// Only these `department/name` listings (a scoped token's); empty: any.
    pub within: Vec<String>,
    /// Only these listings, when `Some` (tool search's nearest by meaning).
    pub among: Option<Vec<ToolId>>,
    pub permissions: PermissionFilter,
    /// From 1.
    pub page: i64,
    pub per_page: i64,
}

impl Default for BrowseQuery {
    fn default() -> Self {
        Self {
            text: None,
            department: None,
            tags: Tags::default(),
            kind: None,
            sort: BrowseSort::Relevance,
            featured_only: false,
            within: Vec::new(),
            among: None,
            permissions: PermissionFilter::Any,
            page: 1,
            per_page: Self::PER_PAGE,
        }
    }
}

impl BrowseQuery {
    pub const PER_PAGE: i64 = 24;
    pub const MAX_PAGE: i64 = 10_000;

    /// The browse form's fields as they arrive in the URL; blank means "any".
    pub fn parse(text: &str, department: &str, tag: &str, kind: &str, sort: &str, page: &str) -> Result<Self, Invalid> {
        let blank = |s: &str| s.trim().is_empty();
        let page = if blank(page) {
            1
        } else {
            page.trim()
                .parse::<i64>()
                .ok()
                .filter(|p| (1..=Self::MAX_PAGE).contains(p))
                .ok_or_else(|| Invalid { field: "Page", reason: format!("must be a whole number from 1 to {}", Self::MAX_PAGE) })?
        };
        Ok(Self {
            text: SearchText::parse(text)?,
            department: if blank(department) { None } else { Some(DepartmentName::parse(department)?) },
            tags: Tags::parse(tag)?,
            kind: if blank(kind) { None } else { Some(ListingKind::parse(kind.trim())?) },
            sort: if blank(sort) { BrowseSort::Relevance } else { BrowseSort::parse(sort.trim())? },
            page,
            ..Self::default()
        })
    }
}

/// A listing as a card on the browse page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListingCard {
    pub kind: ListingKind,
    pub id: i64,
    pub department: String,
    pub department_title: String,
    pub name: String,
    pub title: String,
    /// Plain text, Markdown removed, cut to a card's length.
    pub summary: String,
    pub tags: Vec<String>,
    pub author: String,
    pub visibility: String,
    pub featured: bool,
    pub calls_30d: i64,
    /// Forks of this listing the user may see.
    pub fork_count: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl ListingCard {
    pub fn slug(&self) -> String {
        format!("{}/{}", self.department, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrowsePage {
    pub cards: Vec<ListingCard>,
    /// Every matching listing the user may see, over all pages.
    pub total: i64,
    pub page: i64,
    pub per_page: i64,
}

impl BrowsePage {
    pub fn page_count(&self) -> i64 {
        ((self.total + self.per_page - 1) / self.per_page).max(1)
    }
}

const SUMMARY_CHARS: usize = 160;
/// A search's results, best first: ten pages. Further down, a listing matches
/// one common word or is barely near in meaning, and a person would search
/// again in other words.
pub const SEARCH_RESULTS: usize = 240;
/// How near in meaning a listing without a word of the search must be to be
/// shown: in the nearer half of the nearest (see [`ranking::Found::nearness`]).
/// A model asking `search_tools` gets the best few whatever they are; a person
/// browsing reads the count and the tail.
const SHOWN_NEARNESS: f32 = 0.5;
const DAY_MS: i64 = 86_400_000;

/// A statement built with numbered placeholders (`$1`, `$2`, …, which both
/// backends accept) and the values bound to them, in order.
#[derive(Default)]
struct Statement {
    sql: String,
    values: Vec<Value>,
}

enum Value {
    Int(i64),
    Text(String),
}

impl Statement {
    /// Keeps `value` for binding; returns its placeholder.
    fn bind(&mut self, value: Value) -> String {
        self.values.push(value);
        format!("${}", self.values.len())
    }

    fn query(&self) -> sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments<'_>> {
        self.values.iter().fold(sqlx::query(&self.sql), |q, v| match v {
            Value::Int(i) => q.bind(*i),
            Value::Text(s) => q.bind(s.as_str()),
        })
    }
}

/// When "the last 30 days" of a listing's calls begin.
fn month_ago() -> i64 {
    now_ms() - 30 * DAY_MS
}

/// SQL for the calls to the listing under `alias` since the placeholder `since`:
/// a tool counts every call of it, a bundle the calls made through it.
fn calls_since(alias: &str, since: &str) -> String {
    format!(
        "CASE WHEN {alias}.kind = 'bundle' \
         THEN (SELECT COUNT(*) FROM usage_records r WHERE r.bundle_id = {alias}.id AND r.at_ms >= {since}) \
         ELSE (SELECT COUNT(*) FROM usage_records r WHERE r.tool_id = {alias}.id AND r.at_ms >= {since}) END"
    )
}

/// SQL true when the listing under `alias` is listed to `user`: published,
/// active (not hidden or disabled), and visible to them as [`crate::tools::can_see`] says.
fn listed_to(st: &mut Statement, user: &User, alias: &str) -> String {
    let listed = format!("{alias}.published_version IS NOT NULL AND {alias}.status = 'active'");
    if user.is_admin {
        return listed;
    }
    let me = st.bind(Value::Int(user.id.0));
    let dept = st.bind(Value::Int(user.department.id.0));
    format!(
        "{listed} AND ({alias}.owner_id = {me} OR {alias}.visibility = 'everyone' \
         OR ({alias}.visibility = 'department' AND {alias}.department_id = {dept}))"
    )
}

impl Market<'_> {
    /// Listings `user` may see that match `query`, one page of them, and how
    /// many there are. With search text, the matches are its best
    /// [`SEARCH_RESULTS`], and a sort other than relevance orders those.
    pub async fn browse(self, user: &User, query: &BrowseQuery) -> Result<BrowsePage, ToolError> {
        let per_page = query.per_page.clamp(1, 100);
        let offset = (query.page.max(1) - 1) * per_page;
        let empty = BrowsePage { cards: Vec::new(), total: 0, page: query.page, per_page };
        let (total, page) = if query.text.is_some() {
            let found: Vec<ToolId> = (self.best_first(user, query, SEARCH_RESULTS).await?.into_iter())
                .filter(|f| f.by_words || f.nearness >= SHOWN_NEARNESS)
                .map(|f| f.id)
                .collect();
            let total = found.len() as i64;
            let page = match query.sort {
                BrowseSort::Relevance => found.into_iter().skip(offset as usize).take(per_page as usize).collect(),
                _ => {
                    let among = BrowseQuery { text: None, among: Some(found), ..query.clone() };
                    self.ranked(user, &among, per_page as usize, offset).await?
                }
            };
            (total, page)
        } else {
            // Counting needs no relevance: FTS5's bm25 costs as much as the match itself.
            let mut count = self.matching(user, query, false);
            count.sql = format!("SELECT COUNT(*) AS n {}", count.sql);
            let total: i64 = count.query().fetch_one(self.core.db().pool()).await?.try_get("n")?;
            if total == 0 {
                return Ok(empty);
            }
            (total, self.ranked(user, query, per_page as usize, offset).await?)
        };
        let cards = self.cards(user, &page).await?;
        Ok(BrowsePage { cards, total, page: query.page, per_page })
    }

    /// The listings `user` may see that match `query`, `limit` of them from
    /// `offset`, in `query`'s order (its page is not read).
    async fn ranked(self, user: &User, query: &BrowseQuery, limit: usize, offset: i64) -> Result<Vec<ToolId>, ToolError> {
        let mut st = self.matching(user, query, true);
        let order = match (query.sort, query.text.is_some()) {
            (BrowseSort::Relevance, true) => "l.rank DESC, l.updated_at DESC",
            (BrowseSort::Relevance | BrowseSort::MostUsed, _) => "l.calls_30d DESC, l.updated_at DESC",
            (BrowseSort::Newest, _) => "l.created_at DESC",
            (BrowseSort::RecentlyUpdated, _) => "l.updated_at DESC",
        };
        let limit = st.bind(Value::Int(limit as i64));
        let offset = st.bind(Value::Int(offset));
        st.sql = format!("SELECT l.id {} ORDER BY {order}, l.id DESC LIMIT {limit} OFFSET {offset}", st.sql);
        Ok(st
            .query()
            .fetch_all(self.core.db().pool())
            .await?
            .iter()
            .map(|r| r.try_get("id").map(ToolId))
            .collect::<Result<_, sqlx::Error>>()?)
    }

    /// Cards for the listings `ids`, in that order (those gone meanwhile left out).
    pub(crate) async fn cards(self, user: &User, ids: &[ToolId]) -> Result<Vec<ListingCard>, ToolError> {
        let mut cards = self.listing_cards(user, ids).await?;
        cards.sort_by_key(|c| ids.iter().position(|id| id.0 == c.id));
        Ok(cards)
    }

    /// `FROM … WHERE …` over the listings `user` may see that match `query`
    /// (with their relevance when `ranked`).
    fn matching(self, user: &User, query: &BrowseQuery, ranked: bool) -> Statement {
        let mut st = Statement::default();
        let rows = self.listing_rows(&mut st, query, ranked);
        let mut filters = vec![listed_to(&mut st, user, "l")];
        if query.featured_only {
            filters.push("l.featured = 1".into());
        }
        match query.permissions {
            PermissionFilter::Any => {}
            PermissionFilter::ReadOnly => filters.push("l.kind = 'tool' AND l.read_only_hint = 1".into()),
            PermissionFilter::Offline => filters.push("l.kind = 'tool' AND l.read_only_hint = 1 AND l.fetch_allow = ''".into()),
        }
        if let Some(d) = &query.department {
            let p = st.bind(Value::Text(d.as_str().to_owned()));
            filters.push(format!("l.department_id = (SELECT id FROM departments WHERE name = {p})"));
        }
        if !query.within.is_empty() {
            let slugs: Vec<String> = query.within.iter().map(|s| st.bind(Value::Text(s.clone()))).collect();
            filters.push(format!(
                "l.id IN (SELECT w.id FROM tools w JOIN departments wd ON wd.id = w.department_id WHERE wd.name || '/' || w.name IN ({}))",
                slugs.join(", ")
            ));
        }
        if let Some(among) = &query.among {
            let ids: Vec<String> = among.iter().map(|id| st.bind(Value::Int(id.0))).collect();
            // `IN ()` is not SQL; none means none.
            filters.push(if ids.is_empty() { "1 = 0".into() } else { format!("l.id IN ({})", ids.join(", ")) });
        }
        for tag in query.tags.as_slice() {
            // Tags are slugs: only `_` needs escaping for LIKE.
            let p = st.bind(Value::Text(format!("% {} %", tag.replace('_', "\\_"))));
            filters.push(format!("(' ' || l.tags || ' ') LIKE {p} ESCAPE '\\'"));
        }
        st.sql = format!("FROM ({rows}) l WHERE {}", filters.join(" AND "));
        st
    }

    /// The forks of listing `id` that `user` may see, most used first.
    pub async fn forks(self, user: &User, id: ToolId) -> Result<Vec<ListingCard>, ToolError> {
        Tools::new(self.core).tool(user, id).await?;
        let mut st = Statement::default();
        let source = st.bind(Value::Int(id.0));
        let listed = listed_to(&mut st, user, "f");
        st.sql = format!("SELECT f.id FROM tools f WHERE f.forked_from_tool_id = {source} AND {listed}");
        let ids: Vec<ToolId> =
            st.query().fetch_all(self.core.db().pool()).await?.iter().map(|r| r.try_get("id").map(ToolId)).collect::<Result<_, _>>()?;
        let mut cards = self.listing_cards(user, &ids).await?;
        cards.sort_by(|a, b| b.calls_30d.cmp(&a.calls_30d).then_with(|| a.slug().cmp(&b.slug())));
        Ok(cards)
    }

    /// Featured listings `user` may see, most used first (the home page).
    pub async fn featured(self, user: &User) -> Result<Vec<ListingCard>, ToolError> {
        let query = BrowseQuery { featured_only: true, sort: BrowseSort::MostUsed, per_page: 6, ..BrowseQuery::default() };
        Ok(self.browse(user, &query).await?.cards)
    }

    /// The home page's listings: those an admin features or, while none is, the
    /// most used this person may see (a new instance's home page is no dead end).
    /// `true` with the featured ones.
    pub async fn home_listings(self, user: &User) -> Result<(bool, Vec<ListingCard>), ToolError> {
        let featured = self.featured(user).await?;
        if !featured.is_empty() {
            return Ok((true, featured));
        }
        let most_used = BrowseQuery { sort: BrowseSort::MostUsed, per_page: 6, ..BrowseQuery::default() };
        Ok((false, self.browse(user, &most_used).await?.cards))
    }

    /// Features a listing on the home page, or stops featuring it. Admins only.
    pub async fn set_featured(self, admin: &User, id: ToolId, featured: bool) -> Result<(), ToolError> {
        if !admin.is_admin {
            return Err(ToolError::Forbidden);
        }
        let tool = Tools::new(self.core).tool(admin, id).await?;
        let mut tx = self.core.begin().await?;
        sqlx::query("UPDATE tools SET featured = $1 WHERE id = $2").bind(i64::from(featured)).bind(id.0).execute(&mut *tx).await?;
        let action = tool.action(if featured { "featured" } else { "unfeatured" });
        audit::record(&mut tx, Some(admin.id), &action, &tool.audit_target(), None, None).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The listings (of the kind `query` asks for, if any) in the columns the
    /// browse filters and sorts use.
    fn listing_rows(self, st: &mut Statement, query: &BrowseQuery, ranked: bool) -> String {
        let since = st.bind(Value::Int(month_ago()));
        let (text_join, rank) = match &query.text {
            Some(text) => {
                let p = st.bind(Value::Text(text.fts_query(self.core.db().backend())));
                search::tool_text_match(self.core.db().backend(), &p, ranked)
            }
            None => (String::new(), "0".to_owned()),
        };
        let kind = match query.kind {
            Some(k) => format!("WHERE t.kind = {}", st.bind(Value::Text(k.as_str().to_owned()))),
            None => String::new(),
        };
        format!(
            "SELECT t.kind, t.id, t.department_id, t.owner_id, t.visibility, t.status, t.published_version, \
             t.tags, t.featured, t.read_only_hint, t.fetch_allow, t.created_at, t.updated_at, {rank} AS rank, {} AS calls_30d \
             FROM tools t {text_join} {kind}",
            calls_since("t", &since)
        )
    }

    /// Cards for the listings `ids`, in no particular order.
    async fn listing_cards(self, user: &User, ids: &[ToolId]) -> Result<Vec<ListingCard>, ToolError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut st = Statement::default();
        let since = st.bind(Value::Int(month_ago()));
        let forks_listed = listed_to(&mut st, user, "f");
        let list: Vec<String> = ids.iter().map(|id| st.bind(Value::Int(id.0))).collect();
        st.sql = format!(
            "SELECT t.kind, t.id, d.name AS dept, d.title AS dept_title, t.name, t.title, t.description, t.tags, \
             u.display_name AS author, t.visibility, t.featured, t.created_at, t.updated_at, \
             {} AS calls_30d, \
             (SELECT COUNT(*) FROM tools f WHERE f.forked_from_tool_id = t.id AND {forks_listed}) AS fork_count \
             FROM tools t JOIN departments d ON d.id = t.department_id JOIN users u ON u.id = t.owner_id \
             WHERE t.id IN ({})",
            calls_since("t", &since),
            list.join(", ")
        );
        let rows = st.query().fetch_all(self.core.db().pool()).await?;
        let cards = rows
            .iter()
            .map(|r| {
                let tags: String = r.try_get("tags")?;
                let description: String = r.try_get("description")?;
                Ok(ListingCard {
                    kind: ListingKind::parse(&r.try_get::<String, _>("kind")?).unwrap_or(ListingKind::Tool),
                    id: r.try_get("id")?,
                    department: r.try_get("dept")?,
                    department_title: r.try_get("dept_title")?,
                    name: r.try_get("name")?,
                    title: r.try_get("title")?,
                    summary: crate::markdown::summary(&description, SUMMARY_CHARS),
                    tags: tags.split_whitespace().map(str::to_owned).collect(),
                    author: r.try_get("author")?,
                    visibility: r.try_get("visibility")?,
                    featured: r.try_get::<i64, _>("featured")? != 0,
                    calls_30d: r.try_get("calls_30d")?,
                    fork_count: r.try_get("fork_count")?,
                    created_at: r.try_get("created_at")?,
                    updated_at: r.try_get("updated_at")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(cards)
    }
}
