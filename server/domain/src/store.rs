//! The database: one pool, SQLite (embedded default) or PostgreSQL (scale-out),
//! chosen by URL at start. Queries are written once in the SQL both accept
//! (`$1` placeholders, `RETURNING`, `ON CONFLICT`); only migrations differ.

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Connection, Executor, Row};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database URL {0:?}: use sqlite://… or postgres://…")]
    UnsupportedUrl(String),
    #[error("database error: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("could not create the database directory: {0}")]
    Io(#[from] std::io::Error),
    #[error("the database file {path} cannot be written ({reason}); SQLite must be able to write it and create its -wal and -shm files in the same directory")]
    NotWritable { path: String, reason: std::io::Error },
    /// A write transaction reached its commit without its audit row: a bug,
    /// refused so that no change goes unrecorded (the transaction is rolled back).
    #[error("a write without its audit row was refused and rolled back")]
    Unaudited,
}

impl StoreError {
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, StoreError::Sql(sqlx::Error::Database(e)) if e.is_unique_violation())
    }
}

/// Says so at once when SQLite could only fail later, as "pool timed out".
fn check_writable(path: &std::path::Path) -> Result<(), StoreError> {
    let not_writable = |reason| StoreError::NotWritable { path: path.display().to_string(), reason };
    if path.exists() {
        std::fs::OpenOptions::new().append(true).open(path).map_err(not_writable)?;
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let probe = dir.join(format!(".toolshed-write-check-{}", std::process::id()));
    std::fs::File::create(&probe).and_then(|_| std::fs::remove_file(&probe)).map_err(not_writable)
}

#[derive(Clone, Debug)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
}

/// `SQLITE` and `POSTGRES`: each backend's migrations as (file name, SQL),
/// embedded by `build.rs`.
mod embedded {
    include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

    pub fn files(backend: super::Backend) -> &'static [(&'static str, &'static str)] {
        match backend {
            super::Backend::Sqlite => SQLITE,
            super::Backend::Postgres => POSTGRES,
        }
    }
}

/// Migrations compiled into the binary, read the way sqlx reads a folder
/// (`<version>_<description>.sql`, `-- no-transaction` on the first line), so
/// a database migrated by `sqlx::migrate!` keeps its checksums.
#[derive(Debug)]
struct Embedded(&'static [(&'static str, &'static str)]);

impl Embedded {
    fn migrations(&self) -> Result<Vec<sqlx::migrate::Migration>, String> {
        use sqlx::migrate::{Migration, MigrationType};
        self.0
            .iter()
            .map(|&(file, sql)| {
                let (version, rest) = file.split_once('_').ok_or_else(|| format!("{file}: no version"))?;
                let version = version.parse().map_err(|_| format!("{file}: the version is not a number"))?;
                let kind = MigrationType::from_filename(rest);
                let description = rest.trim_end_matches(kind.suffix()).replace('_', " ");
                Ok(Migration::new(version, description.into(), kind, sql.into(), sql.starts_with("-- no-transaction")))
            })
            .collect()
    }
}

impl sqlx::migrate::MigrationSource<'static> for Embedded {
    #[allow(clippy::type_complexity)] // the trait's own signature
    fn resolve(
        self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<sqlx::migrate::Migration>, sqlx::error::BoxDynError>> + Send>> {
        Box::pin(async move { self.migrations().map_err(Into::into) })
    }
}

impl Db {
    /// Connects; for SQLite, creates the file and its directory when missing.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_owned()));
        };
        let mut url = url.to_owned();
        if backend == Backend::Sqlite {
            let path = url.trim_start_matches("sqlite:").trim_start_matches("//");
            let path = path.split('?').next().unwrap_or_default();
            if let Some(dir) = std::path::Path::new(path).parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            check_writable(std::path::Path::new(path))?;
            if !url.contains("mode=") {
                url.push_str(if url.contains('?') { "&mode=rwc" } else { "?mode=rwc" });
            }
        }
        let options = AnyConnectOptions::from_str(&url)?;
        let pool = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 8 } else { 16 })
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        // WAL lets readers run beside the one writer; foreign keys are
                        // off by default in SQLite; wait rather than fail on a busy file.
                        conn.execute(
                            "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL",
                        )
                        .await?;
                    }
                    Ok(())
                })
            })
            .after_release(move |conn, _| {
                Box::pin(async move {
                    if backend != Backend::Sqlite {
                        return Ok(true);
                    }
                    // A write that failed half-way (a full disk) can leave a connection
                    // inside its transaction, by SQLite's count or by sqlx's, and every
                    // later write on it fails ("database is locked", "non-zero
                    // transaction depth") until a restart. A connection that cannot
                    // open a transaction now is closed instead of reused.
                    match conn.begin_with("BEGIN").await {
                        Ok(tx) => tx.rollback().await.map(|()| true),
                        Err(e) => {
                            tracing::warn!(error = %e, "closing a database connection left inside a transaction");
                            Ok(false)
                        }
                    }
                })
            })
            .connect_with(options)
            .await?;
        Ok(Self { pool, backend })
    }

    pub async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = sqlx::migrate::Migrator::new(Embedded(embedded::files(self.backend))).await?;
        // One connection for both steps: the pool opens no second one while
        // the first is being handed back.
        let mut conn = self.pool.acquire().await?;
        migrator.run_direct(&mut *conn).await?;
        fill_cjk_pairs(&mut conn).await
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A write transaction. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`): a deferred one that read first could not upgrade
    /// after another writer committed, and would fail "database is locked"
    /// instead of waiting its turn.
    pub async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        Ok(match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.pool.begin().await?,
        })
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Writes the CJK pairs of listings that have none yet (those from before
/// migration 0027): SQL cannot split a run of characters into pairs.
async fn fill_cjk_pairs(conn: &mut sqlx::pool::PoolConnection<sqlx::Any>) -> Result<(), StoreError> {
    let rows = sqlx::query("SELECT id, title, description FROM tools WHERE cjk_pairs IS NULL ORDER BY id").fetch_all(&mut **conn).await?;
    if rows.is_empty() {
        return Ok(());
    }
    let mut tx = conn.begin().await?;
    for row in rows {
        let pairs = crate::words::cjk_pairs(&row.try_get::<String, _>("title")?, &row.try_get::<String, _>("description")?);
        sqlx::query("UPDATE tools SET cjk_pairs = $1 WHERE id = $2 AND cjk_pairs IS NULL")
            .bind(pairs)
            .bind(row.try_get::<i64, _>("id")?)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Moved by every write transaction's commit and by every audit row the
/// change feed sees; owned by one `Toolshed` (cheap to clone).
#[derive(Clone, Default)]
pub(crate) struct Epoch(Arc<AtomicU64>);

impl Epoch {
    /// Invalidates every entry loaded before now.
    pub fn invalidate(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn current(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// A write transaction of the domain. It commits only with its audit row
/// (`audit::record`) written inside it, so every change is recorded with it;
/// committing empties the call cache (the epoch moves after the commit, so no
/// read can cache the old row between the two); dropping it rolls back.
pub struct Tx {
    inner: sqlx::Transaction<'static, sqlx::Any>,
    epoch: Epoch,
    audited: bool,
}

impl Tx {
    pub(crate) fn new(inner: sqlx::Transaction<'static, sqlx::Any>, epoch: Epoch) -> Self {
        Self { inner, epoch, audited: false }
    }

    /// Commits, or without an audit row refuses [`StoreError::Unaudited`] and
    /// rolls back. A transaction that turned out to change nothing rolls back.
    pub async fn commit(self) -> Result<(), StoreError> {
        if !self.audited {
            self.inner.rollback().await?;
            return Err(StoreError::Unaudited);
        }
        self.inner.commit().await?;
        self.epoch.invalidate();
        Ok(())
    }

    /// Only `audit::record` says so, having written the row in this transaction.
    pub(crate) fn audited(&mut self) {
        self.audited = true;
    }

    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        self.inner.rollback().await
    }
}

impl std::ops::Deref for Tx {
    type Target = sqlx::AnyConnection;
    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl std::ops::DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use crate::accounts::Registration;
    use crate::tools::{ListingKind, NewTool};
    use crate::{Db, Toolshed};

    #[tokio::test]
    async fn the_embedded_migrations_are_the_folders_as_sqlx_reads_them_checksums_included() {
        let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../migrations");
        for backend in [super::Backend::Sqlite, super::Backend::Postgres] {
            let folder = root.join(match backend {
                super::Backend::Sqlite => "sqlite",
                super::Backend::Postgres => "postgres",
            });
            let read = sqlx::migrate::Migrator::new(folder.as_path()).await.unwrap();
            let embedded = sqlx::migrate::Migrator::new(super::Embedded(super::embedded::files(backend))).await.unwrap();
            let key =
                |m: &sqlx::migrate::Migration| (m.version, m.description.to_string(), m.checksum.to_vec(), m.no_tx, m.sql.to_string());
            assert!(read.iter().count() > 20, "{}", folder.display());
            assert_eq!(read.iter().map(key).collect::<Vec<_>>(), embedded.iter().map(key).collect::<Vec<_>>());
        }
    }

    #[tokio::test]
    async fn a_write_commits_with_its_audit_row_voiding_the_cache_and_without_one_is_refused_and_rolled_back() {
        let dir = std::env::temp_dir().join(format!("toolshed-store-tx-{}", std::process::id()));
        let db = Db::connect(&format!("sqlite://{}/t.db", dir.display())).await.unwrap();
        db.migrate().await.unwrap();
        let ts = Toolshed::new(db.clone(), Default::default());
        let mut reg = Registration::parse("alice", "Alice", "finance", "a-long-enough-password").unwrap();
        reg.role = crate::names::Role::Author;
        let alice = ts.accounts().register(reg, None).await.unwrap();
        let tool = ts.tools().create_tool(&alice, NewTool::parse("t", "Old", "", "", "everyone").unwrap()).await.unwrap();
        let title = || async { ts.tools().listing_for_call(&alice, ListingKind::Tool, "finance", "t").await.unwrap().title };
        assert_eq!(title().await, "Old");

        let mut tx = ts.core.begin().await.unwrap();
        sqlx::query("UPDATE tools SET title = 'New' WHERE id = $1").bind(tool.id.0).execute(&mut *tx).await.unwrap();
        crate::audit::record(&mut tx, Some(alice.id), "tool.settings_changed", &tool.audit_target(), None, None).await.unwrap();
        assert_eq!(title().await, "Old", "not committed yet: read, and cached");
        tx.commit().await.unwrap();
        assert_eq!(title().await, "New", "the commit voided what was cached before it");

        // The same write without its audit row is refused, and nothing of it stays.
        let mut tx = ts.core.begin().await.unwrap();
        sqlx::query("UPDATE tools SET title = 'Unrecorded' WHERE id = $1").bind(tool.id.0).execute(&mut *tx).await.unwrap();
        assert!(matches!(tx.commit().await, Err(super::StoreError::Unaudited)));
        let stored: String =
            sqlx::query_scalar("SELECT title FROM tools WHERE id = $1").bind(tool.id.0).fetch_one(db.pool()).await.unwrap();
        assert_eq!(stored, "New");
        db.close().await;
        let _ = std::fs::remove_dir_all(dir);
    }
}
