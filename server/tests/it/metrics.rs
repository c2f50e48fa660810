//! `GET /metrics`: counts of known calls and sign-ins, for the holder of the
//! metrics token only, and a real Prometheus (Debian's) that scrapes them.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{TempDir, TestServer};
use crate::mcp::{call, Session};
use crate::secrets::Recorder;

/// The metrics token the tests start servers with (`--metrics-token`).
pub const TOKEN: &str = "metrics-token-of-at-least-32-characters";

async fn scrape(srv: &TestServer, token: Option<&str>) -> reqwest::Response {
    let req = reqwest::Client::new().get(srv.url("/metrics"));
    let req = match token {
        Some(t) => req.bearer_auth(t),
        None => req,
    };
    req.send().await.unwrap()
}

/// What a server started with `--metrics-token TOKEN` exposes at `/metrics`.
pub async fn scraped(srv: &TestServer) -> String {
    scrape(srv, Some(TOKEN)).await.text().await.unwrap()
}

/// The value of the gauge `series` (its name and labels as scraped) in a server started with `--metrics-token TOKEN`.
pub async fn gauge(srv: &TestServer, series: &str) -> i64 {
    let text = scraped(srv).await;
    let line = text.lines().find_map(|l| l.strip_prefix(series)).unwrap_or_else(|| panic!("no {series} in {text}"));
    line.trim().parse().unwrap()
}

server_test!(
    metrics_count_known_calls_and_sign_ins_for_the_holder_of_the_token_only,
    ["--metrics-token", TOKEN],
    |srv: TestServer| async move {
        let session = known_calls(&srv).await;
        let events = session.listen().await;
        let browser = srv.browser();
        srv.post_form(&browser, "/api/login", &[("username", "admin"), ("password", "not the password")]).await;

        for wrong in [None, Some("metrics-token-of-at-least-32-characterz")] {
            let res = scrape(&srv, wrong).await;
            assert_eq!(res.status(), 401);
            assert_eq!(res.headers()["www-authenticate"], "Bearer");
        }
        let res = scrape(&srv, Some(TOKEN)).await;
        assert_eq!(res.status(), 200);
        assert!(res.headers()["content-type"].to_str().unwrap().starts_with("application/openmetrics-text"));
        let text = res.text().await.unwrap();
        for line in [
            r#"toolshed_tool_calls_total{listing="demo/echo",transport="mcp-http",outcome="ok"} 2"#,
            r#"toolshed_tool_calls_total{listing="demo/echo",transport="mcp-http",outcome="invalid_arguments"} 1"#,
            r#"toolshed_tool_call_duration_seconds_count{listing="demo/echo",transport="mcp-http"} 3"#,
            r#"toolshed_sign_ins_total{result="wrong"} 1"#,
            r#"toolshed_sandbox_runs_total{result="ok"} 2"#,
            "toolshed_sandbox_run_seconds_count 2",
            "toolshed_sandbox_queue_seconds_count 2",
            r#"toolshed_mcp_sessions{transport="mcp-http"} 1"#,
            r#"toolshed_mcp_streams{kind="standalone"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        assert!(text.contains("toolshed_db_pool_connections{state=\"idle\"}"));
        assert!(!text.contains("admin"), "no person is named");
        // An open stream would hold the graceful shutdown up.
        drop(events);
    }
);

/// Two calls of demo/echo that run and one refused for its arguments, in the session returned.
async fn known_calls(srv: &TestServer) -> Session {
    let token = srv.token("admin").await;
    let session = Session::open(srv.url("/mcp/tools/demo/echo"), &token).await;
    for (id, args) in [(1, json!({"text": "a"})), (2, json!({"text": "b"})), (3, json!({"text": 7}))] {
        session.request(&call(id, "echo", args)).await;
    }
    session
}

server_test!(metrics_count_sandbox_limit_hits_and_fetches_by_host_and_status, ["--metrics-token", TOKEN], |srv: TestServer| async move {
    let api = Recorder::start().await;
    let alice = srv.member("alice", "finance").await;
    let tool = srv.create_tool(&alice, "lookup", "everyone").await;
    let allow = format!("127.0.0.1:{}", api.port);
    srv.set_settings(&alice, tool, &[("fetch_allow", allow.as_str())]).await;
    let fetching =
        format!("await $fetch('{}/ok');\nawait $fetch('http://127.0.0.1:9/elsewhere').catch(e => e.message);\nreturn 'done';", api.base);
    let bomb = "const a = []; while (true) a.push('x'.repeat(1 << 20));";
    for code in [fetching.as_str(), bomb] {
        let run = json!({"tool": tool, "target": {"Draft": {"code": code, "args": []}}, "input": "{}"});
        let (status, view) = srv.server_fn(&alice, "tools/run", run).await;
        assert_eq!(status, 200, "{view}");
    }

    let text = scrape(&srv, Some(TOKEN)).await.text().await.unwrap();
    let allowed = format!(r#"toolshed_fetch_requests_total{{host="127.0.0.1:{}",status="2xx"}} 1"#, api.port);
    for line in [
        allowed.as_str(),
        r#"toolshed_fetch_requests_total{host="not_allowed",status="error"} 1"#,
        r#"toolshed_sandbox_runs_total{result="ok"} 1"#,
        r#"toolshed_sandbox_runs_total{result="oom"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
    assert!(api.received().starts_with("GET /ok"), "the allowed request went out, the other did not");
});

/// `prometheus` as a child process, stopped when dropped.
struct Prometheus {
    child: std::process::Child,
    api: String,
    _dir: TempDir,
}

impl Prometheus {
    /// Scrapes `target` (host:port) every second with the metrics token.
    fn scraping(target: &str) -> Self {
        let dir = TempDir::new();
        let config = format!(
            "global: {{ scrape_interval: 1s }}\nscrape_configs:\n  - job_name: toolshed\n    authorization: {{ credentials: \"{TOKEN}\" }}\n    static_configs: [{{ targets: [\"{target}\"] }}]\n"
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .expect("Debian's prometheus (scripts/bootstrap.sh installs it)");
        Self { child, api: format!("http://127.0.0.1:{port}/api/v1/query"), _dir: dir }
    }

    /// The value of `query` once Prometheus has one, asked again until it has
    /// scraped (it answers an empty vector until then).
    async fn value(&self, query: &str) -> String {
        let client = reqwest::Client::new();
        for _ in 0..300 {
            let answer = client.get(&self.api).query(&[("query", query)]).send().await;
            if let Ok(answer) = answer {
                let body: Value = answer.json().await.unwrap_or_default();
                if let Some(value) = body["data"]["result"][0]["value"][1].as_str() {
                    return value.to_owned();
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("Prometheus had no value for {query} within a minute");
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

server_test!(a_real_prometheus_scrapes_the_counts_of_known_calls, ["--metrics-token", TOKEN], |srv: TestServer| async move {
    known_calls(&srv).await;
    let prometheus = Prometheus::scraping(srv.base.trim_start_matches("http://"));
    assert_eq!(prometheus.value(r#"toolshed_tool_calls_total{listing="demo/echo",outcome="ok"}"#).await, "2");
    assert_eq!(prometheus.value(r#"toolshed_tool_calls_total{listing="demo/echo",outcome="invalid_arguments"}"#).await, "1");
    assert_eq!(prometheus.value(r#"sum(toolshed_tool_call_duration_seconds_count{listing="demo/echo"})"#).await, "3");
    assert_eq!(prometheus.value(r#"up{job="toolshed"}"#).await, "1", "the scrape itself succeeded");
});

server_test!(metrics_are_not_served_without_a_token_set, |srv: TestServer| async move {
    assert_eq!(scrape(&srv, None).await.status(), 404);
    assert_eq!(scrape(&srv, Some(TOKEN)).await.status(), 404);
});
