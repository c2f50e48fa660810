//! Test support: a fresh, migrated database of either backend.
//!
//! PostgreSQL comes from `TOOLSHED_TEST_POSTGRES_URL`, which
//! `scripts/with-postgres.sh` sets after starting a throwaway cluster
//! (`make test` always does); each test gets its own database in it.

use crate::store::{Backend, Db};

pub const POSTGRES_URL_VAR: &str = "TOOLSHED_TEST_POSTGRES_URL";

/// A database that lives as long as this value (SQLite: a temp dir).
pub struct TestDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub async fn new(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}/toolshed.db", dir.path().display());
                Self { url, _dir: Some(dir) }
            }
            Backend::Postgres => {
                let admin = std::env::var(POSTGRES_URL_VAR).unwrap_or_else(|_| {
                    panic!("{POSTGRES_URL_VAR} is not set: run the tests with `make test` or scripts/with-postgres.sh")
                });
                let name = format!("t_{:016x}", rand::random::<u64>());
                let db = Db::connect(&admin).await.expect("connect to the test cluster");
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(db.pool())
                    .await
                    .expect("create a test database");
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

/// Declares a test that runs once on SQLite and once on PostgreSQL:
/// `store_test!(name, |db: Db| async move { … });` makes `name::sqlite` and `name::postgres`.
#[macro_export]
macro_rules! store_test {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test]
            async fn sqlite() {
                let t = $crate::testing::TestDb::new($crate::store::Backend::Sqlite).await;
                ($body)(t.connect().await).await;
            }

            #[tokio::test]
            async fn postgres() {
                let t = $crate::testing::TestDb::new($crate::store::Backend::Postgres).await;
                ($body)(t.connect().await).await;
            }
        }
    };
}
