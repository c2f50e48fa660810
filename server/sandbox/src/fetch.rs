//! `$fetch(url, init?)`: HTTP done by the host, only to allow-listed hosts
//! and ports, never to internal addresses (see [`crate::outbound`]).
//!
//! Requests run on one small shared tokio runtime (so connections are pooled
//! across calls); the JS side gets a promise that the engine settles when the
//! request finishes (`calls.rs` keeps it until then). Outbound-only secrets
//! are filled in hop by hop, just before each is sent, and masked out of
//! whatever comes back (`secrets.rs`).

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_LENGTH, COOKIE, LOCATION};
use reqwest::{Method, StatusCode, Url};
use rquickjs::{Coerced, Ctx, Function, IntoJs, Object, Promise, Value};
use serde::{Deserialize, Serialize};

use super::secrets::Secrets;
use super::{human_bytes, Limits, Renew};
use crate::outbound::{host_allowed, InternalHosts};

const MAX_REDIRECTS: usize = 5;

pub(super) struct FetchIo {
    pub(super) runtime: tokio::runtime::Runtime,
    clients: crate::outbound::Clients,
}

/// Built on first use so that calls which never fetch pay nothing for it.
pub(super) fn io() -> Result<&'static FetchIo, String> {
    static IO: OnceLock<Result<FetchIo, String>> = OnceLock::new();
    IO.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("toolshed-fetch")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the fetch runtime: {e}"))?;
        Ok(FetchIo { runtime, clients: Default::default() })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Where a run's requests may go: its allow-list, the internal hosts the
/// operator lets requests reach, and where each outbound-only secret may go.
pub(super) struct Reach {
    pub allow: Vec<String>,
    pub internal: InternalHosts,
    /// Replaced whole when an account's token is renewed, for the run's
    /// requests from then on.
    pub secrets: Mutex<Secrets>,
    pub renew: Option<Renew>,
    /// The apps whose token this run renewed: once each, so that an API
    /// refusing every token costs its provider one refresh, not one a request.
    /// Held while one renews, so that a request refused meanwhile waits for
    /// the new token rather than handing the code its 401.
    pub renewed: tokio::sync::Mutex<Vec<String>>,
    /// The tool is read-only: only GET and HEAD go out, without a body or a
    /// header asking for another method.
    pub read_only: bool,
}

impl Reach {
    /// The secrets as they stand now.
    fn secrets(&self) -> Secrets {
        self.secrets.lock().expect("no panic while held").clone()
    }

    /// Renews `app`'s token, which an API refused, for this request and
    /// the run's next ones: whether there is another one to send.
    async fn renew(&self, app: &str, refused: &str) -> bool {
        let Some(renew) = &self.renew else { return false };
        let mut renewed = self.renewed.lock().await;
        if self.secrets.lock().expect("no panic while held").account_token(app).is_some_and(|now| now != refused) {
            // Another request of this run renewed it meanwhile.
            return true;
        }
        if renewed.iter().any(|a| a == app) {
            return false;
        }
        renewed.push(app.to_owned());
        let Some(token) = renew.token(app, refused).await else { return false };
        let mut secrets = self.secrets.lock().expect("no panic while held");
        *secrets = secrets.renewed(app, token);
        true
    }
}

fn check_target(reach: &Reach, url: &Url) -> Result<(), String> {
    crate::outbound::check_url(&reach.internal, url)?;
    let host = url.host_str().ok_or_else(|| format!("URL {url} has no host"))?;
    let port = url.port_or_known_default().unwrap_or(0);
    if host_allowed(&reach.allow, host, port) {
        Ok(())
    } else {
        Err(format!("{host}:{port} is not on this tool's fetch allow-list (an entry without a port allows 80 and 443)"))
    }
}

pub(super) struct FetchRequest {
    url: Url,
    method: Method,
    headers: Vec<(String, String)>,
    body: Option<String>,
}

impl FetchRequest {
    /// What [`span`] names: the method and the host.
    pub(super) fn span_fields(&self) -> (Method, String) {
        (self.method.clone(), self.url.host_str().unwrap_or_default().to_owned())
    }
}

/// A request's span, a child of the current one; its status is recorded when it answers.
pub(super) fn span(method: &Method, host: &str) -> tracing::Span {
    tracing::info_span!("fetch", http.request.method = %method, server.address = host, http.response.status_code = tracing::field::Empty)
}

/// A response as `$fetch` hands it to the code (and as a replay serves it back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FetchResponse {
    pub status: u16,
    pub status_text: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// One `$fetch` of a run, as recorded: what the code asked for (secrets as
/// their placeholders, credential headers redacted) and what it got back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FetchExchange {
    pub method: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_headers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_body: Option<String>,
    /// The response, or the message `$fetch` rejected with; `None`: no
    /// answer came before the call ended.
    pub response: Option<Result<FetchResponse, String>>,
    /// A body was cut to keep the recording small (see [`RECORDED_BODY_BYTES`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// Of each body, a recording keeps this much; of all a run's bodies, [`RECORDED_BYTES`].
pub const RECORDED_BODY_BYTES: usize = 256 * 1024;
pub const RECORDED_BYTES: usize = 1024 * 1024;
/// What stands in a recording for a value it must not keep.
pub const REDACTED: &str = "[redacted]";
/// How `$env` secrets are blanked out of outcomes (`tools::env`).
const ENV_MASK: &str = "••••••";

/// Headers, sent or received, that carry credentials whatever the tool's
/// settings say: any whose name has one of these words in it (so
/// `Authorization`, `Set-Cookie`, `Ocp-Apim-Subscription-Key`,
/// `X-Functions-Key`, `DD-APPLICATION-KEY`, `X-Amz-Security-Token`).
fn credential_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["key", "token", "secret", "signature", "auth", "session", "password", "credential", "cookie"].iter().any(|word| name.contains(word))
}

impl FetchExchange {
    /// The recording of a request (its body within `budget`, the bytes left
    /// for the run's recording); its answer follows with [`FetchExchange::answered`].
    pub(super) fn of(req: &FetchRequest, budget: &mut usize) -> Self {
        let mut truncated = false;
        let request_body = req.body.as_deref().map(|body| keep(body, budget, &mut truncated));
        Self {
            method: req.method.to_string(),
            url: req.url.to_string(),
            request_headers: redact_headers(&req.headers),
            request_body,
            response: None,
            truncated,
        }
    }

    /// Keeps `answer`, its body within `budget`.
    pub(super) fn answered(&mut self, answer: &Result<FetchResponse, String>, budget: &mut usize) {
        self.response = Some(match answer {
            Ok(r) => Ok(FetchResponse {
                status: r.status,
                status_text: r.status_text.clone(),
                url: r.url.clone(),
                headers: redact_headers(&r.headers),
                body: keep(&r.body, budget, &mut self.truncated),
            }),
            Err(message) => Err(message.clone()),
        });
    }

    /// Applies `clean` to every text of the exchange (to redact values out of it).
    pub fn clean_texts(&mut self, mut clean: impl FnMut(&mut String)) {
        clean(&mut self.url);
        self.request_headers.iter_mut().for_each(|(_, v)| clean(v));
        self.request_body.iter_mut().for_each(&mut clean);
        match &mut self.response {
            Some(Ok(r)) => {
                clean(&mut r.url);
                r.headers.iter_mut().for_each(|(_, v)| clean(v));
                clean(&mut r.body);
            }
            Some(Err(message)) => clean(message),
            None => {}
        }
    }
}

/// What a recording keeps of `text`: at most [`RECORDED_BODY_BYTES`] and what
/// is left of `budget` (copied, never the whole of a large body first).
fn keep(text: &str, budget: &mut usize, truncated: &mut bool) -> String {
    let mut at = text.len().min(RECORDED_BODY_BYTES).min(*budget);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    *truncated |= at < text.len();
    *budget -= at;
    text[..at].to_owned()
}

fn redact_headers(headers: &[(String, String)]) -> Vec<(String, String)> {
    headers.iter().map(|(name, value)| (name.clone(), if credential_header(name) { REDACTED.to_owned() } else { value.clone() })).collect()
}

/// Whether `url` is the recorded one, where a redacted part of the
/// recording stands for any text (the editor may fill the real value in).
fn same_url(recorded: &str, url: &str) -> bool {
    if !recorded.contains(REDACTED) && !recorded.contains(ENV_MASK) {
        return recorded == url;
    }
    let recorded = recorded.replace(ENV_MASK, REDACTED);
    let mut parts = recorded.split(REDACTED);
    let Some(mut rest) = url.strip_prefix(parts.next().unwrap_or_default()) else { return false };
    let mut parts = parts.peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// What a replay answers a request with: the first recorded exchange with
/// the same method and URL not served yet (the last one again once all
/// were), never the network. `Err`: the recording has no such request.
pub(super) fn replayed(
    tape: &[FetchExchange],
    served: &mut [bool],
    req: &FetchRequest,
) -> Result<Option<Result<FetchResponse, String>>, String> {
    let (method, url) = (req.method.as_str(), req.url.as_str());
    let same: Vec<usize> = (0..tape.len()).filter(|&i| tape[i].method == method && same_url(&tape[i].url, url)).collect();
    let Some(&i) = same.iter().find(|&&i| !served[i]).or(same.last()) else {
        return Err(format!("replay: the recorded call sent no {method} {url} (a replay answers $fetch from the recording only)"));
    };
    served[i] = true;
    Ok(tape[i].response.clone())
}

async fn send(client: reqwest::Client, reach: Arc<Reach>, mut req: FetchRequest, max_bytes: usize) -> Result<FetchResponse, String> {
    let mut renewed = false;
    for _ in 0..=MAX_REDIRECTS {
        // `req` keeps the placeholders; values go only into what this hop sends.
        let secrets = reach.secrets();
        let (url, headers) = secrets.fill(&req.url, &req.headers, req.body.as_deref()).map_err(|e| e.to_string())?;
        let mut builder = client.request(req.method.clone(), url);
        // The trace context is the host's to send: it replaces one the code set.
        let trace = crate::trace::headers(&tracing::Span::current());
        let from_code =
            headers.iter().filter(|(name, _)| trace.is_empty() || !crate::trace::HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h)));
        for (name, value) in from_code.chain(&trace) {
            builder = builder.header(name, value);
        }
        if let Some(body) = &req.body {
            builder = builder.body(body.clone());
        }
        let mut response = builder.send().await.map_err(|e| crate::outbound::describe(&e))?;
        let status = response.status();
        // A person's token the API refused before its expiry: renewed, and
        // the request sent once more (a 401 means it was not acted on).
        if status == StatusCode::UNAUTHORIZED && !renewed {
            if let Some((app, refused)) = secrets.account_in(&req.headers) {
                renewed = true;
                if reach.renew(app, refused).await {
                    continue;
                }
            }
        }
        if let Some(location) = status.is_redirection().then(|| response.headers().get(LOCATION)).flatten() {
            // A value the host put into the location is a placeholder again, so the next hop's checks apply to it.
            let location = secrets.mask(location.to_str().unwrap_or_default().to_owned());
            let next = req.url.join(&location).map_err(|_| format!("invalid redirect location {location:?}"))?;
            check_target(&reach, &next).map_err(|e| format!("redirect refused: {e}"))?;
            if next.host() != req.url.host() {
                req.headers
                    .retain(|(name, _)| !name.eq_ignore_ascii_case(AUTHORIZATION.as_str()) && !name.eq_ignore_ascii_case(COOKIE.as_str()));
            }
            req.headers.retain(|(_, value)| secrets.may_follow(value, &next));
            let becomes_get = status == StatusCode::SEE_OTHER
                || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND) && req.method == Method::POST);
            if becomes_get {
                req.method = Method::GET;
                req.body = None;
            }
            req.url = next;
            continue;
        }

        let too_large = || format!("response body from {} exceeds {}", req.url, human_bytes(max_bytes));
        if response.content_length().unwrap_or(0) > max_bytes as u64 {
            return Err(too_large());
        }
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                (name.as_str().to_string(), value)
            })
            .collect();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| crate::outbound::describe(&e))? {
            if body.len() + chunk.len() > max_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        return Ok(FetchResponse {
            status: status.as_u16(),
            status_text: status.canonical_reason().unwrap_or_default().to_string(),
            url: req.url.to_string(),
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
    }
    Err(format!("too many redirects (more than {MAX_REDIRECTS})"))
}

/// Headers that ask a server to act on a GET as on another method.
const METHOD_OVERRIDES: [&str; 3] = ["x-http-method-override", "x-http-method", "x-method-override"];

/// Refuses what a read-only tool may not send: a method but GET and HEAD,
/// a header asking the server to take it as another method, a body (a GET
/// with one is a write in disguise to servers that read it).
pub(super) fn check_method(reach: &Reach, req: &FetchRequest) -> Result<(), String> {
    if !reach.read_only {
        return Ok(());
    }
    if !crate::outbound::read_only_method(req.method.as_str()) {
        return Err(format!("this tool is read-only: $fetch sends only GET and HEAD requests, not {}", req.method));
    }
    if let Some((name, _)) = req.headers.iter().find(|(name, _)| METHOD_OVERRIDES.iter().any(|o| name.eq_ignore_ascii_case(o))) {
        return Err(format!(
            "this tool is read-only: $fetch does not send {name}, which asks the server to take the {} as another method",
            req.method
        ));
    }
    if req.body.as_deref().is_some_and(|body| !body.is_empty()) {
        return Err(format!("this tool is read-only: $fetch sends {} requests without a body", req.method));
    }
    Ok(())
}

/// The request as a future for the fetch runtime, or why it may not start.
pub(super) fn request(
    reach: &Arc<Reach>,
    limits: &Limits,
    req: FetchRequest,
) -> Result<impl Future<Output = Result<FetchResponse, String>> + Send + 'static, String> {
    check_method(reach, &req)?;
    check_target(reach, &req.url)?;
    let io = io()?;
    // Redirects are followed by hand (`send`) so that each hop is checked.
    let client = io.clients.get(&reach.internal, |b| b.user_agent("toolshed-sandbox"))?;
    let timeout = Duration::from_millis(limits.fetch_timeout_ms);
    let url = req.url.clone();
    let reach = reach.clone();
    let request = send(client, reach.clone(), req, limits.fetch_response_bytes);
    Ok(async move {
        let answer = tokio::time::timeout(timeout, request)
            .await
            .unwrap_or_else(|_| Err(format!("request to {url} timed out after {} ms", timeout.as_millis())));
        // Errors too: reqwest's name the URL it sent, values included.
        let secrets = reach.secrets();
        match answer {
            Ok(response) => Ok(response.masked(&secrets)),
            Err(message) => Err(secrets.mask(message)),
        }
    })
}

impl FetchResponse {
    /// The response with every copy of a secret's value replaced by its
    /// placeholder; a body that changed gets its new length, so not even the
    /// value's length is told.
    fn masked(self, secrets: &Secrets) -> Self {
        if secrets.is_empty() {
            return self;
        }
        let body = secrets.mask(self.body);
        let length = body.len().to_string();
        let headers = self
            .headers
            .into_iter()
            .map(|(name, value)| match name.eq_ignore_ascii_case(CONTENT_LENGTH.as_str()) {
                true => (name, length.clone()),
                false => (secrets.mask(name), secrets.mask(value)),
            })
            .collect();
        Self { status: self.status, status_text: self.status_text, url: secrets.mask(self.url), headers, body }
    }
}

/// The request `$fetch(url, init)` asks for.
pub(super) fn parse_request(url: &str, init: Option<&Value<'_>>) -> Result<FetchRequest, String> {
    let url = Url::parse(url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
    let mut req = FetchRequest { url, method: Method::GET, headers: Vec::new(), body: None };
    let Some(init) = init.filter(|v| !v.is_undefined() && !v.is_null()) else {
        return Ok(req);
    };
    let init = init.as_object().ok_or("$fetch: init must be an object")?;
    let bad = |field: &str| format!("$fetch: init.{field} is invalid");
    if let Some(method) = init.get::<_, Option<String>>("method").map_err(|_| bad("method"))? {
        req.method = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).map_err(|_| bad("method"))?;
    }
    if let Some(headers) = init.get::<_, Option<Object>>("headers").map_err(|_| bad("headers"))? {
        for entry in headers.props::<String, Coerced<String>>() {
            let (name, value) = entry.map_err(|_| bad("headers"))?;
            req.headers.push((name, value.0));
        }
    }
    req.body = init
        .get::<_, Option<String>>("body")
        .map_err(|_| "$fetch: init.body must be a string (use JSON.stringify for objects)".to_string())?;
    // The caller's token at a connected app: a placeholder the host fills
    // in, hop by hop, for the app's hosts only (`secrets.rs`).
    if let Some(app) = init.get::<_, Option<String>>("account").map_err(|_| bad("account"))? {
        if !app.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') || app.is_empty() {
            return Err(format!("$fetch: init.account {app:?} is not an app name"));
        }
        if req.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("authorization")) {
            return Err("$fetch: give init.account or an Authorization header, not both".into());
        }
        let token = super::secrets::placeholder(&format!("{}{app}", super::secrets::ACCOUNT_PREFIX));
        req.headers.push(("Authorization".into(), format!("Bearer {token}")));
    }
    Ok(req)
}

/// `{status, statusText, ok, url, headers, text(), json()}`, body already read.
pub(super) fn response_object<'js>(ctx: &Ctx<'js>, response: FetchResponse) -> rquickjs::Result<Object<'js>> {
    let object = Object::new(ctx.clone())?;
    object.set("status", response.status)?;
    object.set("statusText", response.status_text)?;
    object.set("ok", (200..300).contains(&response.status))?;
    object.set("url", response.url)?;
    let headers = Object::new(ctx.clone())?;
    for (name, value) in response.headers {
        let joined = match headers.get::<_, Option<String>>(name.as_str())? {
            Some(previous) => format!("{previous}, {value}"),
            None => value,
        };
        headers.set(name, joined)?;
    }
    object.set("headers", headers)?;

    let body: std::rc::Rc<str> = response.body.into();
    let text_body = body.clone();
    let text = Function::new(ctx.clone(), move |ctx: Ctx<'js>| {
        let text = (&*text_body).into_js(&ctx)?;
        settled(&ctx, Ok(text))
    })?;
    let json = Function::new(ctx.clone(), move |ctx: Ctx<'js>| {
        let parsed = ctx.json_parse(body.as_bytes()).map_err(|_| ctx.catch());
        settled(&ctx, parsed)
    })?;
    object.set("text", text)?;
    object.set("json", json)?;
    Ok(object)
}

fn settled<'js>(ctx: &Ctx<'js>, outcome: Result<Value<'js>, Value<'js>>) -> rquickjs::Result<Promise<'js>> {
    let (promise, resolve, reject) = ctx.promise()?;
    match outcome {
        Ok(value) => resolve.call::<_, ()>((value,))?,
        Err(error) => reject.call::<_, ()>((error,))?,
    }
    Ok(promise)
}

#[cfg(test)]
mod tests {
    use super::{credential_header, same_url, Reach};
    use crate::outbound::{host_allowed, split_port};
    use crate::secrets::Secrets;
    use crate::{OutboundSecret, Renew};

    #[tokio::test]
    async fn a_request_refused_while_the_token_is_renewed_waits_for_the_new_one() {
        let (give, token) = tokio::sync::oneshot::channel::<String>();
        let token = std::sync::Mutex::new(Some(token));
        let renew = Renew::new(move |_, _| {
            let token = token.lock().unwrap().take().expect("renewed once");
            Box::pin(async move { token.await.ok() })
        });
        let reach = Reach {
            allow: Vec::new(),
            internal: Default::default(),
            secrets: std::sync::Mutex::new(Secrets::new(vec![OutboundSecret::new("account.jira", "tok-old", Vec::new())])),
            renew: Some(renew),
            renewed: Default::default(),
            read_only: false,
        };
        let (first, second) = (reach.renew("jira", "tok-old"), reach.renew("jira", "tok-old"));
        tokio::pin!(first, second);
        // Polled once each: the first is renewing, and the second, refused
        // meanwhile, waits for that token rather than giving up.
        tokio::select! { biased; _ = &mut first => panic!("renewed before the token came"), _ = std::future::ready(()) => {} }
        tokio::select! { biased; _ = &mut second => panic!("gave up while the token was renewed"), _ = std::future::ready(()) => {} }
        give.send("tok-new".into()).unwrap();
        assert!(first.await && second.await, "both send the new token");
        assert_eq!(reach.secrets.lock().unwrap().account_token("jira"), Some("tok-new"));
    }

    #[test]
    fn a_header_whose_name_says_credential_is_redacted_whoever_sent_it() {
        for name in [
            "Authorization",
            "Cookie",
            "Set-Cookie",
            "Ocp-Apim-Subscription-Key",
            "X-Functions-Key",
            "DD-APPLICATION-KEY",
            "X-Request-Key",
            "X-Api-Token",
            "X-Client-Secret",
            "X-Amz-Signature",
            "X-Session-Id",
            "X-Password",
            "X-Goog-Credential",
            "Proxy-Authenticate",
        ] {
            assert!(credential_header(name), "{name}");
        }
        for name in ["Content-Type", "Accept", "X-Request-Id", "Keep-Alive", "User-Agent", "ETag"] {
            assert!(!credential_header(name), "{name}");
        }
    }

    #[test]
    fn a_redacted_part_of_a_recorded_url_matches_any_value() {
        assert!(same_url("http://h/a?x=1", "http://h/a?x=1"));
        assert!(!same_url("http://h/a?x=1", "http://h/a?x=2"));
        assert!(same_url("http://h/a?key=[redacted]&x=1", "http://h/a?key=k-123&x=1"));
        assert!(same_url("http://h/a?key=[redacted]&x=1", "http://h/a?key=[redacted]&x=1"));
        assert!(same_url("http://h/[redacted]/b?t=••••••", "http://h/u1/b?t=s3cret"));
        assert!(!same_url("http://h/a?key=[redacted]&x=1", "http://h/a?key=k-123&x=2"));
        assert!(!same_url("http://h/a?key=[redacted]", "http://other/a?key=k"));
    }

    #[test]
    fn allow_list_matches_exact_hosts_and_subdomain_wildcards() {
        let allow = vec!["api.example.com".to_string(), "*.corp.test".to_string()];
        assert!(host_allowed(&allow, "API.example.com", 443));
        assert!(host_allowed(&allow, "a.corp.test", 80));
        assert!(host_allowed(&allow, "a.b.corp.test", 443));
        assert!(!host_allowed(&allow, "corp.test", 443));
        assert!(!host_allowed(&allow, "evilcorp.test", 443));
        assert!(!host_allowed(&allow, "example.com", 443));
        assert!(!host_allowed(&allow, "api.example.com.evil.org", 443));
    }

    #[test]
    fn an_entry_allows_80_and_443_unless_it_names_its_port() {
        let allow = vec!["api.example.com".to_string(), "db.example.com:8443".to_string(), "[::1]:8080".to_string()];
        assert!(host_allowed(&allow, "api.example.com", 80) && host_allowed(&allow, "api.example.com", 443));
        assert!(!host_allowed(&allow, "api.example.com", 22));
        assert!(!host_allowed(&allow, "api.example.com", 8443));
        assert!(host_allowed(&allow, "db.example.com", 8443));
        assert!(!host_allowed(&allow, "db.example.com", 443));
        assert!(host_allowed(&allow, "[::1]", 8080));
        assert_eq!(split_port("host:81"), ("host", Some(81)));
        assert_eq!(split_port("::1"), ("::1", None));
        assert_eq!(split_port("[fe80::1]:9"), ("fe80::1", Some(9)));
    }
}
