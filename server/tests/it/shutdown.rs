//! A deploy loses no call: on SIGTERM the server refuses new connections, ends
//! the idle event streams at once, lets every call in flight deliver its result
//! on its own stream (Streamable HTTP stateful and stateless, legacy SSE), and
//! exits; the grace period bounds how long it waits for them.

use std::time::Duration;

use axum::extract::State;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use crate::common::TestServer;
use crate::mcp::{call, Events, Session, INIT};

/// A loopback API that holds every request until the test releases it, and
/// tells the test of each as it arrives: a tool that fetches from it is a call
/// in flight for exactly as long as the test wants.
struct Gate {
    base: String,
    host: String,
    arrived: mpsc::UnboundedReceiver<()>,
    open: watch::Sender<bool>,
}

impl Gate {
    async fn start() -> Self {
        let (arrived_tx, arrived) = mpsc::unbounded_channel();
        let (open, opened) = watch::channel(false);
        let app = axum::Router::new().fallback(hold).with_state((arrived_tx, opened));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Gate { base: format!("http://{host}"), host, arrived, open }
    }

    /// Waits until `n` more requests are being held.
    async fn held(&mut self, n: usize) {
        for _ in 0..n {
            self.arrived.recv().await.expect("the gate is running");
        }
    }

    fn release(&self) {
        self.open.send_replace(true);
    }
}

async fn hold(State((arrived, mut opened)): State<(mpsc::UnboundedSender<()>, watch::Receiver<bool>)>) -> &'static str {
    let _ = arrived.send(());
    let _ = opened.wait_for(|open| *open).await;
    "released"
}

/// `research/held`, published by carol: it answers once the gate lets its request through.
async fn held_tool(srv: &TestServer, gate: &Gate) {
    let carol = srv.member("carol", "research").await;
    let id = srv.create_tool(&carol, "held", "everyone").await;
    srv.set_settings(&carol, id, &[("title", "Held"), ("timeout_ms", "30000"), ("fetch_allow", gate.host.as_str())]).await;
    let tool = id.to_string();
    let code = format!("const r = await $fetch('{}/hold');\nreturn `${{args.n}}: ${{await r.text()}}`;", gate.base);
    let args = json!([{"name": "n", "type": {"kind": "integer"}, "description": "", "required": true}]);
    let save = json!({"tool": tool.parse::<i64>().unwrap(), "code": code, "args": args, "changelog": "held"});
    let (status, version) = srv.server_fn(&carol, "tools/save_version", save).await;
    assert_eq!(status, 200, "{version}");
    srv.publish_version(&carol, tool.parse().unwrap(), version.as_i64().unwrap()).await;
}

/// The text a `tools/call` result carries.
fn answer(message: &Value) -> &str {
    message["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("a result: {message}"))
}

/// Whether a new connection to the server is refused.
async fn refuses_connections(srv: &TestServer) -> bool {
    reqwest::Client::new().get(srv.url("/healthz")).send().await.is_err_and(|e| e.is_connect())
}

/// A legacy HTTP+SSE session: its stream, and its message URL.
async fn legacy_session(srv: &TestServer, token: &str) -> (Events, String) {
    let res = reqwest::Client::new().get(srv.url("/mcp/tools/research/held/sse")).bearer_auth(token).send().await.unwrap();
    let mut events = Events::from(res);
    let (kind, endpoint) = events.next().await;
    assert_eq!(kind, "endpoint");
    (events, srv.url(&endpoint))
}

async fn post_legacy(url: &str, token: &str, body: &str) {
    let res = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Content-Type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
}

process_test!(calls_in_flight_at_sigterm_deliver_their_results_while_idle_streams_close_at_once, |mut srv: TestServer| async move {
    let mut gate = Gate::start().await;
    held_tool(&srv, &gate).await;
    let token = srv.token("carol").await;
    let session = Session::open(srv.url("/mcp/tools/research/held"), &token).await;
    let mut idle = session.listen().await;
    let (mut idle_legacy, _) = legacy_session(&srv, &token).await;
    let (mut legacy, messages) = legacy_session(&srv, &token).await;
    post_legacy(&messages, &token, INIT).await;
    assert_eq!(legacy.message().await["id"], 0);
    post_legacy(&messages, &token, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;

    let calls: Vec<_> = (1..=2)
        .map(|n| {
            let session = Session { url: session.url.clone(), token: token.clone(), id: session.id.clone() };
            tokio::spawn(async move { session.request(&call(n, "held", json!({"n": n}))).await })
        })
        .collect();
    post_legacy(&messages, &token, &call(3, "held", json!({"n": 3}))).await;
    gate.held(3).await;

    srv.terminate();
    let asked = std::time::Instant::now();
    assert!(idle.ends_within(Duration::from_secs(2)).await, "the idle Streamable HTTP stream ends at once");
    assert!(idle_legacy.ends_within(Duration::from_secs(2)).await, "the idle legacy stream ends at once");
    assert!(refuses_connections(&srv).await, "new connections are refused");

    gate.release();
    for (n, replies) in (1..=2).zip(calls) {
        let replies = replies.await.unwrap();
        assert_eq!(answer(replies.last().unwrap()), format!("{n}: released"), "{replies:?}");
    }
    let reply = legacy.message().await;
    assert_eq!((reply["id"].as_i64(), answer(&reply)), (Some(3), "3: released"));
    assert!(legacy.ends_within(Duration::from_secs(2)).await, "then the legacy stream ends");
    let status = srv.exit_within(Duration::from_secs(10)).await.expect("the server exits once its calls are answered");
    assert!(status.success());
    assert!(asked.elapsed() < Duration::from_secs(10), "took {:?}", asked.elapsed());
});

process_test!(
    stateless_calls_in_flight_at_sigterm_deliver_their_results,
    ["--mcp-sessions", "stateless"],
    |mut srv: TestServer| async move {
        let mut gate = Gate::start().await;
        held_tool(&srv, &gate).await;
        let token = srv.token("carol").await;
        let url = srv.url("/mcp/tools/research/held");
        let calls: Vec<_> = (1..=2)
            .map(|n| {
                let session = Session { url: url.clone(), token: token.clone(), id: String::new() };
                tokio::spawn(async move {
                    let res = session.post(&call(n, "held", json!({"n": n}))).await;
                    assert_eq!(res.status(), 200);
                    serde_json::from_str::<Value>(&res.text().await.unwrap()).unwrap()
                })
            })
            .collect();
        let (mut idle_legacy, _) = legacy_session(&srv, &token).await;
        gate.held(2).await;
        srv.terminate();
        assert!(idle_legacy.ends_within(Duration::from_secs(2)).await, "the idle legacy stream ends at once");
        assert!(refuses_connections(&srv).await, "new connections are refused");
        gate.release();
        for (n, reply) in (1..=2).zip(calls) {
            assert_eq!(answer(&reply.await.unwrap()), format!("{n}: released"));
        }
        assert!(srv.exit_within(Duration::from_secs(10)).await.expect("the server exits").success());
    }
);

process_test!(the_grace_period_bounds_how_long_a_shutdown_waits_for_calls, ["--shutdown-grace", "1"], |mut srv: TestServer| async move {
    let mut gate = Gate::start().await;
    held_tool(&srv, &gate).await;
    let session = Session::open(srv.url("/mcp/tools/research/held"), &srv.token("carol").await).await;
    let stuck = tokio::spawn(async move { session.post(&call(1, "held", json!({"n": 1}))).await.text().await });
    gate.held(1).await;
    let asked = std::time::Instant::now();
    srv.terminate();
    let status = srv.exit_within(Duration::from_secs(5)).await.expect("the server exits after the grace period");
    assert!(status.success());
    assert!(asked.elapsed() >= Duration::from_secs(1), "it waited for the call: {:?}", asked.elapsed());
    let cut = stuck.await.unwrap().unwrap_or_default();
    assert!(!cut.contains("released"), "the call never got its answer: {cut}");
    gate.release();
});
