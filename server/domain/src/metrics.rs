//! What operators scrape: one Prometheus registry per `Toolshed` (never a
//! global one: tests run several servers in one process), rendered in the
//! OpenMetrics text format Prometheus reads. Labels are bounded: a listing's
//! slug, a transport, an outcome; never a person, a token or an argument.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Why `/metrics` was not answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("metrics are off (no TOOLSHED_METRICS_TOKEN)")]
    Off,
    #[error("a bearer token that is not the metrics token")]
    WrongToken,
}

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Call {
    listing: String,
    transport: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Route {
    listing: String,
    transport: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Ended {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Transport {
    transport: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Stream {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Fetch {
    host: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct State {
    state: String,
}

type Durations = Family<Route, Histogram, fn() -> Histogram>;

pub struct Metrics {
    registry: Registry,
    calls: Family<Call, Counter>,
    durations: Durations,
    sign_ins: Family<Ended, Counter>,
    pool: Family<State, Gauge>,
    sandbox_runs: Family<Ended, Counter>,
    sandbox_queued: Histogram,
    sandbox_ran: Histogram,
    fetches: Family<Fetch, Counter>,
    sessions: Family<Transport, Gauge>,
    streams: Family<Stream, Gauge>,
    /// The hosts `fetches` has a label for; past [`FETCH_HOSTS`] the rest count as `other`.
    fetch_hosts: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Authors choose the hosts (a wildcard allows any subdomain), so their
/// labels are capped: a tool fetching from random subdomains cannot grow
/// every scrape without bound.
const FETCH_HOSTS: usize = 200;

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// 1 ms to about 33 s, doubling: a tool's limit is 30 s.
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("toolshed");
        let calls = Family::<Call, Counter>::default();
        registry.register("tool_calls", "Tool calls that ran, or were refused for their arguments or a full sandbox", calls.clone());
        let durations = Durations::new_with_constructor(seconds);
        registry.register("tool_call_duration_seconds", "Time from a call's arrival to its result", durations.clone());
        let sign_ins = Family::<Ended, Counter>::default();
        registry.register("sign_ins", "Password sign-ins by result", sign_ins.clone());
        let pool = Family::<State, Gauge>::default();
        registry.register("db_pool_connections", "Database connections of this process, idle or in use", pool.clone());
        let sandbox_runs = Family::<Ended, Counter>::default();
        registry.register(
            "sandbox_runs",
            "Sandbox runs by result: ok, tool_error, timeout, oom (the memory limit), or refused (busy, caller_limit)",
            sandbox_runs.clone(),
        );
        let sandbox_queued = seconds();
        registry.register("sandbox_queue_seconds", "Time a run waited for a sandbox worker", sandbox_queued.clone());
        let sandbox_ran = seconds();
        registry.register("sandbox_run_seconds", "Time a run took on its worker", sandbox_ran.clone());
        let fetches = Family::<Fetch, Counter>::default();
        registry.register("fetch_requests", "$fetch requests by host and status class (error: no response)", fetches.clone());
        let sessions = Family::<Transport, Gauge>::default();
        registry.register("mcp_sessions", "MCP sessions this process holds open, by transport", sessions.clone());
        let streams = Family::<Stream, Gauge>::default();
        registry.register(
            "mcp_streams",
            "MCP event streams this process holds open: standalone (a GET), call (a POST's answer), sse (legacy)",
            streams.clone(),
        );
        Self {
            registry,
            calls,
            durations,
            sign_ins,
            pool,
            sandbox_runs,
            sandbox_queued,
            sandbox_ran,
            fetches,
            sessions,
            streams,
            fetch_hosts: Default::default(),
        }
    }
}

impl Metrics {
    /// A call of `listing` (its slug) through `transport` ended with `outcome`.
    pub fn call(&self, listing: &str, transport: &str, outcome: &str, seconds: f64) {
        let (listing, transport) = (listing.to_owned(), transport.to_owned());
        let route = Route { listing, transport };
        self.durations.get_or_create(&route).observe(seconds);
        self.calls.get_or_create(&Call { listing: route.listing, transport: route.transport, outcome: outcome.to_owned() }).inc();
    }

    /// A password sign-in ended with `result` (`ok`, `wrong`, `rate_limited`, …).
    pub fn sign_in(&self, result: &str) {
        self.sign_ins.get_or_create(&Ended { result: result.to_owned() }).inc();
    }

    /// A sandbox run ended with `result`, after `queued` waiting for a worker
    /// (if it waited) and `ran` on it (if it ran).
    pub fn sandbox_run(&self, result: &str, queued: Option<std::time::Duration>, ran: Option<std::time::Duration>) {
        self.sandbox_runs.get_or_create(&Ended { result: result.to_owned() }).inc();
        if let Some(queued) = queued {
            self.sandbox_queued.observe(queued.as_secs_f64());
        }
        if let Some(ran) = ran {
            self.sandbox_ran.observe(ran.as_secs_f64());
        }
    }

    /// An MCP session of `transport` is open until the guard is dropped.
    pub fn session_opened(&self, transport: &str) -> Open {
        let gauge = self.sessions.get_or_create(&Transport { transport: transport.to_owned() }).clone();
        gauge.inc();
        Open(gauge)
    }

    /// An MCP event stream of `kind` is open until the guard is dropped.
    pub fn stream_opened(&self, kind: &str) -> Open {
        let gauge = self.streams.get_or_create(&Stream { kind: kind.to_owned() }).clone();
        gauge.inc();
        Open(gauge)
    }

    /// A `$fetch` to `host` ended with `status` (`2xx` … `5xx`, `error`).
    pub fn fetch(&self, host: &str, status: &str) {
        let host = {
            let mut hosts = self.fetch_hosts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if hosts.contains(host) || (hosts.len() < FETCH_HOSTS && hosts.insert(host.to_owned())) {
                host
            } else {
                "other"
            }
        };
        self.fetches.get_or_create(&Fetch { host: host.to_owned(), status: status.to_owned() }).inc();
    }

    /// Every metric, with the pool's connections as they are now.
    pub fn render(&self, pool_size: u32, pool_idle: usize) -> String {
        let idle = i64::try_from(pool_idle).unwrap_or(i64::MAX);
        self.pool.get_or_create(&State { state: "idle".into() }).set(idle);
        // Read apart, so the two may disagree for a moment.
        self.pool.get_or_create(&State { state: "in_use".into() }).set((i64::from(pool_size) - idle).max(0));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String does not fail");
        text
    }
}

/// Counts one open session until dropped.
#[derive(Debug)]
pub struct Open(Gauge);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A `$fetch`'s labels: the allow-list entry that let it through (as the
/// author wrote it: a wildcard stays one label however many subdomains the
/// code makes up, and a value put into a subdomain never reaches a label),
/// `not_allowed` for the rest, and its status class.
pub fn fetch_labels(allow: &[String], fetch: &toolshed_sandbox::FetchExchange) -> (String, String) {
    let url = reqwest::Url::parse(&fetch.url).ok();
    let host = url
        .as_ref()
        .and_then(|url| toolshed_sandbox::outbound::allowing_entry(allow, url.host_str()?, url.port_or_known_default()?))
        .map_or_else(|| "not_allowed".to_owned(), |entry| entry.trim().to_ascii_lowercase());
    let status = match &fetch.response {
        Some(Ok(response)) => format!("{}xx", response.status / 100),
        Some(Err(_)) => "error".to_owned(),
        None => "unanswered".to_owned(),
    };
    (host, status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_listing_transport_and_outcome() {
        let metrics = Metrics::default();
        metrics.call("finance/fx", "mcp-http", "ok", 0.004);
        metrics.call("finance/fx", "mcp-http", "ok", 0.002);
        metrics.call("finance/fx", "ui", "timeout", 2.5);
        metrics.sign_in("wrong");
        let text = metrics.render(3, 2);
        assert!(text.contains(r#"toolshed_tool_calls_total{listing="finance/fx",transport="mcp-http",outcome="ok"} 2"#), "{text}");
        assert!(text.contains(r#"toolshed_tool_calls_total{listing="finance/fx",transport="ui",outcome="timeout"} 1"#));
        assert!(text.contains(r#"toolshed_tool_call_duration_seconds_count{listing="finance/fx",transport="mcp-http"} 2"#));
        assert!(
            text.contains(r#"toolshed_tool_call_duration_seconds_bucket{le="0.004",listing="finance/fx",transport="mcp-http"} 2"#),
            "{text}"
        );
        assert!(text.contains(r#"toolshed_sign_ins_total{result="wrong"} 1"#));
        assert!(text.contains(r#"toolshed_db_pool_connections{state="in_use"} 1"#));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn a_session_or_stream_counts_as_open_until_its_guard_is_dropped() {
        let metrics = Metrics::default();
        let first = metrics.session_opened("mcp-http");
        let second = metrics.session_opened("mcp-http");
        let _sse = metrics.session_opened("mcp-sse");
        drop(first);
        let text = metrics.render(1, 1);
        assert!(text.contains(r#"toolshed_mcp_sessions{transport="mcp-http"} 1"#), "{text}");
        assert!(text.contains(r#"toolshed_mcp_sessions{transport="mcp-sse"} 1"#), "{text}");
        drop(second);
        assert!(metrics.render(1, 1).contains(r#"toolshed_mcp_sessions{transport="mcp-http"} 0"#));
        let stream = metrics.stream_opened("standalone");
        assert!(metrics.render(1, 1).contains(r#"toolshed_mcp_streams{kind="standalone"} 1"#));
        drop(stream);
        assert!(metrics.render(1, 1).contains(r#"toolshed_mcp_streams{kind="standalone"} 0"#));
    }

    #[test]
    fn fetch_hosts_past_the_cap_are_counted_as_other() {
        let metrics = Metrics::default();
        for i in 0..FETCH_HOSTS + 5 {
            metrics.fetch(&format!("h{i}.example.com"), "2xx");
        }
        metrics.fetch("h0.example.com", "5xx");
        let text = metrics.render(1, 1);
        assert!(text.contains(r#"toolshed_fetch_requests_total{host="h0.example.com",status="5xx"} 1"#), "{text}");
        assert!(text.contains(r#"toolshed_fetch_requests_total{host="other",status="2xx"} 5"#), "{text}");
        assert_eq!(text.matches("toolshed_fetch_requests_total{").count(), FETCH_HOSTS + 2);
    }

    #[test]
    fn a_fetch_is_labelled_by_the_allow_list_entry_that_let_it_through_and_its_status_class() {
        let allow = vec!["*.example.com".to_owned(), "127.0.0.1:8080".to_owned()];
        let fetch = |url: &str, response| toolshed_sandbox::FetchExchange {
            method: "GET".into(),
            url: url.into(),
            request_headers: vec![],
            request_body: None,
            response,
            truncated: false,
        };
        let answered = |status| {
            Some(Ok(toolshed_sandbox::FetchResponse {
                status,
                status_text: String::new(),
                url: String::new(),
                headers: vec![],
                body: String::new(),
            }))
        };
        let labels = |f| fetch_labels(&allow, &f);
        assert_eq!(labels(fetch("https://API.example.com/x", answered(404))), ("*.example.com".into(), "4xx".into()));
        assert_eq!(labels(fetch("https://sk-live-123.example.com/", answered(200))), ("*.example.com".into(), "2xx".into()));
        assert_eq!(labels(fetch("http://127.0.0.1:8080/", answered(200))), ("127.0.0.1:8080".into(), "2xx".into()));
        assert_eq!(labels(fetch("http://127.0.0.1:9/", Some(Err("refused".into())))), ("not_allowed".into(), "error".into()));
        assert_eq!(labels(fetch("https://evil.test/", None)), ("not_allowed".into(), "unanswered".into()));
        assert_eq!(labels(fetch("not a url", None)).0, "not_allowed");
    }

    #[test]
    fn sandbox_runs_are_counted_by_result_and_timed_when_they_ran_and_waited() {
        let metrics = Metrics::default();
        let ms = std::time::Duration::from_millis;
        metrics.sandbox_run("ok", Some(ms(0)), Some(ms(3)));
        metrics.sandbox_run("oom", Some(ms(20)), Some(ms(40)));
        metrics.sandbox_run("busy", None, None);
        // A member call of code mode, nested on its caller's worker.
        metrics.sandbox_run("ok", None, Some(ms(30)));
        let text = metrics.render(1, 1);
        assert!(text.contains(r#"toolshed_sandbox_runs_total{result="ok"} 2"#), "{text}");
        assert!(text.contains(r#"toolshed_sandbox_runs_total{result="oom"} 1"#), "{text}");
        assert!(text.contains(r#"toolshed_sandbox_runs_total{result="busy"} 1"#));
        assert!(text.contains("toolshed_sandbox_queue_seconds_count 2"), "{text}");
        assert!(text.contains("toolshed_sandbox_run_seconds_count 3"), "{text}");
        assert!(text.contains(r#"toolshed_sandbox_run_seconds_bucket{le="0.004"} 1"#), "{text}");
    }
}
