//! `GET /metrics`: counts of known calls and sign-ins, for the holder of the
//! metrics token only. (A real Prometheus scraping it: not yet.)

use serde_json::json;

use crate::common::TestServer;
use crate::mcp::{call, Session};

const TOKEN: &str = "metrics-token-of-at-least-32-characters";

async fn scrape(srv: &TestServer, token: Option<&str>) -> reqwest::Response {
    let req = reqwest::Client::new().get(srv.url("/metrics"));
    let req = match token {
        Some(t) => req.bearer_auth(t),
        None => req,
    };
    req.send().await.unwrap()
}

server_test!(
    metrics_count_known_calls_and_sign_ins_for_the_holder_of_the_token_only,
    ["--metrics-token", TOKEN],
    |srv: TestServer| async move {
        let token = srv.token("admin").await;
        let session = Session::open(srv.url("/mcp/tools/demo/echo"), &token).await;
        for (id, args) in [(1, json!({"text": "a"})), (2, json!({"text": "b"})), (3, json!({"text": 7}))] {
            session.request(&call(id, "echo", args)).await;
        }
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
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        assert!(text.contains("toolshed_db_pool_connections{state=\"idle\"}"));
        assert!(!text.contains("admin"), "no person is named");
    }
);

server_test!(metrics_are_not_served_without_a_token_set, |srv: TestServer| async move {
    assert_eq!(scrape(&srv, None).await.status(), 404);
    assert_eq!(scrape(&srv, Some(TOKEN)).await.status(), 404);
});
