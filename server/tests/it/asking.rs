//! Tools that ask (`$input`, `$ask`) over MCP: MCP 2026-07-28's input-required
//! results and their sealed `requestState`, refused questions, and a 2025
//! request that cannot be asked. The fixtures are the demo data's
//! `demo/conformance` bundle. (A 2025 session asked on its stream: the
//! TypeScript SDK in end2end/tests/mcp.test.mjs and the conformance suite.)

use crate::common::TestServer;
use serde_json::{json, Value};

const CONFORMANCE: &str = "/mcp/bundles/demo/conformance";

/// A 2026-07-28 `tools/call` (no session: `_meta` says who the client is and
/// what it can answer), as its JSON-RPC answer.
async fn call_2026(srv: &TestServer, token: &str, capabilities: Value, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let res = reqwest::Client::new()
        .post(srv.url(CONFORMANCE))
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", params["name"].as_str().unwrap())
        .json(&body)
        .send()
        .await
        .unwrap();
    last_message(&res.text().await.unwrap())
}

/// The JSON-RPC answer of a JSON or SSE response body (the stream's last message).
fn last_message(text: &str) -> Value {
    let json = text.lines().filter_map(|l| l.strip_prefix("data:")).next_back().map(str::trim).unwrap_or(text);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A member of another department than the fixtures': the bundle is for everyone.
async fn member_token(srv: &TestServer, name: &str) -> String {
    srv.member(name, "research").await;
    srv.token(name).await
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

server_test!(a_2026_call_that_asks_returns_its_questions_and_completes_when_called_again_with_every_answer, |srv: TestServer| async move {
    let token = member_token(&srv, "carol").await;
    let can = json!({"elicitation": {}});
    let name = "test_input_required_result_multi_round";
    let first = call_2026(&srv, &token, can.clone(), json!({"name": name, "arguments": {}})).await;
    let asked = &first["result"];
    assert_eq!(asked["resultType"], "input_required", "{first}");
    assert_eq!(asked["inputRequests"]["step1"]["params"]["message"], "Step 1: What is your name?");
    let state1 = asked["requestState"].as_str().unwrap().to_owned();

    let second = call_2026(
        &srv,
        &token,
        can.clone(),
        json!({"name": name, "arguments": {}, "inputResponses": {"step1": accept(json!({"name": "Alice"}))}, "requestState": state1}),
    )
    .await;
    let asked = &second["result"];
    assert_eq!(asked["resultType"], "input_required", "{second}");
    assert!(asked["inputRequests"].get("step1").is_none(), "step 1 is answered: {second}");
    let state2 = asked["requestState"].as_str().unwrap().to_owned();
    assert_ne!(state2, state1);

    // The last round brings only step 2's answer: step 1's travels sealed in the state.
    let step2 = json!({"step2": accept(json!({"color": "blue"}))});
    let done =
        call_2026(&srv, &token, can.clone(), json!({"name": name, "arguments": {}, "inputResponses": step2, "requestState": state2})).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Alice likes blue");

    // A state changed by the client, or carried to another caller, opens for nobody.
    let tampered = format!("{state2}-TAMPERED");
    let refused =
        call_2026(&srv, &token, can.clone(), json!({"name": name, "arguments": {}, "inputResponses": step2, "requestState": tampered}))
            .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let other = member_token(&srv, "dave").await;
    let stolen =
        call_2026(&srv, &other, can, json!({"name": name, "arguments": {}, "inputResponses": step2, "requestState": state2})).await;
    assert_eq!(stolen["error"]["code"], -32602, "{stolen}");
});

server_test!(answers_that_do_not_fit_their_question_are_asked_for_again_and_extra_ones_are_ignored, |srv: TestServer| async move {
    let token = member_token(&srv, "carol").await;
    let can = json!({"elicitation": {}});
    let name = "test_input_required_result_elicitation";
    for wrong in [json!(12345), accept(json!({"name": 7})), json!({"action": "maybe"})] {
        let again =
            call_2026(&srv, &token, can.clone(), json!({"name": name, "arguments": {}, "inputResponses": {"user_name": wrong}})).await;
        assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    }
    let extra = json!({"user_name": accept(json!({"name": "Ada"})), "unknown": accept(json!({"x": 1}))});
    let done = call_2026(&srv, &token, can, json!({"name": name, "arguments": {}, "inputResponses": extra})).await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!", "{done}");
});

server_test!(a_question_the_client_did_not_declare_it_can_answer_is_refused_as_a_missing_capability, |srv: TestServer| async move {
    let token = member_token(&srv, "carol").await;
    let refused =
        call_2026(&srv, &token, json!({"sampling": {}}), json!({"name": "test_input_required_result_elicitation", "arguments": {}})).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(refused["error"]["data"]["requiredCapabilities"], json!({"elicitation": {}}));
    // Code that checks what the client can answer asks only that.
    let asked =
        call_2026(&srv, &token, json!({"sampling": {}}), json!({"name": "test_input_required_result_capabilities", "arguments": {}})).await;
    let keys: Vec<&String> = asked["result"]["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["greeting"], "{asked}");
});

server_test!(
    a_2025_request_without_a_session_is_told_that_it_cannot_be_asked,
    ["--mcp-sessions", "stateless"],
    |srv: TestServer| async move {
        let token = member_token(&srv, "carol").await;
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "test_elicitation", "arguments": {"message": "Who are you?"}}});
        let res = reqwest::Client::new()
            .post(srv.url(CONFORMANCE))
            .bearer_auth(&token)
            .header("Accept", "application/json, text/event-stream")
            .json(&body)
            .send()
            .await
            .unwrap();
        let answer = last_message(&res.text().await.unwrap());
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let message = answer["result"]["content"][0]["text"].as_str().unwrap();
        assert!(message.contains("Who are you?") && message.contains("cannot be asked"), "{message}");
    }
);

server_test!(content_blocks_reach_the_client_as_mcp_content, |srv: TestServer| async move {
    let token = member_token(&srv, "carol").await;
    let mixed = call_2026(&srv, &token, json!({}), json!({"name": "test_multiple_content_types", "arguments": {}})).await;
    let content = mixed["result"]["content"].as_array().unwrap();
    let kinds: Vec<&str> = content.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "image", "resource"], "{mixed}");
    assert_eq!(content[1]["mimeType"], "image/png");
    assert_eq!(content[2]["resource"]["text"], r#"{"test":"data","value":123}"#);
    assert!(mixed["result"].get("structuredContent").is_none());
});
