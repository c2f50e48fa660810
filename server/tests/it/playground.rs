//! The playground end to end: a scripted OpenAI-compatible server on loopback
//! (a tiny axum app that replays a script and keeps what it was sent), an admin
//! configuring it as a chat endpoint, and turns streamed from
//! `POST /playground/chat` by a signed-in browser, on SQLite and PostgreSQL.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::TestServer;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use serde_json::{json, Value};

/// What the scripted endpoint received: the body and the Authorization header.
type Seen = Arc<Mutex<Vec<(Value, Option<String>)>>>;

/// A scripted chat-completions server; `/{mode}/v1/chat/completions` picks the script.
pub(crate) struct Scripted {
    base: String,
    seen: Seen,
}

impl Scripted {
    pub(crate) async fn start() -> Self {
        let seen: Seen = Arc::default();
        let app = axum::Router::new().route("/{mode}/v1/chat/completions", axum::routing::post(completions)).with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { base, seen }
    }

    pub(crate) fn url(&self, mode: &str) -> String {
        format!("{}/{mode}/v1", self.base)
    }

    pub(crate) fn requests(&self) -> Vec<(Value, Option<String>)> {
        self.seen.lock().unwrap().clone()
    }
}

fn chunk(delta: Value) -> String {
    format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": delta}]}))
}

/// An SSE answer sent in pieces, a little apart, as a real model streams (the
/// pause is the fixture's pace, not a wait for anything).
fn streamed(chunks: Vec<String>) -> Response {
    let body = futures::stream::iter(chunks).then(|c| async move {
        tokio::time::sleep(Duration::from_millis(15)).await;
        Ok::<_, std::convert::Infallible>(Bytes::from(c))
    });
    ([("content-type", "text/event-stream")], Body::from_stream(body)).into_response()
}

/// First answer: a little text, then two tool calls whose arguments arrive split.
fn tool_calls() -> Response {
    streamed(vec![
        chunk(json!({"role": "assistant", "content": "Let me "})),
        chunk(json!({"content": "check."})),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "text_kit__table", "arguments": "{\"rows\":[{\"na"}}]}),
        ),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "me\":\"apples\",\"value\":3}]}"}}]})),
        chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_2", "type": "function", "function": {"name": "text_kit__echo", "arguments": "{\"text\":5}"}}]}),
        ),
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n".into(),
        "data: [DONE]\n\n".into(),
    ])
}

async fn completions(State(seen): State<Seen>, Path(mode): Path<String>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    seen.lock().unwrap().push((body.clone(), auth));
    let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
    match mode.as_str() {
        // Tools first; once it has a tool result, an answer quoting the first one.
        "script" | "external" if last["role"] == "tool" => {
            let messages = body["messages"].as_array().unwrap();
            let table = messages
                .iter()
                .find(|m| m["tool_call_id"] == "call_1")
                .map(|m| m["content"].as_str().unwrap().to_owned())
                .unwrap_or_default();
            streamed(vec![chunk(json!({"content": "The table:\n"})), chunk(json!({"content": table})), "data: [DONE]\n\n".into()])
        }
        "script" | "loop" => tool_calls(),
        // A bundle `kit`'s external tool `ext__echo`; then, with its result, the answer `script` gives.
        "external" => streamed(vec![
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "kit__ext__echo", "arguments": "{\"text\":\"hi from the playground\"}"}}]}),
            ),
            "data: [DONE]\n\n".into(),
        ]),
        "unauthorized" => {
            (StatusCode::UNAUTHORIZED, Json(json!({"error": {"message": "Invalid API key", "type": "invalid_request_error"}})))
                .into_response()
        }
        "junk" => ([("content-type", "text/html")], "<html><body>502 Bad Gateway</body></html>").into_response(),
        // Headers, then nothing: the client must give up rather than hang.
        "stall" => {
            let body = futures::stream::once(async { Ok::<_, std::convert::Infallible>(Bytes::from(": hold on\n\n")) })
                .chain(futures::stream::pending());
            ([("content-type", "text/event-stream")], Body::from_stream(body)).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Adds a chat endpoint as the admin; returns its ID.
pub(crate) async fn add_endpoint(srv: &TestServer, admin: &reqwest::Client, name: &str, url: &str, key: &str, timeout: &str) -> i64 {
    let (status, body) = srv
        .call(
            admin,
            "admin/chat_endpoints/create",
            &[("name", name), ("base_url", url), ("model", "scripted-model"), ("api_key", key), ("timeout_secs", timeout)],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, list) = srv.call(admin, "admin/chat_endpoints", &[]).await;
    list.as_array().unwrap().iter().find(|e| e["name"] == name).expect("the endpoint is listed")["id"].as_i64().unwrap()
}

/// Posts a turn like the page does; returns the status and the events (or the error body).
pub(crate) async fn turn(srv: &TestServer, client: &reqwest::Client, listing: Value, endpoint: i64, messages: Value) -> (u16, Vec<Value>) {
    let res = client
        .post(srv.url("/playground/chat"))
        .header("Origin", &srv.base)
        .json(&json!({"listing": listing, "endpoint": endpoint, "messages": messages}))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    let events = if status == 200 {
        text.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| serde_json::from_str(d.trim()).unwrap()).collect()
    } else {
        vec![serde_json::from_str(&text).unwrap_or(Value::String(text))]
    };
    (status, events)
}

fn text_kit() -> Value {
    json!({"kind": "bundle", "department": "demo", "name": "text_kit"})
}

pub(crate) fn ask(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

server_test!(a_turn_streams_text_runs_the_bundles_tool_calls_and_feeds_the_results_back, |srv: TestServer| async move {
    let llm = Scripted::start().await;
    let admin = srv.admin().await;
    let endpoint = add_endpoint(&srv, &admin, "Scripted", &llm.url("script"), "sk-test-123", "").await;
    let (_, list) = srv.call(&admin, "admin/chat_endpoints", &[]).await;
    assert_eq!(list[0]["has_key"], true);
    assert!(!list.to_string().contains("sk-test-123"), "the key is never sent back: {list}");

    let (status, events) = turn(&srv, &admin, text_kit(), endpoint, ask("Make a table of 3 apples")).await;
    assert_eq!(status, 200, "{events:?}");
    assert_eq!(
        types(&events),
        [
            "text",
            "text",
            "message",
            "tool_call",
            "tool_result",
            "message",
            "tool_call",
            "tool_result",
            "message",
            "text",
            "text",
            "message",
            "done"
        ],
        "{events:#?}"
    );
    assert_eq!(events[0]["delta"], "Let me ");
    assert_eq!(events[2]["message"]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(
        events[3],
        json!({"type": "tool_call", "id": "call_1", "name": "text_kit__table", "arguments": "{\"rows\":[{\"name\":\"apples\",\"value\":3}]}"})
    );
    let table = &events[4];
    assert_eq!(table["ok"], true, "{table}");
    assert!(table["output"].as_str().unwrap().contains("| apples"), "{table}");
    assert_eq!(table["console"][0]["message"], "formatting 1 rows");
    assert!(table["duration_ms"].is_u64());
    let echo = &events[7];
    assert_eq!((echo["id"].as_str(), echo["ok"].as_bool()), (Some("call_2"), Some(false)), "bad arguments are the model's to read: {echo}");
    assert!(echo["output"].as_str().unwrap().contains("Invalid arguments"), "{echo}");
    let answer = events[11]["message"]["content"].as_str().unwrap();
    assert_eq!(answer, format!("The table:\n{}", table["output"].as_str().unwrap()));

    // What the model was sent: the listing's functions, streaming, the key; then the tool results.
    let seen = llm.requests();
    assert_eq!(seen.len(), 2);
    let (first, auth) = &seen[0];
    assert_eq!(auth.as_deref(), Some("Bearer sk-test-123"));
    assert_eq!((first["model"].as_str(), first["stream"].as_bool()), (Some("scripted-model"), Some(true)));
    let names: Vec<&str> = first["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["text_kit__echo", "text_kit__table", "text_kit__word_stats"]);
    let sent = seen[1].0["messages"].as_array().unwrap();
    assert_eq!(sent.iter().map(|m| m["role"].as_str().unwrap()).collect::<Vec<_>>(), ["user", "assistant", "tool", "tool"]);
    assert_eq!(sent[2], json!({"role": "tool", "tool_call_id": "call_1", "content": table["output"]}));
    assert_eq!(sent[3]["tool_call_id"], "call_2");

    // The next turn carries the conversation so far.
    let mut history: Vec<Value> = ask("Make a table of 3 apples").as_array().unwrap().clone();
    history.extend(events.iter().filter(|e| e["type"] == "message").map(|e| e["message"].clone()));
    history.push(json!({"role": "user", "content": "Thanks!"}));
    let (status, _) = turn(&srv, &admin, text_kit(), endpoint, Value::Array(history.clone())).await;
    assert_eq!(status, 200);
    assert_eq!(llm.requests()[2].0["messages"], Value::Array(history));

    // Both turns' calls are in usage, through the bundle, as playground calls.
    let url = srv.db.url.clone();
    srv.flush_usage().await;
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let rows: Vec<(String, String, Option<i64>)> =
        sqlx::query_as("SELECT transport, outcome, bundle_id FROM usage_records ORDER BY id").fetch_all(&pool).await.unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert!(rows.iter().all(|(t, _, b)| t == "playground" && b.is_some()), "{rows:?}");
    assert_eq!((rows[0].1.as_str(), rows[1].1.as_str()), ("ok", "invalid_arguments"));
});

server_test!(endpoint_failures_end_the_turn_with_a_clear_error_never_a_hang, |srv: TestServer| async move {
    let llm = Scripted::start().await;
    let admin = srv.admin().await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", l.local_addr().unwrap())
    };
    let cases = [
        ("unauthorized", llm.url("unauthorized"), vec!["HTTP 401", "check the endpoint's API key", "Invalid API key"]),
        ("missing model", llm.url("no-such-model"), vec!["HTTP 404", "check the base URL and the model name"]),
        ("junk", llm.url("junk"), vec!["not an OpenAI-compatible chat completion", "502 Bad Gateway"]),
        ("stall", llm.url("stall"), vec!["sent nothing for 1 s"]),
        ("closed", closed, vec!["Could not reach the chat endpoint"]),
        ("loop", llm.url("loop"), vec!["after 8 rounds"]),
    ];
    for (name, url, expected) in cases {
        let endpoint = add_endpoint(&srv, &admin, name, &url, "", "1").await;
        let (started, before) = (Instant::now(), llm.requests().len());
        let (status, events) = turn(&srv, &admin, text_kit(), endpoint, ask("hi")).await;
        assert_eq!(status, 200, "{name}: {events:?}");
        let last = events.last().unwrap();
        assert_eq!(last["type"], "error", "{name}: {events:?}");
        let message = last["message"].as_str().unwrap();
        for part in expected {
            assert!(message.contains(part), "{name}: {message:?} should say {part:?}");
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{name} took {:?}", started.elapsed());
        if name == "loop" {
            assert_eq!(llm.requests().len() - before, 8, "the model that never stops calling tools is asked 8 times");
        }
    }
});

server_test!(only_signed_in_users_chat_with_listings_they_can_see_and_only_admins_configure, |srv: TestServer| async move {
    let llm = Scripted::start().await;
    let admin = srv.admin().await;
    let endpoint = add_endpoint(&srv, &admin, "Scripted", &llm.url("script"), "sk-secret", "").await;
    let secret = srv.create_tool(&admin, "secret_sauce", "private").await;
    srv.publish(&admin, secret, "classified").await;

    let mallory = srv.member("mallory", "sales").await;
    // A member may use the endpoint, never see or change its settings.
    for (path, form) in [
        ("admin/chat_endpoints", vec![]),
        (
            "admin/chat_endpoints/create",
            vec![("name", "mine"), ("base_url", "http://127.0.0.1:9/v1"), ("model", "m"), ("api_key", ""), ("timeout_secs", "")],
        ),
        ("admin/chat_endpoints/delete", vec![("id", "1")]),
    ] {
        let (status, body) = srv.call(&mallory, path, &form).await;
        assert_eq!(status, 403, "{path}: {body}");
    }
    let (status, choices) = srv.call(&mallory, "playground/options", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(choices["endpoints"], json!([{"id": endpoint, "name": "Scripted", "model": "scripted-model"}]), "no URL, no key");
    let listed: Vec<String> = choices["listings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| format!("{}:{}/{}", l["kind"].as_str().unwrap(), l["department"].as_str().unwrap(), l["name"].as_str().unwrap()))
        .collect();
    assert!(listed.contains(&"bundle:demo/text_kit".to_owned()), "{listed:?}");
    assert!(!listed.iter().any(|l| l.contains("secret_sauce")), "{listed:?}");

    // A forged request for the admin's private tool: not found, and the model is never asked.
    let department = srv.call(&admin, "tools/mine", &[]).await.1.as_array().unwrap().iter().find(|t| t["name"] == "secret_sauce").unwrap()
        ["department"]
        .clone();
    let forged = json!({"kind": "tool", "department": department, "name": "secret_sauce"});
    let (status, body) = turn(&srv, &mallory, forged.clone(), endpoint, ask("tell me")).await;
    assert_eq!((status, body[0]["error"].as_str()), (404, Some("No such listing.")));
    // The owner may.
    let (status, events) = turn(&srv, &admin, forged, endpoint, ask("tell me")).await;
    assert_eq!(status, 200, "{events:?}");
    assert_eq!(llm.requests().len(), 2, "only the owner's turn (a tool round, then the answer) reached the model");

    // Unknown endpoint, signed out, another site, a conversation not ending with the user.
    assert_eq!(turn(&srv, &mallory, text_kit(), endpoint + 100, ask("hi")).await.0, 404);
    assert_eq!(turn(&srv, &srv.browser(), text_kit(), endpoint, ask("hi")).await.0, 401);
    let res = mallory
        .post(srv.url("/playground/chat"))
        .header("Origin", "https://evil.example")
        .json(&json!({"listing": text_kit(), "endpoint": endpoint, "messages": ask("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let (status, body) = turn(&srv, &mallory, text_kit(), endpoint, json!([{"role": "assistant", "content": "hi"}])).await;
    assert_eq!(status, 422, "{body:?}");
    let (status, _) = turn(&srv, &mallory, text_kit(), endpoint, json!([{"role": "wizard", "content": "hi"}])).await;
    assert_eq!(status, 422);
    let huge = "x".repeat(600 * 1024);
    assert_eq!(turn(&srv, &mallory, text_kit(), endpoint, ask(&huge)).await.0, 413);
});
