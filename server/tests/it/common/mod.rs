//! A real `toolshed` process on a random loopback port, with a fresh database,
//! spoken to over HTTP: the world every integration test starts from.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use toolshed_domain::store::Backend;
#[path = "../../../domain/tests/it/support/mod.rs"]
mod support;
pub use support::{postgres_available, TempDir, TestDb, POSTGRES_URL_VAR};

pub struct TestServer {
    pub base: String,
    pub admin_password: String,
    pub db: TestDb,
    pub data_dir: TempDir,
    child: Child,
}

/// A second `toolshed` process on the same database and data dir: what a load
/// balancer's other replica is.
pub struct Replica {
    pub base: String,
    _child: Child,
}

impl Replica {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }
}

/// Starts `toolshed serve` on a random port; returns it with its base URL and
/// the first-start admin password (empty when the database already had one).
async fn spawn(db_url: &str, data_dir: &std::path::Path, extra_args: &[&str]) -> (Child, String, String) {
    spawn_in(std::path::Path::new("."), db_url, data_dir, extra_args).await
}

/// `spawn`, started from `cwd` (where a relative site root is looked for).
async fn spawn_in(cwd: &std::path::Path, db_url: &str, data_dir: &std::path::Path, extra_args: &[&str]) -> (Child, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolshed"))
        .current_dir(cwd)
        .arg("serve")
        .args(extra_args)
        .env("TOOLSHED_ADDR", "127.0.0.1:0")
        .env("TOOLSHED_DATA_DIR", data_dir)
        .env("DATABASE_URL", db_url)
        // The fixtures (external MCP servers, chat endpoints) listen on loopback,
        // under this name: any other internal address stays refused.
        .env("TOOLSHED_INTERNAL_HOSTS", "127.0.0.1")
        .env_remove("TOOLSHED_BASE_URL")
        .env_remove("TOOLSHED_MCP_SESSIONS")
        // Loading the sentence model costs every start a moment: only the
        // tests of search by meaning ask for it (`--embedding-model`).
        .env_remove("TOOLSHED_EMBEDDING_MODEL")
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
    (child, base, admin_password)
}

impl TestServer {
    /// Starts a server with extra `serve` flags, e.g. `["--mcp-sessions", "stateless"]`.
    pub async fn start_with(backend: Backend, args: &[&str]) -> Self {
        let db = TestDb::new(backend).await;
        let data_dir = TempDir::new();
        let (child, base, admin_password) = spawn(&db.url, data_dir.path(), args).await;
        Self { base, admin_password, db, data_dir, child }
    }

    /// Starts a server from `cwd`, as `make run` does from the clone.
    pub async fn start_in(cwd: &std::path::Path, backend: Backend) -> Self {
        let db = TestDb::new(backend).await;
        let data_dir = TempDir::new();
        let (child, base, admin_password) = spawn_in(cwd, &db.url, data_dir.path(), &[]).await;
        Self { base, admin_password, db, data_dir, child }
    }

    /// Another replica of this server: same database, same session key.
    pub async fn replica(&self) -> Replica {
        let (child, base, _) = spawn(&self.db.url, self.data_dir.path(), &[]).await;
        Replica { base, _child: child }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A browser-like client: keeps cookies, does not follow redirects (tests look at them).
    pub fn browser(&self) -> reqwest::Client {
        reqwest::Client::builder().cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap()
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

    /// Registers `username` into `general` by an invitation, the way the form does.
    pub async fn register(&self, client: &reqwest::Client, username: &str, password: &str) -> reqwest::Response {
        let invite = self.invite("general", "author").await;
        self.register_invited(client, username, &format!("{username} Example"), password, &invite).await
    }

    /// Posts the register form with an invitation's token.
    async fn register_invited(
        &self,
        client: &reqwest::Client,
        username: &str,
        display_name: &str,
        password: &str,
        invite: &str,
    ) -> reqwest::Response {
        let form = [
            ("username", username),
            ("display_name", display_name),
            ("password", password),
            ("password_confirm", password),
            ("invite", invite),
        ];
        self.post_form(client, "/api/register", &form).await
    }

    /// The token of a new invitation to `department` (created first when
    /// missing) with `role`, made by the admin on the People page.
    pub async fn invite(&self, department: &str, role: &str) -> String {
        let admin = self.admin().await;
        // Answers 409 when the department exists already: just as good.
        let title = department[..1].to_uppercase() + &department[1..].replace(['-', '_'], " ");
        self.call(&admin, "admin/departments/create", &[("name", department), ("title", &title)]).await;
        let (status, link) = self.call(&admin, "people/invite", &[("department", department), ("role", role), ("days", "7")]).await;
        assert_eq!(status, 200, "{link}");
        link["url"].as_str().unwrap().split_once("invite=").unwrap().1.to_owned()
    }

    pub async fn page(&self, client: &reqwest::Client, path: &str) -> (reqwest::StatusCode, String) {
        let res = client.get(self.url(path)).send().await.unwrap();
        (res.status(), res.text().await.unwrap())
    }

    /// Makes `name` an author in `department` (by invitation) and returns a signed-in client.
    pub async fn member(&self, name: &str, department: &str) -> reqwest::Client {
        self.joined(name, department, "author").await
    }

    /// Makes `name` a `role` of `department` (by invitation) and returns a signed-in client.
    pub async fn joined(&self, name: &str, department: &str, role: &str) -> reqwest::Client {
        let invite = self.invite(department, role).await;
        let client = self.browser();
        let res = self.register_invited(&client, name, name, "a-long-enough-password", &invite).await;
        assert!(
            res.status().is_redirection() && redirected_error(&res).is_none(),
            "{name} joins {department}: {:?}",
            redirected_error(&res)
        );
        client
    }

    /// Calls a JSON server function the way the wasm does; returns status and body.
    pub async fn server_fn(&self, client: &reqwest::Client, endpoint: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        let res = client.post(self.url(&format!("/api/{endpoint}"))).header("Accept", "application/json").json(&body).send().await.unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(serde_json::Value::Null))
    }

    /// Calls a server function with form fields (its default encoding), the way
    /// the wasm does: JSON back; returns status and body.
    pub async fn call(&self, client: &reqwest::Client, endpoint: &str, form: &[(&str, &str)]) -> (u16, serde_json::Value) {
        let res = client.post(self.url(&format!("/api/{endpoint}"))).header("Accept", "application/json").form(form).send().await.unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(serde_json::Value::Null))
    }

    /// A client signed in as the first-start admin.
    pub async fn admin(&self) -> reqwest::Client {
        let client = self.browser();
        let res = self.post_form(&client, "/api/login", &[("username", "admin"), ("password", &self.admin_password)]).await;
        assert!(res.status().is_redirection() && redirected_error(&res).is_none(), "the admin signs in");
        client
    }

    /// Signs `client` in as `username` (with the password `member` registers).
    pub async fn sign_in(&self, client: &reqwest::Client, username: &str) -> reqwest::Response {
        self.post_form(client, "/api/login", &[("username", username), ("password", "a-long-enough-password")]).await
    }

    /// Creates a tool with a plain form post and returns its ID.
    pub async fn create_tool(&self, client: &reqwest::Client, name: &str, visibility: &str) -> i64 {
        self.create_tool_titled(client, name, name, visibility).await
    }

    /// Creates a tool titled `title` and returns its ID.
    pub async fn create_tool_titled(&self, client: &reqwest::Client, name: &str, title: &str, visibility: &str) -> i64 {
        self.post_form(
            client,
            "/api/tools/create",
            &[("name", name), ("title", title), ("description", ""), ("tags", ""), ("visibility", visibility)],
        )
        .await;
        let res = client
            .post(self.url("/api/tools/mine"))
            .header("Accept", "application/json")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let dept_and_name: serde_json::Value = res.json().await.unwrap();
        let card = dept_and_name.as_array().unwrap().iter().find(|t| t["name"] == name).expect("the new tool is listed").clone();
        let res = client
            .post(self.url("/api/tools/detail"))
            .header("Accept", "application/json")
            .form(&[("department", card["department"].as_str().unwrap()), ("name", name)])
            .send()
            .await
            .unwrap();
        res.json::<serde_json::Value>().await.unwrap()["id"].as_i64().unwrap()
    }

    /// Saves a version of `tool` returning `text` and publishes it.
    pub async fn publish(&self, client: &reqwest::Client, tool: i64, text: &str) {
        let code = format!("return {};", serde_json::json!(text));
        let (status, version) = self
            .server_fn(client, "tools/save_version", serde_json::json!({"tool": tool, "code": code, "args": [], "changelog": text}))
            .await;
        assert_eq!(status, 200, "{version}");
        self.publish_version(client, tool, version.as_i64().unwrap()).await;
    }

    /// Publishes saved `version` of listing `id` (a tool or a bundle).
    pub async fn publish_version(&self, client: &reqwest::Client, id: i64, version: i64) {
        let res = client
            .post(self.url("/api/tools/publish"))
            .header("Accept", "application/json")
            .form(&[("tool", id.to_string()), ("version", version.to_string())])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    }

    /// A bundle `research/kit` by `client`, with `members` as (tool id, pinned version, exposed name), published.
    pub async fn published_bundle(&self, client: &reqwest::Client, members: serde_json::Value) -> i64 {
        let form = [
            ("name", "kit"),
            ("title", "Research kit"),
            ("description", "Our tools."),
            ("tags", ""),
            ("visibility", "everyone"),
            ("kind", "bundle"),
        ];
        self.post_form(client, "/api/tools/create", &form).await;
        let res = client
            .post(self.url("/api/bundles/detail"))
            .header("Accept", "application/json")
            .form(&[("department", "research"), ("name", "kit")])
            .send()
            .await
            .unwrap();
        let id = res.json::<serde_json::Value>().await.unwrap()["listing"]["id"].as_i64().unwrap();
        self.publish_bundle(client, id, members).await;
        id
    }

    /// Saves a version of bundle `id` with `members` and publishes it.
    pub async fn publish_bundle(&self, client: &reqwest::Client, id: i64, members: serde_json::Value) {
        let body = serde_json::json!({"bundle": id, "members": members, "changelog": "members"});
        let (status, version) = self.server_fn(client, "bundles/save_version", body).await;
        assert_eq!(status, 200, "{version}");
        self.publish_version(client, id, version.as_i64().unwrap()).await;
    }

    /// The HTTP status an MCP `initialize` at `path` gets with `token`.
    pub async fn mcp_initialize_status(&self, path: &str, token: &str) -> u16 {
        mcp_initialize_status(&self.url(path), token).await
    }

    /// Creates an API token for `username` with the operator command.
    pub fn token(&self, username: &str) -> String {
        self.token_with(username, &[])
    }

    /// Creates an API token for `username` that may also publish (`/api/v1`).
    pub fn publish_token(&self, username: &str) -> String {
        self.token_with(username, &["--publish"])
    }

    fn token_with(&self, username: &str, extra: &[&str]) -> String {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolshed"))
            .args(["admin", "create-token", "--username", username, "--name", "tests"])
            .args(extra)
            .env("DATABASE_URL", &self.db.url)
            .env("TOOLSHED_DATA_DIR", self.data_dir.path())
            .output()
            .expect("run toolshed admin create-token");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().last().unwrap().to_owned()
    }

    /// The server process's peak resident memory so far (`VmHWM`), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.memory_kib("VmHWM")
    }

    /// The server process's resident memory now (`VmRSS`), in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.memory_kib("VmRSS")
    }

    /// Caps the server's memory from now on (`RLIMIT_DATA`: every private
    /// writable mapping, heap and mmap alike) at what it holds now plus
    /// `room_mib`: past it an allocation fails and the process aborts.
    pub fn limit_memory(&self, room_mib: u64) {
        let bytes = (self.memory_kib("VmData") + room_mib * 1024) * 1024;
        let pid = self.child.id().expect("the server is running");
        let status = std::process::Command::new("prlimit").arg(format!("--pid={pid}")).arg(format!("--data={bytes}:{bytes}")).status();
        assert!(status.expect("run prlimit (util-linux)").success(), "prlimit refused");
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        assert!(limits.lines().any(|l| l.starts_with("Max data size") && l.contains(&bytes.to_string())), "{limits}");
    }

    fn memory_kib(&self, field: &str) -> u64 {
        let pid = self.child.id().expect("the server is running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with(&format!("{field}:"))).expect("the field in /proc/PID/status");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Stops the server the way an operator does (SIGTERM) and waits for it.
    pub async fn stop(&mut self) -> std::process::ExitStatus {
        self.terminate();
        self.exit_within(Duration::from_secs(20)).await.expect("stops in time")
    }

    /// Sends SIGTERM, as a deploy does, without waiting.
    pub fn terminate(&self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        }
    }

    /// The server's exit status, if it exits within `limit`.
    pub async fn exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(limit, self.child.wait()).await.ok().map(Result::unwrap)
    }
}

/// Runs a test body, failing it (instead of hanging the run) when a request never gets an answer.
pub async fn within_time_limit(body: impl std::future::Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(120), body).await.expect("the test finishes within two minutes");
}

/// `server_test!(name, |srv: TestServer| async move { … })` runs on SQLite and on PostgreSQL;
/// `server_test!(name, ["--flag", "value"], |srv| …)` passes `serve` flags.
macro_rules! server_test {
    ($name:ident, $body:expr) => {
        server_test!($name, [], $body);
    };
    ($name:ident, [$($arg:expr),*], $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test]
            async fn sqlite() {
                let srv = crate::common::TestServer::start_with(toolshed_domain::store::Backend::Sqlite, &[$($arg),*]).await;
                crate::common::within_time_limit(($body)(srv)).await;
            }

            #[tokio::test]
            async fn postgres() {
                if !crate::common::postgres_available() {
                    return;
                }
                let srv = crate::common::TestServer::start_with(toolshed_domain::store::Backend::Postgres, &[$($arg),*]).await;
                crate::common::within_time_limit(($body)(srv)).await;
            }
        }
    };
}

/// The sentence model's folder, for `--embedding-model` (`make test` installs
/// it; without it the test fails rather than pass vacuously).
pub fn embedding_model() -> &'static str {
    static DIR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        std::env::var("TOOLSHED_EMBEDDING_MODEL")
            .expect("TOOLSHED_EMBEDDING_MODEL names the sentence model's folder (scripts/env.sh sets it; scripts/bootstrap.sh installs it)")
    })
}

/// The HTTP status an MCP `initialize` at `url` gets with `token`.
pub async fn mcp_initialize_status(url: &str, token: &str) -> u16 {
    let res = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .unwrap();
    res.status().as_u16()
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
