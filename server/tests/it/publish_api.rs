//! Publishing from CI: `POST /api/v1/tools` with a publish-scoped token, and
//! `toolshed push` against a real server.

use crate::common::TestServer;
use serde_json::{json, Value};

async fn push(srv: &TestServer, token: Option<&str>, body: &str) -> (u16, Value) {
    let mut req = reqwest::Client::new().post(srv.url("/api/v1/tools")).header("Content-Type", "application/json").body(body.to_owned());
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let res = req.send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap_or(Value::Null))
}

/// A tool file: `shout` upper-cases its text, with one test case.
fn shout(code: &str, expected: &str) -> String {
    json!({
        "name": "shout",
        "title": "Shout",
        "description": "Upper-cases a text.",
        "tags": ["text"],
        "visibility": "everyone",
        "code": code,
        "arguments": [{"name": "text", "type": {"kind": "string"}, "description": "What to shout", "required": true}],
        "test_cases": [{"name": "hello", "args": {"text": "hello"}, "expected": expected}],
        "changelog": "from CI",
    })
    .to_string()
}

server_test!(pushing_needs_a_token_with_the_publish_scope_for_that_listing, |srv: TestServer| async move {
    let client = srv.member("carol", "research").await;
    let file = shout("return $text.toUpperCase();", "HELLO");
    let (status, body) = push(&srv, None, &file).await;
    assert_eq!((status, &body["error"]["code"]), (401, &json!("unauthorized")), "{body}");
    let (status, body) = push(&srv, Some("tsk_wrong"), &file).await;
    assert_eq!((status, &body["error"]["code"]), (401, &json!("unauthorized")), "{body}");

    let plain = srv.token("carol").await;
    let (status, body) = push(&srv, Some(&plain), &file).await;
    assert_eq!(status, 403);
    assert_eq!(body["error"]["code"], "missing_scope");
    assert!(body["error"]["message"].as_str().unwrap().contains("publish scope"), "{body}");

    let (status, scoped) = srv
        .call(
            &client,
            "tokens/create",
            &[("name", "ci for another tool"), ("expires_in_days", ""), ("scope", "research/other"), ("publish", "on")],
        )
        .await;
    assert_eq!(status, 200, "{scoped}");
    let (status, body) = push(&srv, Some(scoped.as_str().unwrap()), &file).await;
    assert_eq!((status, &body["error"]["code"]), (403, &json!("out_of_scope")), "{body}");
    let (_, tokens) = srv.call(&client, "tokens", &[]).await;
    assert_eq!(tokens[0]["publish"], true, "the Account page shows the grant: {tokens}");
});

server_test!(a_file_that_is_not_a_valid_tool_gets_400_invalid_file, |srv: TestServer| async move {
    srv.member("carol", "research").await;
    let token = srv.publish_token("carol").await;
    for (file, says) in [
        ("not json".to_owned(), "not valid"),
        (json!({"name": "x", "code": "return 1;", "colour": "blue"}).to_string(), "unknown field `colour`"),
        (json!({"name": "bad name!", "code": "return 1;"}).to_string(), "Name"),
        (
            json!({"name": "x", "code": "return 1;", "arguments": [{"name": "1st", "type": {"kind": "string"}}]}).to_string(),
            "argument name",
        ),
    ] {
        let (status, body) = push(&srv, Some(&token), &file).await;
        assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_file")), "{file}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(says), "{file}: {body}");
    }
});

server_test!(a_push_refused_for_a_failing_test_case_changes_nothing, |srv: TestServer| async move {
    let client = srv.member("carol", "research").await;
    let token = srv.publish_token("carol").await;
    let (status, body) = push(&srv, Some(&token), &shout("return $text;", "HELLO")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "tests_failed");
    assert_eq!(body["error"]["message"], "1 of 1 test cases failed; nothing was saved or published.");
    assert_eq!((&body["outcome"], &body["version"], &body["created"]), (&json!("tests_failed"), &Value::Null, &json!(false)));
    let mut result = body["test_results"][0].clone();
    result.as_object_mut().unwrap().remove("duration_ms");
    assert_eq!(
        result,
        json!({"name": "hello", "passed": false, "actual": "hello", "expected": "HELLO", "reason": "the result is not the one expected"})
    );
    assert_eq!(srv.mcp_initialize_status("/mcp/tools/research/shout", &srv.token("carol").await).await, 404, "nothing is served");

    // Published for the department, then a red push that would retitle it and open it to everyone.
    let mut department: Value = serde_json::from_str(&shout("return $text.toUpperCase();", "HELLO")).unwrap();
    department["visibility"] = json!("department");
    let (status, body) = push(&srv, Some(&token), &department.to_string()).await;
    assert_eq!(status, 200, "{body}");
    let mut red: Value = serde_json::from_str(&shout("return $text;", "HELLO")).unwrap();
    red["title"] = json!("Whisper");
    let (status, body) = push(&srv, Some(&token), &red.to_string()).await;
    assert_eq!((status, &body["version"]), (422, &Value::Null), "{body}");
    let (_, detail) = srv.call(&client, "tools/detail", &[("department", "research"), ("name", "shout")]).await;
    assert_eq!(
        (&detail["title"], &detail["visibility"], &detail["published_version"], &detail["latest_version"]),
        (&json!("Shout"), &json!("department"), &json!(1), &json!(1)),
        "{detail}"
    );
});

server_test!(a_passing_file_creates_and_publishes_the_tool_and_an_unchanged_file_saves_nothing, |srv: TestServer| async move {
    let client = srv.member("carol", "research").await;
    let token = srv.publish_token("carol").await;
    let (status, body) = push(&srv, Some(&token), &shout("return $text.toUpperCase();", "HELLO")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["tool"], &body["created"], &body["version"], &body["new_version"], &body["outcome"]),
        (&json!("research/shout"), &json!(true), &json!(1), &json!(true), &json!("published"))
    );
    assert_eq!(body["test_results"][0]["passed"], true);
    assert_eq!(srv.mcp_initialize_status("/mcp/tools/research/shout", &srv.token("carol").await).await, 200);
    let detail = client
        .post(srv.url("/api/tools/detail"))
        .header("Accept", "application/json")
        .form(&[("department", "research"), ("name", "shout")])
        .send()
        .await
        .unwrap();
    let detail: Value = detail.json().await.unwrap();
    assert_eq!((&detail["title"], &detail["visibility"], &detail["tags"]), (&json!("Shout"), &json!("everyone"), &json!(["text"])));

    let (status, again) = push(&srv, Some(&token), &shout("return $text.toUpperCase();", "HELLO")).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (&again["created"], &again["version"], &again["new_version"], &again["outcome"]),
        (&json!(false), &json!(1), &json!(false), &json!("published"))
    );

    let (status, changed) = push(&srv, Some(&token), &shout("return $text.toUpperCase() + '';", "HELLO")).await;
    assert_eq!((status, &changed["version"], &changed["outcome"]), (200, &json!(2), &json!("published")), "{changed}");
});

server_test!(toolshed_push_sends_a_file_with_its_code_file_and_fails_when_a_test_fails, |srv: TestServer| async move {
    srv.member("carol", "research").await;
    let token = srv.publish_token("carol").await;
    let dir = crate::common::TempDir::new();
    let file = json!({
        "name": "greet", "description": "Greets someone.",
        "code_file": "greet.js",
        "arguments": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        "test_cases": [{"name": "ada", "args": {"name": "Ada"}, "expected": "Hello, Ada!"}],
    });
    std::fs::write(dir.path().join("greet.json"), file.to_string()).unwrap();
    let run = |code: &str| {
        std::fs::write(dir.path().join("greet.js"), code).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_toolshed"))
            .args(["push", dir.path().join("greet.json").to_str().unwrap(), "--url", &srv.base])
            .env("TOOLSHED_TOKEN", &token)
            .output()
            .expect("run toolshed push")
    };
    let out = run("return `Hello, ${$name}!`;");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("  pass ada"), "{stdout}");
    assert!(stdout.ends_with("research/greet v1: created, version saved; published.\n"), "{stdout}");

    let out = run("return `Hi, ${$name}`;");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stdout.contains("  FAIL ada") && stdout.contains("expected: Hello, Ada!") && stdout.contains("actual:   Hi, Ada"), "{stdout}");
    assert!(
        stderr.contains("1 of 1 test cases failed; nothing was saved or published. (422 Unprocessable Entity, tests_failed)"),
        "{stderr}"
    );
});

server_test!(toolshed_push_says_when_the_new_description_waits_for_review, |srv: TestServer| async move {
    srv.member("carol", "research").await;
    let admin = srv.admin().await;
    let token = srv.publish_token("carol").await;
    let dir = crate::common::TempDir::new();
    let path = dir.path().join("shout.json");
    let run = |description: &str| {
        let mut file: Value = serde_json::from_str(&shout("return $text.toUpperCase();", "HELLO")).unwrap();
        file["description"] = json!(description);
        std::fs::write(&path, file.to_string()).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_toolshed"))
            .args(["push", path.to_str().unwrap(), "--url", &srv.base])
            .env("TOOLSHED_TOKEN", &token)
            .output()
            .expect("run toolshed push")
    };
    assert!(run("Upper-cases a text.").status.success());
    let (status, _) = srv.call(&admin, "admin/departments/review", &[("name", "research"), ("review", "required")]).await;
    assert_eq!(status, 200);
    let out = run("Upper-cases a text, loudly.");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.ends_with(
            "research/shout v1: unchanged since the latest version; published; \
             the new title and description wait for an administrator's review.\n"
        ),
        "{stdout}"
    );
});

server_test!(a_push_that_may_break_callers_is_refused_until_allowed, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    let token = srv.publish_token("carol").await;
    let dir = crate::common::TempDir::new();
    let path = dir.path().join("count.json");
    let run = |kind: &str, extra: &[&str]| {
        let file = json!({
            "name": "count", "code": "return String($n);", "changelog": kind,
            "arguments": [{"name": "n", "type": {"kind": kind}, "required": true}],
        });
        std::fs::write(&path, file.to_string()).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_toolshed"))
            .args(["push", path.to_str().unwrap(), "--url", &srv.base])
            .args(extra)
            .env("TOOLSHED_TOKEN", &token)
            .output()
            .expect("run toolshed push")
    };
    assert!(run("integer", &[]).status.success());
    // Widening integer to number breaks nobody's call: published at once.
    let out = run("number", &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // number to string does: refused, nothing saved, and it says why.
    let out = run("string", &[]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success());
    assert!(stdout.contains("  breaking: n: type changed from number to string"), "{stdout}");
    assert!(stderr.contains("Nothing was saved or published") && stderr.contains("(409 Conflict, breaking_change)"), "{stderr}");
    let versions = || async {
        let (_, detail) = srv.call(&carol, "tools/detail", &[("department", "research"), ("name", "count")]).await;
        (detail["published_version"].clone(), detail["latest_version"].clone())
    };
    assert_eq!(versions().await, (json!(2), json!(2)), "version 2 (numbers) stays published, and is the latest");
    let out = run("string", &["--allow-breaking"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("research/count v3: version saved; published.\n"));
    assert_eq!(versions().await, (json!(3), json!(3)));
});

server_test!(the_example_tool_file_in_examples_publishes_with_toolshed_push, |srv: TestServer| async move {
    srv.member("carol", "research").await;
    let example = crate::common::repo_root().join("examples/slugify.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolshed"))
        .args(["push", example.to_str().unwrap(), "--url", &srv.base, "--token", &srv.publish_token("carol").await])
        .output()
        .expect("run toolshed push");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.matches("  pass ").count(), 3, "{stdout}");
    assert!(stdout.ends_with("research/slugify v1: created, version saved; published.\n"), "{stdout}");
});

server_test!(where_a_department_requires_tests_a_push_publishes_only_with_passing_checks, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    let admin = srv.admin().await;
    let token = srv.publish_token("carol").await;
    // Only an admin or the department's maintainer decides.
    let (status, _) = srv.call(&carol, "departments/tests", &[("name", "research"), ("tests", "required")]).await;
    assert_eq!(status, 403);
    let (status, body) = srv.call(&admin, "departments/tests", &[("name", "research"), ("tests", "required")]).await;
    assert_eq!(status, 200, "{body}");

    let file = |cases: Value| {
        json!({
            "name": "count", "visibility": "everyone",
            "code": "return { words: $text.split(' ').length, text: $text };",
            "arguments": [{"name": "text", "type": {"kind": "string"}, "required": true}],
            "test_cases": cases,
        })
        .to_string()
    };
    let (status, body) = push(&srv, Some(&token), &file(json!([]))).await;
    assert_eq!((status, &body["error"]["code"], &body["outcome"]), (422, &json!("tests_missing"), &json!("tests_missing")), "{body}");
    assert_eq!(srv.mcp_initialize_status("/mcp/tools/research/count", &srv.token("carol").await).await, 404, "nothing is served");

    let failing = json!([{"name": "two words", "args": {"text": "a b"}, "json_path": "$.words", "equals": 3}]);
    let (status, body) = push(&srv, Some(&token), &file(failing)).await;
    assert_eq!((status, &body["error"]["code"]), (422, &json!("tests_failed")), "{body}");
    assert_eq!(body["test_results"][0]["reason"], "$.words is 2, expected 3");

    let passing = json!([
        {"name": "two words", "args": {"text": "a b"}, "json_path": "$.words", "equals": 2},
        {"name": "keeps the text", "args": {"text": "a b"}, "contains": "\"text\":\"a b\""},
        {"name": "shape", "args": {"text": "x"}, "schema": {"type": "object", "required": ["words", "text"]}},
    ]);
    let (status, body) = push(&srv, Some(&token), &file(passing)).await;
    assert_eq!((status, &body["outcome"]), (200, &json!("published")), "{body}");
    assert_eq!(srv.mcp_initialize_status("/mcp/tools/research/count", &srv.token("carol").await).await, 200);

    let ambiguous = json!([{"name": "both", "args": {}, "contains": "a", "schema": {"type": "object"}}]);
    let (status, body) = push(&srv, Some(&token), &file(ambiguous)).await;
    assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_file")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("more than one check"), "{body}");
});

/// A counter tool declaring `{count: integer}` as its output, returning what `code` does.
fn counter(code: &str, test_cases: Value) -> String {
    json!({
        "name": "counter",
        "visibility": "everyone",
        "code": code,
        "output_schema": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]},
        "test_cases": test_cases,
    })
    .to_string()
}

server_test!(a_result_that_does_not_match_the_declared_output_schema_is_the_tools_error, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    let token = srv.publish_token("carol").await;
    // Its test cases run against the schema too: a mismatch is not published.
    let (status, body) = push(&srv, Some(&token), &counter("return {count: 'three'};", json!([{"name": "runs"}]))).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["test_results"][0]["reason"], "the run failed", "{body}");
    let said = body["test_results"][0]["actual"].as_str().unwrap_or_default();
    assert!(said.contains(r#"does not match the tool's output schema: at /count: "three" is not of type "integer""#), "{body}");

    let (status, body) = push(&srv, Some(&token), &counter("return {count: 3};", json!([]))).await;
    assert_eq!(status, 200, "{body}");
    let session = crate::mcp::Session::open(srv.url("/mcp/tools/research/counter"), &srv.token("carol").await).await;
    let listed = session.request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).await;
    assert_eq!(listed[0]["result"]["tools"][0]["outputSchema"]["required"], json!(["count"]));
    let ok = session.request(&crate::mcp::call(2, "counter", json!({}))).await;
    assert_eq!(ok[0]["result"]["structuredContent"], json!({"count": 3}), "{ok:?}");
    // A version that returns text: the session follows the publish.
    let (status, body) = push(&srv, Some(&token), &counter("return '3';", json!([]))).await;
    assert_eq!(status, 200, "{body}");
    let text = session.request(&crate::mcp::call(3, "counter", json!({}))).await;
    let result = &text[0]["result"];
    assert_eq!(result["isError"], true, "{result}");
    assert!(result.get("structuredContent").is_none());
    let message = result["content"][0]["text"].as_str().unwrap();
    assert!(message.contains(r#"does not match the tool's output schema: "3" is not of type "object""#), "{message}");

    // The editor edits code and arguments: a version saved there keeps the schema, and its runs are checked.
    let (_, detail) = srv.call(&carol, "tools/detail", &[("department", "research"), ("name", "counter")]).await;
    let id = detail["id"].as_i64().unwrap();
    let (status, saved) = srv
        .server_fn(&carol, "tools/save_version", json!({"tool": id, "code": "return {count: 1.5};", "args": [], "changelog": "ui"}))
        .await;
    assert_eq!(status, 200, "{saved}");
    srv.publish_version(&carol, id, saved.as_i64().unwrap()).await;
    let (_, ran) = srv.server_fn(&carol, "tools/run", json!({"tool": id, "target": "Published", "input": "{}"})).await;
    assert_eq!(ran["error"]["kind"], "output_mismatch", "{ran}");
    let draft = |code: &str| json!({"tool": id, "target": {"Draft": {"code": code, "args": []}}, "input": "{}"});
    let (_, ran) = srv.server_fn(&carol, "tools/run", draft("return {count: 2};")).await;
    assert_eq!(serde_json::from_str::<Value>(ran["result"].as_str().unwrap()).unwrap(), json!({"count": 2}), "{ran}");
    let (_, ran) = srv.server_fn(&carol, "tools/run", draft("return {total: 2};")).await;
    assert_eq!(ran["error"]["kind"], "output_mismatch", "{ran}");

    // The message may quote the value: a secret in it is blanked like anywhere in a result.
    let set = [
        ("tool", id.to_string()),
        ("name", "API_KEY".into()),
        ("value", "sk-live-0123456789".into()),
        ("kind", "secret".into()),
        ("hosts", "".into()),
    ];
    let set: Vec<(&str, &str)> = set.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(srv.call(&carol, "tools/env/set", &set).await.0, 200);
    let (_, ran) = srv.server_fn(&carol, "tools/run", draft("return {count: $env.API_KEY};")).await;
    assert_eq!(ran["error"]["kind"], "output_mismatch", "{ran}");
    let said = ran["error"]["message"].as_str().unwrap();
    assert!(!said.contains("sk-live-0123456789") && said.contains("/count"), "{said}");

    // A new schema must describe an object, as MCP's do.
    let mut listed: Value = serde_json::from_str(&counter("return 3;", json!([]))).unwrap();
    listed["output_schema"] = json!({"type": "integer"});
    let (status, body) = push(&srv, Some(&token), &listed.to_string()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("describes an object"), "{body}");
});
