//! Runs a tool's JavaScript (the body of an async function) in a fresh QuickJS
//! context per call (on a runtime its worker thread keeps between clean runs),
//! with memory, time, stack and output limits.
//!
//! Inside the sandbox the code sees its arguments as `$name` and `args`,
//! `console.*`, `$env`, `$context`, `$progress`, `$json2MarkdownTable` and
//! `$fetch` (host-side HTTP, allow-listed hosts only); code-mode code sees
//! `tools.<name>(input)` (a bundle's members) instead of `$fetch` and `$env`. There is no file
//! system, no module loader, no `eval` and no other I/O. Only the globals
//! and the Date/RegExp/Map/Set built-ins that the source names are installed:
//! creating the rest would cost every call time for nothing.
//!
//! [`run_blocking`] executes one call on the current thread; [`Sandbox`] is the
//! bounded worker pool the async server uses so that tool code never runs on
//! the reactor.

mod alloc;
mod ask;
mod calls;
mod content;
mod cores;
mod engine;
mod fetch;
mod globals;
mod markdown;
pub mod outbound;
mod pool;
pub mod redact;
mod secrets;
#[cfg(test)]
mod tests;
pub mod trace;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedSender;

pub use ask::{canonical_json, fingerprint, Answer, Input, METHODS as INPUT_METHODS};
pub use calls::{CodeTools, PreparedCall, ToolCall, ToolHost};
pub use engine::{run_blocking, run_reporting};
pub use fetch::{FetchExchange, FetchResponse, REDACTED};
pub use pool::{Lane, Sandbox, SandboxConfig, SandboxError};
pub use secrets::{placeholder, OutboundSecret};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Resource limits for one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Bytes the JS heap may hold at once.
    pub memory_bytes: usize,
    /// Time budget for the whole call: executing, and awaiting `$fetch`es and
    /// tool calls; time spent waiting for a core while others run does not count.
    pub wall_clock_ms: u64,
    /// Native stack QuickJS may use before throwing a stack overflow.
    pub stack_bytes: usize,
    /// Largest result (text, or JSON as serialized).
    pub result_bytes: usize,
    /// Total console output kept; later lines are dropped after a marker line.
    pub console_bytes: usize,
    /// Timeout of one `$fetch` request (bounded by the wall clock as well).
    pub fetch_timeout_ms: u64,
    /// Largest `$fetch` response body.
    pub fetch_response_bytes: usize,
    /// `$fetch` calls allowed per run.
    pub fetch_requests: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 32 * MIB,
            wall_clock_ms: 2_000,
            stack_bytes: MIB,
            result_bytes: MIB,
            console_bytes: 256 * KIB,
            fetch_timeout_ms: 10_000,
            fetch_response_bytes: 4 * MIB,
            fetch_requests: 50,
        }
    }
}

/// One tool call.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunRequest {
    /// Body of the async function (line 1 of errors = first line of this).
    pub code: String,
    /// Tool arguments: `args`, and `$name` for each name that is an identifier.
    pub args: Map<String, Value>,
    /// Declared arguments the call left out that have no default: their
    /// `$name` is `undefined` (not a ReferenceError).
    #[serde(default)]
    pub absent: Vec<String>,
    /// Configuration values exposed, frozen, as `$env`.
    pub env: BTreeMap<String, String>,
    /// Call context exposed, frozen, as `$context` (e.g. caller, department, transport).
    pub context: Map<String, Value>,
    /// Hosts `$fetch` may reach: exact names or `*.example.com` wildcards,
    /// each with `:port` (none: 80 and 443).
    pub fetch_allow: Vec<String>,
    /// The tool is read-only: `$fetch` refuses methods other than GET and HEAD.
    pub read_only: bool,
    /// Internal hosts the operator lets requests reach (none by default).
    #[serde(skip)]
    pub internal_hosts: crate::outbound::InternalHosts,
    /// Secrets `$fetch` fills in for their hosts only; `env` holds their
    /// placeholders, never their values.
    #[serde(skip)]
    pub outbound_secrets: Vec<OutboundSecret>,
    /// Renews a connected account's token that an API refused (401): the
    /// request is then sent once more with the new one.
    #[serde(skip)]
    pub renew: Option<Renew>,
    pub limits: Limits,
    /// Live console lines and progress, for forwarding while the call runs.
    #[serde(skip)]
    pub events: Option<UnboundedSender<RunEvent>>,
    /// Code mode: the tools the code calls as `tools.<name>(input)`. Such
    /// code gets neither `$fetch` nor `$env`: it reaches out only through tools.
    #[serde(skip)]
    pub tools: Option<CodeTools>,
    /// A replay: `$fetch` answers from these recorded exchanges, never the network.
    #[serde(skip)]
    pub replay: Option<std::sync::Arc<Vec<FetchExchange>>>,
    /// The answers `$input` and `$ask` have been given so far.
    #[serde(skip)]
    pub input: Input,
    /// Stops the run from outside (a task's `tasks/cancel`): it ends with
    /// [`RunError::Cancelled`], out of any wait at once.
    #[serde(skip)]
    pub cancel: Option<tokio_util::sync::CancellationToken>,
}

/// How a run renews a connected account's token (`account.APP`) that an
/// API refused before its expiry (revoked, rotated, its grant shortened):
/// given the app and the refused token, the token to use now, or `None` when
/// there is none (the person must connect again).
#[derive(Clone)]
pub struct Renew(std::sync::Arc<dyn Fn(String, String) -> RenewFuture + Send + Sync>);

/// What [`Renew`] answers with.
pub type RenewFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Option<String>> + Send>>;

impl Renew {
    pub fn new(renew: impl Fn(String, String) -> RenewFuture + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(renew))
    }

    pub(crate) fn token(&self, app: &str, refused: &str) -> RenewFuture {
        (self.0)(app.to_owned(), refused.to_owned())
    }
}

impl fmt::Debug for Renew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Renew")
    }
}

impl RunRequest {
    pub fn new(code: impl Into<String>) -> Self {
        Self { code: code.into(), ..Self::default() }
    }
}

/// What a tool returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum ToolValue {
    Text(String),
    Json(Value),
    /// MCP content blocks, made by `$content` (checked, and each reduced to its type's fields).
    Content(Vec<Value>),
}

impl ToolValue {
    /// The value as one text: a model or a transcript that cannot show
    /// images reads content blocks by their type and size.
    pub fn to_text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Json(value) => value.to_string(),
            Self::Content(blocks) => content::as_text(blocks),
        }
    }

    /// The value as JSON: text as a string, content as its array of blocks.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Text(text) => Value::String(text.clone()),
            Self::Json(value) => value.clone(),
            Self::Content(blocks) => Value::Array(blocks.clone()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Log,
    Info,
    Warn,
    Error,
    Debug,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsoleLine {
    pub level: LogLevel,
    pub message: String,
    /// Milliseconds since the call started.
    pub elapsed_ms: u64,
}

/// Sent live on [`RunRequest::events`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    Console(ConsoleLine),
    Progress { done: f64, total: Option<f64>, message: Option<String> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    pub result: Result<ToolValue, RunError>,
    pub console: Vec<ConsoleLine>,
    /// Every `$fetch` the code made, as recorded (see [`FetchExchange`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fetches: Vec<FetchExchange>,
    pub duration: Duration,
    /// How long the call waited for a worker before it ran (pool runs only).
    #[serde(default)]
    pub queued: Duration,
    pub peak_memory_bytes: usize,
}

/// Why a call did not produce a value. `Display` is the message shown to users.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunError {
    /// The code does not parse.
    Syntax {
        message: String,
        line: Option<u32>,
    },
    /// The code threw (or its promise rejected).
    Thrown {
        name: String,
        message: String,
        line: Option<u32>,
        stack: Option<String>,
    },
    Timeout {
        limit_ms: u64,
    },
    OutOfMemory {
        limit_bytes: usize,
    },
    StackOverflow {
        line: Option<u32>,
    },
    OutputTooLarge {
        limit_bytes: usize,
        actual_bytes: usize,
    },
    /// The returned value cannot become JSON (BigInt, cycle, function, symbol).
    NotSerializable {
        message: String,
    },
    /// The code awaits a promise that nothing can ever settle.
    NeverSettled,
    /// Stopped from outside before it finished (a task cancelled).
    Cancelled,
    /// The sandbox itself failed; not the tool's fault.
    Internal {
        message: String,
    },
    /// The tool declares an output schema and its result does not match it.
    OutputMismatch {
        message: String,
    },
    /// The code asked questions (`$input`, `$ask`) that have no answer yet:
    /// the run stopped there. `requests` are MCP's `inputRequests`, by key.
    NeedsInput {
        requests: Map<String, Value>,
    },
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax { message, line } => {
                write!(f, "SyntaxError: {message}")?;
                write_line(f, *line)
            }
            Self::Thrown { name, message, line, .. } => {
                match (name.is_empty(), message.is_empty()) {
                    (false, false) => write!(f, "{name}: {message}")?,
                    (true, _) => f.write_str(message)?,
                    (false, true) => f.write_str(name)?,
                }
                write_line(f, *line)
            }
            Self::Timeout { limit_ms } => write!(f, "Timed out after {limit_ms} ms"),
            Self::OutOfMemory { limit_bytes } => {
                write!(f, "Out of memory (limit {})", human_bytes(*limit_bytes))
            }
            Self::StackOverflow { line } => {
                f.write_str("Stack overflow: maximum call stack size exceeded")?;
                write_line(f, *line)
            }
            Self::OutputTooLarge { limit_bytes, actual_bytes } => {
                write!(f, "Result too large: {} (limit {})", human_bytes(*actual_bytes), human_bytes(*limit_bytes))
            }
            Self::NotSerializable { message } => {
                write!(f, "The result is not JSON-serializable: {message}")
            }
            Self::NeverSettled => f.write_str("The tool never finished: it awaits a promise that nothing can resolve"),
            Self::Cancelled => f.write_str("The call was cancelled before it finished"),
            Self::Internal { message } => write!(f, "Sandbox error: {message}"),
            Self::OutputMismatch { message } => write!(f, "The result does not match the tool's output schema: {message}"),
            Self::NeedsInput { requests } => {
                let asked: Vec<&str> =
                    requests.values().map(|r| r["params"]["message"].as_str().or(r["method"].as_str()).unwrap_or_default()).collect();
                write!(f, "The tool asks for input that was not given: {}", asked.join("; "))
            }
        }
    }
}

impl std::error::Error for RunError {}

fn write_line(f: &mut fmt::Formatter<'_>, line: Option<u32>) -> fmt::Result {
    match line {
        Some(line) => write!(f, " (line {line})"),
        None => Ok(()),
    }
}

fn human_bytes(bytes: usize) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= MIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}
