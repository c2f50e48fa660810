//! Search quality of the personal endpoint's `search_tools` (scripts/bench.sh search).
//!
//! The 50 listings of bench/search/queries.json, written as people write
//! them, go among 9,950 generated ones (the browse benchmark's generator,
//! with argument rows) in a temp SQLite database. For each, the query a
//! person would type goes through `Catalog::search` as a member of another
//! department; reported: the share whose listing comes first and within the
//! top 5, every miss, the search time, and what `tools/list` costs a model on
//! `/mcp/me` against the same tools listed flat (one MCP tool each).

use std::time::Instant;

use serde::Deserialize;
use toolshed_bench::{insert_version, seed_listings, Lcg};
use toolshed_domain::accounts::Registration;
use toolshed_domain::catalog::CatalogSearch;
use toolshed_domain::codegen::{token_count, tools_list_json};
use toolshed_domain::ids::ToolId;
use toolshed_domain::market::{BrowseQuery, BrowseSort, SearchText};
use toolshed_domain::names::Tags;
use toolshed_domain::semantic::SentenceModel;
use toolshed_domain::store::Db;
use toolshed_domain::{now_ms, Settings, Toolshed};

const GENERATED: i64 = 9_950;
const DEPARTMENTS: i64 = 20;
const TOP: usize = 5;

#[derive(Deserialize)]
struct Cases {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    listing: Listing,
    query: String,
}

#[derive(Deserialize)]
struct Listing {
    department: String,
    name: String,
    title: String,
    description: String,
    tags: Vec<String>,
}

impl Listing {
    fn slug(&self) -> String {
        format!("{}/{}", self.department, self.name)
    }
}

/// Generated departments `dept1…dept20` with an author each, then the
/// generated listings, then the written ones in departments of their own names.
async fn seed(db: &Db, cases: &[Case]) -> Result<(), sqlx::Error> {
    let now = now_ms();
    let mut tx = db.pool().begin().await?;
    let mut departments: Vec<String> = (1..=DEPARTMENTS).map(|d| format!("dept{d}")).collect();
    for case in cases {
        if !departments.contains(&case.listing.department) {
            departments.push(case.listing.department.clone());
        }
    }
    for (i, name) in departments.iter().enumerate() {
        let id = i as i64 + 1;
        sqlx::query("INSERT INTO departments (id, name, title, created_at) VALUES ($1, $2, $3, $4)")
            .bind(id)
            .bind(name)
            .bind(name)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO users (id, username, display_name, department_id, password_hash, created_at, updated_at) VALUES ($1, $2, $2, $1, 'x', $3, $3)",
        )
        .bind(id)
        .bind(format!("author{id}"))
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    seed_listings(&mut tx, &mut Lcg::default(), 1..=GENERATED, DEPARTMENTS, true).await?;
    for (i, case) in cases.iter().enumerate() {
        let id = GENERATED + 1 + i as i64;
        let dept = departments.iter().position(|d| *d == case.listing.department).unwrap() as i64 + 1;
        let l = &case.listing;
        sqlx::query(
            "INSERT INTO tools (id, department_id, name, title, description, tags, visibility, owner_id, published_version, status, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'everyone', $2, 1, 'active', $7, $7)",
        )
        .bind(id)
        .bind(dept)
        .bind(&l.name)
        .bind(&l.title)
        .bind(&l.description)
        .bind(l.tags.join(" "))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        insert_version(&mut tx, id, dept, "[]").await?;
    }
    tx.commit().await
}

/// Where the wanted listing stands among all by meaning alone (before
/// visibility), and its similarity: why fusion missed it.
async fn meaning_rank(ts: &Toolshed, query: &str, wanted: ToolId) -> String {
    let Some(index) = ts.semantic() else { return String::new() };
    let near = index.nearest(&SearchText::parse(query).unwrap().unwrap(), 10_000).await;
    match near.iter().position(|(id, _)| *id == wanted) {
        Some(rank) => format!("(by meaning: #{}, similarity {:.2})", rank + 1, near[rank].1),
        None => "(by meaning: below the similarity floor)".into(),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // Built in: bench.sh runs this binary itself, from wherever the clone is.
    let cases: Cases = serde_json::from_str(include_str!("../../search/queries.json")).expect("parse queries.json");
    let cases = cases.cases;
    let dir = std::env::temp_dir().join(format!("toolshed-bench-search-{}", std::process::id()));
    let db = Db::connect(&format!("sqlite://{}/bench.db", dir.display())).await.expect("open the database");
    db.migrate().await.expect("migrate");
    let started = Instant::now();
    seed(&db, &cases).await.expect("seed");
    println!(
        "seeded {} listings ({} written, {GENERATED} generated) in {:.1} s",
        GENERATED as usize + cases.len(),
        cases.len(),
        started.elapsed().as_secs_f64()
    );

    // The model `make test` installs; the search is full-text only without it.
    let model = std::env::var_os("TOOLSHED_EMBEDDING_MODEL").map(|dir| SentenceModel::load(dir.as_ref()).expect("load the sentence model"));
    let semantic = model.is_some();
    let ts = Toolshed::new(db.clone(), Settings { sentence_model: model, ..Settings::default() });
    if let Some(index) = ts.semantic() {
        // The index encodes every listing in the background; wait for it.
        let started = Instant::now();
        let active: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tools WHERE status = 'active'").fetch_one(db.pool()).await.unwrap();
        while index.len() < active as usize {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        println!("encoded {} listings' meaning in {:.1} s", index.len(), started.elapsed().as_secs_f64());
    }
    let reader =
        ts.accounts().register(Registration::parse("reader", "Reader", "dept3", "a-long-enough-password").unwrap(), None).await.unwrap();
    let catalog = ts.catalog(&reader, None);

    let (mut first, mut top, mut micros) = (0, 0, Vec::new());
    let mut misses = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let q = CatalogSearch { text: SearchText::parse(&case.query).unwrap(), department: None, tags: Tags::default(), limit: TOP as i64 };
        let t = Instant::now();
        let hits = catalog.search(&q).await.expect("search");
        micros.push(t.elapsed().as_secs_f64() * 1e6);
        match hits.iter().position(|h| h.name == case.listing.slug()) {
            Some(0) => {
                first += 1;
                top += 1;
            }
            Some(_) => top += 1,
            None => misses.push(format!(
                "  miss: {:52} wanted {:28} got {:28} {}",
                format!("\"{}\"", case.query),
                case.listing.slug(),
                hits.first().map_or("nothing", |h| h.name.as_str()),
                meaning_rank(&ts, &case.query, ToolId(GENERATED + 1 + i as i64)).await,
            )),
        }
    }
    let n = cases.len();
    let share = |k: usize| format!("{k}/{n} ({:.0} %)", 100.0 * k as f64 / n as f64);
    let how = if semantic { "full text and meaning" } else { "full text only: TOOLSHED_EMBEDDING_MODEL is not set" };
    println!("search_tools ({how}): the expected listing first {}, in the top {TOP} {}", share(first), share(top));
    for miss in &misses {
        println!("{miss}");
    }
    micros.sort_by(f64::total_cmp);
    println!("search_tools time: median {:.2} ms, max {:.2} ms", micros[n / 2] / 1000.0, micros[n - 1] / 1000.0);

    // What a model is shown: the personal endpoint's list, or every tool the reader may use, one by one.
    let me = token_count(&tools_list_json(&catalog.tool_defs().await.unwrap()));
    let mut defs = Vec::new();
    for page in 1.. {
        let query = BrowseQuery { sort: BrowseSort::Newest, page, per_page: 100, ..BrowseQuery::default() };
        let cards = ts.market().browse(&reader, &query).await.unwrap().cards;
        if cards.is_empty() {
            break;
        }
        for card in cards {
            defs.push(catalog.definition(&card.slug()).await.unwrap().1);
        }
    }
    let flat = token_count(&tools_list_json(&defs));
    println!(
        "tools/list tokens (o200k): /mcp/me {me}; the same {} tools listed flat {flat} ({:.0}x more)",
        defs.len(),
        flat as f64 / me as f64
    );
    db.close().await;
    let _ = std::fs::remove_dir_all(dir);
}
