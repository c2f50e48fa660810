//! The world every integration test starts from: a Toolshed server on a random
//! loopback port, with a fresh database, spoken to over real HTTP. By default
//! it runs in the test's own process (the binary's router, listener and
//! shutdown, from `toolshed::web`), so the test can reach into it: flush the
//! usage writer, hear the change feed. Where a process is the point (signals,
//! memory limits, a site found from the working directory) `process_test!`
//! starts a real `toolshed serve` instead.
//!
//! A server in this process runs on a tokio runtime of its own, not on the
//! test's: it has its threads as a process has, whatever the test does with
//! its own, and it ends with its `TestServer` along with everything it
//! started (the domain's change feed and usage writer live as long as the
//! runtime they were started on). The test only speaks HTTP to it, and its
//! hooks into the server's domain run there too.

use std::process::Stdio;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use toolshed::config::Config;
use toolshed::web::ServeArgs;
use toolshed_domain::store::Backend;
use toolshed_domain::Toolshed;
#[path = "../../../domain/tests/it/support/mod.rs"]
mod support;
pub use support::{postgres_available, repo_root, TempDir, TestDb, POSTGRES_URL_VAR};

pub struct TestServer {
    pub base: String,
    pub admin_password: String,
    pub db: TestDb,
    pub data_dir: TempDir,
    /// The server's own domain in process; beside a process, one on the same
    /// database, as `toolshed admin` opens.
    toolshed: Toolshed,
    running: Running,
    /// Where the server in process and the domain run; shut down on drop.
    runtime: Option<tokio::runtime::Runtime>,
}

enum Running {
    InProcess { stop: Option<tokio::sync::oneshot::Sender<()>>, served: tokio::task::JoinHandle<anyhow::Result<()>> },
    Process(Child),
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

/// `toolshed serve`'s flags, read with the binary's own definitions: the
/// test's database and data dir, any free loopback port, and `extra`. The
/// environment is not read: tests run side by side in one process.
fn serve_flags(db: &TestDb, data_dir: &TempDir, extra: &[&str]) -> (Config, ServeArgs) {
    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        config: Config,
        #[command(flatten)]
        args: ServeArgs,
    }
    let data_dir = data_dir.path().to_str().unwrap();
    // The fixtures (external MCP servers, chat endpoints) listen on loopback,
    // under this name: any other internal address stays refused.
    let flags = ["serve", "--addr", "127.0.0.1:0", "--data-dir", data_dir, "--database-url", &db.url, "--internal-hosts", "127.0.0.1"];
    let matches = Serve::command()
        .mut_args(|arg| arg.env(None::<&str>))
        .try_get_matches_from(flags.iter().chain(extra))
        .unwrap_or_else(|e| panic!("serve flags {extra:?}: {e}"));
    let Serve { mut config, args } = Serve::from_arg_matches(&matches).unwrap();
    // The clone's built site (`make test` builds it first), as `make run` serves it.
    config.site_root.get_or_insert_with(|| repo_root().join("target/site"));
    (config, args)
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

/// The in-process servers' warnings, shown with a failing test's output
/// (a process server's go to stderr, `RUST_LOG=warn`).
fn log_warnings() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = tracing_subscriber::fmt().with_env_filter("warn").with_test_writer().try_init();
    });
}

/// A runtime for one server in this process, whatever runtime its test has:
/// two worker threads (the binary has one a core; the tests' machines have two).
fn server_runtime() -> tokio::runtime::Runtime {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("toolshed-server").enable_all().build();
    runtime.expect("start a runtime for the server")
}

/// Runs `work` on `runtime` and waits for it there; a panic in it is the caller's.
async fn run_on<T: Send + 'static>(runtime: &tokio::runtime::Runtime, work: impl std::future::Future<Output = T> + Send + 'static) -> T {
    match runtime.spawn(work).await {
        Ok(done) => done,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => panic!("the server's work did not finish: {e}"),
        },
    }
}

impl TestServer {
    /// Starts a server in this process with extra `serve` flags, e.g. `["--mcp-sessions", "stateless"]`.
    pub async fn start_with(backend: Backend, args: &[&str]) -> Self {
        log_warnings();
        let (db, data_dir) = (TestDb::new(backend).await, TempDir::new());
        let (config, args) = serve_flags(&db, &data_dir, args);
        let runtime = server_runtime();
        let (toolshed, admin_password, base, running) = run_on(&runtime, async move {
            let toolshed = toolshed::open(&config).await.expect("open the database");
            let admin = toolshed::web::first_start(&toolshed, &args).await.expect("the first start");
            let admin_password = admin.map(|(_, password)| password).unwrap_or_default();
            let server = toolshed::web::Server::bind(config, &args, toolshed.clone()).await.expect("listen");
            let base = format!("http://{}", server.addr());
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let served = tokio::spawn(server.run(async move {
                let _ = stopped.await;
            }));
            (toolshed, admin_password, base, Running::InProcess { stop: Some(stop), served })
        })
        .await;
        Self { base, admin_password, db, data_dir, toolshed, running, runtime: Some(runtime) }
    }

    /// Starts `toolshed serve` as a process, with extra `serve` flags: for the
    /// tests of what only a process has (signals, its memory, its working directory).
    pub async fn process(backend: Backend, args: &[&str]) -> Self {
        Self::process_in(std::path::Path::new("."), backend, args).await
    }

    /// Starts `toolshed serve` as a process from `cwd`, as `make run` does from the clone.
    pub async fn process_in(cwd: &std::path::Path, backend: Backend, args: &[&str]) -> Self {
        let (db, data_dir) = (TestDb::new(backend).await, TempDir::new());
        let (child, base, admin_password) = spawn_in(cwd, &db.url, data_dir.path(), args).await;
        let runtime = server_runtime();
        let config = serve_flags(&db, &data_dir, &[]).0;
        let toolshed = run_on(&runtime, async move { toolshed::open(&config).await.expect("open the database") }).await;
        Self { base, admin_password, db, data_dir, toolshed, running: Running::Process(child), runtime: Some(runtime) }
    }

    /// Another replica of this server: same database, same session key.
    pub async fn replica(&self) -> Replica {
        let (child, base, _) = spawn(&self.db.url, self.data_dir.path(), &[]).await;
        Replica { base, _child: child }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Another server of this one's database and data dir, built in this
    /// process and listening but not serving: what a start does before its
    /// first request.
    pub fn bind_beside(&self) -> impl std::future::Future<Output = toolshed::web::Server> + Send + 'static {
        let (config, args) = serve_flags(&self.db, &self.data_dir, &[]);
        let toolshed = self.toolshed.clone();
        async move { toolshed::web::Server::bind(config, &args, toolshed).await.expect("listen") }
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

    /// Saves `tool`'s settings with the editor's form: `fields` over these
    /// defaults (visible to everyone, 10 s, 32 MiB, no `$fetch`).
    pub async fn set_settings(&self, client: &reqwest::Client, tool: i64, fields: &[(&str, &str)]) {
        let tool = tool.to_string();
        let mut form: Vec<(&str, &str)> = vec![
            ("tool", &tool),
            ("title", "A tool"),
            ("description", ""),
            ("tags", ""),
            ("visibility", "everyone"),
            ("timeout_ms", "10000"),
            ("memory_mib", "32"),
            ("fetch_allow", ""),
        ];
        for (name, value) in fields {
            match form.iter_mut().find(|(n, _)| n == name) {
                Some(field) => field.1 = value,
                None => form.push((name, value)),
            }
        }
        let (status, body) = self.call(client, "tools/settings", &form).await;
        assert_eq!(status, 200, "{body}");
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

    /// Creates an API token for `username`, as `toolshed admin create-token` does.
    pub async fn token(&self, username: &str) -> String {
        self.token_with(username, false).await
    }

    /// Creates an API token for `username` that may also publish (`/api/v1`).
    pub async fn publish_token(&self, username: &str) -> String {
        self.token_with(username, true).await
    }

    async fn token_with(&self, username: &str, publish: bool) -> String {
        let username = username.to_owned();
        self.on_server(|toolshed| async move {
            let user = toolshed.accounts().user_by_username(&username).await.unwrap().unwrap_or_else(|| panic!("no user named {username}"));
            toolshed.tokens().create_token(&user, "tests", None, Vec::new(), publish).await.unwrap().1
        })
        .await
    }

    /// Waits until every call answered so far is in `usage_records` (the
    /// usage writer writes in the background).
    pub async fn flush_usage(&self) {
        self.in_process("flush_usage");
        self.on_server(|toolshed| async move { toolshed.usage().flush().await }).await;
    }

    /// The listing changes the server's change feed tells from now on (what
    /// it tells its live MCP sessions).
    pub async fn listing_changes(&self) -> toolshed_domain::changes::Subscription {
        self.in_process("listing_changes");
        self.on_server(|toolshed| async move { toolshed.listing_changes().subscribe().await.unwrap() }).await
    }

    /// Runs `work` with the server's domain, on the server's runtime.
    /// Runs `statement` on the server's database: what only time would do otherwise.
    pub async fn sql(&self, statement: &'static str) {
        self.on_server(|toolshed| async move {
            sqlx::query(statement).execute(toolshed.db().pool()).await.unwrap();
        })
        .await
    }

    async fn on_server<T: Send + 'static, F: std::future::Future<Output = T> + Send + 'static>(
        &self,
        work: impl FnOnce(Toolshed) -> F,
    ) -> T {
        let runtime = self.runtime.as_ref().expect("the server's runtime runs until the end of the test");
        run_on(runtime, work(self.toolshed.clone())).await
    }

    fn in_process(&self, hook: &str) {
        assert!(matches!(self.running, Running::InProcess { .. }), "{hook} reaches into a server in this process: use server_test!");
    }

    /// The server process, for what only a process has.
    fn child(&self) -> &Child {
        match &self.running {
            Running::Process(child) => child,
            Running::InProcess { .. } => panic!("only a process test's server is a process: use process_test!"),
        }
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
        let pid = self.child().id().expect("the server is running");
        let status = std::process::Command::new("prlimit").arg(format!("--pid={pid}")).arg(format!("--data={bytes}:{bytes}")).status();
        assert!(status.expect("run prlimit (util-linux)").success(), "prlimit refused");
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        assert!(limits.lines().any(|l| l.starts_with("Max data size") && l.contains(&bytes.to_string())), "{limits}");
    }

    fn memory_kib(&self, field: &str) -> u64 {
        let pid = self.child().id().expect("the server is running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with(&format!("{field}:"))).expect("the field in /proc/PID/status");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Stops the server the way an operator does (SIGTERM; in process, the
    /// same shutdown, started by the test) and waits for it: whether it ended cleanly.
    pub async fn stops_cleanly(&mut self) -> bool {
        const LIMIT: Duration = Duration::from_secs(20);
        match &mut self.running {
            Running::InProcess { stop, served } => {
                let _ = stop.take().expect("stopped once").send(());
                let ended = tokio::time::timeout(LIMIT, served).await.expect("stops in time").expect("the server does not panic");
                ended.inspect_err(|e| eprintln!("the server ended with an error: {e:#}")).is_ok()
            }
            Running::Process(_) => {
                self.terminate();
                self.exit_within(LIMIT).await.expect("stops in time").success()
            }
        }
    }

    /// Sends SIGTERM, as a deploy does, without waiting.
    pub fn terminate(&self) {
        if let Some(pid) = self.child().id() {
            let _ = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        }
    }

    /// The server's exit status, if it exits within `limit`.
    pub async fn exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let Running::Process(child) = &mut self.running else { panic!("only a process test's server exits: use process_test!") };
        tokio::time::timeout(limit, child.wait()).await.ok().map(Result::unwrap)
    }
}

impl Drop for TestServer {
    /// The server in process, or the domain beside a process, ends with the
    /// test: its runtime is shut down without waiting, as a process is killed.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs a test body, failing it (instead of hanging the run) when a request never gets an answer.
pub async fn within_time_limit(body: impl std::future::Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(120), body).await.expect("the test finishes within two minutes");
}

/// `server_test!(name, |srv: TestServer| async move { … })` runs on SQLite and
/// on PostgreSQL, the server in process; `server_test!(name, ["--flag",
/// "value"], |srv| …)` passes `serve` flags.
macro_rules! server_test {
    ($name:ident, $body:expr) => {
        server_test!($name, [], $body);
    };
    ($name:ident, [$($arg:expr),*], $body:expr) => {
        on_both_backends!($name, start_with, [$($arg),*], $body);
    };
}

/// `server_test!`, with the server a `toolshed serve` process: for what only
/// a process has (SIGTERM, its memory).
macro_rules! process_test {
    ($name:ident, $body:expr) => {
        process_test!($name, [], $body);
    };
    ($name:ident, [$($arg:expr),*], $body:expr) => {
        on_both_backends!($name, process, [$($arg),*], $body);
    };
}

macro_rules! on_both_backends {
    ($name:ident, $start:ident, [$($arg:expr),*], $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            // The server has threads of its own: the test's side is one thread,
            // as it was when every server was a process.
            #[tokio::test]
            async fn sqlite() {
                let srv = crate::common::TestServer::$start(toolshed_domain::store::Backend::Sqlite, &[$($arg),*]).await;
                crate::common::within_time_limit(($body)(srv)).await;
            }

            #[tokio::test]
            async fn postgres() {
                if !crate::common::postgres_available() {
                    return;
                }
                let srv = crate::common::TestServer::$start(toolshed_domain::store::Backend::Postgres, &[$($arg),*]).await;
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

/// One MCP 2026-07-28 request (no session: `_meta` says who the client is and
/// what it can answer) to `url`, as its JSON-RPC answer, with the routing
/// headers the revision requires.
pub async fn rpc_2026(
    url: &str,
    token: &str,
    method: &str,
    params: serde_json::Value,
    capabilities: serde_json::Value,
) -> serde_json::Value {
    let mut params = params;
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let mut req = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method);
    if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()).or(params["uri"].as_str()) {
        req = req.header("Mcp-Name", name);
    }
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    last_message(&req.json(&body).send().await.unwrap().text().await.unwrap())
}

/// The JSON-RPC answer of a JSON or SSE response body (the stream's last message).
pub fn last_message(text: &str) -> serde_json::Value {
    let json = text.lines().filter_map(|l| l.strip_prefix("data:")).next_back().map(str::trim).unwrap_or(text);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}"))
}
