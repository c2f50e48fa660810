//! Tools over real HTTP: the editor's and the Run panel's calls, with the bad
//! input a careless or malicious client sends.

use crate::common::TestServer;
use serde_json::{json, Value};

fn draft(code: &str) -> Value {
    json!({ "Draft": { "code": code, "args": [] } })
}

server_test!(runaway_code_is_stopped_and_the_server_keeps_serving, |srv: TestServer| async move {
    let alice = srv.member("alice", "finance").await;
    let tool = srv.create_tool(&alice, "probe", "everyone").await;
    let cases = [
        ("while (true) {}", "timeout"),
        ("const a = new Array(1e9).fill(1); return a.length;", "out_of_memory"),
        ("function f() { return f() + 1; } return f();", "stack_overflow"),
        ("return {", "syntax"),
        ("return () => 1;", "not_serializable"),
    ];
    for (code, kind) in cases {
        let (status, body) = srv.server_fn(&alice, "tools/run", json!({"tool": tool, "target": draft(code), "input": "{}"})).await;
        assert_eq!(status, 200, "{code}: {body}");
        assert_eq!(body["error"]["kind"], kind, "{code}: {body}");
    }
    let (_, body) = srv.server_fn(&alice, "tools/run", json!({"tool": tool, "target": draft("for (let i = 0; i < 1e5; i++) console.log('x'.repeat(100)); return 'done';"), "input": "{}"})).await;
    assert_eq!(body["result"], "done");
    assert!(body["console"].as_array().unwrap().len() < 5000, "console output is capped");
    assert_eq!(srv.page(&srv.browser(), "/healthz").await.1, "ok");
});

server_test!(another_users_tool_ids_get_not_found, |srv: TestServer| async move {
    let alice = srv.member("alice", "finance").await;
    let mallory = srv.member("mallory", "sales").await;
    let private = srv.create_tool(&alice, "secret", "private").await;
    let dept = srv.create_tool(&alice, "internal", "department").await;
    for tool in [private, dept] {
        let (status, body) = srv.server_fn(&mallory, "tools/run", json!({"tool": tool, "target": "Published", "input": "{}"})).await;
        assert_eq!((status, body), (404, json!("NotFound")));
        let (status, _) = srv.server_fn(&mallory, "tools/draft", json!({"tool": tool, "code": "return 1", "args": []})).await;
        assert_eq!(status, 404);
    }
    let (status, _) = srv.server_fn(&mallory, "tools/run", json!({"tool": 999_999, "target": "Published", "input": "{}"})).await;
    assert_eq!(status, 404);
    // Signed out: nothing at all.
    let (status, body) = srv.server_fn(&srv.browser(), "tools/run", json!({"tool": dept, "target": "Published", "input": "{}"})).await;
    assert_eq!((status, body), (401, json!("NotSignedIn")));
});

server_test!(arguments_of_the_wrong_type_are_listed_before_anything_runs, |srv: TestServer| async move {
    let alice = srv.member("alice", "finance").await;
    let tool = srv.create_tool(&alice, "typed", "everyone").await;
    let args = json!([{ "name": "n", "type": { "kind": "integer" }, "required": true }]);
    let target = json!({ "Draft": { "code": "return $n * 2;", "args": args } });
    let (_, body) = srv.server_fn(&alice, "tools/run", json!({"tool": tool, "target": target, "input": r#"{"n": 21}"#})).await;
    assert_eq!(body["kind"], "json");
    assert_eq!(body["result"], "42");
    let (status, body) =
        srv.server_fn(&alice, "tools/run", json!({"tool": tool, "target": target, "input": r#"{"n": "x", "extra": 1}"#})).await;
    assert_eq!(status, 422);
    let msg = body["Invalid"].as_str().unwrap();
    assert!(msg.starts_with("Invalid arguments:") && msg.contains("`n`") && msg.contains("extra"), "{msg}");
    let (status, body) = srv.server_fn(&alice, "tools/run", json!({"tool": tool, "target": target, "input": "{not json"})).await;
    assert_eq!(status, 422);
    assert!(body["Invalid"].as_str().unwrap().starts_with("Arguments: not valid JSON"), "{body}");
});

server_test!(saving_invalid_definitions_changes_nothing, |srv: TestServer| async move {
    let alice = srv.member("alice", "finance").await;
    let tool = srv.create_tool(&alice, "strict", "everyone").await;
    let dup = json!([{ "name": "a", "type": { "kind": "string" } }, { "name": "a", "type": { "kind": "number" } }]);
    let (status, body) =
        srv.server_fn(&alice, "tools/save_version", json!({"tool": tool, "code": "return 1", "args": dup, "changelog": ""})).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body, json!({"Invalid": "Arguments: a: appears twice"}));
    let huge = "x".repeat(300 * 1024);
    let (status, _) = srv.server_fn(&alice, "tools/save_version", json!({"tool": tool, "code": huge, "args": [], "changelog": ""})).await;
    assert_eq!(status, 422);
    let (status, body) =
        srv.server_fn(&alice, "tools/save_version", json!({"tool": tool, "code": "return 1", "args": [], "changelog": "ok"})).await;
    assert_eq!((status, body), (200, json!(1)), "the first valid save is version 1: nothing was half-written before");
});

server_test!(publishing_a_version_that_breaks_callers_says_what_and_who_and_needs_a_confirmation, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    let tool = srv.create_tool(&carol, "greet", "everyone").await;
    let save = |args: Value| {
        let carol = carol.clone();
        let srv = &srv;
        async move {
            let body = json!({"tool": tool, "code": "return 'hi';", "args": args, "changelog": "x"});
            let (status, version) = srv.server_fn(&carol, "tools/save_version", body).await;
            assert_eq!(status, 200, "{version}");
            version.as_i64().unwrap()
        }
    };
    let publish = |version: i64, confirm: bool| {
        let carol = carol.clone();
        let url = srv.url("/api/tools/publish");
        async move {
            let mut form = vec![("tool", tool.to_string()), ("version", version.to_string())];
            if confirm {
                form.push(("confirm_breaking", "true".into()));
            }
            let res = carol.post(url).header("Accept", "application/json").form(&form).send().await.unwrap();
            (res.status().as_u16(), res.text().await.unwrap())
        }
    };
    let v1 = save(json!([{"name": "who", "type": {"kind": "string"}, "required": true}])).await;
    assert_eq!(publish(v1, false).await.0, 200, "a first publish changes nothing for anyone");
    // A bundle follows it, and someone called it.
    let members = json!([{"tool": tool, "pinned_version": null, "exposed_name": ""}]);
    srv.published_bundle(&carol, members).await;
    let (status, _) = srv.server_fn(&carol, "tools/run", json!({"tool": tool, "target": "Published", "input": "{\"who\": \"x\"}"})).await;
    assert_eq!(status, 200);

    // An optional argument added: compatible, published at once.
    let v2 =
        save(json!([{"name": "who", "type": {"kind": "string"}, "required": true}, {"name": "loud", "type": {"kind": "boolean"}}])).await;
    // Usage is written in the background: once it is, the call counts.
    srv.flush_usage().await;
    let (status, impact) = srv.call(&carol, "tools/publish_impact", &[("tool", &tool.to_string()), ("version", &v2.to_string())]).await;
    assert_eq!(status, 200, "{impact}");
    assert_eq!(impact["changes"], json!([{"path": "loud", "breaking": false, "what": "added, optional"}]));
    assert_eq!(impact["following_bundles"], json!(["research/kit"]));
    assert_eq!(impact["recent_callers"], 1, "{impact}");
    assert_eq!(publish(v2, false).await.0, 200);

    // `who` retyped: breaking, refused until confirmed, and nothing changes meanwhile.
    let v3 =
        save(json!([{"name": "who", "type": {"kind": "integer"}, "required": true}, {"name": "loud", "type": {"kind": "boolean"}}])).await;
    let (_, impact) = srv.call(&carol, "tools/publish_impact", &[("tool", &tool.to_string()), ("version", &v3.to_string())]).await;
    assert_eq!(impact["changes"][0]["breaking"], true, "{impact}");
    let (status, refused) = publish(v3, false).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused.contains("who: type changed from string to integer") && refused.contains("confirm to publish it"), "{refused}");
    let (_, detail) = srv.call(&carol, "tools/detail", &[("department", "research"), ("name", "greet")]).await;
    assert_eq!(detail["published_version"], v2);
    assert_eq!(publish(v3, true).await.0, 200);
    // Someone else may not ask.
    let erin = srv.member("erin", "sales").await;
    assert_ne!(srv.call(&erin, "tools/publish_impact", &[("tool", &tool.to_string()), ("version", &v3.to_string())]).await.0, 200);
});

server_test!(a_tools_health_shows_its_editors_the_last_day_per_version_and_the_commonest_errors, |srv: TestServer| async move {
    let alice = srv.member("alice", "finance").await;
    let id = crate::permissions::tool(&srv, &alice, "flaky", "", false, "throw new Error('upstream said no');").await;
    let token = srv.token("alice").await;
    let session = crate::mcp::Session::open(srv.url("/mcp/tools/finance/flaky"), &token).await;
    for n in 1..=2 {
        session.request(&crate::mcp::call(n, "flaky", json!({}))).await;
    }
    let save = json!({"tool": id, "code": "return 'fine';", "args": [], "changelog": "fixed"});
    let (status, version) = srv.server_fn(&alice, "tools/save_version", save).await;
    assert_eq!(status, 200, "{version}");
    srv.publish_version(&alice, id, version.as_i64().unwrap()).await;
    for n in 3..=5 {
        session.request(&crate::mcp::call(n, "flaky", json!({}))).await;
    }
    session.request(&crate::mcp::call(6, "flaky", json!({"unexpected": 1}))).await;
    srv.flush_usage().await;

    let (status, usage) = srv.call(&alice, "market/usage", &[("tool", &id.to_string())]).await;
    assert_eq!(status, 200, "{usage}");
    let versions = &usage["health"]["versions"];
    let row = |i: usize| (versions[i]["version"].clone(), versions[i]["calls"].as_i64(), versions[i]["errors"].as_i64());
    assert_eq!(row(0), (json!(2), Some(3), Some(0)), "newest first: {usage}");
    assert_eq!(row(1), (json!(1), Some(2), Some(2)));
    assert_eq!(row(2), (Value::Null, Some(1), Some(1)), "refused for its arguments, before any code ran");
    assert!(versions[0]["p95_ms"].as_f64().is_some());
    let errors = &usage["health"]["errors"];
    assert_eq!(errors.as_array().unwrap().len(), 1, "{usage}");
    assert!(errors[0]["error"].as_str().unwrap().contains("upstream said no"), "{usage}");
    assert_eq!(errors[0]["count"], 2);

    let (_, page) = srv.page(&alice, "/tools/finance/flaky").await;
    assert!(page.contains("Health, last 24 hours") && page.contains("upstream said no"), "the listing page shows it to its author");
    let bob = srv.member("bob", "research").await;
    let (_, usage) = srv.call(&bob, "market/usage", &[("tool", &id.to_string())]).await;
    assert_eq!(usage["health"], Value::Null, "not to someone who cannot edit it: {usage}");
    let (_, page) = srv.page(&bob, "/tools/finance/flaky").await;
    assert!(!page.contains("Health, last 24 hours"));
});
