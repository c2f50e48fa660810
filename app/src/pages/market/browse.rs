//! The browse page: a GET form whose state lives in the URL, so search,
//! filters, sorting and paging work without JavaScript (and links share).

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use leptos_router::params::ParamsMap;

use super::ListingCard;
use crate::api::{browse_listings, departments, BrowseView, DepartmentView};
use crate::components::RequireUser;
use crate::form_encode;

/// The browse form's fields, as in the URL's query string.
#[derive(Debug, Clone, PartialEq, Default)]
struct BrowseParams {
    q: String,
    department: String,
    tag: String,
    kind: String,
    sort: String,
    page: String,
    /// What the listings may do: blank, `read_only` or `offline`.
    can: String,
}

impl BrowseParams {
    fn from_query(query: &ParamsMap) -> Self {
        let get = |k: &str| query.get(k).unwrap_or_default();
        Self {
            q: get("q"),
            department: get("department"),
            tag: get("tag"),
            kind: get("kind"),
            sort: get("sort"),
            page: get("page"),
            can: get("can"),
        }
    }

    /// This search at page `page`, as a link.
    fn href(&self, page: i64) -> String {
        let fields = [
            ("q", &self.q),
            ("department", &self.department),
            ("tag", &self.tag),
            ("kind", &self.kind),
            ("sort", &self.sort),
            ("can", &self.can),
        ];
        page_href("/browse", &fields, page)
    }
}

/// `path?field=value&…&page=N`: a GET form's `fields` (blank ones left out) at page `page`.
pub(crate) fn page_href(path: &str, fields: &[(&str, &String)], page: i64) -> String {
    let mut query: Vec<String> = fields.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| format!("{k}={}", form_encode(v))).collect();
    query.push(format!("page={page}"));
    format!("{path}?{}", query.join("&"))
}

const SORTS: [(&str, &str); 4] =
    [("relevance", "Best match"), ("most_used", "Most used (30 days)"), ("newest", "Newest"), ("updated", "Recently updated")];
const KINDS: [(&str, &str); 3] = [("", "Tools and bundles"), ("tool", "Tools"), ("bundle", "Bundles")];
const CAN: [(&str, &str); 3] = [("", "Any permissions"), ("read_only", "Read-only"), ("offline", "Read-only, no network")];

#[component]
fn SearchForm(params: BrowseParams, departments: Vec<DepartmentView>) -> impl IntoView {
    let option = move |current: &str, value: &str, label: String| {
        view! { <option value=value.to_owned() selected=current == value>{label}</option> }
    };
    view! {
        <form class="card browse-form" method="get" action="/browse" role="search">
            <div class="browse-row">
                <input type="search" name="q" value=params.q.clone() placeholder="What do you need? Any words, any language…" maxlength="1000" aria-label="Search" />
                <button type="submit" class="button">"Search"</button>
            </div>
            <div class="browse-row filters">
                <select name="department" aria-label="Department">
                    {option(&params.department, "", "All departments".into())}
                    {departments.into_iter().map(|d| option(&params.department, &d.name, d.title)).collect_view()}
                </select>
                <input name="tag" value=params.tag.clone() placeholder="Tag" aria-label="Tag" class="tag-input" />
                <select name="kind" aria-label="Kind">
                    {KINDS.iter().map(|(v, l)| option(&params.kind, v, (*l).into())).collect_view()}
                </select>
                <select name="can" aria-label="Permissions">
                    {CAN.iter().map(|(v, l)| option(&params.can, v, (*l).into())).collect_view()}
                </select>
                <select name="sort" aria-label="Sort">
                    {SORTS.iter().map(|(v, l)| option(&params.sort, v, (*l).into())).collect_view()}
                </select>
            </div>
        </form>
    }
}

#[component]
fn Results(params: BrowseParams, found: BrowseView) -> impl IntoView {
    if found.cards.is_empty() {
        return view! {
            <div class="card empty">
                <h3>"Nothing found"</h3>
                <p class="muted">"No listing you may see matches. Try other words, or clear the filters."</p>
                <a class="button secondary" href="/browse">"Clear search"</a>
            </div>
        }
        .into_any();
    }
    let count = if found.total == 1 { "1 listing".to_owned() } else { format!("{} listings", found.total) };
    let (page, pages) = (found.page, found.page_count);
    view! {
        <p class="muted result-count">{count}</p>
        <div class="grid">
            {found.cards.into_iter().map(|card| view! { <ListingCard card /> }).collect_view()}
        </div>
        <nav class="pager" aria-label="Pages">
            {(page > 1).then(|| view! { <a rel="prev" href=params.href(page - 1)>"← Previous"</a> })}
            <span class="muted">{format!("Page {page} of {pages}")}</span>
            {(page < pages).then(|| view! { <a rel="next" href=params.href(page + 1)>"Next →"</a> })}
        </nav>
    }
    .into_any()
}

#[component]
pub fn Browse() -> impl IntoView {
    let query = use_query_map();
    let params = Memo::new(move |_| query.with(BrowseParams::from_query));
    let found = Resource::new(move || params.get(), |p| browse_listings(p.q, p.department, p.tag, p.kind, p.sort, p.page, p.can));
    let departments = Resource::new(|| (), |_| departments());
    view! {
        <Title text="Browse" />
        <RequireUser>
            <div class="page-head">
                <h1>"Browse"</h1>
            </div>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    let params = params.get();
                    let departments = departments.await.unwrap_or_default();
                    let results = match found.await {
                        Ok(found) => view! { <Results params=params.clone() found /> }.into_any(),
                        Err(e) => view! { <p class="alert error" role="alert">{e.to_string()}</p> }.into_any(),
                    };
                    view! { <SearchForm params departments /> {results} }
                })}
            </Suspense>
        </RequireUser>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_links_keep_the_search_and_encode_it_like_a_form() {
        let p = BrowseParams { q: "fx & rate/€".into(), tag: "finance".into(), page: "1".into(), ..Default::default() };
        assert_eq!(p.href(2), "/browse?q=fx+%26+rate%2F%E2%82%AC&tag=finance&page=2");
    }
}
