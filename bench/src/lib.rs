//! What the benchmarks share: a deterministic catalog of generated listings,
//! the same on every run, for the browse and search benchmarks.

use std::ops::RangeInclusive;

use toolshed_domain::now_ms;

/// Words the generated titles and descriptions are made of: a company's
/// subjects, so searches for them find many listings.
pub const WORDS: [&str; 48] = [
    "currency",
    "rate",
    "invoice",
    "ledger",
    "contract",
    "search",
    "summary",
    "report",
    "weather",
    "ticket",
    "deploy",
    "status",
    "customer",
    "order",
    "shipping",
    "inventory",
    "holiday",
    "calendar",
    "translate",
    "glossary",
    "budget",
    "forecast",
    "payroll",
    "tax",
    "audit",
    "policy",
    "incident",
    "metrics",
    "latency",
    "queue",
    "backup",
    "release",
    "changelog",
    "review",
    "license",
    "vendor",
    "travel",
    "expense",
    "badge",
    "room",
    "printer",
    "wiki",
    "onboarding",
    "survey",
    "energy",
    "carbon",
    "quote",
    "risk",
];
pub const TAGS: [&str; 12] = ["finance", "legal", "ops", "hr", "sales", "it", "data", "docs", "travel", "security", "fx", "reporting"];

/// A small deterministic generator: the same data on every run.
pub struct Lcg(u64);

impl Default for Lcg {
    fn default() -> Self {
        Lcg(42)
    }
}

impl Lcg {
    pub fn next(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }

    pub fn words(&mut self, n: usize) -> String {
        (0..n).map(|_| WORDS[self.next(WORDS.len() as u64) as usize]).collect::<Vec<_>>().join(" ")
    }
}

/// Inserts generated tools with the ids in `ids`, spread over departments
/// `1..=departments` (which exist, each with an author of the same id): every
/// visibility, 1 in 50 hidden, all published at version 1. With `versions`,
/// version 1 exists too, with one to three described arguments, so what a
/// tool's definition costs a model is realistic.
pub async fn seed_listings(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    rng: &mut Lcg,
    ids: RangeInclusive<i64>,
    departments: i64,
    versions: bool,
) -> Result<(), sqlx::Error> {
    let now = now_ms();
    for id in ids {
        let dept = 1 + rng.next(departments as u64) as i64;
        let visibility = match rng.next(10) {
            0 => "private",
            1 | 2 => "department",
            _ => "everyone",
        };
        let status = if rng.next(50) == 0 { "hidden" } else { "active" };
        let tags = format!("{} {}", TAGS[rng.next(12) as usize], TAGS[rng.next(12) as usize]);
        let created = now - rng.next(365 * 86_400_000) as i64;
        sqlx::query(
            "INSERT INTO tools (id, department_id, name, title, description, tags, visibility, owner_id, published_version, status, created_at, updated_at, cjk_pairs) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $2, 1, $8, $9, $10, '')",
        )
        .bind(id)
        .bind(dept)
        .bind(format!("tool_{id}"))
        .bind(rng.words(3))
        .bind(format!("{}.\n\n{}.", rng.words(12), rng.words(24)))
        .bind(tags)
        .bind(visibility)
        .bind(status)
        .bind(created)
        .bind(created + rng.next(30 * 86_400_000) as i64)
        .execute(&mut **tx)
        .await?;
        if versions {
            let args: Vec<serde_json::Value> = (0..1 + rng.next(3))
                .map(|i| {
                    serde_json::json!({
                        "name": format!("{}_{i}", WORDS[rng.next(WORDS.len() as u64) as usize]),
                        "type": {"kind": if rng.next(3) == 0 { "integer" } else { "string" }},
                        "description": format!("The {} to use", rng.words(4)),
                        "required": i == 0,
                    })
                })
                .collect();
            insert_version(tx, id, dept, &serde_json::Value::Array(args).to_string()).await?;
        }
    }
    Ok(())
}

/// Version 1 of tool `id` by user `author`, with argument rows `args_json`.
pub async fn insert_version(tx: &mut sqlx::Transaction<'_, sqlx::Any>, id: i64, author: i64, args_json: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO tool_versions (tool_id, version, code, args_json, changelog, created_by, created_at, published_at) \
         VALUES ($1, 1, 'return 1;', $2, 'First', $3, $4, $4)",
    )
    .bind(id)
    .bind(args_json)
    .bind(author)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(())
}
