//! Traces over OTLP: a tool call that arrives with the client's trace context
//! is one trace through the MCP call, the tool run and its `$fetch`, as a
//! real OTLP receiver (oteltap, from PyPI) gets it from the server process,
//! and the loopback API the tool fetches from continues that same trace.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::common::TestServer;
use crate::mcp::Session;
use crate::secrets::Recorder;
use crate::upstream::{bundle, world, Upstream};
use toolshed_domain::store::Backend;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// `otlp_receiver.py` in the test venv, printing the spans it receives.
struct Receiver {
    endpoint: String,
    spans: Lines<BufReader<ChildStdout>>,
    _child: Child,
}

impl Receiver {
    async fn start() -> Self {
        let tools = std::env::var("TOOLS").expect("TOOLS (scripts/env.sh) names the test tools' folder");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let script = crate::common::repo_root().join("server/tests/it/otlp_receiver.py");
        let mut child = Command::new(format!("{tools}/venv/bin/python"))
            .arg(script)
            .arg(port.to_string())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the venv's python (scripts/bootstrap.sh installs oteltap there)");
        let mut spans = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(Duration::from_secs(30), spans.next_line()).await.expect("the receiver starts");
        assert_eq!(ready.unwrap().as_deref(), Some("listening"));
        Self { endpoint: format!("http://127.0.0.1:{port}"), spans, _child: child }
    }

    /// The spans of `trace` by name, once all of `names` have arrived.
    async fn trace(&mut self, trace: &str, names: &[&str]) -> HashMap<String, Value> {
        let mut found = HashMap::new();
        while !names.iter().all(|n| found.contains_key(*n)) {
            let line = tokio::time::timeout(Duration::from_secs(60), self.spans.next_line())
                .await
                .unwrap_or_else(|_| panic!("spans {names:?} of the trace within a minute; had {found:?}"))
                .unwrap()
                .expect("the receiver keeps running");
            let span: Value = serde_json::from_str(&line).unwrap();
            if span["trace_id"] == trace {
                found.insert(span["name"].as_str().unwrap().to_owned(), span);
            }
        }
        found
    }
}

/// Calls `tool` at `path` as `user`, with the client's trace context in `_meta`.
async fn call_traced(srv: &TestServer, user: &str, path: &str, tool: &str, arguments: Value) -> Value {
    let session = Session::open(srv.url(path), &srv.token(user).await).await;
    let traceparent = format!("00-{TRACE}-{CLIENT_SPAN}-01");
    let params = json!({"name": tool, "arguments": arguments, "_meta": {"traceparent": traceparent}});
    let answer = session.request(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).to_string()).await;
    answer.last().unwrap()["result"].clone()
}

/// The span id of the parent a `traceparent` names, checking it is of [`TRACE`].
fn parent_in(traceparent: &str) -> String {
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts[1], TRACE, "{traceparent}");
    parts[2].to_owned()
}

#[tokio::test]
async fn a_call_with_a_traceparent_is_one_trace_from_the_client_to_the_api_the_tool_fetches() {
    let mut receiver = Receiver::start().await;
    let api = Recorder::start().await;
    let mut srv = TestServer::process(Backend::Sqlite, &["--otlp-endpoint", &receiver.endpoint]).await;
    let alice = srv.member("alice", "finance").await;
    let code = format!("const r = await $fetch('{}/rates');\nreturn r.status;", api.base);
    crate::permissions::tool(&srv, &alice, "rates", &format!("127.0.0.1:{}", api.port), false, &code).await;

    let result = call_traced(&srv, "alice", "/mcp/tools/finance/rates", "rates", json!({})).await;
    assert_eq!(result["content"][0]["text"], "200", "{result}");

    // The API got the trace, as a child of the server's `fetch` span.
    let seen = api.received();
    let sent = seen.lines().find_map(|l| l.strip_prefix("traceparent: ")).unwrap_or_else(|| panic!("a traceparent in {seen}"));
    let api_parent = parent_in(sent);

    // Stopping flushes what the batch exporter holds.
    assert!(srv.stops_cleanly().await);
    let spans = receiver.trace(TRACE, &["tools/call", "tool_run", "fetch"]).await;
    let (call, run, fetch) = (&spans["tools/call"], &spans["tool_run"], &spans["fetch"]);
    assert_eq!(call["parent_span_id"], CLIENT_SPAN, "the call continues the client's span");
    assert_eq!(run["parent_span_id"], call["span_id"]);
    assert_eq!(fetch["parent_span_id"], run["span_id"]);
    assert_eq!(fetch["span_id"], api_parent, "the API's parent is the fetch span");
    assert_eq!(call["attributes"]["gen_ai.tool.name"], "rates");
    assert_eq!(run["attributes"]["listing"], "finance/rates");
    assert_eq!(run["attributes"]["department"], "finance");
    assert_eq!(run["attributes"]["outcome"], "ok");
    assert_eq!(fetch["attributes"]["http.response.status_code"], 200);
}

#[tokio::test]
async fn an_external_servers_request_continues_the_callers_trace() {
    let mut receiver = Receiver::start().await;
    let upstream = Upstream::start().await;
    let mut srv = TestServer::process(Backend::Sqlite, &["--otlp-endpoint", &receiver.endpoint]).await;
    let (alice, _admin) = world(&srv, &upstream).await;
    bundle(&srv, &alice, &["echo"]).await;

    let result = call_traced(&srv, "alice", "/mcp/bundles/research/kit", "ext__echo", json!({"text": "hi"})).await;
    assert_eq!(result["content"][0]["text"], "hi", "{result}");
    let seen: Value = reqwest::get(upstream.url("/control/traceparent")).await.unwrap().json().await.unwrap();
    let upstream_parent = parent_in(seen["traceparent"].as_str().expect("the server got a traceparent"));

    assert!(srv.stops_cleanly().await);
    let spans = receiver.trace(TRACE, &["tools/call", "call_external"]).await;
    let (call, external) = (&spans["tools/call"], &spans["call_external"]);
    assert_eq!(external["parent_span_id"], call["span_id"]);
    assert_eq!(external["span_id"], upstream_parent, "the external server's parent is the call_external span");
    assert_eq!(external["attributes"]["server"], "ext");
    assert_eq!(external["attributes"]["department"], "research");
}

#[tokio::test]
async fn code_modes_member_call_is_a_counted_tool_run_of_its_own_whose_fetch_continues_the_trace() {
    let mut receiver = Receiver::start().await;
    let api = Recorder::start().await;
    let args = ["--otlp-endpoint", &receiver.endpoint, "--metrics-token", crate::metrics::TOKEN];
    let mut srv = TestServer::process(Backend::Sqlite, &args).await;
    let alice = srv.member("alice", "research").await;
    let code = format!("const r = await $fetch('{}/rates');\nreturn r.status;", api.base);
    let rates = crate::permissions::tool(&srv, &alice, "rates", &format!("127.0.0.1:{}", api.port), false, &code).await;
    let bundle = srv.published_bundle(&alice, json!([{"tool": rates, "pinned_version": null, "exposed_name": ""}])).await;
    let (status, info) = srv.call(&alice, "bundles/code_mode", &[("bundle", &bundle.to_string()), ("mode", "instead")]).await;
    assert_eq!(status, 200, "{info}");

    let result =
        call_traced(&srv, "alice", "/mcp/bundles/research/kit", "run_code", json!({"code": "return await tools.rates({});"})).await;
    assert_eq!(result["content"][0]["text"], "200", "{result}");
    let seen = api.received();
    let sent = seen.lines().find_map(|l| l.strip_prefix("traceparent: ")).unwrap_or_else(|| panic!("a traceparent in {seen}"));
    let api_parent = parent_in(sent);
    // Two runs, the member nested in the code's, so only the code waited for a worker; the member's $fetch counted.
    let text = crate::metrics::scraped(&srv).await;
    let fetched = format!(r#"toolshed_fetch_requests_total{{host="127.0.0.1:{}",status="2xx"}} 1"#, api.port);
    for line in [r#"toolshed_sandbox_runs_total{result="ok"} 2"#, "toolshed_sandbox_queue_seconds_count 1", &fetched] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }

    assert!(srv.stops_cleanly().await);
    let spans = receiver.trace(TRACE, &["tools/call", "run_code", "tool_run", "fetch"]).await;
    let (call, code, member, fetch) = (&spans["tools/call"], &spans["run_code"], &spans["tool_run"], &spans["fetch"]);
    assert_eq!(code["parent_span_id"], call["span_id"]);
    assert_eq!(member["parent_span_id"], code["span_id"], "the member ran inside the code's run");
    assert_eq!(member["attributes"]["listing"], "research/rates");
    assert_eq!(member["attributes"]["outcome"], "ok");
    assert_eq!(fetch["parent_span_id"], member["span_id"]);
    assert_eq!(fetch["span_id"], api_parent);
}
