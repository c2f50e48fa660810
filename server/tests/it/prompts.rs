//! Prompts and resources: tools their authors serve as one (editor →
//! Settings → "Served on MCP as"), listed and run by `prompts/*` and
//! `resources/*` beside a listing's tools, in both MCP revisions.

use crate::common::{rpc_2026, TestServer};
use crate::mcp::{listen_2026, Events, Session};
use serde_json::{json, Value};

/// Saves a version of `tool` with `code` and `args` and publishes it.
async fn publish_code(srv: &TestServer, client: &reqwest::Client, tool: i64, code: &str, args: Value) {
    let body = json!({"tool": tool, "code": code, "args": args, "changelog": code});
    let (status, version) = srv.server_fn(client, "tools/save_version", body).await;
    assert_eq!(status, 200, "{version}");
    srv.publish_version(client, tool, version.as_i64().unwrap()).await;
}

fn arg(name: &str, kind: &str, required: bool) -> Value {
    json!({"name": name, "type": {"kind": kind}, "description": format!("The {name}"), "required": required})
}

/// A 2026-07-28 request to `path` with nothing to answer questions with.
async fn rpc(srv: &TestServer, token: &str, path: &str, method: &str, params: Value) -> Value {
    rpc_2026(&srv.url(path), token, method, params, json!({})).await
}

/// Carol's `research/notes`: a resource at `notes://today` whose tool returns `text`.
async fn notes_resource(srv: &TestServer, text: &str) -> (reqwest::Client, i64) {
    let carol = srv.member("carol", "research").await;
    let notes = srv.create_tool(&carol, "notes", "everyone").await;
    srv.set_settings(&carol, notes, &[("serves", "resource"), ("resource_uri", "notes://today"), ("resource_mime", "")]).await;
    srv.publish(&carol, notes, text).await;
    (carol, notes)
}

/// The next event is `notes://today`'s update.
async fn hears_notes_updated(events: &mut Events) {
    let updated = events.message().await;
    let said = (updated["method"].as_str(), updated["params"]["uri"].as_str());
    assert_eq!(said, (Some("notifications/resources/updated"), Some("notes://today")), "{updated}");
}

server_test!(a_bundle_serves_its_prompts_and_resources_beside_its_tools_and_runs_each_with_its_arguments, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    let lookup = srv.create_tool(&carol, "lookup", "everyone").await;
    srv.publish(&carol, lookup, "found").await;
    let review = srv.create_tool(&carol, "review", "everyone").await;
    srv.set_settings(&carol, review, &[("serves", "prompt"), ("title", "Review a topic")]).await;
    let code = "return `Review ${$topic}: ${typeof $count} ${$count}`;";
    publish_code(&srv, &carol, review, code, json!([arg("topic", "string", true), arg("count", "integer", false)])).await;
    let handbook = srv.create_tool(&carol, "handbook", "everyone").await;
    let resource = [("serves", "resource"), ("resource_uri", "docs://handbook/{section}"), ("resource_mime", "text/markdown")];
    srv.set_settings(&carol, handbook, &resource).await;
    publish_code(&srv, &carol, handbook, "return `# ${$section}`;", json!([arg("section", "string", true)])).await;
    let members = json!([
        {"tool": lookup, "pinned_version": null, "exposed_name": ""},
        {"tool": review, "pinned_version": null, "exposed_name": ""},
        {"tool": handbook, "pinned_version": null, "exposed_name": ""},
    ]);
    let kit_id = srv.published_bundle(&carol, members).await;
    let (token, kit) = (srv.token("carol").await, "/mcp/bundles/research/kit");

    let tools = rpc(&srv, &token, kit, "tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["lookup"], "prompts and resources are not tools: {tools}");
    let prompts = rpc(&srv, &token, kit, "prompts/list", json!({})).await;
    let listed = &prompts["result"]["prompts"];
    assert_eq!(listed.as_array().unwrap().len(), 1, "{prompts}");
    assert_eq!((listed[0]["name"].as_str(), listed[0]["title"].as_str()), (Some("review"), Some("Review a topic")));
    let arguments = listed[0]["arguments"].as_array().unwrap();
    let topic = arguments.iter().find(|a| a["name"] == "topic").unwrap();
    assert_eq!((topic["required"].as_bool(), topic["description"].as_str()), (Some(true), Some("The topic")));
    assert_eq!(arguments.iter().find(|a| a["name"] == "count").unwrap()["required"], false);

    // Prompt arguments travel as strings: the integer is read as one.
    let got = rpc(&srv, &token, kit, "prompts/get", json!({"name": "review", "arguments": {"topic": "tests", "count": "2"}})).await;
    let message = &got["result"]["messages"][0];
    assert_eq!((message["role"].as_str(), message["content"]["text"].as_str()), (Some("user"), Some("Review tests: number 2")), "{got}");
    let missing = rpc(&srv, &token, kit, "prompts/get", json!({"name": "review", "arguments": {}})).await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert!(missing["error"]["message"].as_str().unwrap().contains("topic"));
    let not_a_number =
        rpc(&srv, &token, kit, "prompts/get", json!({"name": "review", "arguments": {"topic": "t", "count": "three"}})).await;
    assert_eq!(not_a_number["error"]["code"], -32602, "the tool's own check refuses it as invalid params: {not_a_number}");
    let not_a_prompt = rpc(&srv, &token, kit, "prompts/get", json!({"name": "lookup"})).await;
    assert_eq!(not_a_prompt["error"]["code"], -32602, "a tool is not a prompt: {not_a_prompt}");
    let not_a_tool = rpc(&srv, &token, kit, "tools/call", json!({"name": "review", "arguments": {"topic": "x"}})).await;
    assert_eq!(not_a_tool["error"]["code"], -32602, "a prompt is not a tool: {not_a_tool}");

    let fixed = rpc(&srv, &token, kit, "resources/list", json!({})).await;
    assert_eq!(fixed["result"]["resources"], json!([]), "{fixed}");
    let templates = rpc(&srv, &token, kit, "resources/templates/list", json!({})).await;
    let template = &templates["result"]["resourceTemplates"][0];
    assert_eq!(
        (template["uriTemplate"].as_str(), template["name"].as_str(), template["mimeType"].as_str()),
        (Some("docs://handbook/{section}"), Some("handbook"), Some("text/markdown")),
        "{templates}"
    );
    let read = rpc(&srv, &token, kit, "resources/read", json!({"uri": "docs://handbook/intro"})).await;
    assert_eq!(
        read["result"]["contents"],
        json!([{"uri": "docs://handbook/intro", "mimeType": "text/markdown", "text": "# intro"}]),
        "{read}"
    );
    for unknown in ["docs://handbook/a/b", "docs://elsewhere", "notes://today"] {
        let refused = rpc(&srv, &token, kit, "resources/read", json!({"uri": unknown})).await;
        assert_eq!(
            (refused["error"]["code"].as_i64(), refused["error"]["data"]["uri"].as_str()),
            (Some(-32602), Some(unknown)),
            "{refused}"
        );
    }

    // A prompt's own endpoint serves it too; the personal endpoint serves tools only.
    let own = rpc(
        &srv,
        &token,
        "/mcp/tools/research/review",
        "prompts/get",
        json!({"name": "review", "arguments": {"topic": "t", "count": "5"}}),
    )
    .await;
    assert_eq!(own["result"]["messages"][0]["content"]["text"], "Review t: number 5", "{own}");
    let me = rpc(&srv, &token, "/mcp/me", "prompts/list", json!({})).await;
    assert_eq!(me["result"]["prompts"], json!([]), "{me}");

    // A URI that could not be read with the published version's arguments is refused.
    let form = [
        ("tool", handbook.to_string()),
        ("title", "Handbook".into()),
        ("description", String::new()),
        ("tags", String::new()),
        ("visibility", "everyone".into()),
        ("timeout_ms", "2000".into()),
        ("memory_mib", "32".into()),
        ("fetch_allow", String::new()),
        ("serves", "resource".into()),
        ("resource_uri", "docs://handbook/{sectoin}".into()),
        ("resource_mime", String::new()),
    ];
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, error) = srv.call(&carol, "tools/settings", &form).await;
    assert!(status >= 400 && error.to_string().contains("{sectoin} is not one of the tool's arguments"), "{status} {error}");

    // Two resources at one URI: the second could never be read, so the bundle refuses it.
    let copy = srv.create_tool(&carol, "handbook_copy", "everyone").await;
    srv.set_settings(&carol, copy, &resource).await;
    publish_code(&srv, &carol, copy, "return 'copy';", json!([arg("section", "string", true)])).await;
    let both =
        json!([{"tool": handbook, "pinned_version": null, "exposed_name": ""}, {"tool": copy, "pinned_version": null, "exposed_name": ""}]);
    let (status, error) =
        srv.server_fn(&carol, "bundles/save_version", json!({"bundle": kit_id, "members": both, "changelog": "two"})).await;
    assert!(status >= 400 && error.to_string().contains("both resources at docs://handbook/{section}"), "{status} {error}");
});

server_test!(a_prompt_that_asks_returns_its_question_and_completes_with_the_answer, |srv: TestServer| async move {
    srv.member("dave", "research").await;
    let token = srv.token("dave").await;
    let (url, can) = (srv.url("/mcp/bundles/demo/conformance"), json!({"elicitation": {}}));
    let name = "test_input_required_result_prompt";
    let first = rpc_2026(&url, &token, "prompts/get", json!({"name": name}), can.clone()).await;
    let asked = &first["result"];
    assert_eq!(asked["resultType"], "input_required", "{first}");
    assert_eq!(asked["inputRequests"]["user_context"]["params"]["message"], "What context should the prompt use?");
    let answer = json!({"user_context": {"action": "accept", "content": {"context": "quarterly numbers"}}});
    let retry = json!({"name": name, "inputResponses": answer, "requestState": asked["requestState"]});
    let done = rpc_2026(&url, &token, "prompts/get", retry, can.clone()).await;
    assert_eq!(done["result"]["messages"][0]["content"]["text"], "Answer with this context in mind: quarterly numbers", "{done}");
    // The state was sealed for the prompt, not for a tool of another name.
    let tampered = json!({"name": "test_simple_prompt", "inputResponses": answer, "requestState": asked["requestState"]});
    assert_eq!(rpc_2026(&url, &token, "prompts/get", tampered, can).await["error"]["code"], -32602);
});

server_test!(
    a_session_subscribed_to_a_resource_hears_when_its_tool_is_published_again_and_not_after_unsubscribing,
    |srv: TestServer| async move {
        let (carol, notes) = notes_resource(&srv, "v1").await;
        let session = Session::open(srv.url("/mcp/tools/research/notes"), &srv.token("carol").await).await;
        let mut events = session.listen().await;
        let rpc =
            |id: u32, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let subscribed = session.request(&rpc(1, "resources/subscribe", json!({"uri": "notes://today"}))).await;
        assert_eq!(subscribed.last().unwrap()["result"], json!({}), "{subscribed:?}");
        // Only to what is served here; in the 2025 revisions a missing resource is -32002.
        let elsewhere = session.request(&rpc(9, "resources/subscribe", json!({"uri": "notes://tomorrow"}))).await;
        let error = &elsewhere.last().unwrap()["error"];
        assert_eq!((error["code"].as_i64(), error["data"]["uri"].as_str()), (Some(-32002), Some("notes://tomorrow")), "{elsewhere:?}");
        let read = session.request(&rpc(2, "resources/read", json!({"uri": "notes://today"}))).await;
        assert_eq!(read.last().unwrap()["result"]["contents"][0]["text"], "v1");

        srv.publish(&carol, notes, "v2").await;
        assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
        hears_notes_updated(&mut events).await;
        let read = session.request(&rpc(3, "resources/read", json!({"uri": "notes://today"}))).await;
        assert_eq!(read.last().unwrap()["result"]["contents"][0]["text"], "v2");

        session.request(&rpc(4, "resources/unsubscribe", json!({"uri": "notes://today"}))).await;
        srv.publish(&carol, notes, "v3").await;
        assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
        srv.publish(&carol, notes, "v4").await;
        // Had v3 told of an update, it would come before v4's list change.
        assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
    }
);

server_test!(a_2026_client_listening_for_a_resource_hears_its_updates_on_its_subscription, |srv: TestServer| async move {
    let (carol, notes) = notes_resource(&srv, "v1").await;
    let token = srv.token("carol").await;
    let notifications = json!({"resourceSubscriptions": ["notes://today"]});
    let mut events = listen_2026(&srv.url("/mcp/tools/research/notes"), &token, notifications).await;
    let ack = events.message().await;
    assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"], json!(["notes://today"]), "{ack}");
    srv.publish(&carol, notes, "v2").await;
    hears_notes_updated(&mut events).await;
});

server_test!(a_session_resumed_on_another_replica_keeps_its_resource_subscriptions, |srv: TestServer| async move {
    let (carol, notes) = notes_resource(&srv, "v1").await;
    let token = srv.token("carol").await;
    let session = Session::open(srv.url("/mcp/tools/research/notes"), &token).await;
    let subscribe = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "notes://today"}});
    session.request(&subscribe.to_string()).await;
    let other = srv.replica().await;
    let elsewhere = Session { url: other.url("/mcp/tools/research/notes"), token, id: session.id.clone() };
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "notes://today"}});
    assert_eq!(elsewhere.request(&read.to_string()).await.last().unwrap()["result"]["contents"][0]["text"], "v1");
    let mut events = elsewhere.listen().await;
    srv.publish(&carol, notes, "v2").await;
    assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
    hears_notes_updated(&mut events).await;
});
