//! A small, tolerant MCP client over Streamable HTTP and the legacy HTTP+SSE
//! transport: initialize, `tools/list`, `tools/call`.
//!
//! Why not rmcp's client: real servers answer a POST with plain JSON, with an
//! SSE stream, or with a banner, a BOM or log lines before the JSON; rmcp's
//! transport refuses anything but a well-formed body of the announced content
//! type, and gives no way to say *what* came back. This one reads the body as
//! it arrives and takes the first JSON-RPC response with the id it waits for,
//! wherever it stands (a `data:` line, after junk), so one parser serves both
//! transports and every answer shape; what cannot be parsed is reported with a
//! snippet of what was received.

use std::time::Duration;

use serde_json::{json, Value};
use url::Url;

/// The protocol revision we speak; servers answer with theirs.
const PROTOCOL_VERSION: &str = "2025-06-18";
/// Bounds what one answer may make us buffer.
const MAX_BODY: usize = 8 << 20;
/// `tools/list` pages followed at most.
const MAX_PAGES: usize = 50;

/// How Toolshed reaches a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    StreamableHttp,
    Sse,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::StreamableHttp => "streamable_http",
            Transport::Sse => "sse",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "streamable_http" => Some(Transport::StreamableHttp),
            "sse" => Some(Transport::Sse),
            _ => None,
        }
    }
}

/// The credential sent with every request, opened from the database.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    None,
    Header { name: String, value: String },
    Query { name: String, value: String },
}

/// Where and how to reach one server.
#[derive(Clone)]
pub struct Endpoint {
    pub url: Url,
    pub transport: Transport,
    pub credential: Credential,
}

/// Why talking to a server failed, in words for the admin's status column and
/// for the model that called the tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("could not reach the server: {0}")]
    Unreachable(String),
    #[error("the server answered HTTP {status}{}", snippet_suffix(.body))]
    Http { status: u16, body: String },
    #[error("the server closed the connection before answering{}", snippet_suffix(.0))]
    Closed(String),
    #[error("the server's answer is not MCP (no JSON-RPC response found){}", snippet_suffix(.0))]
    Junk(String),
    #[error("the server refused: {message} (JSON-RPC {code})")]
    Rpc { code: i64, message: String },
    #[error("the server did not answer within {0} ms")]
    Timeout(u64),
}

fn snippet_suffix(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!("; it sent {s}")
    }
}

/// What a server sent, described, never quoted: a status line is shown to
/// whoever manages the server and to models, and must not become a way to
/// read pages through it.
fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let trimmed = text.trim_start();
    let kind = if serde_json::from_slice::<serde_json::Value>(bytes).is_ok() {
        "JSON"
    } else if trimmed.starts_with('<') {
        "HTML or XML"
    } else if trimmed.starts_with("event:") || trimmed.starts_with("data:") {
        "server-sent events"
    } else {
        "text"
    };
    match bytes.len() {
        0 => String::new(),
        n => format!("{n} bytes of {kind}"),
    }
}

/// Finds, in bytes received so far, the JSON-RPC response with `id`. `from`
/// remembers where scanning may resume: objects wholly before it were seen.
/// `None`: not there yet (an incomplete object may still complete).
fn find_response(buf: &[u8], id: i64, from: &mut usize) -> Option<Value> {
    let mut pos = *from;
    while let Some(off) = buf[pos..].iter().position(|&b| b == b'{') {
        let start = pos + off;
        let mut values = serde_json::Deserializer::from_slice(&buf[start..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(v)) => {
                let end = start + values.byte_offset();
                if v.get("id").and_then(Value::as_i64) == Some(id) && (v.get("result").is_some() || v.get("error").is_some()) {
                    *from = end;
                    return Some(v);
                }
                // A notification, another id's answer, or stray JSON: step over it.
                pos = end;
                *from = end;
            }
            Some(Err(e)) if e.is_eof() => {
                *from = start; // wait for more bytes, then try this object again
                return None;
            }
            _ => {
                pos = start + 1;
                *from = pos;
            }
        }
    }
    None
}

/// A response body read as it arrives.
struct Body {
    res: reqwest::Response,
    buf: Vec<u8>,
    scanned: usize,
    done: bool,
}

impl Body {
    fn new(res: reqwest::Response) -> Self {
        Self { res, buf: Vec::new(), scanned: 0, done: false }
    }

    /// Reads until the response to `id` arrives or the body ends.
    async fn response(&mut self, id: i64) -> Result<Value, ClientError> {
        loop {
            if let Some(v) = find_response(&self.buf, id, &mut self.scanned) {
                return rpc_result(v);
            }
            if self.done || !self.more().await? {
                return Err(if self.buf.iter().all(u8::is_ascii_whitespace) {
                    ClientError::Closed(String::new())
                } else {
                    ClientError::Junk(snippet(&self.buf))
                });
            }
        }
    }

    /// Reads the next chunk; `false` at the end of the body.
    async fn more(&mut self) -> Result<bool, ClientError> {
        match self.res.chunk().await {
            Ok(Some(chunk)) => {
                if self.buf.len() + chunk.len() > MAX_BODY {
                    return Err(ClientError::Junk(format!("more than {MAX_BODY} bytes without an answer")));
                }
                self.buf.extend_from_slice(&chunk);
                Ok(true)
            }
            Ok(None) => {
                self.done = true;
                Ok(false)
            }
            Err(e) => Err(ClientError::Closed(snippet_or(&self.buf, &e))),
        }
    }
}

fn snippet_or(buf: &[u8], e: &reqwest::Error) -> String {
    if buf.is_empty() {
        root_cause(e)
    } else {
        snippet(buf)
    }
}

/// reqwest's outermost message ("error sending request") says little; the
/// innermost cause says what happened (connection refused, reset, …).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

fn rpc_result(v: Value) -> Result<Value, ClientError> {
    if let Some(err) = v.get("error") {
        return Err(ClientError::Rpc {
            code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: err.get("message").and_then(Value::as_str).unwrap_or("no message").to_owned(),
        });
    }
    Ok(v.get("result").cloned().unwrap_or(Value::Null))
}

/// One conversation with a server: the handshake, then requests.
pub struct Connection {
    http: reqwest::Client,
    endpoint: Endpoint,
    next_id: i64,
    channel: Channel,
}

enum Channel {
    /// Each request is a POST; answers come in its body.
    Streamable { session: Option<String> },
    /// Requests are POSTed to `post_url`; answers come on the open GET stream.
    Sse { post_url: Url, stream: Box<Body> },
}

impl Connection {
    /// Connects and completes the handshake. Nothing here has a time limit of
    /// its own: callers bound a whole conversation with [`within`].
    pub async fn open(http: &reqwest::Client, endpoint: &Endpoint) -> Result<Self, ClientError> {
        let channel = match endpoint.transport {
            Transport::StreamableHttp => Channel::Streamable { session: None },
            Transport::Sse => {
                let res = send(
                    authorize(http.get(with_query(&endpoint.url, &endpoint.credential)), &endpoint.credential)
                        .header("accept", "text/event-stream"),
                )
                .await?;
                let mut stream = Body::new(res);
                let post_url = sse_endpoint(&mut stream, &endpoint.url).await?;
                Channel::Sse { post_url: with_query(&post_url, &endpoint.credential), stream: Box::new(stream) }
            }
        };
        let mut conn = Self { http: http.clone(), endpoint: endpoint.clone(), next_id: 0, channel };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "toolshed", "version": env!("CARGO_PKG_VERSION")},
        });
        conn.request("initialize", params).await?;
        conn.notify("notifications/initialized").await?;
        Ok(conn)
    }

    /// Every tool the server lists, following pages.
    pub async fn list_tools(&mut self) -> Result<Vec<Value>, ClientError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self.request("tools/list", params).await?;
            tools.extend(page.get("tools").and_then(Value::as_array).cloned().unwrap_or_default());
            cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }

    /// The server's `CallToolResult`, as it sent it.
    pub async fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, ClientError> {
        self.request("tools/call", json!({"name": name, "arguments": arguments})).await
    }

    /// Ends a Streamable HTTP session (a stateful server keeps it until told;
    /// the legacy stream ends when dropped). Best effort: nobody waits for it.
    pub async fn close(self) {
        if let Channel::Streamable { session: Some(s) } = &self.channel {
            let credential = &self.endpoint.credential;
            let req = self
                .http
                .delete(with_query(&self.endpoint.url, credential))
                .header("mcp-session-id", s.as_str())
                .header("mcp-protocol-version", PROTOCOL_VERSION);
            let _ = tokio::time::timeout(Duration::from_secs(5), authorize(req, credential).send()).await;
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let res = self.post(&message).await?;
        match &mut self.channel {
            Channel::Streamable { session } => {
                if let Some(s) = res.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
                    *session = Some(s.to_owned());
                }
                Body::new(res).response(id).await
            }
            Channel::Sse { stream, .. } => stream.response(id).await,
        }
    }

    async fn notify(&mut self, method: &str) -> Result<(), ClientError> {
        self.post(&json!({"jsonrpc": "2.0", "method": method})).await.map(drop)
    }

    async fn post(&self, message: &Value) -> Result<reqwest::Response, ClientError> {
        let credential = &self.endpoint.credential;
        let req = match &self.channel {
            Channel::Streamable { session } => {
                let mut req = self
                    .http
                    .post(with_query(&self.endpoint.url, credential))
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", PROTOCOL_VERSION);
                if let Some(s) = session {
                    req = req.header("mcp-session-id", s);
                }
                req
            }
            Channel::Sse { post_url, .. } => self.http.post(post_url.clone()),
        };
        send(authorize(req, credential).json(message)).await
    }
}

/// Reads the legacy transport's `endpoint` event: where to POST messages.
async fn sse_endpoint(stream: &mut Body, base: &Url) -> Result<Url, ClientError> {
    loop {
        let text = String::from_utf8_lossy(&stream.buf);
        let mut event = "";
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            if let Some(name) = line.strip_prefix("event:") {
                event = name.trim();
            } else if let Some(data) = line.strip_prefix("data:").filter(|_| event == "endpoint") {
                let url = base.join(data.trim()).map_err(|e| ClientError::Junk(format!("endpoint event {:?}: {e}", data.trim())))?;
                // Messages carry the credential: they go to the registered origin only.
                if url.origin() != base.origin() {
                    return Err(ClientError::Junk(format!(
                        "the endpoint event names another origin ({}); messages go only to the server's own",
                        url.origin().ascii_serialization()
                    )));
                }
                return Ok(url);
            }
        }
        if !stream.more().await? {
            return Err(ClientError::Junk(format!("no endpoint event on the SSE stream{}", snippet_suffix(&snippet(&stream.buf)))));
        }
    }
}

/// `work`, or [`ClientError::Timeout`] once `limit` has passed.
pub async fn within<T>(limit: Duration, work: impl std::future::Future<Output = Result<T, ClientError>>) -> Result<T, ClientError> {
    tokio::time::timeout(limit, work).await.unwrap_or(Err(ClientError::Timeout(limit.as_millis() as u64)))
}

async fn send(mut req: reqwest::RequestBuilder) -> Result<reqwest::Response, ClientError> {
    for (name, value) in crate::sandbox::trace::headers(&tracing::Span::current()) {
        req = req.header(name, value);
    }
    let res = req.send().await.map_err(|e| ClientError::Unreachable(root_cause(&e)))?;
    let status = res.status();
    if status.is_success() {
        return Ok(res);
    }
    let body = res.bytes().await.map(|b| snippet(&b)).unwrap_or_default();
    Err(ClientError::Http { status: status.as_u16(), body })
}

fn authorize(req: reqwest::RequestBuilder, credential: &Credential) -> reqwest::RequestBuilder {
    match credential {
        Credential::Header { name, value } => req.header(name.as_str(), value.as_str()),
        _ => req,
    }
}

fn with_query(url: &Url, credential: &Credential) -> Url {
    let mut url = url.clone();
    if let Credential::Query { name, value } = credential {
        url.query_pairs_mut().append_pair(name, value);
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(buf: &str, id: i64) -> Option<Value> {
        find_response(buf.as_bytes(), id, &mut 0)
    }

    #[test]
    fn the_response_is_found_in_plain_json_sse_and_after_junk() {
        let ok = json!({"jsonrpc": "2.0", "id": 2, "result": {"x": 1}});
        assert_eq!(find(&ok.to_string(), 2), Some(ok.clone()));
        let sse =
            format!("event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}}\n\nevent: message\ndata: {ok}\n\n");
        assert_eq!(find(&sse, 2), Some(ok.clone()));
        let junk = format!("\u{feff}Starting server... {{not json}} [warn] {{\"id\": 1, \"result\": 0}}\n{ok}");
        assert_eq!(find(&junk, 2), Some(ok));
    }

    #[test]
    fn an_incomplete_answer_waits_for_more_bytes_and_resumes_where_it_stopped() {
        let full = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}).to_string();
        let (head, _) = full.split_at(full.len() - 4);
        let mut from = 0;
        assert_eq!(find_response(format!("junk {head}").as_bytes(), 1, &mut from), None);
        assert_eq!(from, 5, "scanning resumes at the incomplete object");
        assert!(find_response(format!("junk {full}").as_bytes(), 1, &mut from).is_some());
    }

    #[test]
    fn a_body_without_a_response_is_described_never_quoted() {
        assert_eq!(find("<html>502 Bad Gateway</html>", 1), None);
        assert_eq!(snippet(b"<html>\n  502 Bad   Gateway\n</html>"), "34 bytes of HTML or XML");
        assert_eq!(snippet(br#"{"secret": "internal page"}"#), "27 bytes of JSON");
        assert_eq!(snippet(b"root:x:0:0"), "10 bytes of text");
        assert_eq!(snippet(b""), "");
    }
}
