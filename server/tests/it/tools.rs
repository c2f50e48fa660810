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
