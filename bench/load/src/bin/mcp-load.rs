//! `mcp-load`: an end-to-end load generator for one MCP tool over Streamable HTTP.
//!
//! `concurrency` workers share one HTTP/1.1 keep-alive connection pool and call
//! the `echo`-like tool `--tool` with `{"<arg>": "<unique text>"}` until `--requests`
//! calls were measured or `--max-seconds` passed, whichever comes first (plus an
//! unmeasured warm-up). A call counts as OK only if it is a JSON-RPC result, not
//! `isError`, whose first text content is exactly the text sent. Anything else is
//! an error, reported by kind; more than `--max-error-rate` of them fails the run.
//!
//! * `stateful`: each worker sends `initialize`, keeps its `Mcp-Session-Id`, sends
//!   `notifications/initialized`, then calls the tool in that session (and ends the
//!   session with DELETE at the end).
//! * `stateless`: each call is a lone `tools/call` POST, no session.
//!
//! Prints one line: `mcp-load label=… mode=… concurrency=… ok=… errors=… seconds=…
//! req_s=… p50_ms=… p99_ms=… max_ms=…` (key=value, for scripts/bench.sh).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Value};

const PROTOCOL_VERSION: &str = "2025-06-18";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Stateful,
    Stateless,
}

#[derive(Debug, Parser)]
#[command(about = "Load-test one MCP tool over Streamable HTTP (loopback, bounded)")]
struct Args {
    /// The MCP endpoint, e.g. http://127.0.0.1:3000/mcp/tools/demo/echo.
    url: String,
    /// Sent as `Authorization: Bearer <token>`.
    #[arg(long, env = "MCP_LOAD_TOKEN")]
    token: Option<String>,
    #[arg(long, value_enum, default_value = "stateful")]
    mode: Mode,
    /// Requests in flight at once (one worker each).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Measured `tools/call` requests (the run stops at this count).
    #[arg(long, default_value_t = 20_000)]
    requests: u64,
    /// Unmeasured `tools/call` requests before the measured ones.
    #[arg(long, default_value_t = 500)]
    warmup: u64,
    /// Hard limit on the measured phase; the run stops early, and says so, when hit.
    #[arg(long, default_value_t = 30)]
    max_seconds: u64,
    /// The tool to call and its string argument.
    #[arg(long, default_value = "echo")]
    tool: String,
    #[arg(long, default_value = "text")]
    arg: String,
    /// A name for the output line (e.g. `toolshed`, `ts-sdk`).
    #[arg(long, default_value = "server")]
    label: String,
    /// Fail (exit 1) if more than this fraction of calls were errors.
    #[arg(long, default_value_t = 0.001)]
    max_error_rate: f64,
    /// Tokio worker threads for the load generator itself (it shares the machine with the server).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// How long one request may take before the client gives up on it (and
    /// sends the next: a long limit keeps exactly `concurrency` calls in flight).
    #[arg(long, default_value_t = 10)]
    timeout_seconds: u64,
}

/// Why a call did not count as OK.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Failure {
    Transport,
    Status(u16),
    Unparsable,
    RpcError(i64),
    /// By its text (a time limit, out of memory, a refusal), cut to 80 characters.
    ToolError(String),
    WrongText,
}

struct Shared {
    args: Args,
    client: reqwest::Client,
    /// Next request number to hand out, across warm-up and measured phases.
    issued: AtomicU64,
    errors: Mutex<BTreeMap<Failure, u64>>,
    first_error: Mutex<Option<String>>,
}

impl Shared {
    fn fail(&self, kind: Failure, detail: String) {
        *self.errors.lock().unwrap().entry(kind).or_default() += 1;
        let mut first = self.first_error.lock().unwrap();
        if first.is_none() {
            *first = Some(detail);
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.concurrency == 0 || args.requests == 0 {
        eprintln!("mcp-load: --concurrency and --requests must be at least 1");
        return ExitCode::from(2);
    }
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads.max(1)).enable_all().build().expect("tokio runtime");
    runtime.block_on(run(args))
}

async fn run(args: Args) -> ExitCode {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    if let Some(token) = &args.token {
        let value = HeaderValue::from_str(&format!("Bearer {token}")).expect("token is a valid header value");
        headers.insert(AUTHORIZATION, value);
    }
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .http1_only()
        .pool_max_idle_per_host(args.concurrency)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(args.timeout_seconds))
        .no_proxy()
        .build()
        .expect("http client");
    let shared = Arc::new(Shared { args, client, issued: AtomicU64::new(0), errors: Mutex::default(), first_error: Mutex::default() });
    let a = &shared.args;

    // Sessions first (stateful), so the handshake is not part of the measurement.
    let mut sessions = Vec::with_capacity(a.concurrency);
    for worker in 0..a.concurrency {
        let session = match a.mode {
            Mode::Stateless => None,
            Mode::Stateful => match tokio::time::timeout(Duration::from_secs(10), open_session(&shared)).await {
                Ok(Ok(id)) => Some(id),
                Ok(Err(e)) => return fatal(&format!("worker {worker}: could not open a session: {e}")),
                Err(_) => return fatal(&format!("worker {worker}: opening a session timed out")),
            },
        };
        sessions.push(session);
    }

    // Warm-up: the first `warmup` request numbers, not recorded.
    let warmup_deadline = Instant::now() + Duration::from_secs(a.max_seconds.max(1));
    let _ = phase(&shared, &sessions, a.warmup, warmup_deadline, false).await;
    let warm_errors: u64 = shared.errors.lock().unwrap().values().sum();
    if warm_errors > a.warmup / 10 + 1 {
        report_errors(&shared);
        return fatal(&format!("{warm_errors} of {} warm-up calls failed", a.warmup));
    }
    shared.errors.lock().unwrap().clear();
    *shared.first_error.lock().unwrap() = None;

    // Measured phase.
    let started = Instant::now();
    let deadline = started + Duration::from_secs(a.max_seconds.max(1));
    let hist = phase(&shared, &sessions, a.warmup + a.requests, deadline, true).await;
    let elapsed = started.elapsed().as_secs_f64();

    for session in sessions.iter().flatten() {
        let _ =
            shared.client.delete(&a.url).header("mcp-session-id", session).header("mcp-protocol-version", PROTOCOL_VERSION).send().await;
    }

    let ok = hist.len();
    let errors: u64 = shared.errors.lock().unwrap().values().sum();
    let attempted = ok + errors;
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "mcp-load label={} mode={} concurrency={} ok={} errors={} seconds={:.2} req_s={:.0} p50_ms={:.2} p99_ms={:.2} max_ms={:.2}{}",
        a.label,
        match a.mode {
            Mode::Stateful => "stateful",
            Mode::Stateless => "stateless",
        },
        a.concurrency,
        ok,
        errors,
        elapsed,
        ok as f64 / elapsed,
        ms(0.5),
        ms(0.99),
        hist.max() as f64 / 1000.0,
        if attempted < a.requests { " stopped=time-limit" } else { "" },
    );
    if errors > 0 {
        report_errors(&shared);
    }
    if attempted == 0 || errors as f64 > a.max_error_rate * attempted as f64 {
        return fatal(&format!(
            "{errors} of {attempted} calls failed (more than {:.2}%): these figures measure failures, not the server",
            a.max_error_rate * 100.0
        ));
    }
    ExitCode::SUCCESS
}

fn fatal(message: &str) -> ExitCode {
    eprintln!("mcp-load: FAILED: {message}");
    ExitCode::FAILURE
}

fn report_errors(shared: &Shared) {
    for (kind, n) in shared.errors.lock().unwrap().iter() {
        eprintln!("mcp-load:   {n} × {kind:?}");
    }
    if let Some(first) = shared.first_error.lock().unwrap().as_ref() {
        eprintln!("mcp-load:   first error: {first}");
    }
}

/// Runs the workers until request number `until` was handed out or `deadline`
/// passed; returns the merged latency histogram (µs) if `record`.
async fn phase(shared: &Arc<Shared>, sessions: &[Option<String>], until: u64, deadline: Instant, record: bool) -> Histogram<u64> {
    let mut tasks = Vec::with_capacity(sessions.len());
    for (worker, session) in sessions.iter().cloned().enumerate() {
        let shared = shared.clone();
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
            loop {
                let n = shared.issued.fetch_add(1, Ordering::Relaxed);
                if n >= until || Instant::now() >= deadline {
                    break;
                }
                let text = format!("load w{worker} n{n} ✓");
                let t0 = Instant::now();
                match call(&shared, session.as_deref(), n, &text).await {
                    Ok(()) if record => hist.saturating_record(t0.elapsed().as_micros() as u64),
                    Ok(()) => {}
                    Err((kind, detail)) => shared.fail(kind, detail),
                }
            }
            hist
        }));
    }
    let mut total = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
    for t in tasks {
        total.add(t.await.expect("worker panicked")).expect("same bounds");
    }
    // The counter overshoots by one per worker; the next phase starts where this one was meant to end.
    shared.issued.store(until, Ordering::Relaxed);
    total
}

async fn post(shared: &Shared, session: Option<&str>, body: &Value) -> reqwest::Result<reqwest::Response> {
    let mut req = shared.client.post(&shared.args.url).header("mcp-protocol-version", PROTOCOL_VERSION).body(body.to_string());
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    req.send().await
}

/// One `tools/call`, checked.
async fn call(shared: &Shared, session: Option<&str>, id: u64, text: &str) -> Result<(), (Failure, String)> {
    let a = &shared.args;
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": a.tool, "arguments": { a.arg.as_str(): text } },
    });
    let res = post(shared, session, &body).await.map_err(|e| (Failure::Transport, format!("request {id}: {e}")))?;
    let status = res.status();
    let is_sse = res.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/event-stream"));
    let bytes = res.bytes().await.map_err(|e| (Failure::Transport, format!("request {id}: reading the body: {e}")))?;
    if !status.is_success() {
        return Err((Failure::Status(status.as_u16()), format!("request {id}: HTTP {status}: {}", String::from_utf8_lossy(&bytes))));
    }
    let msg = response_message(&bytes, is_sse, id)
        .ok_or_else(|| (Failure::Unparsable, format!("request {id}: no JSON-RPC response in {:?}", String::from_utf8_lossy(&bytes))))?;
    if let Some(err) = msg.get("error") {
        return Err((Failure::RpcError(err["code"].as_i64().unwrap_or(0)), format!("request {id}: JSON-RPC error {err}")));
    }
    let result = &msg["result"];
    if result["isError"].as_bool() == Some(true) {
        let text: String = result["content"][0]["text"].as_str().unwrap_or_default().chars().take(80).collect();
        return Err((Failure::ToolError(text), format!("request {id}: tool error {result}")));
    }
    if result["content"][0]["text"].as_str() != Some(text) {
        return Err((Failure::WrongText, format!("request {id}: sent {text:?}, got {result}")));
    }
    Ok(())
}

/// The JSON-RPC response with `id` from a JSON body or an SSE stream (`data:` lines;
/// priming events with empty data are skipped).
fn response_message(body: &[u8], is_sse: bool, id: u64) -> Option<Value> {
    let matches = |v: &Value| v.get("id").and_then(Value::as_u64) == Some(id) && (v.get("result").is_some() || v.get("error").is_some());
    if !is_sse {
        return serde_json::from_slice::<Value>(body).ok().filter(matches);
    }
    let text = std::str::from_utf8(body).ok()?;
    // A data field may span several `data:` lines of one event; events end with a blank line.
    let mut data = String::new();
    for line in text.lines().chain(std::iter::once("")) {
        if let Some(rest) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        } else if line.is_empty() && !data.is_empty() {
            if let Ok(v) = serde_json::from_str::<Value>(&data) {
                if matches(&v) {
                    return Some(v);
                }
            }
            data.clear();
        }
    }
    None
}

/// `initialize` + `notifications/initialized`; the session id the server gave.
async fn open_session(shared: &Shared) -> Result<String, String> {
    let init = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": { "name": "mcp-load", "version": env!("CARGO_PKG_VERSION") },
        },
    });
    let res = post(shared, None, &init).await.map_err(|e| e.to_string())?;
    let status = res.status();
    let is_sse = res.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/event-stream"));
    let session = res.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let bytes = res.bytes().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("initialize: HTTP {status}: {}", String::from_utf8_lossy(&bytes)));
    }
    let msg =
        response_message(&bytes, is_sse, 0).ok_or_else(|| format!("initialize: no response in {:?}", String::from_utf8_lossy(&bytes)))?;
    if msg.get("result").is_none() {
        return Err(format!("initialize: {msg}"));
    }
    let session = session.ok_or("initialize: the server sent no Mcp-Session-Id (is it stateless?)")?;
    let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let res = post(shared, Some(&session), &note).await.map_err(|e| e.to_string())?;
    if res.status().as_u16() != 202 && !res.status().is_success() {
        return Err(format!("notifications/initialized: HTTP {}", res.status()));
    }
    let _ = res.bytes().await;
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_response_in_json_and_sse() {
        let json = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}"#;
        assert!(response_message(json, false, 7).is_some());
        assert!(response_message(json, false, 8).is_none());
        let sse = b"id: 0\nretry: 3000\ndata:\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n";
        assert!(response_message(sse, true, 7).is_some());
        let crlf = b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32602}}\r\n\r\n";
        assert!(response_message(crlf, true, 3).unwrap().get("error").is_some());
    }
}
