//! Tools that ask (`$input`, `$ask`) over MCP: MCP 2026-07-28's input-required
//! results and their sealed `requestState`, refused questions, and a 2025
//! request that cannot be asked. The fixtures are the demo data's
//! `demo/conformance` bundle. (A 2025 session asked on its stream: the
//! TypeScript SDK in end2end/tests/mcp.test.mjs and the conformance suite.)

use crate::common::{last_message, rpc_2026, TestServer};
use serde_json::{json, Value};

const CONFORMANCE: &str = "/mcp/bundles/demo/conformance";

/// A 2026-07-28 `tools/call` (no session: `_meta` says who the client is and
/// what it can answer), as its JSON-RPC answer.
async fn call_2026(srv: &TestServer, token: &str, capabilities: Value, params: Value) -> Value {
    call_2026_at(srv, CONFORMANCE, token, capabilities, params).await
}

async fn call_2026_at(srv: &TestServer, path: &str, token: &str, capabilities: Value, params: Value) -> Value {
    rpc_2026(&srv.url(path), token, "tools/call", params, capabilities).await
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

server_test!(answers_that_do_not_fit_their_question_are_asked_for_again_and_unasked_ones_are_ignored, |srv: TestServer| async move {
    let token = member_token(&srv, "carol").await;
    let can = json!({"elicitation": {}});
    let name = "test_input_required_result_elicitation";
    let first = call_2026(&srv, &token, can.clone(), json!({"name": name, "arguments": {}})).await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    for wrong in [json!(12345), accept(json!({"name": 7})), json!({"action": "maybe"})] {
        let again = call_2026(
            &srv,
            &token,
            can.clone(),
            json!({"name": name, "arguments": {}, "inputResponses": {"user_name": wrong}, "requestState": state}),
        )
        .await;
        assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    }
    // Answers need the round that asked: without its state they answer nothing.
    let unasked = json!({"user_name": accept(json!({"name": "Ada"}))});
    let cold = call_2026(&srv, &token, can.clone(), json!({"name": name, "arguments": {}, "inputResponses": unasked})).await;
    assert_eq!(cold["result"]["resultType"], "input_required", "{cold}");
    let extra = json!({"user_name": accept(json!({"name": "Ada"})), "unknown": accept(json!({"x": 1}))});
    let done = call_2026(&srv, &token, can, json!({"name": name, "arguments": {}, "inputResponses": extra, "requestState": state})).await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!", "{done}");
});

/// The payment tool of the test below: its second question is built from
/// the first answer and from the amount of the published version.
fn payment_code(amount: u32) -> String {
    format!(
        "const who = await $ask('Who is paid?', {{type: 'object', properties: {{name: {{type: 'string'}}}}, required: ['name']}});\n\
         const ok = await $ask(`Send {amount} EUR to ${{who.content.name}}?`);\n\
         return `${{who.content.name}}: ${{ok.action}} {amount}`;"
    )
}

server_test!(an_answer_counts_only_for_the_question_it_was_given_to, |srv: TestServer| async move {
    let alice = srv.member("alice", "finance").await;
    let tool = srv.create_tool(&alice, "pay", "everyone").await;
    let save = |amount: u32| json!({"tool": tool, "code": payment_code(amount), "args": [], "changelog": ""});
    let (status, v1) = srv.server_fn(&alice, "tools/save_version", save(100)).await;
    assert_eq!(status, 200, "{v1}");
    srv.publish_version(&alice, tool, v1.as_i64().unwrap()).await;
    let token = srv.token("alice").await;
    let (path, can) = ("/mcp/tools/finance/pay", json!({"elicitation": {}}));
    let call = |responses: Value, state: &str| json!({"name": "pay", "arguments": {}, "inputResponses": responses, "requestState": state});

    let first = call_2026_at(&srv, path, &token, can.clone(), json!({"name": "pay", "arguments": {}})).await;
    let state1 = first["result"]["requestState"].as_str().unwrap().to_owned();
    let second = call_2026_at(&srv, path, &token, can.clone(), call(json!({"ask1": accept(json!({"name": "Ada"}))}), &state1)).await;
    assert_eq!(second["result"]["inputRequests"]["ask2"]["params"]["message"], "Send 100 EUR to Ada?", "{second}");
    let state2 = second["result"]["requestState"].as_str().unwrap().to_owned();

    // Round 1's state asked only ask1: an "accept" under ask2 sent with it answers nothing.
    let early = json!({"ask1": accept(json!({"name": "Eve"})), "ask2": accept(json!({}))});
    let refused = call_2026_at(&srv, path, &token, can.clone(), call(early, &state1)).await;
    assert_eq!(refused["result"]["inputRequests"]["ask2"]["params"]["message"], "Send 100 EUR to Eve?", "{refused}");

    // The tool changes between the rounds: the accept given to "100 EUR" is not one to "5000 EUR".
    let (_, v2) = srv.server_fn(&alice, "tools/save_version", save(5000)).await;
    srv.publish_version(&alice, tool, v2.as_i64().unwrap()).await;
    let changed = call_2026_at(&srv, path, &token, can.clone(), call(json!({"ask2": accept(json!({}))}), &state2)).await;
    assert_eq!(changed["result"]["resultType"], "input_required", "{changed}");
    assert_eq!(changed["result"]["inputRequests"]["ask2"]["params"]["message"], "Send 5000 EUR to Ada?");
    let state3 = changed["result"]["requestState"].as_str().unwrap().to_owned();
    let done = call_2026_at(&srv, path, &token, can, call(json!({"ask2": accept(json!({}))}), &state3)).await;
    assert_eq!(done["result"]["content"][0]["text"], "Ada: accept 5000", "{done}");

    // The Run panel's answers go back with the question they answer, too.
    let run = |answers: Value| json!({"tool": tool, "target": "Published", "input": "{}", "answers": answers.to_string()});
    let (status, asked) = srv.server_fn(&alice, "tools/run", run(json!({}))).await;
    assert_eq!(status, 200, "{asked}");
    let who = &asked["questions"][0];
    assert_eq!(who["message"], "Who is paid?");
    let given = json!({"ask1": {"question": who["question"], "answer": accept(json!({"name": "Bo"}))}});
    let (_, asked) = srv.server_fn(&alice, "tools/run", run(given.clone())).await;
    let send = &asked["questions"][0];
    assert_eq!(send["message"], "Send 5000 EUR to Bo?");
    let mut wrong = given.clone();
    wrong["ask2"] = json!({"question": who["question"], "answer": accept(json!({}))});
    let (_, again) = srv.server_fn(&alice, "tools/run", run(wrong)).await;
    assert_eq!(again["questions"][0]["message"], "Send 5000 EUR to Bo?", "an answer to another question: {again}");
    let mut right = given;
    right["ask2"] = json!({"question": send["question"], "answer": accept(json!({}))});
    let (_, ran) = srv.server_fn(&alice, "tools/run", run(right)).await;
    assert_eq!(ran["result"], "Bo: accept 5000", "{ran}");
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
