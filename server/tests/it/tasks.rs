//! Long calls as tasks (MCP's tasks extension) over MCP 2026-07-28: a call
//! answered with a task id, polled, answered and cancelled through another
//! replica than the one running it; tasks private to whoever started them;
//! tools that only run as tasks refused to clients that do not take them;
//! and the longer time limit a task may have. The fixtures are the demo
//! data's `demo/conformance` bundle (the conformance suite's own task
//! scenarios run in end2end/tests/conformance.test.mjs).

use std::time::{Duration, Instant};

use crate::common::{rpc_2026, TestServer};
use serde_json::{json, Value};

const CONFORMANCE: &str = "/mcp/bundles/demo/conformance";

/// A client that takes tasks (and can be asked things).
fn takes_tasks() -> Value {
    json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
}

async fn call(url: &str, token: &str, capabilities: Value, name: &str, arguments: Value) -> Value {
    rpc_2026(url, token, "tools/call", json!({"name": name, "arguments": arguments}), capabilities).await
}

async fn task_request(url: &str, token: &str, method: &str, params: Value) -> Value {
    rpc_2026(url, token, method, params, takes_tasks()).await
}

/// Polls `tasks/get` until the task has `status` (or has ended), as a client
/// would, at the interval the server asked for; its last answer.
async fn until_status(url: &str, token: &str, id: &str, status: &str) -> Value {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let got = task_request(url, token, "tasks/get", json!({"taskId": id})).await;
        let now = got["result"]["status"].as_str().unwrap_or_default().to_owned();
        if now == status || ["completed", "failed", "cancelled"].contains(&now.as_str()) || Instant::now() > give_up {
            return got;
        }
        let interval = got["result"]["pollIntervalMs"].as_u64().unwrap_or(200);
        tokio::time::sleep(Duration::from_millis(interval)).await;
    }
}

async fn member_token(srv: &TestServer, name: &str) -> String {
    srv.member(name, "research").await;
    srv.token(name).await
}

/// Whether this server has counted a cancelled call of `slow_compute`: the run itself ended.
async fn counted_a_cancelled_run(srv: &TestServer) -> bool {
    crate::metrics::scraped(srv)
        .await
        .contains(r#"toolshed_tool_calls_total{listing="demo/slow_compute",transport="mcp-http",outcome="cancelled"} 1"#)
}

server_test!(
    a_long_call_becomes_a_task_that_another_replica_answers_for_and_cancels,
    ["--metrics-token", crate::metrics::TOKEN],
    |srv: TestServer| async move {
        let token = member_token(&srv, "carol").await;
        let other = srv.replica().await;
        let (here, there) = (srv.url(CONFORMANCE), other.url(CONFORMANCE));

        // A quick call of a tool that may run as a task answers in its request.
        let quick = call(&here, &token, takes_tasks(), "slow_compute", json!({"seconds": 0, "label": "quick"})).await;
        assert_eq!(quick["result"]["resultType"], "complete", "{quick}");
        assert_eq!(quick["result"]["content"][0]["text"], "Computed quick in 0 s.");

        let started = call(&here, &token, takes_tasks(), "slow_compute", json!({"seconds": 1, "label": "sum"})).await;
        let task = &started["result"];
        assert_eq!((task["resultType"].as_str(), task["status"].as_str()), (Some("task"), Some("working")), "{started}");
        assert!(task["ttlMs"].as_u64().unwrap() >= 3_600_000 && task["pollIntervalMs"].as_u64().unwrap() > 0, "{started}");
        let id = task["taskId"].as_str().unwrap();
        // Polled through the other replica, the task runs to its end here.
        let done = until_status(&there, &token, id, "completed").await;
        assert_eq!(done["result"]["status"], "completed", "{done}");
        assert_eq!(done["result"]["result"]["content"][0]["text"], "Computed sum in 1 s.", "{done}");
        assert_eq!(done["result"]["resultType"], "complete");

        // Cancelled through the other replica, a run of a minute stops and stays cancelled.
        let long = call(&here, &token, takes_tasks(), "slow_compute", json!({"seconds": 60, "label": "never"})).await;
        let id = long["result"]["taskId"].as_str().unwrap();
        // Its `$progress` is the task's status message, read through the other replica.
        let give_up = Instant::now() + Duration::from_secs(20);
        loop {
            let got = task_request(&there, &token, "tasks/get", json!({"taskId": id})).await;
            if got["result"]["statusMessage"] == "Computing never (0 of 60)" {
                break;
            }
            assert!(Instant::now() < give_up && got["result"]["status"] == "working", "{got}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let ack = task_request(&there, &token, "tasks/cancel", json!({"taskId": id})).await;
        assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
        let cancelled = until_status(&here, &token, id, "cancelled").await;
        assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
        assert!(cancelled["result"].get("result").is_none(), "{cancelled}");
        // The run of a minute stopped: its call is counted, as cancelled, well before.
        let give_up = Instant::now() + Duration::from_secs(20);
        while !counted_a_cancelled_run(&srv).await {
            assert!(Instant::now() < give_up, "the cancelled run still runs");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Cancelling again is the same empty answer.
        let again = task_request(&here, &token, "tasks/cancel", json!({"taskId": id})).await;
        assert_eq!(again["result"], json!({"resultType": "complete"}), "{again}");
    }
);

server_test!(a_task_that_asks_waits_for_answers_given_through_another_replica, |srv: TestServer| async move {
    let token = member_token(&srv, "carol").await;
    let other = srv.replica().await;
    let (here, there) = (srv.url(CONFORMANCE), other.url(CONFORMANCE));
    let started = call(&here, &token, takes_tasks(), "multi_input", json!({})).await;
    let id = started["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {started}")).to_owned();
    let asking = until_status(&there, &token, &id, "input_required").await;
    let asked = asking["result"]["inputRequests"].as_object().unwrap_or_else(|| panic!("questions: {asking}"));
    let mut keys: Vec<&str> = asked.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["confirm", "name"], "{asking}");
    assert_eq!(asked["name"]["method"], "elicitation/create");

    // An answer to one question (and to one never asked) leaves the other waiting.
    let name = json!({"action": "accept", "content": {"name": "Ada"}});
    let partial = json!({"taskId": id, "inputResponses": {"name": name, "unasked": {"action": "accept"}}});
    let ack = task_request(&there, &token, "tasks/update", partial).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let still = task_request(&here, &token, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(still["result"]["status"], "input_required", "{still}");
    assert_eq!(still["result"]["inputRequests"].as_object().unwrap().keys().collect::<Vec<_>>(), ["confirm"], "{still}");

    let rest = json!({"taskId": id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}});
    task_request(&there, &token, "tasks/update", rest).await;
    let done = until_status(&there, &token, &id, "completed").await;
    assert_eq!(done["result"]["result"]["content"][0]["text"], "Ada said accept.", "{done}");
});

server_test!(a_task_is_seen_and_steered_only_by_whoever_started_it, |srv: TestServer| async move {
    let carol = member_token(&srv, "carol").await;
    let dave = member_token(&srv, "dave").await;
    let url = srv.url(CONFORMANCE);
    let started = call(&url, &carol, takes_tasks(), "confirm_delete", json!({"filename": "plan.txt"})).await;
    let id = started["result"]["taskId"].as_str().unwrap().to_owned();
    until_status(&url, &carol, &id, "input_required").await;
    let answer = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    for (method, params) in [
        ("tasks/get", json!({"taskId": id})),
        ("tasks/update", json!({"taskId": id, "inputResponses": answer})),
        ("tasks/cancel", json!({"taskId": id})),
        ("tasks/get", json!({"taskId": "no-such-task"})),
    ] {
        let refused = task_request(&url, &dave, method, params).await;
        assert_eq!(refused["error"]["code"], -32602, "{method}: {refused}");
    }
    // Nothing Dave sent reached it.
    let mine = task_request(&url, &carol, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(mine["result"]["status"], "input_required", "{mine}");
    // Nor is it known to another endpoint, which a token may be scoped to.
    let elsewhere = task_request(&srv.url("/mcp/tools/demo/slow_compute"), &carol, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(elsewhere["error"]["code"], -32602, "{elsewhere}");
    // Five tasks at once, a person's most: the sixth call is told so, and starts nothing.
    for n in 2..=5 {
        let more = call(&url, &carol, takes_tasks(), "confirm_delete", json!({"filename": format!("file{n}.txt")})).await;
        assert_eq!(more["result"]["resultType"], "task", "{more}");
    }
    let sixth = call(&url, &carol, takes_tasks(), "confirm_delete", json!({"filename": "one-too-many.txt"})).await;
    assert_eq!(sixth["result"]["isError"], true, "{sixth}");
    assert!(sixth["result"]["content"][0]["text"].as_str().unwrap().contains("5 tasks running"), "{sixth}");
    // Without the extension, the tasks methods are refused outright.
    let undeclared = rpc_2026(&url, &carol, "tasks/get", json!({"taskId": id}), json!({})).await;
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
});

server_test!(a_tool_that_only_runs_as_a_task_is_refused_to_clients_that_do_not_take_tasks, |srv: TestServer| async move {
    let token = member_token(&srv, "carol").await;
    let url = srv.url(CONFORMANCE);
    let refused = call(&url, &token, json!({"elicitation": {}}), "failing_job", json!({})).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(refused["error"]["data"]["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"], json!({}), "{refused}");
    // A tool that may run as a task runs in the request for such a client.
    let sync = call(&url, &token, json!({}), "slow_compute", json!({"seconds": 1, "label": "inline"})).await;
    assert_eq!(sync["result"]["content"][0]["text"], "Computed inline in 1 s.", "{sync}");
    // A tool's own error is a completed task's error result; a result breaking its output schema fails the task.
    let failing = call(&url, &token, takes_tasks(), "failing_job", json!({})).await;
    let failed = until_status(&url, &token, failing["result"]["taskId"].as_str().unwrap(), "completed").await;
    assert_eq!(
        (failed["result"]["status"].as_str(), &failed["result"]["result"]["isError"]),
        (Some("completed"), &json!(true)),
        "{failed}"
    );
    let broken = call(&url, &token, takes_tasks(), "protocol_error_job", json!({})).await;
    let broke = until_status(&url, &token, broken["result"]["taskId"].as_str().unwrap(), "failed").await;
    assert_eq!(broke["result"]["status"], "failed", "{broke}");
    assert!(broke["result"]["error"]["message"].as_str().unwrap().contains("output schema"), "{broke}");
    assert!(broke["result"].get("result").is_none(), "{broke}");
});

server_test!(a_task_may_run_past_the_time_limit_of_calls_in_their_request, |srv: TestServer| async move {
    let token = member_token(&srv, "carol").await;
    let url = srv.url(CONFORMANCE);
    let limits = [("max_timeout_ms", "500"), ("max_task_timeout_ms", "10000"), ("max_memory_mib", "256"), ("fetch_hosts", "")];
    assert_eq!(srv.call(&srv.admin().await, "admin/policy/set", &limits).await.0, 200);
    let sync = call(&url, &token, json!({}), "slow_compute", json!({"seconds": 1, "label": "late"})).await;
    assert_eq!(sync["result"]["content"][0]["text"], "Timed out after 500 ms", "{sync}");
    let task = call(&url, &token, takes_tasks(), "slow_compute", json!({"seconds": 1, "label": "in time"})).await;
    let done = until_status(&url, &token, task["result"]["taskId"].as_str().unwrap(), "completed").await;
    assert_eq!(done["result"]["result"]["content"][0]["text"], "Computed in time in 1 s.", "{done}");
});

/// A published tool of Carol's (research) that acts as its caller at the app
/// `people`, and only runs as a task; its MCP endpoint.
async fn acting_as_the_caller(srv: &TestServer) -> String {
    // Nobody connects here, so the provider is never reached.
    let app = [
        ("name", "people"),
        ("department", ""),
        ("issuer", ""),
        ("authorize_url", "https://id.example.com/authorize"),
        ("token_url", "https://id.example.com/token"),
        ("revoke_url", ""),
        ("client_id", "toolshed"),
        ("client_secret", ""),
        ("scopes", "profile"),
        ("hosts", "api.example.com"),
    ];
    let (status, body) = srv.call(&srv.admin().await, "apps/register", &app).await;
    assert_eq!(status, 200, "{body}");
    let carol = srv.member("carol", "research").await;
    let tool = srv.create_tool(&carol, "who_am_i", "everyone").await;
    srv.set_settings(&carol, tool, &[("fetch_allow", "api.example.com"), ("task_support", "required")]).await;
    let (status, body) = srv.call(&carol, "tools/accounts", &[("id", &tool.to_string()), ("accounts", "people")]).await;
    assert_eq!(status, 200, "{body}");
    srv.publish(&carol, tool, "never reached").await;
    srv.url("/mcp/tools/research/who_am_i")
}

server_test!(a_task_acting_as_a_caller_not_connected_sends_them_to_connect_when_their_client_opens_urls, |srv: TestServer| async move {
    let url = acting_as_the_caller(&srv).await;
    let token = srv.token("carol").await;
    let started = |capabilities: Value| {
        let (url, token) = (url.clone(), token.clone());
        async move {
            let started = call(&url, &token, capabilities, "who_am_i", json!({})).await;
            started["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {started}")).to_owned()
        }
    };
    let answers_with_the_link = |done: &Value| {
        assert_eq!(done["result"]["status"], "completed", "{done}");
        assert_eq!(done["result"]["result"]["isError"], true, "{done}");
        let text = done["result"]["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("/connect/people to connect it"), "{done}");
    };

    // A client that cannot open URLs: the link is the task's answer.
    let id = started(takes_tasks()).await;
    answers_with_the_link(&until_status(&url, &token, &id, "completed").await);

    // One that can: the task asks its person to connect (input required, a URL request).
    let opens_urls = json!({"elicitation": {"url": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    let id = started(opens_urls.clone()).await;
    let asking = until_status(&url, &token, &id, "input_required").await;
    let asked = &asking["result"]["inputRequests"]["toolshed_connect"];
    assert_eq!((asked["method"].as_str(), asked["params"]["mode"].as_str()), (Some("elicitation/create"), Some("url")), "{asking}");
    assert!(asked["params"]["url"].as_str().unwrap_or_default().ends_with("/connect/people"), "{asking}");
    // Declined: the link is the answer, and the task is not asked again.
    let decline = json!({"taskId": id, "inputResponses": {"toolshed_connect": {"action": "decline"}}});
    task_request(&url, &token, "tasks/update", decline).await;
    answers_with_the_link(&until_status(&url, &token, &id, "completed").await);

    // Accepted (they went to connect), then cancelled while it waits: the wait ends with the task.
    let id = started(opens_urls).await;
    until_status(&url, &token, &id, "input_required").await;
    let accept = json!({"taskId": id, "inputResponses": {"toolshed_connect": {"action": "accept"}}});
    task_request(&url, &token, "tasks/update", accept).await;
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        let got = task_request(&url, &token, "tasks/get", json!({"taskId": id})).await;
        if got["result"]["statusMessage"] == "Waiting for you to connect your account at “people”." {
            break;
        }
        assert!(Instant::now() < give_up, "{got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    task_request(&url, &token, "tasks/cancel", json!({"taskId": id})).await;
    let cancelled = until_status(&url, &token, &id, "cancelled").await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
});
