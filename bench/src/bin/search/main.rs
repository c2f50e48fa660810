//! Search quality of the personal endpoint's `search_tools` (scripts/bench.sh search).
//!
//! The 122 listings of bench/search/eval.json, written as people write them
//! (a quarter of the new ones in Chinese, near-duplicates on purpose), go
//! among 9,878 generated ones (the browse benchmark's generator, with
//! argument rows) in a temp SQLite database: 10,000 in all. Two sets of
//! queries go through `Catalog::search` as a member of another department:
//! - *tuning*: the 50 queries of bench/search/queries.json and the 150 of
//!   tuning.json (written without reading eval.json's queries), the sets the
//!   ranking's constants are chosen on (`search --tuning` runs only these);
//! - *evaluation*: the 300 queries of eval.json, written before any tuning
//!   and never changed since, reported by category (no shared word, Chinese,
//!   typos, long, ...);
//! - *held out*: `search --holdout` seeds bench/search/holdout.json's own
//!   listings instead and runs its queries, written after the ranking was
//!   tuned and never tuned on (use another TOOLSHED_BENCH_SEARCH_DIR);
//!   `--holdout2`, bench/search/holdout2.json, written after that;
//!   `--holdout3`, bench/search/holdout3.json, a small company's 48 tools,
//!   written after the adapter was trained; `--holdout4`, holdout4.json,
//!   another company's 48, written after the adapter's last training;
//!   `--holdout5`, holdout5.json, a manufacturer's 48, written later still;
//!   `--holdout6`, holdout6.json, a drug maker's 48, written before the
//!   adapter was trained on three more companies; `--holdout7`, holdout7.json,
//!   a builder's 48, written after that; `--holdout8`, holdout8.json, a food
//!   cooperative's 48, written before the adapter was trained on two more.
//! - `--alone` seeds the written listings without the generated ones: a
//!   small company's catalogue, as a first customer has (use another
//!   TOOLSHED_BENCH_SEARCH_DIR).
//!
//! `search train` trains the search adapter instead (see `train`).
//!
//! Reported per set and category: the share whose listing comes first and
//! within the top 5, the misses, the search time; and what `tools/list`
//! costs a model on `/mcp/me` against the same tools listed flat.

mod train;

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Deserialize;
use toolshed_bench::{insert_version, seed_listings, Lcg};
use toolshed_domain::accounts::{Registration, User};
use toolshed_domain::catalog::{Catalog, CatalogSearch};
use toolshed_domain::codegen::{token_count, tools_list_json};
use toolshed_domain::ids::ToolId;
use toolshed_domain::market::{BrowseQuery, BrowseSort, SearchText};
use toolshed_domain::names::Tags;
use toolshed_domain::semantic::SentenceModel;
use toolshed_domain::store::Db;
use toolshed_domain::words::cjk_pairs;
use toolshed_domain::{now_ms, Settings, Toolshed};

const LISTINGS: i64 = 10_000;
const DEPARTMENTS: i64 = 20;
const TOP: usize = 5;

/// bench/search/eval.json.
#[derive(Deserialize)]
struct EvalSet {
    listings: Vec<Listing>,
    queries: Vec<Query>,
}

#[derive(Deserialize)]
struct Query {
    query: String,
    want: String,
    #[serde(default)]
    categories: Vec<String>,
}

/// bench/search/tuning.json: queries over eval.json's listings, written
/// without reading its queries; the ranking's constants are chosen on these.
#[derive(Deserialize)]
struct TuningQueries {
    queries: Vec<Query>,
}

/// bench/search/queries.json: one query per listing.
#[derive(Deserialize)]
struct TuningSet {
    cases: Vec<TuningCase>,
}

#[derive(Deserialize)]
struct TuningCase {
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
    #[serde(default)]
    args: Vec<Arg>,
}

#[derive(Deserialize)]
struct Arg {
    name: String,
    description: String,
}

impl Listing {
    fn slug(&self) -> String {
        format!("{}/{}", self.department, self.name)
    }
}

/// Generated departments `dept1…dept20` with an author each, then the
/// generated listings, then the written ones in departments of their own names.
async fn seed(db: &Db, written: &[Listing], total: i64) -> Result<(), sqlx::Error> {
    let now = now_ms();
    let mut tx = db.pool().begin().await?;
    let mut departments: Vec<String> = (1..=DEPARTMENTS).map(|d| format!("dept{d}")).collect();
    for listing in written {
        if !departments.contains(&listing.department) {
            departments.push(listing.department.clone());
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
    let generated = total - written.len() as i64;
    seed_listings(&mut tx, &mut Lcg::default(), 1..=generated, DEPARTMENTS, true).await?;
    for (i, l) in written.iter().enumerate() {
        let id = generated + 1 + i as i64;
        let dept = departments.iter().position(|d| *d == l.department).unwrap() as i64 + 1;
        sqlx::query(
            "INSERT INTO tools (id, department_id, name, title, description, tags, visibility, owner_id, published_version, status, created_at, updated_at, cjk_pairs) \
             VALUES ($1, $2, $3, $4, $5, $6, 'everyone', $2, 1, 'active', $7, $7, $8)",
        )
        .bind(id)
        .bind(dept)
        .bind(&l.name)
        .bind(&l.title)
        .bind(&l.description)
        .bind(l.tags.join(" "))
        .bind(now)
        .bind(cjk_pairs(&l.title, &l.description))
        .execute(&mut *tx)
        .await?;
        let args: Vec<serde_json::Value> =
            l.args.iter().map(|a| serde_json::json!({"name": a.name, "type": {"kind": "string"}, "description": a.description})).collect();
        insert_version(&mut tx, id, dept, &serde_json::Value::Array(args).to_string()).await?;
    }
    tx.commit().await
}

/// Where the wanted listing stands among all by meaning alone (before
/// visibility), and its nearness (1 the nearest): why fusion missed it.
async fn meaning_rank(ts: &Toolshed, reader: &User, query: &str, wanted: ToolId) -> String {
    let Some(index) = ts.semantic() else { return String::new() };
    let near = index.nearest(reader.id, &SearchText::parse(query).unwrap().unwrap(), 10_000).await;
    match near.iter().position(|(id, _)| *id == wanted) {
        Some(rank) => format!("(by meaning: #{}, nearness {:.2})", rank + 1, near[rank].1),
        None => "(by meaning: below the similarity floor)".into(),
    }
}

/// Found first, found in the top 5, of how many.
#[derive(Default)]
struct Score {
    first: usize,
    top: usize,
    of: usize,
}

impl Score {
    fn add(&mut self, rank: Option<usize>) {
        self.of += 1;
        self.first += usize::from(rank == Some(0));
        self.top += usize::from(rank.is_some());
    }

    fn line(&self) -> String {
        let pct = |k: usize| 100.0 * k as f64 / self.of.max(1) as f64;
        format!(
            "first {:3}/{:<3} ({:3.0} %)   top {TOP} {:3}/{:<3} ({:3.0} %)",
            self.first,
            self.of,
            pct(self.first),
            self.top,
            self.of,
            pct(self.top)
        )
    }
}

/// Runs `queries` (query, wanted slug, categories) and prints the scores by
/// category, every miss, and the search time.
async fn run_set(ts: &Toolshed, catalog: &Catalog, slugs: &[String], total: i64, set: &str, queries: &[(String, String, Vec<String>)]) {
    let mut by_category: BTreeMap<String, Score> = BTreeMap::new();
    let mut all = Score::default();
    let mut micros = Vec::new();
    let mut misses = Vec::new();
    for (query, want, categories) in queries {
        let q = CatalogSearch { text: SearchText::parse(query).unwrap(), department: None, tags: Tags::default(), limit: TOP as i64 };
        let t = Instant::now();
        let hits = catalog.search(&q).await.expect("search");
        micros.push(t.elapsed().as_secs_f64() * 1e6);
        let rank = hits.iter().position(|h| h.name == *want);
        all.add(rank);
        for category in categories {
            by_category.entry(category.clone()).or_default().add(rank);
        }
        if rank != Some(0) {
            let id = slugs.iter().position(|s| s == want).expect("the wanted listing is among the written ones");
            misses.push(format!(
                "  {}: {:60} wanted {:32} got {:32} {}",
                rank.map_or("miss".to_owned(), |r| format!("#{}", r + 1)),
                format!("\"{}\"", query.chars().take(58).collect::<String>()),
                want,
                hits.first().map_or("nothing", |h| h.name.as_str()),
                meaning_rank(ts, catalog.user(), query, ToolId(total - slugs.len() as i64 + 1 + id as i64)).await,
            ));
        }
    }
    micros.sort_by(f64::total_cmp);
    let n = micros.len();
    println!("{set}: {}   search time median {:.2} ms, p95 {:.2} ms", all.line(), micros[n / 2] / 1000.0, micros[n * 95 / 100] / 1000.0);
    for (category, score) in &by_category {
        println!("  {category:16} {}", score.line());
    }
    for miss in &misses {
        println!("{miss}");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().nth(1).as_deref() == Some("train") {
        let dir = std::env::var_os("TOOLSHED_EMBEDDING_MODEL").expect("training needs the sentence model");
        return train::train(&SentenceModel::load(dir.as_ref()).expect("load the sentence model"));
    }
    // Built in: bench.sh runs this binary itself, from wherever the clone is.
    let eval: EvalSet = serde_json::from_str(include_str!("../../../search/eval.json")).expect("parse eval.json");
    let tuning: TuningSet = serde_json::from_str(include_str!("../../../search/queries.json")).expect("parse queries.json");
    let tuning_more: TuningQueries = serde_json::from_str(include_str!("../../../search/tuning.json")).expect("parse tuning.json");
    // `--holdout…`: a catalogue of its own listings, and its queries alone.
    let held_out = [
        ("--holdout", "holdout.json", include_str!("../../../search/holdout.json")),
        ("--holdout2", "holdout2.json", include_str!("../../../search/holdout2.json")),
        ("--holdout3", "holdout3.json", include_str!("../../../search/holdout3.json")),
        ("--holdout4", "holdout4.json", include_str!("../../../search/holdout4.json")),
        ("--holdout5", "holdout5.json", include_str!("../../../search/holdout5.json")),
        ("--holdout6", "holdout6.json", include_str!("../../../search/holdout6.json")),
        ("--holdout7", "holdout7.json", include_str!("../../../search/holdout7.json")),
        ("--holdout8", "holdout8.json", include_str!("../../../search/holdout8.json")),
    ];
    let holdout: Option<(&str, EvalSet)> = std::env::args()
        .find_map(|a| held_out.iter().find(|(flag, _, _)| *flag == a))
        .map(|(_, file, text)| (*file, serde_json::from_str(text).unwrap_or_else(|e| panic!("parse {file}: {e}"))));
    let written = holdout.as_ref().map_or(&eval.listings, |(_, h)| &h.listings);
    let total = if std::env::args().any(|a| a == "--alone") { written.len() as i64 } else { LISTINGS };
    // TOOLSHED_BENCH_SEARCH_DIR keeps the database, and so its encoded
    // vectors, for the next run (encoding 10,000 listings takes minutes).
    let kept = std::env::var_os("TOOLSHED_BENCH_SEARCH_DIR").map(std::path::PathBuf::from);
    let dir = kept.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("toolshed-bench-search-{}", std::process::id())));
    let db = Db::connect(&format!("sqlite://{}/bench.db", dir.display())).await.expect("open the database");
    db.migrate().await.expect("migrate");
    let seeded: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tools").fetch_one(db.pool()).await.unwrap();
    if seeded == 0 {
        let started = Instant::now();
        seed(&db, written, total).await.expect("seed");
        println!("seeded {total} listings ({} written, the rest generated) in {:.1} s", written.len(), started.elapsed().as_secs_f64());
    }

    // The model `make test` installs; the search is full-text only without it.
    let model = std::env::var_os("TOOLSHED_EMBEDDING_MODEL").map(|dir| SentenceModel::load(dir.as_ref()).expect("load the sentence model"));
    let how = if model.is_some() { "full text and meaning" } else { "full text only: TOOLSHED_EMBEDDING_MODEL is not set" };
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
        match ts.accounts().register(Registration::parse("reader", "Reader", "dept3", "a-long-enough-password").unwrap(), None).await {
            Ok(reader) => reader,
            // A kept database has the reader from its first run.
            Err(_) => ts.accounts().user_by_username("reader").await.unwrap().expect("the reader of a kept database"),
        };
    let catalog = ts.catalog(&reader, None);
    let last: String = sqlx::query_scalar("SELECT name FROM tools WHERE id = $1").bind(total).fetch_one(db.pool()).await.unwrap();
    assert_eq!(last, written.last().unwrap().name, "a kept database seeded with the other set: use another TOOLSHED_BENCH_SEARCH_DIR");
    let slugs: Vec<String> = written.iter().map(Listing::slug).collect();
    println!("search_tools ({how}), top {TOP}:");
    if let Some((file, holdout)) = holdout {
        let queries: Vec<_> = holdout.queries.into_iter().map(|q| (q.query, q.want, q.categories)).collect();
        return run_set(&ts, &catalog, &slugs, total, &format!("held out ({file})"), &queries).await;
    }
    let tuning: Vec<_> = tuning.cases.into_iter().map(|c| (c.query, c.listing.slug(), vec!["tuning".to_owned()])).collect();
    run_set(&ts, &catalog, &slugs, total, "tuning (queries.json)", &tuning).await;
    let tuning_more: Vec<_> = tuning_more.queries.into_iter().map(|q| (q.query, q.want, q.categories)).collect();
    run_set(&ts, &catalog, &slugs, total, "tuning (tuning.json)", &tuning_more).await;
    if std::env::args().any(|a| a == "--tuning") {
        return;
    }
    let queries: Vec<_> = eval.queries.into_iter().map(|q| (q.query, q.want, q.categories)).collect();
    run_set(&ts, &catalog, &slugs, total, "evaluation (eval.json)", &queries).await;
    // What a search's time is made of: the query's encoding alone, the best
    // of three runs of each query (the rest is full text, nearness and rows).
    if let Some(dir) = std::env::var_os("TOOLSHED_EMBEDDING_MODEL") {
        let model = SentenceModel::load(dir.as_ref()).expect("loaded once already");
        let mut best = vec![f64::MAX; queries.len()];
        for _ in 0..3 {
            for ((query, _, _), fastest) in queries.iter().zip(&mut best) {
                let t = Instant::now();
                std::hint::black_box(model.parts().1.encode_search(query));
                *fastest = fastest.min(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        best.sort_by(f64::total_cmp);
        println!(
            "the query's encoding alone (best of 3): median {:.2} ms, p95 {:.2} ms",
            best[best.len() / 2],
            best[best.len() * 95 / 100]
        );
    }

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
    if kept.is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
}
