//! MCP endpoints at the HTTP level: token checks, JSON-RPC answers, bad input,
//! and usage records. (Real SDK clients are in end2end/tests/mcp.test.mjs.)

use crate::common::TestServer;
use serde_json::{json, Value};

async fn rpc(srv: &TestServer, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let mut req = reqwest::Client::new()
        .post(srv.url(path))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body.to_owned());
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let res = req.send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

pub(crate) fn call(id: u32, name: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}}).to_string()
}

/// The JSON-RPC message in a JSON or SSE response body.
fn message(body: &str) -> Value {
    let json = body.lines().find_map(|l| l.strip_prefix("data:")).map(str::trim).unwrap_or(body);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {body}"))
}

server_test!(a_tool_call_with_a_token_runs_the_published_version_and_is_recorded, |mut srv: TestServer| async move {
    let token = srv.token("admin").await;
    let session = Session::open(srv.url("/mcp/tools/demo/echo"), &token).await;
    let replies = session.request(&call(1, "echo", json!({"text": "hi"}))).await;
    assert_eq!(replies.last().unwrap()["result"]["content"], json!([{"type": "text", "text": "hi"}]), "{replies:?}");
    let replies = session.request(&call(2, "echo", json!({"text": 1}))).await;
    assert_eq!(replies.last().unwrap()["result"]["isError"], true);

    let url = srv.db.url.clone();
    assert!(srv.stops_cleanly().await);
    // A clean shutdown writes every record.
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT transport, outcome FROM usage_records ORDER BY id").fetch_all(&pool).await.unwrap();
    assert_eq!(rows, [("mcp-http".into(), "ok".into()), ("mcp-http".into(), "invalid_arguments".into())]);
});

server_test!(missing_wrong_and_revoked_tokens_get_401_with_www_authenticate, |srv: TestServer| async move {
    for token in [None, Some("tsk_wrong"), Some("not even a token")] {
        let res = reqwest::Client::new()
            .post(srv.url("/mcp/tools/demo/echo"))
            .header("Content-Type", "application/json")
            .header("Authorization", token.map(|t| format!("Bearer {t}")).unwrap_or_default())
            .body(call(1, "echo", json!({"text": "x"})))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401);
        assert!(res.headers()["www-authenticate"].to_str().unwrap().starts_with("Bearer"));
    }
    // A token in the query string works for clients that only take a URL.
    let token = srv.token("admin").await;
    let (status, _) = rpc(&srv, &format!("/mcp/tools/demo/echo?token={token}"), None, INIT).await;
    assert_eq!(status, 200);
});

/// One HTTP/1.1 response read off `conn`: its status, its headers (names in
/// lower case) and its body (by `Content-Length`).
async fn read_response<R: tokio::io::AsyncBufRead + Unpin>(conn: &mut R) -> (u16, Vec<(String, String)>, String) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let mut status_line = String::new();
    assert!(conn.read_line(&mut status_line).await.unwrap() > 0, "the connection closed without an answer");
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        conn.read_line(&mut line).await.unwrap();
        match line.trim_end().split_once(':') {
            Some((name, value)) => headers.push((name.to_ascii_lowercase(), value.trim().to_owned())),
            None => break,
        }
    }
    let length: usize =
        headers.iter().find(|(n, _)| n == "content-length").map_or_else(|| panic!("no length: {headers:?}"), |(_, v)| v.parse().unwrap());
    let mut body = vec![0; length];
    conn.read_exact(&mut body).await.unwrap();
    (status, headers, String::from_utf8(body).unwrap())
}

server_test!(a_request_refused_before_its_body_is_read_leaves_the_connection_usable_or_says_it_closes, |srv: TestServer| async move {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Through `url`: it captures the whole server, where `srv.base` alone would drop (and stop) it.
    let host = srv.url("").strip_prefix("http://").unwrap().to_owned();
    for padding in [10, 64 * 1024] {
        // One keep-alive connection: an initialize without a token (401 before the message is read) ...
        let mut conn = tokio::io::BufReader::new(tokio::net::TcpStream::connect(&host).await.unwrap());
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"padding": "x".repeat(padding)}}).to_string();
        let request = format!(
            "POST /mcp/tools/demo/echo HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{message}",
            message.len()
        );
        conn.write_all(request.as_bytes()).await.unwrap();
        let (status, headers, _) = read_response(&mut conn).await;
        assert_eq!(status, 401, "{padding}-byte padding");
        if headers.iter().any(|(n, v)| n == "connection" && v.eq_ignore_ascii_case("close")) {
            // Said so: the client knows to open another, and this one ends.
            let mut rest = Vec::new();
            let _ = conn.read_to_end(&mut rest).await;
            assert!(rest.is_empty(), "{padding}-byte padding: after close, {rest:?}");
            continue;
        }
        // ... then the next request on the same connection gets its whole answer.
        conn.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes()).await.unwrap();
        let (status, _, body) = read_response(&mut conn).await;
        assert_eq!((status, body.as_str()), (200, "ok"), "{padding}-byte padding");
    }
});

server_test!(unknown_listings_and_tools_and_malformed_json_get_clear_errors, |srv: TestServer| async move {
    let token = srv.token("admin").await;
    let (status, _) = rpc(&srv, "/mcp/tools/demo/missing", Some(&token), &call(1, "x", json!({}))).await;
    assert_eq!(status, 404);
    let session = Session::open(srv.url("/mcp/tools/demo/echo"), &token).await;
    let msg = session.request(&call(1, "other", json!({}))).await.pop().unwrap();
    assert_eq!(msg["error"]["code"], -32602, "{msg}");
    assert!(msg["error"]["message"].as_str().unwrap().contains("Unknown tool: other"));
    let (status, body) = rpc(&srv, "/mcp/tools/demo/echo", Some(&token), "{not json").await;
    assert!((400..500).contains(&status) && body.contains("deserialize"), "{status} {body}");
    assert_eq!(srv.page(&srv.browser(), "/healthz").await.1, "ok");
});

pub(crate) const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"tests","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// A Streamable HTTP session, spoken by hand: every request carries the token
/// and, once initialized, the session id.
pub(crate) struct Session {
    pub(crate) url: String,
    pub(crate) token: String,
    pub(crate) id: String,
}

impl Session {
    pub(crate) async fn open(url: String, token: &str) -> Self {
        let s = Self::initialize(url, token).await;
        s.initialized().await;
        s
    }

    /// The first half of the handshake: `initialize` answered, `initialized` not sent.
    async fn initialize(url: String, token: &str) -> Self {
        let mut s = Session { url, token: token.to_owned(), id: String::new() };
        let res = s.post(INIT).await;
        assert_eq!(res.status(), 200);
        s.id = res.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        s
    }

    async fn initialized(&self) {
        assert_eq!(self.post(INITIALIZED).await.status(), 202);
    }

    pub(crate) async fn post(&self, body: &str) -> reqwest::Response {
        let mut req = reqwest::Client::new()
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body.to_owned());
        if !self.id.is_empty() {
            req = req.header("Mcp-Session-Id", &self.id).header("MCP-Protocol-Version", "2025-06-18");
        }
        req.send().await.unwrap()
    }

    /// Sends a request and returns the messages of its response stream.
    pub(crate) async fn request(&self, body: &str) -> Vec<Value> {
        let res = self.post(body).await;
        assert_eq!(res.status(), 200);
        messages(&res.text().await.unwrap())
    }

    /// The standalone event stream (server-initiated messages).
    pub(crate) async fn listen(&self) -> Events {
        let res = reqwest::Client::new()
            .get(&self.url)
            .bearer_auth(&self.token)
            .header("Accept", "text/event-stream")
            .header("Mcp-Session-Id", &self.id)
            .header("MCP-Protocol-Version", "2025-06-18")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        Events { res, buf: String::new() }
    }
}

/// Every JSON-RPC message in an SSE body.
fn messages(body: &str) -> Vec<Value> {
    body.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect()
}

/// Reads server-sent events as they arrive.
pub(crate) struct Events {
    res: reqwest::Response,
    buf: String,
}

impl From<reqwest::Response> for Events {
    fn from(res: reqwest::Response) -> Self {
        Events { res, buf: String::new() }
    }
}

impl Events {
    /// The next event with data, as (event name, data); fails after 10 s.
    pub(crate) async fn next(&mut self) -> (String, String) {
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                if let Some(end) = self.buf.find("\n\n") {
                    let block: String = self.buf.drain(..end + 2).collect();
                    let event = block.lines().find_map(|l| l.strip_prefix("event:")).unwrap_or("message").trim().to_owned();
                    let data: Vec<&str> = block.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
                    if !data.is_empty() && !data.concat().is_empty() {
                        return (event, data.join("\n"));
                    }
                    continue;
                }
                let chunk = self.res.chunk().await.unwrap().expect("the event stream stays open");
                self.buf.push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
            }
        })
        .await
        .expect("an event within 10 s")
    }

    /// Whether the stream ends (events before the end are skipped) within `limit`.
    pub(crate) async fn ends_within(&mut self, limit: std::time::Duration) -> bool {
        tokio::time::timeout(limit, async { while let Ok(Some(_)) = self.res.chunk().await {} }).await.is_ok()
    }

    /// The next JSON-RPC message on the stream.
    pub(crate) async fn message(&mut self) -> Value {
        serde_json::from_str(&self.next().await.1).unwrap()
    }
}

/// A member's published tool that returns `version`; returns (client, tool id).
async fn published_tool(srv: &TestServer, user: &str, name: &str, version: &str) -> (reqwest::Client, i64) {
    let client = srv.member(user, "research").await;
    let tool = srv.create_tool(&client, name, "everyone").await;
    srv.publish(&client, tool, version).await;
    (client, tool)
}

server_test!(legacy_sse_clients_get_an_endpoint_and_their_replies_on_the_stream, |srv: TestServer| async move {
    let token = srv.token("admin").await;
    let res = reqwest::Client::new().get(srv.url("/mcp/tools/demo/echo/sse")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    assert_eq!(res.headers()["deprecation"], "@1742947200", "the transport MCP 2025-03-26 replaced");
    assert_eq!(res.headers()["link"], r#"</mcp/tools/demo/echo>; rel="successor-version""#);
    let mut events = Events { res, buf: String::new() };
    let (kind, endpoint) = events.next().await;
    assert_eq!(kind, "endpoint");
    assert!(endpoint.starts_with("/mcp/tools/demo/echo/messages?session_id="), "{endpoint}");
    let post = |body: &'static str| {
        let (url, token) = (srv.url(&endpoint), token.clone());
        async move {
            reqwest::Client::new().post(url).bearer_auth(token).header("Content-Type", "application/json").body(body).send().await.unwrap()
        }
    };
    let posted = post(INIT).await;
    assert_eq!(posted.status(), 202);
    assert_eq!(posted.headers()["deprecation"], "@1742947200");
    let init = events.message().await;
    assert_eq!(init["result"]["serverInfo"]["name"], "demo/echo", "{init}");
    assert_eq!(post(INITIALIZED).await.status(), 202);
    assert_eq!(post(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).await.status(), 202);
    assert_eq!(events.message().await["result"]["tools"][0]["name"], "echo");
    post(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"over SSE"}}}"#).await;
    assert_eq!(events.message().await["result"]["content"][0]["text"], "over SSE");

    // Bad input on the message endpoint: clear errors, the session lives on.
    let res = post("{not json").await;
    assert_eq!(res.status(), 400);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["code"], -32700);
    let res = post(r#"[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]"#).await;
    assert_eq!(res.status(), 400, "a batch is not a message");
    let unknown = reqwest::Client::new()
        .post(srv.url("/mcp/tools/demo/echo/messages?session_id=nope"))
        .bearer_auth(&token)
        .header("Content-Type", "application/json")
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    // A session answers only for the listing it was opened on.
    let elsewhere = endpoint.replace("/demo/echo/", "/demo/table/");
    let res = reqwest::Client::new()
        .post(srv.url(&elsewhere))
        .bearer_auth(&token)
        .header("Content-Type", "application/json")
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    post(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}"#).await;
    assert_eq!(events.message().await["result"]["content"][0]["text"], "still here");
});

server_test!(a_session_started_on_one_replica_continues_on_another, |srv: TestServer| async move {
    let token = srv.token("admin").await;
    let other = srv.replica().await;
    let session = Session::open(srv.url("/mcp/tools/demo/echo"), &token).await;
    let elsewhere = Session { url: other.url("/mcp/tools/demo/echo"), token: token.clone(), id: session.id.clone() };
    let replies = elsewhere.request(&call(1, "echo", json!({"text": "from the other replica"}))).await;
    assert_eq!(replies.last().unwrap()["result"]["content"][0]["text"], "from the other replica", "{replies:?}");

    let mut stream_here = session.listen().await;

    // Ending the session through one replica ends it everywhere within a second, open streams too.
    let res = reqwest::Client::new()
        .delete(other.url("/mcp/tools/demo/echo"))
        .bearer_auth(&token)
        .header("Mcp-Session-Id", &session.id)
        .header("MCP-Protocol-Version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "as the official SDKs expect");
    let ended = std::time::Instant::now();
    assert!(stream_here.ends_within(std::time::Duration::from_millis(1500)).await, "the stream on the first replica ends");
    assert!(ended.elapsed() < std::time::Duration::from_millis(1500));
    assert_eq!(session.post(&call(2, "echo", json!({"text": "x"}))).await.status(), 404, "the first replica forgot it");
    let fresh = srv.replica().await;
    let gone = Session { url: fresh.url("/mcp/tools/demo/echo"), token, id: session.id.clone() };
    assert_eq!(gone.post(&call(3, "echo", json!({"text": "x"}))).await.status(), 404);
});

process_test!(sigterm_closes_idle_event_streams_ends_subscriptions_and_the_server_exits_in_seconds, |mut srv: TestServer| async move {
    let token = srv.token("admin").await;
    let session = Session::open(srv.url("/mcp/tools/demo/echo"), &token).await;
    let mut streamable = session.listen().await;
    let res = reqwest::Client::new().get(srv.url("/mcp/tools/demo/echo/sse")).bearer_auth(&token).send().await.unwrap();
    let mut legacy = Events { res, buf: String::new() };
    assert_eq!(legacy.next().await.0, "endpoint");
    let mut listening = listen_2026(&srv.url("/mcp/tools/demo/echo"), &token, json!({"toolsListChanged": true})).await;
    assert_eq!(listening.message().await["method"], "notifications/subscriptions/acknowledged");

    let asked = std::time::Instant::now();
    assert!(srv.stops_cleanly().await);
    // Idle keep-alive connections may hold the drain its 4 s; the open streams
    // must not hold the exit to the 30 s grace. Loose enough for a loaded machine.
    assert!(asked.elapsed() < std::time::Duration::from_secs(15), "took {:?}", asked.elapsed());
    assert!(streamable.ends_within(std::time::Duration::from_secs(1)).await);
    assert!(legacy.ends_within(std::time::Duration::from_secs(1)).await);
    // The demo's seeding, just before, may still be told once
    // (`subscribe_at_once`): a spurious notice, then the final result.
    let mut last = listening.message().await;
    while last["method"] == "notifications/tools/list_changed" {
        last = listening.message().await;
    }
    assert_eq!(last["result"]["_meta"][SUBSCRIPTION_ID], "listen-1", "a subscription ends with its final result: {last}");
    assert!(listening.ends_within(std::time::Duration::from_secs(1)).await);
});

server_test!(publishing_on_one_replica_tells_sessions_on_another_that_the_tool_list_changed, |srv: TestServer| async move {
    let (client, tool) = published_tool(&srv, "carol", "greeting", "v1 says hi").await;
    let token = srv.token("carol").await;
    let other = srv.replica().await;
    let session = Session::open(other.url("/mcp/tools/research/greeting"), &token).await;
    let mut events = session.listen().await;
    srv.publish(&client, tool, "v2 says hello").await;
    assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
    let replies = session.request(&call(1, "greeting", json!({}))).await;
    assert_eq!(replies.last().unwrap()["result"]["content"][0]["text"], "v2 says hello");
});

/// A 2026-07-28 client's `subscriptions/listen` at `url` (no session: the
/// request's `_meta` says who it is), as its stream of events.
pub(crate) async fn listen_2026(url: &str, token: &str, notifications: Value) -> Events {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": {"_meta": meta, "notifications": notifications}});
    let res = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "subscriptions/listen")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    Events::from(res)
}

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

server_test!(
    a_2026_client_listening_on_one_replica_hears_of_a_publish_on_another_tagged_with_its_subscription,
    |srv: TestServer| async move {
        let (client, tool) = published_tool(&srv, "carol", "greeting", "v1 says hi").await;
        let token = srv.token("carol").await;
        let other = srv.replica().await;
        let asked = json!({"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true});
        let mut events = listen_2026(&other.url("/mcp/tools/research/greeting"), &token, asked).await;
        let ack = events.message().await;
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
        assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}), "only what is served: {ack}");
        assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], "listen-1");
        // Asking only for what is not served here: granted nothing, and not ended by a tool change.
        let mut unasked = listen_2026(&other.url("/mcp/tools/research/greeting"), &token, json!({"promptsListChanged": true})).await;
        assert_eq!(unasked.message().await["params"]["notifications"], json!({}));

        srv.publish(&client, tool, "v2 says hello").await;
        let changed = events.message().await;
        assert_eq!(changed["method"], "notifications/tools/list_changed", "{changed}");
        assert_eq!(changed["params"]["_meta"][SUBSCRIPTION_ID], "listen-1");
        // By the next change the other stream would have ended had the first one ended it.
        srv.publish(&client, tool, "v3").await;
        assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
        assert!(!unasked.ends_within(std::time::Duration::ZERO).await, "a subscription granted nothing ends only when told to");
    }
);

server_test!(disabling_a_listing_tells_its_open_sessions_that_the_tool_list_changed, |srv: TestServer| async move {
    let (_, tool) = published_tool(&srv, "carol", "greeting", "hi").await;
    let session = Session::open(srv.url("/mcp/tools/research/greeting"), &srv.token("carol").await).await;
    let mut events = session.listen().await;
    let admin = srv.admin().await;
    let (status, _) =
        srv.call(&admin, "moderation/act", &[("tool", &tool.to_string()), ("action", "disable"), ("note", "Under review.")]).await;
    assert_eq!(status, 200);
    assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
    assert_eq!(session.post(&call(1, "greeting", json!({}))).await.status(), 403, "and its calls are refused from then on");
});

server_test!(console_output_and_progress_reach_the_client_while_the_tool_runs, |srv: TestServer| async move {
    let token = srv.token("admin").await;
    let session = Session::open(srv.url("/mcp/tools/demo/countdown"), &token).await;
    let mut log = session.listen().await;
    session.request(r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"warning"}}"#).await;
    let replies = session
        .request(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"countdown","arguments":{"from":2},"_meta":{"progressToken":"t1"}}}"#)
        .await;
    let progress: Vec<_> = replies
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| (m["params"]["progress"].as_f64(), m["params"]["message"].clone()))
        .collect();
    assert_eq!(progress, [(Some(1.0), json!("2 to go")), (Some(2.0), json!("1 to go"))], "{replies:?}");
    assert_eq!(replies.last().unwrap()["result"]["content"][0]["text"], "Counted down from 2.");
    // Only lines at or above the level the client set: the warning, not the info lines.
    let m = log.message().await;
    assert_eq!(
        (m["method"].as_str(), m["params"]["level"].as_str(), m["params"]["data"].as_str()),
        (Some("notifications/message"), Some("warning"), Some("liftoff"))
    );
});

server_test!(bad_requests_get_clear_http_and_json_rpc_errors, |srv: TestServer| async move {
    let token = srv.token("admin").await;
    let url = srv.url("/mcp/tools/demo/echo");
    let send = |body: String, accept: &'static str, session: Option<&str>| {
        let mut req = reqwest::Client::new()
            .post(&url)
            .bearer_auth(&token)
            .header("Content-Type", "application/json")
            .header("Accept", accept)
            .body(body);
        if let Some(s) = session {
            req = req.header("Mcp-Session-Id", s.to_owned());
        }
        req.send()
    };
    let res = send(INIT.to_owned(), "text/html", None).await.unwrap();
    assert_eq!(res.status(), 406, "wrong Accept");
    let res = send(
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#, "x".repeat(10 * 1024 * 1024)),
        "application/json, text/event-stream",
        None,
    )
    .await;
    assert!(res.map(|r| r.status() == 413).unwrap_or(true), "a 10 MB body is refused");
    let res = send(call(1, "echo", json!({"text": "x"})), "application/json, text/event-stream", Some("no-such-session")).await.unwrap();
    assert_eq!(res.status(), 404, "unknown session");
    let res = send(call(1, "echo", json!({"text": "x"})), "application/json, text/event-stream", None).await.unwrap();
    assert_eq!(res.status(), 400, "a request without a session");
    let res = send(format!("[{INIT}]"), "application/json, text/event-stream", None).await.unwrap();
    assert!((400..500).contains(&res.status().as_u16()), "a JSON-RPC batch: {}", res.status());
    let session = Session::open(url.clone(), &token).await;
    let replies = session.request(r#"{"jsonrpc":"2.0","id":5,"method":"no/such/method"}"#).await;
    assert_eq!(replies.last().unwrap()["error"]["code"], -32601, "{replies:?}");
    let res = reqwest::Client::new().delete(&url).bearer_auth(&token).header("Mcp-Session-Id", "no-such-session").send().await.unwrap();
    assert_eq!(res.status(), 404, "deleting an unknown session");
    assert_eq!(srv.page(&srv.browser(), "/healthz").await.1, "ok");
});

server_test!(stateless_mode_answers_every_request_on_its_own, ["--mcp-sessions", "stateless"], |srv: TestServer| async move {
    let token = srv.token("admin").await;
    let (status, body) = rpc(&srv, "/mcp/tools/demo/echo", Some(&token), &call(1, "echo", json!({"text": "no session"}))).await;
    assert_eq!(status, 200);
    assert_eq!(message(&body)["result"]["content"][0]["text"], "no session");
    let res = reqwest::Client::new().delete(srv.url("/mcp/tools/demo/echo")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(res.status(), 405);

    // Console output arrives as log messages, before the result, on the request's own stream.
    let (status, body) = rpc(&srv, "/mcp/tools/demo/countdown", Some(&token), &call(2, "countdown", json!({"from": 2}))).await;
    assert_eq!(status, 200);
    let replies = messages(&body);
    let logs: Vec<&Value> = replies.iter().filter(|m| m["method"] == "notifications/message").collect();
    assert_eq!(logs.len(), 3, "{body}");
    assert_eq!((logs[0]["params"]["level"].as_str(), logs[0]["params"]["logger"].as_str()), (Some("info"), Some("demo/countdown")));
    assert_eq!(logs[2]["params"]["level"], "warning");
    assert_eq!(replies.last().unwrap()["result"]["content"][0]["text"], "Counted down from 2.");
});

server_test!(the_listing_page_may_call_with_the_session_cookie_but_other_sites_may_not, |srv: TestServer| async move {
    let alice = srv.member("alice", "finance").await;
    let post = |origin: &str| {
        alice
            .post(srv.url("/mcp/tools/demo/echo"))
            .header("Origin", origin)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(INIT)
            .send()
    };
    assert_eq!(post(&srv.base).await.unwrap().status(), 200);
    assert_eq!(post("https://evil.example").await.unwrap().status(), 401);
    // Signed out, the same-origin page gets nothing either.
    let res = srv
        .browser()
        .post(srv.url("/mcp/tools/demo/echo"))
        .header("Origin", &srv.base)
        .header("Content-Type", "application/json")
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
});

server_test!(a_call_racing_a_publish_gets_one_version_or_the_other, |srv: TestServer| async move {
    let (client, tool) = published_tool(&srv, "dave", "racer", "old").await;
    let token = srv.token("dave").await;
    let session = Session::open(srv.url("/mcp/tools/research/racer"), &token).await;
    let calls = async {
        let mut seen = Vec::new();
        for i in 0..20 {
            let replies = session.request(&call(i, "racer", json!({}))).await;
            let result = &replies.last().unwrap()["result"];
            assert_eq!(result["isError"], false, "{replies:?}");
            seen.push(result["content"][0]["text"].as_str().unwrap().to_owned());
        }
        seen
    };
    let (seen, ()) = tokio::join!(calls, srv.publish(&client, tool, "new"));
    assert!(seen.iter().all(|t| t == "old" || t == "new"), "{seen:?}");
    let replies = session.request(&call(99, "racer", json!({}))).await;
    assert_eq!(replies.last().unwrap()["result"]["content"][0]["text"], "new");
});

server_test!(a_pinned_endpoint_keeps_serving_its_version_after_later_publishes, |srv: TestServer| async move {
    let (client, greeting) = published_tool(&srv, "carol", "greeting", "v1 says hi").await;
    srv.publish(&client, greeting, "v2 says hello").await;
    // Saved, never published: only its editors may reach it by number.
    let (status, _) = srv
        .server_fn(&client, "tools/save_version", json!({"tool": greeting, "code": "return 'v3 draft';", "args": [], "changelog": "wip"}))
        .await;
    assert_eq!(status, 200);
    let text = |replies: Vec<Value>| replies.last().unwrap()["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    let pinned = Session::open(srv.url("/mcp/tools/research/greeting@v1"), &srv.token("carol").await).await;
    assert_eq!(text(pinned.request(&call(1, "greeting", json!({}))).await), "v1 says hi");
    let latest = Session::open(srv.url("/mcp/tools/research/greeting"), &srv.token("carol").await).await;
    assert_eq!(text(latest.request(&call(1, "greeting", json!({}))).await), "v2 says hello");
    let (status, init) = rpc(&srv, "/mcp/tools/research/greeting@v1", Some(&srv.token("carol").await), INIT).await;
    assert_eq!(status, 200);
    assert!(init.contains(r#""version":"v1""#), "{init}");
    // A member who may not edit it: published versions only.
    srv.joined("dave", "research", "member").await;
    let dave = srv.token("dave").await;
    assert_eq!(rpc(&srv, "/mcp/tools/research/greeting@v2", Some(&dave), INIT).await.0, 200);
    assert_eq!(rpc(&srv, "/mcp/tools/research/greeting@v3", Some(&dave), INIT).await.0, 404);
    assert_eq!(rpc(&srv, "/mcp/tools/research/greeting@v3", Some(&srv.token("carol").await), INIT).await.0, 200);
    for wrong in ["@v9", "@v0", "@3", "@latest", "@v1x"] {
        assert_eq!(rpc(&srv, &format!("/mcp/tools/research/greeting{wrong}"), Some(&dave), INIT).await.0, 404, "{wrong}");
    }
});

server_test!(a_pinned_bundle_serves_the_members_of_its_version, |srv: TestServer| async move {
    let (client, greeting) = published_tool(&srv, "carol", "greeting", "hi").await;
    let farewell = srv.create_tool(&client, "farewell", "everyone").await;
    srv.publish(&client, farewell, "bye").await;
    let bundle = srv.published_bundle(&client, json!([{"tool": greeting, "pinned_version": null, "exposed_name": ""}])).await;
    let members = json!([{"tool": greeting, "pinned_version": null, "exposed_name": ""}, {"tool": farewell, "pinned_version": null, "exposed_name": ""}]);
    srv.publish_bundle(&client, bundle, members).await;
    let names = |session: Session| async move {
        let listed = session.request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).await;
        let tools = listed.last().unwrap()["result"]["tools"].as_array().unwrap().clone();
        tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    let token = srv.token("carol").await;
    assert_eq!(names(Session::open(srv.url("/mcp/bundles/research/kit@v1"), &token).await).await, ["greeting"]);
    assert_eq!(names(Session::open(srv.url("/mcp/bundles/research/kit"), &token).await).await, ["greeting", "farewell"]);
});

server_test!(a_bundle_endpoint_serves_pinned_and_following_tools_under_their_names, |srv: TestServer| async move {
    let (client, greeting) = published_tool(&srv, "carol", "greeting", "v1 says hi").await;
    srv.publish(&client, greeting, "v2 says hello").await;
    let members = json!([
        {"tool": greeting, "pinned_version": 1, "exposed_name": "greeting_v1"},
        {"tool": greeting, "pinned_version": null, "exposed_name": ""},
    ]);
    let bundle = srv.published_bundle(&client, members).await;
    let token = srv.token("carol").await;
    let session = Session::open(srv.url("/mcp/bundles/research/kit"), &token).await;
    let listed = session.request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).await;
    let names: Vec<&str> =
        listed.last().unwrap()["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["greeting_v1", "greeting"]);
    let text = |replies: Vec<Value>| replies.last().unwrap()["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert_eq!(text(session.request(&call(2, "greeting_v1", json!({}))).await), "v1 says hi");
    assert_eq!(text(session.request(&call(3, "greeting", json!({}))).await), "v2 says hello");
    let unknown = session.request(&call(4, "nope", json!({}))).await;
    assert_eq!(unknown.last().unwrap()["error"]["code"], -32602, "{unknown:?}");
    // The bundle is not a tool endpoint, and a tool's endpoint is not a bundle's.
    assert_eq!(rpc(&srv, "/mcp/tools/research/kit", Some(&token), INIT).await.0, 404);
    assert_eq!(rpc(&srv, "/mcp/bundles/research/greeting", Some(&token), INIT).await.0, 404);

    let url = srv.db.url.clone();
    srv.flush_usage().await;
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let rows: Vec<(i64, Option<i64>, Option<i64>)> =
        sqlx::query_as("SELECT tool_id, version, bundle_id FROM usage_records ORDER BY id").fetch_all(&pool).await.unwrap();
    assert_eq!(rows, [(greeting, Some(1), Some(bundle)), (greeting, Some(2), Some(bundle))], "calls count for the tool and the bundle");
});

server_test!(a_bundle_in_code_mode_lists_run_code_which_calls_two_members, |srv: TestServer| async move {
    let (client, greeting) = published_tool(&srv, "carol", "greeting", "hi").await;
    let farewell = srv.create_tool(&client, "farewell", "everyone").await;
    srv.publish(&client, farewell, "bye").await;
    let members = json!([{"tool": greeting, "pinned_version": null, "exposed_name": ""}, {"tool": farewell, "pinned_version": null, "exposed_name": ""}]);
    let bundle = srv.published_bundle(&client, members).await;
    let session = Session::open(srv.url("/mcp/bundles/research/kit"), &srv.token("carol").await).await;
    let mut events = session.listen().await;
    let (status, info) = srv.call(&client, "bundles/code_mode", &[("bundle", &bundle.to_string()), ("mode", "instead")]).await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(info["code_mode"], "instead");
    assert_eq!(events.message().await["method"], "notifications/tools/list_changed");

    let listed = session.request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).await;
    let tools = listed.last().unwrap()["result"]["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["name"], "run_code");
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["code"]));
    let description = tools[0]["description"].as_str().unwrap();
    assert!(
        description.contains("greeting(input: GreetingInput): Promise<GreetingOutput>;") && description.contains("farewell("),
        "{description}"
    );

    let code = "const a = await tools.greeting({});\nconst b = await tools.farewell({});\nconsole.log(a, b);\nreturn [a, b].length;";
    let result = session.request(&call(2, "run_code", json!({"code": code}))).await.last().unwrap()["result"].clone();
    assert_eq!(result["content"][0]["text"], "hi bye\n2", "{result}");
    assert_eq!(result["isError"], false);
    let result = session.request(&call(3, "run_code", json!({"code": "while (true) {}"}))).await.last().unwrap()["result"].clone();
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["content"][0]["text"], "Timed out after 2000 ms");
    let result = session.request(&call(4, "run_code", json!({"code": "\nawait tools.nope({});"}))).await.last().unwrap()["result"].clone();
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["content"][0]["text"], "Error: there is no tool “nope” here; the tools are: greeting, farewell (line 2)");
    let result = session.request(&call(5, "run_code", json!({"source": "x"}))).await.last().unwrap()["result"].clone();
    assert_eq!(result["isError"], true, "{result}");
    // The members are not served one by one in this mode.
    assert_eq!(session.request(&call(6, "greeting", json!({}))).await.last().unwrap()["error"]["code"], -32602);
    // An open event stream would hold the graceful shutdown up.
    drop(events);
    drop(session);

    let url = srv.db.url.clone();
    srv.flush_usage().await;
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let rows: Vec<(i64, Option<i64>, String)> =
        sqlx::query_as("SELECT tool_id, bundle_id, transport FROM usage_records ORDER BY id").fetch_all(&pool).await.unwrap();
    let through = |tool| (tool, Some(bundle), "mcp-http+run_code".to_owned());
    assert_eq!(rows, [through(greeting), through(farewell)]);
});

server_test!(a_change_made_during_the_handshake_is_told_once_the_client_is_initialized, |srv: TestServer| async move {
    let (client, greeting) = published_tool(&srv, "carol", "greeting", "v1 says hi").await;
    let session = Session::initialize(srv.url("/mcp/tools/research/greeting"), &srv.token("carol").await).await;
    let mut changes = srv.listing_changes().await;
    srv.publish(&client, greeting, "v2 says hello").await;
    assert_eq!(&*changes.recv().await.unwrap(), "tool:research/greeting", "the change feed has told the sessions");
    let mut events = session.listen().await;
    session.initialized().await;
    assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
});

server_test!(a_bundle_session_hears_when_a_followed_member_publishes, |srv: TestServer| async move {
    let (client, greeting) = published_tool(&srv, "carol", "greeting", "v1 says hi").await;
    srv.published_bundle(&client, json!([{"tool": greeting, "pinned_version": null, "exposed_name": "hello"}])).await;
    let token = srv.token("carol").await;
    let other = srv.replica().await;
    let session = Session::open(other.url("/mcp/bundles/research/kit"), &token).await;
    let mut events = session.listen().await;
    srv.publish(&client, greeting, "v2 says hello").await;
    assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
    let replies = session.request(&call(1, "hello", json!({}))).await;
    assert_eq!(replies.last().unwrap()["result"]["content"][0]["text"], "v2 says hello");
});

server_test!(a_bundle_speaks_the_legacy_sse_transport_too, |srv: TestServer| async move {
    let (client, greeting) = published_tool(&srv, "carol", "greeting", "hi").await;
    srv.published_bundle(&client, json!([{"tool": greeting, "pinned_version": null, "exposed_name": "hello"}])).await;
    let token = srv.token("carol").await;
    let res = reqwest::Client::new().get(srv.url("/mcp/bundles/research/kit/sse")).bearer_auth(&token).send().await.unwrap();
    let mut events = Events { res, buf: String::new() };
    let (_, endpoint) = events.next().await;
    assert!(endpoint.starts_with("/mcp/bundles/research/kit/messages?session_id="), "{endpoint}");
    let post = |body: String| {
        let (url, token) = (srv.url(&endpoint), token.clone());
        async move {
            reqwest::Client::new().post(url).bearer_auth(token).header("Content-Type", "application/json").body(body).send().await.unwrap()
        }
    };
    post(INIT.into()).await;
    assert_eq!(events.message().await["result"]["serverInfo"]["name"], "research/kit");
    post(INITIALIZED.into()).await;
    post(call(1, "hello", json!({}))).await;
    assert_eq!(events.message().await["result"]["content"][0]["text"], "hi");
});

server_test!(a_member_hidden_by_an_admin_leaves_the_bundle_and_its_sessions_hear_of_it, |srv: TestServer| async move {
    let (client, greeting) = published_tool(&srv, "carol", "greeting", "hi").await;
    let farewell = srv.create_tool(&client, "farewell", "everyone").await;
    srv.publish(&client, farewell, "bye").await;
    srv.published_bundle(
        &client,
        json!([
            {"tool": greeting, "pinned_version": null, "exposed_name": ""},
            {"tool": farewell, "pinned_version": 1, "exposed_name": ""},
        ]),
    )
    .await;
    let session = Session::open(srv.url("/mcp/bundles/research/kit"), &srv.token("carol").await).await;
    let mut events = session.listen().await;
    let admin = srv.admin().await;
    let (status, _) = srv.call(&admin, "moderation/act", &[("tool", &farewell.to_string()), ("action", "hide"), ("note", "Spam.")]).await;
    assert_eq!(status, 200);
    assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
    let listed = session.request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).await;
    let names: Vec<&str> =
        listed.last().unwrap()["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["greeting"], "a hidden tool is served by no bundle, pinned or not");
    let refused = session.request(&call(2, "farewell", json!({}))).await;
    assert_eq!(refused.last().unwrap()["error"]["code"], -32602);

    // Disabling the bundle itself refuses its endpoint, with a clear message.
    let res = client
        .post(srv.url("/api/bundles/detail"))
        .header("Accept", "application/json")
        .form(&[("department", "research"), ("name", "kit")])
        .send()
        .await
        .unwrap();
    let bundle = res.json::<Value>().await.unwrap()["listing"]["id"].as_i64().unwrap();
    let (status, _) =
        srv.call(&admin, "moderation/act", &[("tool", &bundle.to_string()), ("action", "disable"), ("note", "Broken.")]).await;
    assert_eq!(status, 200);
    assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
    let res = session.post(&call(3, "greeting", json!({}))).await;
    assert_eq!(res.status(), 403);
    assert!(res.text().await.unwrap().contains("disabled by an administrator"));
});

async fn get_api(srv: &TestServer, path: &str, token: Option<&str>) -> (u16, String, String) {
    let mut req = reqwest::Client::new().get(srv.url(path));
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let res = req.send().await.unwrap();
    let content_type = res.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    (res.status().as_u16(), content_type, res.text().await.unwrap())
}

server_test!(a_tools_typescript_api_is_served_at_api_d_ts_behind_the_token_check, |srv: TestServer| async move {
    assert_eq!(get_api(&srv, "/mcp/tools/demo/echo/api.d.ts", None).await.0, 401);
    assert_eq!(get_api(&srv, "/mcp/tools/demo/echo/api.d.ts", Some("tsk_wrong")).await.0, 401);
    let token = srv.token("admin").await;
    assert_eq!(get_api(&srv, "/mcp/tools/demo/nope/api.d.ts", Some(&token)).await.0, 404);
    assert_eq!(get_api(&srv, "/mcp/bundles/demo/echo/api.d.ts", Some(&token)).await.0, 404, "a tool is not a bundle");

    let (status, content_type, body) = get_api(&srv, "/mcp/tools/demo/echo/api.d.ts", Some(&token)).await;
    assert_eq!((status, content_type.as_str()), (200, "application/typescript; charset=utf-8"));
    assert_eq!(
        body,
        "// The TypeScript API of demo/echo, generated by Toolshed from its tools' JSON Schemas.\n\n\
         /** Arguments of `echo`. */\n\
         export interface EchoInput {\n  /**\n   * The text to send back\n   * @example \"Hello, Toolshed\"\n   */\n  text: string;\n}\n\n\
         /** `echo` declares no output schema: text, or any JSON value. */\n\
         export type EchoOutput = unknown;\n\n\
         declare const tools: {\n  /**\n   * Returns its `text` argument unchanged.\n   *\n   * Use it to check that a client is connected and can call tools.\n   */\n\
         \x20 echo(input: EchoInput): Promise<EchoOutput>;\n};\n"
    );
});

server_test!(a_private_tool_or_one_outside_the_token_scope_has_no_api_d_ts, |srv: TestServer| async move {
    let (client, _) = published_tool(&srv, "dave", "secret", "psst").await;
    let private = srv.create_tool(&client, "mine_only", "private").await;
    srv.publish(&client, private, "mine").await;
    srv.member("erin", "sales").await;
    let token = srv.token("erin").await;
    assert_eq!(get_api(&srv, "/mcp/tools/research/mine_only/api.d.ts", Some(&token)).await.0, 404);
    let own = srv.token("dave").await;
    assert_eq!(get_api(&srv, "/mcp/tools/research/mine_only/api.d.ts", Some(&own)).await.0, 200);
    let (status, scoped) =
        srv.call(&client, "tokens/create", &[("name", "one tool"), ("expires_in_days", ""), ("scope", "research/secret")]).await;
    assert_eq!(status, 200, "{scoped}");
    let scoped = scoped.as_str().unwrap();
    assert_eq!(get_api(&srv, "/mcp/tools/research/secret/api.d.ts", Some(scoped)).await.0, 200);
    assert_eq!(get_api(&srv, "/mcp/tools/research/mine_only/api.d.ts", Some(scoped)).await.0, 404);
});

server_test!(a_bundles_typescript_api_declares_every_member_it_serves, |srv: TestServer| async move {
    let token = srv.token("admin").await;
    let (status, _, body) = get_api(&srv, "/mcp/bundles/demo/text_kit/api.d.ts", Some(&token)).await;
    assert_eq!(status, 200);
    for line in [
        "  echo(input: EchoInput): Promise<EchoOutput>;",
        "  word_stats(input: WordStatsInput): Promise<WordStatsOutput>;",
        "  table(input: TableInput): Promise<TableOutput>;",
        "export interface TableInput {",
        "  columns?: string[];",
    ] {
        assert!(body.contains(line), "{line:?} in\n{body}");
    }
});

server_test!(the_listing_page_gets_the_typescript_api_openai_functions_and_token_costs, |srv: TestServer| async move {
    let admin = srv.admin().await;
    let bundle = admin
        .post(srv.url("/api/bundles/detail"))
        .header("Accept", "application/json")
        .form(&[("department", "demo"), ("name", "text_kit")])
        .send()
        .await
        .unwrap();
    let id = bundle.json::<Value>().await.unwrap()["listing"]["id"].as_i64().unwrap();
    let (status, api) = srv.call(&admin, "listings/api", &[("listing", &id.to_string())]).await;
    assert_eq!(status, 200, "{api}");
    assert!(api["typescript"].as_str().unwrap().contains("declare const tools: {"));
    assert!(api["typescript_url"].as_str().unwrap().ends_with("/mcp/bundles/demo/text_kit/api.d.ts"));
    let functions: Value = serde_json::from_str(api["openai"].as_str().unwrap()).unwrap();
    let names: Vec<&str> = functions.as_array().unwrap().iter().map(|f| f["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["text_kit__echo", "text_kit__table", "text_kit__word_stats"]);
    assert_eq!(functions[0]["type"], "function");
    assert_eq!(functions[0]["function"]["strict"], false, "echo's schema has examples: not strict");
    assert_eq!(functions[0]["function"]["parameters"]["required"], json!(["text"]));
    assert!(api["tools_list_tokens"].as_u64().unwrap() > 100);
    assert!(api["code_mode_tokens"].as_u64().unwrap() > 100);

    let stranger = srv.browser();
    let (status, _) = srv.call(&stranger, "listings/api", &[("listing", &id.to_string())]).await;
    assert_eq!(status, 401);
});

/// Cuts this test's PostgreSQL database off (no new connections, the open ones
/// ended), or lets it back: an outage of the database alone.
async fn postgres_outage(srv: &TestServer, down: bool) {
    let admin = toolshed_domain::store::Db::connect(&std::env::var(crate::common::POSTGRES_URL_VAR).unwrap()).await.unwrap();
    let name = srv.db.url.rsplit('/').next().unwrap();
    sqlx::query(&format!("ALTER DATABASE {name} WITH ALLOW_CONNECTIONS {}", !down)).execute(admin.pool()).await.unwrap();
    if down {
        let kill = format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'");
        sqlx::query(&kill).execute(admin.pool()).await.unwrap();
    }
    admin.close().await;
}

#[tokio::test]
async fn a_database_outage_gets_a_json_rpc_error_and_calls_recover_without_a_restart() {
    if !crate::common::postgres_available() {
        return;
    }
    let srv = TestServer::start_with(toolshed_domain::store::Backend::Postgres, &[]).await;
    crate::common::within_time_limit(async move {
        let (known, fresh) = (srv.token("admin").await, srv.token("admin").await);
        assert_eq!(rpc(&srv, "/mcp/tools/demo/echo", Some(&known), INIT).await.0, 200);

        postgres_outage(&srv, true).await;
        let (status, body) = rpc(&srv, "/mcp/tools/demo/echo", Some(&fresh), INIT).await;
        assert_eq!(status, 503, "{body}");
        let error: Value = serde_json::from_str(&body).expect("a JSON-RPC error, not an empty body");
        assert_eq!((error["jsonrpc"].as_str(), error["error"]["code"].as_i64()), (Some("2.0"), Some(-32603)), "{error}");
        assert!(error["error"]["message"].as_str().unwrap().contains("database"), "{error}");

        postgres_outage(&srv, false).await;
        // The pool finds the database back only by connecting again, on a
        // request: nothing tells of it but an answer, so ask until one comes.
        let back = std::time::Instant::now();
        loop {
            let (status, body) = rpc(&srv, "/mcp/tools/demo/echo", Some(&fresh), INIT).await;
            if status == 200 {
                break;
            }
            assert!(back.elapsed() < std::time::Duration::from_secs(30), "still {status} {body}");
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    })
    .await;
}

process_test!(
    a_shutdown_under_load_answers_or_refuses_every_call_but_never_resets_one,
    ["--mcp-sessions", "stateless"],
    |mut srv: TestServer| async move {
        let token = srv.token("admin").await;
        let url = srv.url("/mcp/tools/demo/echo");
        // Stateless JSON-RPC calls on kept-alive connections, eight at a time, until the server is gone.
        let (answers, mut answered_so_far) = tokio::sync::mpsc::unbounded_channel();
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let (url, token, answers) = (url.clone(), token.clone(), answers.clone());
                tokio::spawn(async move {
                    let client = reqwest::Client::new();
                    let (mut answered, mut refused, mut broken) = (0, 0, Vec::new());
                    for i in 0..100_000 {
                        let res = client
                            .post(&url)
                            .bearer_auth(&token)
                            .header("Content-Type", "application/json")
                            .header("Accept", "application/json, text/event-stream")
                            .body(INIT)
                            .send()
                            .await;
                        match res {
                            Ok(r) => match r.text().await {
                                Ok(_) => {
                                    answered += 1;
                                    let _ = answers.send(());
                                }
                                Err(e) => broken.push(format!("call {i}: body: {e:?}")),
                            },
                            Err(e) if e.is_connect() => {
                                refused += 1;
                                if refused > 3 {
                                    break;
                                }
                            }
                            Err(e) => broken.push(format!("call {i}: {e:?}")),
                        }
                    }
                    (answered, refused, broken)
                })
            })
            .collect();
        // Stopped under load: a hundred calls answered, and the workers calling on.
        for _ in 0..100 {
            answered_so_far.recv().await.expect("the load runs");
        }
        assert!(srv.stops_cleanly().await);
        let mut total = 0;
        for w in workers {
            let (answered, _, broken) = w.await.unwrap();
            total += answered;
            assert!(broken.is_empty(), "calls cut off by the shutdown: {broken:?}");
        }
        assert!(total > 100, "the load ran: {total} calls answered");
    }
);

server_test!(a_session_answers_only_the_user_who_opened_it, |srv: TestServer| async move {
    srv.member("mallory", "research").await;
    let (admin, mallory) = (srv.token("admin").await, srv.token("mallory").await);
    const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let url = srv.url("/mcp/tools/demo/echo");
    let session = Session::open(url.clone(), &admin).await;
    // Mallory may call demo/echo herself, but not in the admin's session.
    let stolen = Session { url: url.clone(), token: mallory.clone(), id: session.id.clone() };
    assert_eq!(stolen.post(LIST).await.status(), 404);
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let res = reqwest::Client::new()
            .request(method.clone(), &url)
            .bearer_auth(&mallory)
            .header("Accept", "text/event-stream")
            .header("Mcp-Session-Id", &session.id)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 404, "{method}");
    }
    // Nor the same session on another listing.
    let moved = Session { url: srv.url("/mcp/tools/demo/table"), token: admin.clone(), id: session.id.clone() };
    assert_eq!(moved.post(LIST).await.status(), 404);
    assert_eq!(session.request(LIST).await.last().unwrap()["result"]["tools"][0]["name"], "echo");

    // The legacy transport: the admin's stream, Mallory's POST.
    let res = reqwest::Client::new().get(srv.url("/mcp/tools/demo/echo/sse")).bearer_auth(&admin).send().await.unwrap();
    let mut events = Events { res, buf: String::new() };
    let endpoint = events.next().await.1;
    let post = |token: String| {
        let url = srv.url(&endpoint);
        async move {
            let res = reqwest::Client::new().post(url).bearer_auth(token).header("Content-Type", "application/json").body(INIT).send();
            res.await.unwrap().status()
        }
    };
    assert_eq!(post(mallory.clone()).await, 404);
    assert_eq!(post(admin.clone()).await, 202);
    assert_eq!(events.message().await["result"]["serverInfo"]["name"], "demo/echo");
});

process_test!(
    sessions_clients_never_end_stay_in_the_database_not_in_memory,
    ["--metrics-token", crate::metrics::TOKEN],
    |srv: TestServer| async move {
        let token = srv.token("admin").await;
        let url = srv.url("/mcp/tools/demo/echo");
        let srv = &srv;
        let open = |n: usize| {
            let (url, token) = (url.clone(), token.clone());
            async move {
                let mut sessions = Vec::new();
                for _ in 0..n / 25 {
                    sessions.extend(futures::future::join_all((0..25).map(|_| Session::open(url.clone(), &token))).await);
                }
                // The keeper moves the oldest out of memory inside the server
                // process; its sessions gauge is what tells of it from here.
                let since = std::time::Instant::now();
                while crate::metrics::gauge(srv, r#"toolshed_mcp_sessions{transport="mcp-http"}"#).await > 500 {
                    assert!(since.elapsed() < std::time::Duration::from_secs(20), "the server still holds more than 500 sessions");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                sessions
            }
        };
        let before = srv.rss_kib();
        let first = open(500).await;
        let per_held_kib = (srv.rss_kib() - before) / 500;
        open(1_000).await;
        let settled = srv.rss_kib();
        let more = open(1_500).await;
        let grew_kib = srv.rss_kib().saturating_sub(settled);
        // Before, every session ever opened stayed held (5,000 took ~370 MiB) until it idled out.
        assert!(
            grew_kib < 1_500 * per_held_kib / 3,
            "1,500 more abandoned sessions grew the server by {grew_kib} KiB; a held session takes {per_held_kib} KiB"
        );
        // The oldest left memory, not the database: they answer as before.
        const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        for session in [&first[0], &first[499], &more[1_499]] {
            assert_eq!(session.request(LIST).await.last().unwrap()["result"]["tools"][0]["name"], "echo");
        }
    }
);
