//! A real `toolshed` process on a random loopback port, with a fresh database,
//! spoken to over HTTP: the world every integration test starts from.

#![allow(dead_code)] // each test binary uses a different part of this

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use toolshed_domain::store::Backend;
#[path = "../../domain/tests/support/mod.rs"]
mod support;
pub use support::{TempDir, TestDb};

pub struct TestServer {
    pub base: String,
    pub admin_password: String,
    pub db: TestDb,
    pub data_dir: TempDir,
    child: Child,
}

impl TestServer {
    pub async fn start(backend: Backend) -> Self {
        let db = TestDb::new(backend).await;
        let data_dir = TempDir::new();
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolshed"))
            .arg("serve")
            .env("TOOLSHED_ADDR", "127.0.0.1:0")
            .env("TOOLSHED_DATA_DIR", data_dir.path())
            .env("DATABASE_URL", &db.url)
            .env_remove("TOOLSHED_BASE_URL")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the toolshed binary");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut admin_password = String::new();
        let base = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(p) = line.trim().strip_prefix("password: ") {
                    admin_password = p.to_owned();
                }
                if let Some(url) = line.strip_prefix("Toolshed is serving on ") {
                    return url.trim().to_owned();
                }
            }
            panic!("the server exited before it was ready");
        })
        .await
        .expect("the server starts within a minute");
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self { base, admin_password, db, data_dir, child }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A browser-like client: keeps cookies, does not follow redirects (tests look at them).
    pub fn browser(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    }

    /// Posts a form the way a browser without JavaScript does, from the home page.
    pub async fn post_form(&self, client: &reqwest::Client, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        self.post_form_from(client, "/", path, form).await
    }

    /// Posts a form from the page at `from` (where a no-JS error is sent back to).
    pub async fn post_form_from(&self, client: &reqwest::Client, from: &str, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        client
            .post(self.url(path))
            .header("Origin", &self.base)
            .header("Referer", self.url(from))
            .header("Accept", "text/html,application/xhtml+xml")
            .form(form)
            .send()
            .await
            .unwrap()
    }

    pub async fn register(&self, client: &reqwest::Client, username: &str, password: &str) -> reqwest::Response {
        self.post_form(
            client,
            "/api/register",
            &[
                ("username", username),
                ("display_name", &format!("{username} Example")),
                ("department", "general"),
                ("new_department", ""),
                ("password", password),
                ("password_confirm", password),
            ],
        )
        .await
    }

    pub async fn page(&self, client: &reqwest::Client, path: &str) -> (reqwest::StatusCode, String) {
        let res = client.get(self.url(path)).send().await.unwrap();
        (res.status(), res.text().await.unwrap())
    }

    /// Creates an API token for `username` with the operator command.
    pub fn token(&self, username: &str) -> String {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolshed"))
            .args(["admin", "create-token", "--username", username, "--name", "tests"])
            .env("DATABASE_URL", &self.db.url)
            .env("TOOLSHED_DATA_DIR", self.data_dir.path())
            .output()
            .expect("run toolshed admin create-token");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().last().unwrap().to_owned()
    }

    /// Stops the server the way an operator does (SIGTERM) and waits for it.
    pub async fn stop(&mut self) -> std::process::ExitStatus {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        }
        tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await.expect("stops in time").unwrap()
    }
}

/// `server_test!(name, |srv: TestServer| async move { … })` runs on SQLite and on PostgreSQL.
#[macro_export]
macro_rules! server_test {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test]
            async fn sqlite() {
                let srv = common::TestServer::start(toolshed_domain::store::Backend::Sqlite).await;
                ($body)(srv).await;
            }

            #[tokio::test]
            async fn postgres() {
                let srv = common::TestServer::start(toolshed_domain::store::Backend::Postgres).await;
                ($body)(srv).await;
            }
        }
    };
}

/// The error a no-JS form post was redirected back with, decoded from `__err`.
pub fn redirected_error(res: &reqwest::Response) -> Option<serde_json::Value> {
    use base64::Engine;
    let location = res.headers().get("location")?.to_str().ok()?;
    let url = reqwest::Url::parse(location).ok()?;
    let err = url.query_pairs().find(|(k, _)| k == "__err")?.1.into_owned();
    let bytes = base64::engine::general_purpose::URL_SAFE.decode(err).ok()?;
    serde_json::from_slice(&bytes).ok()
}

