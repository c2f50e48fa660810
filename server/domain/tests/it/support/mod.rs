//! Test support: a fresh, migrated database of either backend. Shared by this
//! crate's tests and the server's (`#[path]`-included there), so it needs no
//! feature flag that would change how the main crates are built for tests.
//!
//! PostgreSQL comes from `TOOLSHED_TEST_POSTGRES_URL`, which
//! `scripts/with-postgres.sh` sets after starting a throwaway cluster
//! (`make test` always does); each test gets its own database in it.

#![allow(dead_code)]

use toolshed_domain::accounts::Registration;
use toolshed_domain::schema::ArgDef;
use toolshed_domain::store::{Backend, Db};
use toolshed_domain::{Settings, Toolshed, User};

pub const POSTGRES_URL_VAR: &str = "TOOLSHED_TEST_POSTGRES_URL";

/// The root of the clone the tests run in. Read when the test runs, never
/// with `env!`: cargo reuses a test binary built in another clone (CI's clones
/// share one target directory), and a path baked in at build time names that
/// clone, which may be gone.
pub fn repo_root() -> std::path::PathBuf {
    let package = std::env::var_os("CARGO_MANIFEST_DIR").expect("tests are run by cargo, which names the package's folder");
    let package = std::path::PathBuf::from(package);
    package.ancestors().find(|dir| dir.join("Cargo.lock").is_file()).expect("the package is inside the workspace").to_path_buf()
}

/// A directory under the system temp dir, removed when dropped. (Hand-rolled
/// rather than `tempfile`, whose dependencies would change the feature set the
/// main crates are compiled with for tests, and so force a second full build.)
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    pub fn new() -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let name = format!("toolshed-test-{}-{}-{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).expect("create a temp dir");
        Self(path)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether the PostgreSQL cases can run; says why not when they cannot, so a
/// plain `cargo test` without a cluster skips them instead of failing.
pub fn postgres_available() -> bool {
    let set = std::env::var_os(POSTGRES_URL_VAR).is_some();
    if !set {
        eprintln!("skipped: {POSTGRES_URL_VAR} is not set (`make test` or scripts/with-postgres.sh starts a throwaway PostgreSQL)");
    }
    set
}

/// A database that lives as long as this value (SQLite: a temp dir).
pub struct TestDb {
    pub url: String,
    _dir: Option<TempDir>,
}

impl TestDb {
    pub async fn new(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let dir = TempDir::new();
                let url = format!("sqlite://{}/toolshed.db", dir.path().display());
                Self { url, _dir: Some(dir) }
            }
            Backend::Postgres => {
                let admin = std::env::var(POSTGRES_URL_VAR).unwrap_or_else(|_| {
                    panic!("{POSTGRES_URL_VAR} is not set: run the tests with `make test` or scripts/with-postgres.sh")
                });
                let name = format!("t_{}", TempDir::new().path().file_name().unwrap().to_string_lossy().replace('-', "_"));
                let db = Db::connect(&admin).await.expect("connect to the test cluster");
                sqlx::query(&format!("CREATE DATABASE {name}")).execute(db.pool()).await.expect("create a test database");
                db.close().await;
                let base = admin.rsplit_once('/').map(|(b, _)| b).expect("URL has a database part");
                Self { url: format!("{base}/{name}"), _dir: None }
            }
        }
    }

    /// Connects and migrates.
    pub async fn connect(&self) -> Db {
        let db = Db::connect(&self.url).await.expect("connect");
        db.migrate().await.expect("migrate");
        db
    }
}

/// Registers `name` as an author in `department` (created when new).
pub async fn user(ts: &Toolshed, name: &str, department: &str) -> User {
    let mut reg = Registration::parse(name, name, department, "a-long-enough-password").unwrap();
    reg.role = toolshed_domain::names::Role::Author;
    ts.accounts().register(reg, None).await.unwrap()
}

/// A Toolshed on `db` with Alice and Bob in finance and Carol in legal.
pub async fn finance_and_legal(db: Db) -> (Toolshed, User, User, User) {
    let ts = Toolshed::new(db, Settings::default());
    let alice = user(&ts, "alice", "finance").await;
    let bob = user(&ts, "bob", "finance").await;
    let carol = user(&ts, "carol", "legal").await;
    (ts, alice, bob, carol)
}

/// A published tool: `title | description | tags | visibility`.
pub async fn listing(ts: &Toolshed, author: &User, name: &str, spec: &str) -> toolshed_domain::tools::Tool {
    let [title, description, tags, visibility] = spec.split('|').map(str::trim).collect::<Vec<_>>().try_into().unwrap();
    let tool = ts
        .tools()
        .create_tool(author, toolshed_domain::tools::NewTool::parse(name, title, description, tags, visibility).unwrap())
        .await
        .unwrap();
    ts.tools().save_version(author, tool.id, toolshed_domain::tools::Source::parse("return 1;", vec![], None).unwrap(), "").await.unwrap();
    ts.tools().publish(author, tool.id, 1).await.unwrap()
}

/// One required string argument, `text`.
pub fn text_arg() -> Vec<ArgDef> {
    serde_json::from_value(serde_json::json!([{ "name": "text", "type": { "kind": "string" }, "required": true }])).unwrap()
}

/// Declares a test that runs once on SQLite and once on PostgreSQL:
/// `store_test!(name, |db: Db| async move { … });` makes `name::sqlite` and `name::postgres`.
#[allow(unused_macros)]
macro_rules! store_test {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test]
            async fn sqlite() {
                let t = crate::support::TestDb::new(toolshed_domain::store::Backend::Sqlite).await;
                ($body)(t.connect().await).await;
            }

            #[tokio::test]
            async fn postgres() {
                if !crate::support::postgres_available() {
                    return;
                }
                let t = crate::support::TestDb::new(toolshed_domain::store::Backend::Postgres).await;
                ($body)(t.connect().await).await;
            }
        }
    };
}
