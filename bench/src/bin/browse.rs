//! The browse/search page with 10,000 listings (scripts/bench.sh).
//!
//! - `browse`: seeds a temp SQLite database (20 departments, 10,000 tools of
//!   every visibility, 100,000 calls in the last 30 days), then times
//!   `Market::browse` plus serializing the page to JSON, as a member would
//!   browse and search.
//! - `browse --seed PATH`: only seeds the database at PATH, for a real server.
//! - `browse --http BASE`: registers a member on the server at BASE (loopback)
//!   and times `GET /browse?…` (the server-rendered page) from request to last byte.

use std::time::Instant;

use sqlx::Row;
use toolshed_bench::{seed_listings, Lcg};
use toolshed_domain::accounts::Registration;
use toolshed_domain::market::BrowseQuery;
use toolshed_domain::store::Db;
use toolshed_domain::{now_ms, Settings, Toolshed};

const LISTINGS: i64 = 10_000;
const DEPARTMENTS: i64 = 20;
const CALLS: i64 = 100_000;
const WARMUP: usize = 20;
const ITERATIONS: usize = 300;

async fn seed(db: &Db) -> Result<(), sqlx::Error> {
    let mut rng = Lcg::default();
    let now = now_ms();
    let mut tx = db.pool().begin().await?;
    for d in 1..=DEPARTMENTS {
        sqlx::query("INSERT INTO departments (id, name, title, created_at) VALUES ($1, $2, $3, $4)")
            .bind(d)
            .bind(format!("dept{d}"))
            .bind(format!("Department {d}"))
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO users (id, username, display_name, department_id, password_hash, created_at, updated_at) VALUES ($1, $2, $3, $1, 'x', $4, $4)",
        )
        .bind(d)
        .bind(format!("author{d}"))
        .bind(format!("Author {d}"))
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    seed_listings(&mut tx, &mut rng, 1..=LISTINGS, DEPARTMENTS, false).await?;
    for _ in 0..CALLS {
        // Skewed: a few listings get most of the calls.
        let tool = 1 + (rng.next(LISTINGS as u64) * rng.next(LISTINGS as u64) / LISTINGS as u64) as i64;
        sqlx::query("INSERT INTO usage_records (at_ms, tool_id, version, user_id, transport, duration_us, outcome) VALUES ($1, $2, 1, 1, 'mcp-http', $3, 'ok')")
            .bind(now - rng.next(30 * 86_400_000) as i64)
            .bind(tool)
            .bind(200 + rng.next(5_000) as i64)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await
}

fn report(name: &str, mut micros: Vec<f64>) {
    micros.sort_by(f64::total_cmp);
    let at = |q: f64| micros[((micros.len() - 1) as f64 * q).round() as usize];
    println!("{name:44} {} runs: median {:6.2} ms  p99 {:6.2} ms", micros.len(), at(0.5) / 1000.0, at(0.99) / 1000.0);
}

const SCENARIOS: [(&str, [&str; 6]); 5] = [
    ("browse, most used (default)", ["", "", "", "", "", ""]),
    ("search \"currency rate\"", ["currency rate", "", "", "", "", ""]),
    ("search \"inv\" (prefix), department, tag", ["inv", "dept3", "finance", "", "", ""]),
    ("newest, page 20", ["", "", "", "", "newest", "20"]),
    ("search \"report\", recently updated", ["report", "", "", "", "updated", ""]),
];

async fn in_process() {
    let dir = std::env::temp_dir().join(format!("toolshed-bench-browse-{}", std::process::id()));
    let db = Db::connect(&format!("sqlite://{}/bench.db", dir.display())).await.expect("open the database");
    db.migrate().await.expect("migrate");
    let started = Instant::now();
    seed(&db).await.expect("seed");
    println!("seeded {LISTINGS} listings and {CALLS} calls in {:.1} s", started.elapsed().as_secs_f64());
    let ts = Toolshed::new(db.clone(), Settings::default());
    let member =
        ts.accounts().register(Registration::parse("reader", "Reader", "dept3", "a-long-enough-password").unwrap(), None).await.unwrap();
    for (name, [q, d, tag, kind, sort, page]) in SCENARIOS {
        let query = BrowseQuery::parse(q, d, tag, kind, sort, page).unwrap();
        let mut micros = Vec::with_capacity(ITERATIONS);
        let mut total = 0;
        for i in 0..WARMUP + ITERATIONS {
            let t = Instant::now();
            let found = ts.market().browse(&member, &query).await.unwrap();
            let json = serde_json::to_string(&found).unwrap();
            let elapsed = t.elapsed().as_secs_f64() * 1e6;
            assert!(!json.is_empty());
            total = found.total;
            if i >= WARMUP {
                micros.push(elapsed);
            }
        }
        report(&format!("{name} ({total} found)"), micros);
    }
    db.close().await;
    let _ = std::fs::remove_dir_all(dir);
}

async fn http(base: &str) {
    assert!(base.starts_with("http://127.0.0.1:"), "loopback only");
    let client = reqwest::Client::builder().cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let form = [
        ("username", "bench_reader"),
        ("display_name", "Bench Reader"),
        ("department", "general"),
        ("new_department", "dept3"),
        ("password", "a-long-enough-password"),
        ("password_confirm", "a-long-enough-password"),
    ];
    let res =
        client.post(format!("{base}/api/register")).header("Origin", base).header("Accept", "text/html").form(&form).send().await.unwrap();
    assert!(res.status().is_redirection() || res.status().is_success(), "register: {}", res.status());
    for (name, [q, d, tag, kind, sort, page]) in SCENARIOS {
        let fields = [("q", q), ("department", d), ("tag", tag), ("kind", kind), ("sort", sort), ("page", page)];
        let url = reqwest::Url::parse_with_params(&format!("{base}/browse"), fields.iter().filter(|(_, v)| !v.is_empty())).unwrap();
        let mut micros = Vec::with_capacity(ITERATIONS);
        for i in 0..WARMUP + ITERATIONS {
            let t = Instant::now();
            let res = client.get(url.clone()).send().await.unwrap();
            assert_eq!(res.status(), 200);
            let html = res.text().await.unwrap();
            let elapsed = t.elapsed().as_secs_f64() * 1e6;
            assert!(html.contains("listing-card"), "{name}: the page lists something");
            if i >= WARMUP {
                micros.push(elapsed);
            }
        }
        report(&format!("GET /browse: {name}"), micros);
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => in_process().await,
        ["--seed", path] => {
            let db = Db::connect(&format!("sqlite://{path}")).await.expect("open the database");
            db.migrate().await.expect("migrate");
            seed(&db).await.expect("seed");
            let n: i64 = sqlx::query("SELECT COUNT(*) AS n FROM tools").fetch_one(db.pool()).await.unwrap().get("n");
            println!("seeded {n} listings into {path}");
            db.close().await;
        }
        ["--http", base] => http(base).await,
        _ => {
            eprintln!("usage: browse [--seed PATH | --http http://127.0.0.1:PORT]");
            std::process::exit(2);
        }
    }
}
