//! A small client for OpenAI-compatible chat completions, streaming: it posts
//! the conversation with `stream: true`, reads the `data:` chunks of the SSE
//! answer, forwards text as it arrives, and accumulates `delta.tool_calls` by
//! index (a call's arguments arrive in pieces). Servers that ignore `stream`
//! and answer one JSON completion are understood too.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::outbound::{self, InternalHosts};

/// One message of a conversation, exactly as the chat-completions API takes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        #[serde(default)]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A function call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text, as the model wrote it.
    pub arguments: String,
}

fn function_type() -> String {
    "function".into()
}

/// Why the endpoint gave no usable answer. `Display` is what the page shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("Could not reach the chat endpoint: {0}")]
    Unreachable(String),
    #[error("The chat endpoint answered HTTP {status}{hint}: {message}")]
    Status { status: u16, hint: &'static str, message: String },
    #[error("The chat endpoint sent nothing for {0} s; gave up waiting.")]
    Timeout(u64),
    #[error("The chat endpoint's answer is not an OpenAI-compatible chat completion: {0}")]
    Junk(String),
    #[error("The chat endpoint reported an error: {0}")]
    Reported(String),
    /// The model kept asking for tools (see `turn::MAX_ROUNDS`).
    #[error("The model was still calling tools after {0} rounds, so the turn was stopped; ask it to answer with what it has.")]
    TooManyRounds(usize),
    /// Whoever was reading the answer went away: stop quietly.
    #[error("the conversation was closed")]
    Gone,
}

/// The model's whole answer in one round.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Completion {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
}

/// Most bytes of one answer: a chat reply is far smaller.
const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// Most bytes of an error body worth reading.
const MAX_ERROR_BYTES: usize = 4096;

pub(crate) struct ChatClient {
    http: reqwest::Client,
    url: String,
    model: String,
    key: Option<String>,
    /// The longest wait for the answer's next bytes.
    idle: Duration,
    internal: InternalHosts,
}

impl ChatClient {
    /// A client for one endpoint; its requests never reach internal
    /// addresses but those `internal` names ([`crate::outbound`]).
    pub fn new(base_url: &str, model: &str, key: Option<String>, timeout_secs: i64, internal: &InternalHosts) -> Self {
        let idle = Duration::from_secs(timeout_secs.max(1) as u64);
        let http = outbound::client_builder(internal).connect_timeout(idle.min(Duration::from_secs(10))).build().unwrap_or_default();
        Self { http, url: format!("{base_url}/chat/completions"), model: model.to_owned(), key, idle, internal: internal.clone() }
    }

    /// Asks for the next assistant message; `on_text` gets the content as it
    /// streams in and answers false when nobody is listening any more.
    pub async fn complete<F: std::future::Future<Output = bool>>(
        &self,
        messages: &[Message],
        tools: &Value,
        mut on_text: impl FnMut(String) -> F,
    ) -> Result<Completion, EndpointError> {
        let mut body = json!({"model": self.model, "messages": messages, "stream": true});
        if tools.as_array().is_some_and(|t| !t.is_empty()) {
            body["tools"] = tools.clone();
        }
        let url = reqwest::Url::parse(&self.url).map_err(|e| EndpointError::Unreachable(format!("invalid URL {}: {e}", self.url)))?;
        outbound::check_url(&self.internal, &url).map_err(EndpointError::Unreachable)?;
        let mut request = self.http.post(url).json(&body).header("Accept", "text/event-stream");
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        let mut response = self.within(request.send()).await?.map_err(|e| EndpointError::Unreachable(plain(e)))?;
        let status = response.status();
        if !status.is_success() {
            let text = self.read_some(&mut response, MAX_ERROR_BYTES).await.unwrap_or_default();
            let hint = match status.as_u16() {
                401 | 403 => " (check the endpoint's API key)",
                404 => " (check the base URL and the model name)",
                _ => "",
            };
            return Err(EndpointError::Status { status: status.as_u16(), hint, message: error_message(&text) });
        }
        let is_json =
            response.headers().get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("application/json"));
        if is_json {
            let text = self.read_some(&mut response, MAX_ANSWER_BYTES).await?;
            let completion = whole_completion(&text)?;
            if !completion.content.is_empty() && !on_text(completion.content.clone()).await {
                return Err(EndpointError::Gone);
            }
            return Ok(completion);
        }
        let mut stream = Stream::default();
        let mut pending: Vec<u8> = Vec::new();
        let mut received = 0usize;
        loop {
            let chunk = self.within(response.chunk()).await?.map_err(|e| EndpointError::Unreachable(plain(e)))?;
            let Some(chunk) = chunk else { break };
            received += chunk.len();
            if received > MAX_ANSWER_BYTES {
                return Err(EndpointError::Junk("the answer is larger than 8 MiB".into()));
            }
            pending.extend_from_slice(&chunk);
            // Lines end at '\n', which never occurs inside a UTF-8 sequence.
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                if let Some(text) = stream.line(line.trim_end_matches(['\r', '\n']))? {
                    if !on_text(text).await {
                        return Err(EndpointError::Gone);
                    }
                }
                if stream.done {
                    return stream.finish();
                }
            }
        }
        if !pending.is_empty() {
            let line = String::from_utf8_lossy(&pending).into_owned();
            if let Some(text) = stream.line(line.trim_end())? {
                if !on_text(text).await {
                    return Err(EndpointError::Gone);
                }
            }
        }
        stream.finish()
    }

    async fn within<T>(&self, f: impl std::future::Future<Output = T>) -> Result<T, EndpointError> {
        tokio::time::timeout(self.idle, f).await.map_err(|_| EndpointError::Timeout(self.idle.as_secs()))
    }

    /// The body's first `limit` bytes, as text.
    async fn read_some(&self, response: &mut reqwest::Response, limit: usize) -> Result<String, EndpointError> {
        let mut bytes = Vec::new();
        while bytes.len() < limit {
            match self.within(response.chunk()).await?.map_err(|e| EndpointError::Unreachable(plain(e)))? {
                Some(chunk) => bytes.extend_from_slice(&chunk),
                None => break,
            }
        }
        if bytes.len() > limit {
            if limit == MAX_ANSWER_BYTES {
                return Err(EndpointError::Junk("the answer is larger than 8 MiB".into()));
            }
            bytes.truncate(limit);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// reqwest's error with its causes, without the URL (it may carry a key).
fn plain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = if e.is_connect() { "connection failed".to_owned() } else { e.to_string() };
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// The message of an error body: OpenAI's `{"error": {"message"}}`, other
/// servers' `{"error": "…"}` or `{"message"}`, or the text itself, shortened.
fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let e = v.get("error").unwrap_or(&v);
        e.get("message").and_then(Value::as_str).or(e.as_str()).map(str::to_owned)
    });
    let text = from_json.unwrap_or_else(|| body.trim().to_owned());
    if text.is_empty() {
        "(no message)".into()
    } else {
        shorten(&text)
    }
}

fn shorten(text: &str) -> String {
    const MAX: usize = 300;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// A non-streamed completion: `choices[0].message`.
fn whole_completion(body: &str) -> Result<Completion, EndpointError> {
    let v: Value = serde_json::from_str(body).map_err(|_| EndpointError::Junk(shorten(body)))?;
    if let Some(e) = v.get("error") {
        return Err(EndpointError::Reported(error_message(&e.to_string())));
    }
    let message = v.pointer("/choices/0/message").ok_or_else(|| EndpointError::Junk(shorten(body)))?;
    let content = message.get("content").and_then(Value::as_str).unwrap_or_default().to_owned();
    let calls: Vec<ToolCall> = match message.get("tool_calls") {
        Some(Value::Array(calls)) => {
            calls.iter().cloned().map(serde_json::from_value).collect::<Result<_, _>>().map_err(|e| EndpointError::Junk(e.to_string()))?
        }
        _ => Vec::new(),
    };
    Ok(Completion { content, tool_calls: calls })
}

/// A tool call being assembled from its pieces.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The state of one streamed answer.
#[derive(Default)]
struct Stream {
    content: String,
    calls: Vec<PartialCall>,
    chunks: usize,
    done: bool,
    /// The first line that was not SSE, to show when nothing usable came.
    junk: Option<String>,
}

impl Stream {
    /// Takes one line of the SSE answer; returns the text it adds, if any.
    fn line(&mut self, line: &str) -> Result<Option<String>, EndpointError> {
        let Some(data) = line.strip_prefix("data:") else {
            // Comments, `event:`/`id:` fields and blank lines carry nothing for us.
            let sse = line.is_empty() || [":", "event:", "id:", "retry:"].iter().any(|p| line.starts_with(p));
            if !sse && self.junk.is_none() {
                self.junk = Some(shorten(line));
            }
            return Ok(None);
        };
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|_| EndpointError::Junk(format!("a data line is not JSON: {}", shorten(data))))?;
        if let Some(e) = chunk.get("error") {
            return Err(EndpointError::Reported(error_message(&e.to_string())));
        }
        self.chunks += 1;
        let Some(delta) = chunk.pointer("/choices/0/delta") else { return Ok(None) };
        for (position, call) in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let index = call.get("index").and_then(Value::as_u64).map_or(position, |i| i as usize);
            if index >= 128 {
                return Err(EndpointError::Junk(format!("tool call index {index} is out of range")));
            }
            if self.calls.len() <= index {
                self.calls.resize_with(index + 1, PartialCall::default);
            }
            let partial = &mut self.calls[index];
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                partial.id = id.to_owned();
            }
            if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                partial.name.push_str(name);
            }
            if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str) {
                partial.arguments.push_str(args);
            }
        }
        match delta.get("content").and_then(Value::as_str) {
            Some(text) if !text.is_empty() => {
                self.content.push_str(text);
                Ok(Some(text.to_owned()))
            }
            _ => Ok(None),
        }
    }

    fn finish(self) -> Result<Completion, EndpointError> {
        if self.chunks == 0 {
            let what = self.junk.unwrap_or_else(|| "the answer ended without any data".into());
            return Err(EndpointError::Junk(what));
        }
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .filter(|(_, c)| !c.name.is_empty())
            .map(|(i, c)| ToolCall {
                id: if c.id.is_empty() { format!("call_{i}") } else { c.id },
                kind: function_type(),
                function: FunctionCall { name: c.name, arguments: c.arguments },
            })
            .collect();
        Ok(Completion { content: self.content, tool_calls })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(lines: &[&str]) -> Result<(Completion, String), EndpointError> {
        let mut s = Stream::default();
        let mut text = String::new();
        for l in lines {
            if let Some(t) = s.line(l)? {
                text.push_str(&t);
            }
        }
        Ok((s.finish()?, text))
    }

    #[test]
    fn tool_call_arguments_split_over_chunks_are_joined_by_index() {
        let (c, text) = feed(&[
            r#"data: {"choices":[{"delta":{"role":"assistant","content":"Let me "}}]}"#,
            "",
            r#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"kit__echo","arguments":"{\"te"}}]}}]}"#,
            r#"data: {"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"kit__stats","arguments":"{}"}}]}}]}"#,
            r#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"xt\":\"hi\"}"}}]}}]}"#,
            ": keep-alive",
            "data: [DONE]",
        ])
        .unwrap();
        assert_eq!(text, "Let me ");
        assert_eq!(c.tool_calls.len(), 2);
        assert_eq!(c.tool_calls[0].id, "call_a");
        assert_eq!(c.tool_calls[0].function, FunctionCall { name: "kit__echo".into(), arguments: r#"{"text":"hi"}"#.into() });
        assert_eq!(c.tool_calls[1].function.name, "kit__stats");
    }

    #[test]
    fn junk_instead_of_a_stream_is_reported_with_what_came() {
        assert_eq!(feed(&["<html>Bad gateway</html>"]).unwrap_err(), EndpointError::Junk("<html>Bad gateway</html>".into()));
        assert!(matches!(feed(&["data: {oops"]).unwrap_err(), EndpointError::Junk(m) if m.contains("not JSON")));
        assert!(
            matches!(feed(&[r#"data: {"error":{"message":"overloaded"}}"#]).unwrap_err(), EndpointError::Reported(m) if m == "overloaded")
        );
    }

    #[test]
    fn a_non_streamed_completion_is_understood() {
        let c = whole_completion(r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{}"}}]}}]}"#).unwrap();
        assert_eq!(c.tool_calls[0].function.name, "echo");
        assert_eq!(error_message(r#"{"error":{"message":"Invalid API key","type":"auth"}}"#), "Invalid API key");
        assert_eq!(error_message("model not found"), "model not found");
    }

    #[test]
    fn messages_serialize_as_the_chat_completions_api_takes_them() {
        let m = Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: "c".into(),
                kind: function_type(),
                function: FunctionCall { name: "f".into(), arguments: "{}".into() },
            }],
        };
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
        );
        let t: Message = serde_json::from_value(json!({"role": "tool", "tool_call_id": "c", "content": "ok"})).unwrap();
        assert_eq!(t, Message::Tool { tool_call_id: "c".into(), content: "ok".into() });
    }
}
