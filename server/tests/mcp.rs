//! MCP endpoints at the HTTP level: token checks, JSON-RPC answers, bad input,
//! and usage records. (Real SDK clients are in end2end/tests/mcp.test.mjs.)

mod common;

use common::TestServer;
use serde_json::{json, Value};

async fn rpc(srv: &TestServer, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let mut req = reqwest::Client::new()
        .post(srv.url(path))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body.to_owned());
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let res = req.send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

fn call(id: u32, name: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}}).to_string()
}

/// The JSON-RPC message in a JSON or SSE response body.
fn message(body: &str) -> Value {
    let json = body.lines().find_map(|l| l.strip_prefix("data:")).map(str::trim).unwrap_or(body);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {body}"))
}

server_test!(a_tool_call_with_a_token_runs_the_published_version_and_is_recorded, |mut srv: TestServer| async move {
    let token = srv.token("admin");
    let (status, body) = rpc(&srv, "/mcp/tools/demo/echo", Some(&token), &call(1, "echo", json!({"text": "hi"}))).await;
    assert_eq!(status, 200, "{body}");
    let msg = message(&body);
    assert_eq!(msg["result"]["content"], json!([{"type": "text", "text": "hi"}]), "{msg}");
    let (_, body) = rpc(&srv, "/mcp/tools/demo/echo", Some(&token), &call(2, "echo", json!({"text": 1}))).await;
    assert_eq!(message(&body)["result"]["isError"], true);

    let url = srv.db.url.clone();
    assert!(srv.stop().await.success());
    // A clean shutdown writes every record.
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let rows: Vec<(String, String)> = sqlx::query_as("SELECT transport, outcome FROM usage_records ORDER BY id").fetch_all(&pool).await.unwrap();
    assert_eq!(rows, [("mcp-http".into(), "ok".into()), ("mcp-http".into(), "invalid_arguments".into())]);
});

server_test!(missing_wrong_and_revoked_tokens_get_401_with_www_authenticate, |srv: TestServer| async move {
    for token in [None, Some("tsk_wrong"), Some("not even a token")] {
        let res = reqwest::Client::new()
            .post(srv.url("/mcp/tools/demo/echo"))
            .header("Content-Type", "application/json")
            .header("Authorization", token.map(|t| format!("Bearer {t}")).unwrap_or_default())
            .body(call(1, "echo", json!({"text": "x"})))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401);
        assert!(res.headers()["www-authenticate"].to_str().unwrap().starts_with("Bearer"));
    }
    // A token in the query string works for clients that only take a URL.
    let token = srv.token("admin");
    let (status, _) = rpc(&srv, &format!("/mcp/tools/demo/echo?token={token}"), None, &call(1, "echo", json!({"text": "x"}))).await;
    assert_eq!(status, 200);
});

server_test!(unknown_listings_and_tools_and_malformed_json_get_clear_errors, |srv: TestServer| async move {
    let token = srv.token("admin");
    let (status, _) = rpc(&srv, "/mcp/tools/demo/missing", Some(&token), &call(1, "x", json!({}))).await;
    assert_eq!(status, 404);
    let (_, body) = rpc(&srv, "/mcp/tools/demo/echo", Some(&token), &call(1, "other", json!({}))).await;
    let msg = message(&body);
    assert_eq!(msg["error"]["code"], -32602, "{msg}");
    assert!(msg["error"]["message"].as_str().unwrap().contains("Unknown tool: other"));
    let (status, body) = rpc(&srv, "/mcp/tools/demo/echo", Some(&token), "{not json").await;
    assert!((400..500).contains(&status) && body.contains("deserialize"), "{status} {body}");
    assert_eq!(srv.page(&srv.browser(), "/healthz").await.1, "ok");
});
