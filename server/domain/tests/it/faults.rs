//! Faults underneath: a full disk and a read-only file (SQLite on a small
//! tmpfs, so root only: skipped with a message otherwise), a database that
//! cannot take usage records for a while, or refuses one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{text_arg, user, TempDir};
use toolshed_domain::store::Db;
use toolshed_domain::tools::{NewTool, Source};
use toolshed_domain::usage::{Outcome, UsageRecord};
use toolshed_domain::{Settings, Toolshed};

/// A 4 MiB tmpfs, unmounted when dropped.
struct SmallDisk {
    dir: TempDir,
}

impl SmallDisk {
    fn mount() -> Option<Self> {
        let dir = TempDir::new();
        let ok = Command::new("mount").args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"]).arg(dir.path()).status().is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: mounting a small tmpfs needs root");
            return None;
        }
        Some(Self { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills what is left of the disk; returns the filler file.
    fn fill(&self) -> PathBuf {
        let filler = self.path().join("filler");
        let _ = Command::new("dd").arg("if=/dev/zero").arg(format!("of={}", filler.display())).arg("bs=64k").status();
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn usage(ts: &Toolshed, tool_id: i64, user_id: i64) {
    ts.usage().record(UsageRecord {
        at_ms: 1,
        tool_id,
        version: Some(1),
        user_id,
        token_id: None,
        bundle_id: None,
        transport: "test".into(),
        duration_us: 1,
        outcome: Outcome::Ok,
        upstream_server_id: None,
        upstream_tool: None,
    });
}

#[tokio::test]
async fn sqlite_writes_recover_by_themselves_once_a_full_disk_has_room_again() {
    let Some(disk) = SmallDisk::mount() else { return };
    let db = Db::connect(&format!("sqlite://{}/toolshed.db", disk.path().display())).await.unwrap();
    db.migrate().await.unwrap();
    let ts = Toolshed::new(db.clone(), Settings::default());
    let alice = user(&ts, "alice", "finance").await;
    let tool = ts.tools().create_tool(&alice, NewTool::parse("t", "T", "", "", "everyone").unwrap()).await.unwrap();
    let big = |n: usize| Source::parse(&format!("return {:?};", "x".repeat(n)), text_arg(), None).unwrap();
    ts.tools().save_version(&alice, tool.id, big(10), "v1").await.unwrap();

    let filler = disk.fill();
    let mut failed = 0;
    for _ in 0..20 {
        if ts.tools().save_version(&alice, tool.id, big(200_000), "while full").await.is_err() {
            failed += 1;
        }
        usage(&ts, tool.id.0, alice.id.0);
    }
    assert!(failed > 0, "the disk was full, so some saves failed");

    std::fs::remove_file(filler).unwrap();
    let freed = Instant::now();
    let saved = loop {
        match ts.tools().save_version(&alice, tool.id, big(10), "after").await {
            Ok(n) => break n,
            Err(e) if freed.elapsed() < Duration::from_secs(10) => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("writes did not recover without a restart: {e}"),
        }
    };
    assert!(saved >= 2);
    // Usage recorded while the disk was full waited, and is written now.
    ts.usage().flush().await;
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM usage_records").fetch_one(db.pool()).await.unwrap();
    assert_eq!(rows, 20);
    let numbers: Vec<i64> = ts.tools().versions(&alice, tool.id).await.unwrap().iter().map(|v| v.version).rev().collect();
    assert_eq!(numbers, (1..=saved).collect::<Vec<_>>(), "every version whole, none half-written");
    db.close().await;
}

#[tokio::test]
async fn a_database_file_that_cannot_be_written_is_named_at_start() {
    let Some(disk) = SmallDisk::mount() else { return };
    let url = format!("sqlite://{}/toolshed.db", disk.path().display());
    let db = Db::connect(&url).await.unwrap();
    db.migrate().await.unwrap();
    db.close().await;
    assert!(Command::new("mount").args(["-o", "remount,ro"]).arg(disk.path()).status().unwrap().success());

    let error = Db::connect(&url).await.expect_err("a read-only file is refused at start").to_string();
    assert!(error.contains("toolshed.db") && error.contains("cannot be written"), "{error}");
}

async fn usage_rows(db: &Db) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM usage_records").fetch_one(db.pool()).await.unwrap()
}

store_test!(usage_waits_in_a_bounded_queue_while_the_database_cannot_take_it, |db: Db| async move {
    let (ts, alice, _, _) = crate::support::finance_and_legal(db.clone()).await;
    let tool = ts.tools().create_tool(&alice, NewTool::parse("t", "T", "", "", "everyone").unwrap()).await.unwrap();
    // Another writer holds the table: the usage writer waits.
    let mut blocker = db.begin().await.unwrap();
    if db.backend() == toolshed_domain::store::Backend::Postgres {
        sqlx::query("LOCK TABLE usage_records IN EXCLUSIVE MODE").execute(&mut *blocker).await.unwrap();
    }
    // Whether the writer takes a batch before it blocks or not, at most one
    // batch leaves the queue: the rest waits in it or is dropped.
    let sent = 60_000;
    for _ in 0..sent {
        usage(&ts, tool.id.0, alice.id.0);
    }
    let dropped = ts.usage().dropped() as i64;
    assert!(dropped > 0, "the queue is bounded");
    assert!(dropped < 20_000, "but holds tens of thousands: {dropped} dropped");

    blocker.rollback().await.unwrap();
    ts.usage().flush().await;
    ts.usage().flush().await;
    assert_eq!(usage_rows(&db).await, sent - dropped, "everything queued is written once the database takes it");
});

store_test!(a_usage_row_the_database_refuses_costs_only_itself, |db: Db| async move {
    let (ts, alice, _, _) = crate::support::finance_and_legal(db.clone()).await;
    let tool = ts.tools().create_tool(&alice, NewTool::parse("t", "T", "", "", "everyone").unwrap()).await.unwrap();
    usage(&ts, tool.id.0, alice.id.0);
    usage(&ts, 987_654, alice.id.0); // no such tool: a foreign key refuses it
    usage(&ts, tool.id.0, alice.id.0);
    // Each flush is one more try of the refused batch; after a few, it is written row by row.
    for _ in 0..10 {
        ts.usage().flush().await;
    }
    assert_eq!(usage_rows(&db).await, 2, "the good rows are written");
    usage(&ts, tool.id.0, alice.id.0);
    ts.usage().flush().await;
    assert_eq!(usage_rows(&db).await, 3, "and the writer goes on");
});
