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
struct SignIn {
    result: String,
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
    sign_ins: Family<SignIn, Counter>,
    pool: Family<State, Gauge>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// 1 ms to about 33 s, doubling: a tool's limit is 30 s.
fn durations() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("toolshed");
        let calls = Family::<Call, Counter>::default();
        registry.register("tool_calls", "Tool calls that ran, or were refused for their arguments or a full sandbox", calls.clone());
        let durations = Durations::new_with_constructor(durations);
        registry.register("tool_call_duration_seconds", "Time from a call's arrival to its result", durations.clone());
        let sign_ins = Family::<SignIn, Counter>::default();
        registry.register("sign_ins", "Password sign-ins by result", sign_ins.clone());
        let pool = Family::<State, Gauge>::default();
        registry.register("db_pool_connections", "Database connections of this process, idle or in use", pool.clone());
        Self { registry, calls, durations, sign_ins, pool }
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
        self.sign_ins.get_or_create(&SignIn { result: result.to_owned() }).inc();
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
}
