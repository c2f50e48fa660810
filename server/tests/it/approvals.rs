//! Approvals: in a department that requires them, a call of a tool that
//! writes waits for one of the department's approvers, whoever calls and
//! however (a plain 2026 request, one whose client can be asked, a task on
//! another replica). An approval admits exactly the frozen arguments, for
//! the person who called, once; declines and withdrawals are told; who may
//! decide is the department's to say; every step is audited.

use std::time::{Duration, Instant};

use crate::common::{rpc_2026, TestServer};
use serde_json::{json, Value};

const DEPLOY: &str = "/mcp/tools/ops/deploy";

/// `ops` with maintainer mia, author alex who publishes `ops/deploy` (a tool
/// that writes: not held to reading), and rita from research who calls it;
/// approvals required in ops. Returns (mia's client, rita's token).
async fn ops(srv: &TestServer) -> (reqwest::Client, String) {
    let mia = srv.joined("mia", "ops", "maintainer").await;
    let alex = srv.joined("alex", "ops", "author").await;
    srv.member("rita", "research").await;
    let id = srv.create_tool(&alex, "deploy", "everyone").await;
    srv.set_settings(&alex, id, &[("title", "Deploy"), ("description", "Deploys a service.")]).await;
    publish_deploy(srv, &alex, id, "Deployed").await;
    set_approvals(srv, &mia, "writes", "").await;
    (mia, srv.token("rita").await)
}

/// Publishes a version of `ops/deploy` (tool `id`) that answers `{said} {service}.`.
async fn publish_deploy(srv: &TestServer, alex: &reqwest::Client, id: i64, said: &str) {
    let args = json!([{"name": "service", "type": {"kind": "string"}, "description": "What to deploy", "required": true}]);
    let code = format!("return `{said} ${{$service}}.`;");
    let (status, version) =
        srv.server_fn(alex, "tools/save_version", json!({"tool": id, "code": code, "args": args, "changelog": said})).await;
    assert_eq!(status, 200, "{version}");
    srv.publish_version(alex, id, version.as_i64().unwrap()).await;
}

async fn set_approvals(srv: &TestServer, client: &reqwest::Client, required: &str, approvers: &str) -> (u16, Value) {
    let form = [("department", "ops"), ("required", required), ("approvers", approvers)];
    let (status, body) = srv.call(client, "approvals/settings/set", &form).await;
    assert!(status == 200 || status >= 400, "{body}");
    (status, body)
}

async fn deploy(url: &str, token: &str, capabilities: Value, service: &str) -> Value {
    rpc_2026(url, token, "tools/call", json!({"name": "deploy", "arguments": {"service": service}}), capabilities).await
}

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("a text result: {answer}"))
}

/// The request id a held call's message names.
fn request_id(message: &str) -> String {
    let after = message.split("Request ").nth(1).unwrap_or_else(|| panic!("names its request: {message}"));
    after.split_whitespace().next().unwrap().to_owned()
}

async fn inbox(srv: &TestServer, client: &reqwest::Client) -> Value {
    let (status, body) = srv.call(client, "approvals", &[]).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn decide(srv: &TestServer, client: &reqwest::Client, id: &str, decision: &str, note: &str) -> (u16, Value) {
    srv.call(client, "approvals/decide", &[("id", id), ("decision", decision), ("note", note)]).await
}

fn status_of(list: &Value, id: &str) -> String {
    let found = list.as_array().unwrap().iter().find(|a| a["id"] == id).unwrap_or_else(|| panic!("{id} in {list}"));
    found["status"].as_str().unwrap().to_owned()
}

/// The header's count of calls waiting for `client`'s decision.
async fn waiting(srv: &TestServer, client: &reqwest::Client) -> i64 {
    let (status, body) = srv.call(client, "approvals/waiting", &[]).await;
    assert_eq!(status, 200, "{body}");
    body.as_i64().unwrap_or_else(|| panic!("a count: {body}"))
}

server_test!(an_approver_is_told_how_many_calls_wait_for_them_and_no_one_else_counts_them, |srv: TestServer| async move {
    let (mia, rita_token) = ops(&srv).await;
    let url = srv.url(DEPLOY);
    assert_eq!(waiting(&srv, &mia).await, 0);
    let api = request_id(text(&deploy(&url, &rita_token, json!({}), "api").await));
    let db = request_id(text(&deploy(&url, &rita_token, json!({}), "db").await));
    assert_eq!(waiting(&srv, &mia).await, 2, "the maintainer decides both");
    // Not the requester, not an author of ops, not someone signed out.
    let (rita, alex) = (srv.browser(), srv.browser());
    srv.sign_in(&rita, "rita").await;
    srv.sign_in(&alex, "alex").await;
    assert_eq!((waiting(&srv, &rita).await, waiting(&srv, &alex).await, waiting(&srv, &srv.browser()).await), (0, 0, 0));
    // A decision and a withdrawal each take one off.
    assert_eq!(decide(&srv, &mia, &api, "approve", "").await.0, 200);
    assert_eq!(waiting(&srv, &mia).await, 1);
    assert_eq!(srv.call(&rita, "approvals/withdraw", &[("id", db.as_str())]).await.0, 200);
    assert_eq!(waiting(&srv, &mia).await, 0);
});

server_test!(no_one_has_more_calls_waiting_than_the_cap_even_when_they_arrive_at_once, |srv: TestServer| async move {
    let (mia, rita_token) = ops(&srv).await;
    let url = srv.url(DEPLOY);
    let cap = toolshed_domain::tools::approvals::MAX_WAITING_PER_USER as usize;
    // More distinct calls than the cap, all at once.
    let services: Vec<String> = (0..cap + 6).map(|i| format!("service-{i}")).collect();
    let answers = futures::future::join_all(services.iter().map(|s| deploy(&url, &rita_token, json!({}), s))).await;
    let filed = answers.iter().filter(|a| text(a).contains("needs approval")).count();
    let refused = answers.iter().filter(|a| text(a).contains(&format!("You have {cap} calls waiting for approval"))).count();
    assert_eq!((filed, refused), (cap, 6), "filed and refused of {} at once", cap + 6);
    let waiting = inbox(&srv, &mia).await;
    assert_eq!(waiting["inbox"].as_array().unwrap().iter().filter(|a| a["status"] == "pending").count(), cap, "{waiting}");
    // Withdrawing one makes room for one.
    let rita = srv.browser();
    srv.sign_in(&rita, "rita").await;
    let one = answers.iter().find(|a| text(a).contains("needs approval")).map(|a| request_id(text(a))).unwrap();
    let (status, body) = srv.call(&rita, "approvals/withdraw", &[("id", one.as_str())]).await;
    assert_eq!(status, 200, "{body}");
    assert!(text(&deploy(&url, &rita_token, json!({}), "one-more").await).contains("needs approval"));
    assert!(text(&deploy(&url, &rita_token, json!({}), "and-another").await).contains("calls waiting for approval"));
});

server_test!(a_call_that_writes_waits_for_an_approver_and_runs_once_with_its_frozen_arguments, |srv: TestServer| async move {
    let (mia, rita_token) = ops(&srv).await;
    let url = srv.url(DEPLOY);

    // Held: the call did not run, and says where it waits.
    let held = deploy(&url, &rita_token, json!({}), "api").await;
    assert_eq!(held["result"]["isError"], true, "{held}");
    assert!(text(&held).contains("needs approval"), "{held}");
    let api = request_id(text(&held));
    // The same call again finds the same request; other arguments file their own.
    assert_eq!(request_id(text(&deploy(&url, &rita_token, json!({}), "api").await)), api);
    let db = request_id(text(&deploy(&url, &rita_token, json!({}), "db").await));
    assert_ne!(db, api);

    // The maintainer's inbox has both, each with its frozen arguments.
    let waiting = inbox(&srv, &mia).await;
    let pending: Vec<&Value> = waiting["inbox"].as_array().unwrap().iter().filter(|a| a["status"] == "pending").collect();
    assert_eq!(pending.len(), 2, "{waiting}");
    let shown = pending.iter().find(|a| a["id"] == api.as_str()).unwrap();
    assert_eq!((shown["tool"].as_str(), shown["requester"].as_str()), (Some("ops/deploy"), Some("rita")));
    assert_eq!(serde_json::from_str::<Value>(shown["arguments"].as_str().unwrap()).unwrap(), json!({"service": "api"}));

    // Nobody decides their own call, nor one they are not an approver of.
    let rita = srv.browser();
    srv.sign_in(&rita, "rita").await;
    assert_eq!(decide(&srv, &rita, &api, "approve", "").await.0, 404);
    assert!(inbox(&srv, &rita).await["inbox"].as_array().unwrap().is_empty(), "rita decides nothing");
    assert_eq!(status_of(&inbox(&srv, &rita).await["mine"], &api), "pending");
    let alex = srv.browser();
    srv.sign_in(&alex, "alex").await;
    assert_eq!(decide(&srv, &alex, &api, "approve", "").await.0, 404, "an author of ops is no approver");

    let (status, body) = decide(&srv, &mia, &api, "approve", "Go ahead.").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(decide(&srv, &mia, &api, "decline", "").await.0, 409, "decided once");
    // The approved call runs, once.
    let ran = deploy(&url, &rita_token, json!({}), "api").await;
    assert_eq!((ran["result"]["isError"].as_bool(), text(&ran)), (Some(false), "Deployed api."), "{ran}");
    let again = deploy(&url, &rita_token, json!({}), "api").await;
    assert_eq!(again["result"]["isError"], true, "{again}");
    assert_ne!(request_id(text(&again)), api, "a second run asks afresh");
    assert_eq!(status_of(&inbox(&srv, &rita).await["mine"], &api), "used");

    // A decline is told once, with its note; the call never ran.
    assert_eq!(decide(&srv, &mia, &db, "decline", "Not during the freeze.").await.0, 200);
    let declined = deploy(&url, &rita_token, json!({}), "db").await;
    assert_eq!(declined["result"]["isError"], true, "{declined}");
    assert!(text(&declined).contains("declined by mia") && text(&declined).contains("Not during the freeze."), "{declined}");
    let asked_again = deploy(&url, &rita_token, json!({}), "db").await;
    assert!(text(&asked_again).contains("needs approval"), "{asked_again}");
    assert_ne!(request_id(text(&asked_again)), db);

    // A request nobody decided in time is over: the same call files a new one.
    srv.sql("UPDATE approvals SET expires_at = 0 WHERE status = 'pending'").await;
    let after_a_day = deploy(&url, &rita_token, json!({}), "db").await;
    assert!(text(&after_a_day).contains("needs approval"), "{after_a_day}");
    let fresh = request_id(text(&after_a_day));
    assert_ne!(fresh, request_id(text(&asked_again)));
    assert_eq!(status_of(&inbox(&srv, &mia).await["inbox"], &fresh), "pending");

    // Every request and decision is in the audit log, with the arguments.
    let admin = srv.admin().await;
    let form = [("action", "approval."), ("actor", ""), ("target", "tool:ops/deploy"), ("from", ""), ("to", ""), ("page", "")];
    let (_, audit) = srv.call(&admin, "admin/audit", &form).await;
    let actions: Vec<&str> = audit["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    for action in ["approval.requested", "approval.approved", "approval.declined"] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
});

server_test!(a_client_that_can_ask_keeps_its_person_waiting_and_its_request_state_runs_the_call_once, |srv: TestServer| async move {
    let (mia, rita_token) = ops(&srv).await;
    let url = srv.url(DEPLOY);
    let can_ask = json!({"elicitation": {}});

    let asked = deploy(&url, &rita_token, can_ask.clone(), "api").await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let question = &asked["result"]["inputRequests"]["toolshed_approval"];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    let id = request_id(question["params"]["message"].as_str().unwrap());
    let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
    let retry = |state: String| {
        let (url, token) = (url.clone(), rita_token.clone());
        async move {
            let params = json!({"name": "deploy", "arguments": {"service": "api"}, "requestState": state,
                "inputResponses": {"toolshed_approval": {"action": "accept", "content": {}}}});
            rpc_2026(&url, &token, "tools/call", params, json!({"elicitation": {}})).await
        }
    };
    // Accepted before anyone decided: asked again.
    let still = retry(state.clone()).await;
    assert_eq!(still["result"]["resultType"], "input_required", "{still}");

    assert_eq!(decide(&srv, &mia, &id, "approve", "").await.0, 200);
    let ran = retry(still["result"]["requestState"].as_str().unwrap().to_owned()).await;
    assert_eq!(text(&ran), "Deployed api.", "{ran}");
    // Its request state, sent again, runs nothing more.
    let replayed = retry(state).await;
    assert_eq!(replayed["result"]["isError"], true, "{replayed}");
    assert!(text(&replayed).contains("admitted one call"), "{replayed}");

    // Declining the question withdraws the request.
    let asked = deploy(&url, &rita_token, can_ask, "db").await;
    let id = request_id(asked["result"]["inputRequests"]["toolshed_approval"]["params"]["message"].as_str().unwrap());
    let params = json!({"name": "deploy", "arguments": {"service": "db"}, "requestState": asked["result"]["requestState"],
        "inputResponses": {"toolshed_approval": {"action": "decline"}}});
    let withdrawn = rpc_2026(&url, &rita_token, "tools/call", params, json!({"elicitation": {}})).await;
    assert!(text(&withdrawn).contains("withdrew"), "{withdrawn}");
    assert_eq!(status_of(&inbox(&srv, &mia).await["inbox"], &id), "withdrawn");
    assert_eq!(decide(&srv, &mia, &id, "approve", "").await.0, 409, "nothing left to approve");
});

/// A client that takes tasks.
fn takes_tasks() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

async fn task(url: &str, token: &str, method: &str, id: &str) -> Value {
    rpc_2026(url, token, method, json!({"taskId": id}), takes_tasks()).await
}

server_test!(a_held_call_is_a_task_that_runs_on_its_replica_once_approved_through_another, |srv: TestServer| async move {
    let (mia, rita_token) = ops(&srv).await;
    let other = srv.replica().await;
    let (here, there) = (srv.url(DEPLOY), other.url(DEPLOY));

    let started = deploy(&here, &rita_token, takes_tasks(), "api").await;
    assert_eq!(started["result"]["resultType"], "task", "{started}");
    let id = started["result"]["taskId"].as_str().unwrap().to_owned();
    // The task says what it waits for.
    let give_up = Instant::now() + Duration::from_secs(20);
    let request = loop {
        let got = task(&there, &rita_token, "tasks/get", &id).await;
        if let Some(message) = got["result"]["statusMessage"].as_str() {
            break request_id(message);
        }
        assert!(Instant::now() < give_up && got["result"]["status"] == "working", "{got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(decide(&srv, &mia, &request, "approve", "").await.0, 200);
    let give_up = Instant::now() + Duration::from_secs(20);
    let done = loop {
        let got = task(&there, &rita_token, "tasks/get", &id).await;
        if got["result"]["status"] != "working" {
            break got;
        }
        assert!(Instant::now() < give_up, "{got}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(done["result"]["result"]["content"][0]["text"], "Deployed api.", "{done}");

    // A cancelled task withdraws its request.
    let started = deploy(&here, &rita_token, takes_tasks(), "db").await;
    let id = started["result"]["taskId"].as_str().unwrap().to_owned();
    let request = loop {
        let got = task(&here, &rita_token, "tasks/get", &id).await;
        if let Some(message) = got["result"]["statusMessage"].as_str() {
            break request_id(message);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    task(&there, &rita_token, "tasks/cancel", &id).await;
    let give_up = Instant::now() + Duration::from_secs(20);
    while status_of(&inbox(&srv, &mia).await["inbox"], &request) != "withdrawn" {
        assert!(Instant::now() < give_up, "the cancelled task's request is withdrawn");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
});

server_test!(a_department_names_who_decides_and_only_its_maintainers_may_say_so, |srv: TestServer| async move {
    let (mia, rita_token) = ops(&srv).await;
    let olga = srv.joined("olga", "ops", "member").await;
    let alex = srv.browser();
    srv.sign_in(&alex, "alex").await;
    assert_eq!(set_approvals(&srv, &alex, "off", "").await.0, 403, "an author does not decide it");
    let (status, body) = set_approvals(&srv, &mia, "writes", "olga, rita").await;
    assert_eq!(status, 422, "rita is not of ops: {body}");
    assert_eq!(set_approvals(&srv, &mia, "writes", "@olga").await.0, 200);
    let (_, settings) = srv.call(&mia, "approvals/settings", &[]).await;
    assert_eq!(settings, json!({"department": "ops", "required": true, "approvers": ["olga"]}));

    let held = deploy(&srv.url(DEPLOY), &rita_token, json!({}), "api").await;
    let id = request_id(text(&held));
    // Named approvers decide instead of the maintainers; an admin always may.
    assert!(inbox(&srv, &mia).await["inbox"].as_array().unwrap().is_empty());
    assert_eq!(decide(&srv, &mia, &id, "approve", "").await.0, 404);
    assert_eq!(status_of(&inbox(&srv, &olga).await["inbox"], &id), "pending");
    let admin = srv.admin().await;
    assert_eq!(status_of(&inbox(&srv, &admin).await["inbox"], &id), "pending");
    assert_eq!(decide(&srv, &olga, &id, "approve", "").await.0, 200);

    // An approval is for the version that was to run: republished, the tool asks afresh.
    let (_, detail) = srv.call(&alex, "tools/detail", &[("department", "ops"), ("name", "deploy")]).await;
    publish_deploy(&srv, &alex, detail["id"].as_i64().unwrap(), "Shipped").await;
    let held = deploy(&srv.url(DEPLOY), &rita_token, json!({}), "api").await;
    assert!(text(&held).contains("needs approval"), "{held}");
    assert_ne!(request_id(text(&held)), id);
    let (_, mine) = srv.call(&admin, "approvals", &[]).await;
    let shown = mine["inbox"].as_array().unwrap().iter().find(|a| a["id"] == request_id(text(&held)).as_str()).cloned().unwrap();
    assert_eq!(shown["version"], 2, "the inbox says which version is to run: {shown}");

    // With approvals off, calls run at once.
    set_approvals(&srv, &mia, "off", "").await;
    let ran = deploy(&srv.url(DEPLOY), &rita_token, json!({}), "cache").await;
    assert_eq!(text(&ran), "Shipped cache.", "{ran}");
});

server_test!(an_approved_call_that_asks_its_caller_takes_its_rounds_under_one_approval_each_round_once, |srv: TestServer| async move {
    let (mia, rita_token) = ops(&srv).await;
    let alex = srv.browser();
    srv.sign_in(&alex, "alex").await;
    let id = srv.create_tool(&alex, "purge", "everyone").await;
    srv.set_settings(&alex, id, &[("title", "Purge"), ("description", "Purges a cache.")]).await;
    let args = json!([{"name": "service", "type": {"kind": "string"}, "description": "Whose cache", "required": true}]);
    let code = "const { sure } = await $input({ sure: { method: 'elicitation/create', params: { message: 'Sure?', \
                requestedSchema: { type: 'object', properties: {} } } } });\nreturn `Purged ${$service}: ${sure.action}.`;";
    let (status, version) =
        srv.server_fn(&alex, "tools/save_version", json!({"tool": id, "code": code, "args": args, "changelog": "v1"})).await;
    assert_eq!(status, 200, "{version}");
    srv.publish_version(&alex, id, version.as_i64().unwrap()).await;

    let url = srv.url("/mcp/tools/ops/purge");
    let round = |state: Value, responses: Value| {
        let (url, token) = (url.clone(), rita_token.clone());
        async move {
            let mut params = json!({"name": "purge", "arguments": {"service": "api"}, "inputResponses": responses});
            if !state.is_null() {
                params["requestState"] = state;
            }
            rpc_2026(&url, &token, "tools/call", params, json!({"elicitation": {}})).await
        }
    };
    let held = round(Value::Null, json!({})).await;
    let id = request_id(held["result"]["inputRequests"]["toolshed_approval"]["params"]["message"].as_str().unwrap());
    assert_eq!(decide(&srv, &mia, &id, "approve", "").await.0, 200);
    // Approved, it runs and asks its own question.
    let asks = round(held["result"]["requestState"].clone(), json!({"toolshed_approval": {"action": "accept", "content": {}}})).await;
    assert_eq!(asks["result"]["inputRequests"]["sure"]["params"]["message"], "Sure?", "{asks}");
    // The answer, sent twice at once: one round runs; the other does not (told the approval
    // was used, or held for a new one, as the race falls).
    let answer = || round(asks["result"]["requestState"].clone(), json!({"sure": {"action": "accept", "content": {}}}));
    let (first, second) = tokio::join!(answer(), answer());
    let ran = [&first, &second].into_iter().filter(|a| a["result"]["content"][0]["text"] == "Purged api: accept.").count();
    assert_eq!(ran, 1, "{first} {second}");
    let other = if first["result"]["content"][0]["text"] == "Purged api: accept." { &second } else { &first };
    let said = other.to_string();
    assert!(said.contains("admitted one call") || said.contains("needs approval"), "{said}");

    // The Run panel: held, approved, then its answer goes back with the round's key.
    let rita = srv.browser();
    srv.sign_in(&rita, "rita").await;
    let tool = srv.call(&rita, "tools/detail", &[("department", "ops"), ("name", "purge")]).await.1["id"].clone();
    let run = |answers: Value, approval: &str| json!({"tool": tool, "target": "Published", "input": r#"{"service": "web"}"#, "answers": answers.to_string(), "approval": approval});
    let (status, held) = srv.server_fn(&rita, "tools/run", run(json!({}), "")).await;
    assert_eq!(status, 403, "{held}");
    let id = request_id(&held.to_string());
    assert_eq!(decide(&srv, &mia, &id, "approve", "").await.0, 200);
    let (_, asked) = srv.server_fn(&rita, "tools/run", run(json!({}), "")).await;
    let (sure, key) = (&asked["questions"][0], asked["approval"].as_str().unwrap_or_else(|| panic!("a round key: {asked}")));
    let answers = json!({"sure": {"question": sure["question"], "answer": {"action": "accept", "content": {}}}});
    let (_, ran) = srv.server_fn(&rita, "tools/run", run(answers, key)).await;
    assert_eq!(ran["result"], "Purged web: accept.", "{ran}");
});
