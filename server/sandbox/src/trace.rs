//! W3C trace context (`traceparent`, `tracestate`): continued from what a
//! client sends, written into every request that leaves, so that a call is one
//! trace from the agent to the upstream API. Spans carry a trace context only
//! while the server exports traces (an OpenTelemetry layer is installed);
//! otherwise nothing is read or written.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The headers the trace context travels in.
pub const HEADERS: [&str; 2] = ["traceparent", "tracestate"];

/// The headers that carry `span`'s trace context to the next hop; none while
/// traces are off.
pub fn headers(span: &tracing::Span) -> Vec<(String, String)> {
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut headers = Outgoing(Vec::new());
    TraceContextPropagator::new().inject_context(&context, &mut headers);
    // The propagator writes an empty `tracestate` when there is none.
    headers.0.retain(|(_, value)| !value.is_empty());
    headers.0
}

/// Makes `span` (not entered yet) a child of the trace that `traceparent` and
/// `tracestate` name, as a client sent them. A malformed `traceparent` is
/// ignored: the span then starts a trace of its own.
pub fn continue_from(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    // W3C allows printable ASCII only; anything else would make every request
    // this one sends on fail to build (or carry bytes the standard forbids).
    let tracestate = tracestate.filter(|state| state.bytes().all(|b| (0x20..=0x7e).contains(&b)));
    let context = TraceContextPropagator::new().extract(&Incoming { traceparent, tracestate });
    if context.span().span_context().is_remote() {
        // Fails only for a span already started, which callers never pass.
        let _ = span.set_parent(context);
    }
}

struct Outgoing(Vec<(String, String)>);

impl Injector for Outgoing {
    fn set(&mut self, key: &str, value: String) {
        self.0.push((key.to_owned(), value));
    }
}

struct Incoming<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl Extractor for Incoming<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(self.traceparent),
            "tracestate" => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        HEADERS.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /// `body` with spans that have trace contexts, as when traces are exported.
    fn traced(body: impl FnOnce()) {
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), body);
    }

    fn traceparent(headers: &[(String, String)]) -> Option<&str> {
        headers.iter().find(|(name, _)| name == "traceparent").map(|(_, value)| value.as_str())
    }

    #[test]
    fn a_span_continued_from_a_traceparent_passes_the_trace_on_with_its_own_span_id() {
        traced(|| {
            let span = tracing::info_span!("call");
            continue_from(&span, PARENT, Some("vendor=1"));
            let headers = headers(&span);
            let sent = traceparent(&headers).expect("a traceparent goes out");
            assert!(sent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"), "{sent}");
            assert!(!sent.contains("00f067aa0ba902b7"), "the next hop's parent is this span, not the client's: {sent}");
            assert!(headers.contains(&("tracestate".into(), "vendor=1".into())), "{headers:?}");
        });
    }

    #[test]
    fn a_malformed_traceparent_starts_a_new_trace() {
        traced(|| {
            for garbage in ["", "00-zz-yy-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "not a header"] {
                let span = tracing::info_span!("call");
                continue_from(&span, garbage, None);
                let headers = headers(&span);
                let sent = traceparent(&headers).expect("a new trace still goes out");
                assert!(!sent.contains("4bf92f3577b34da6"), "{sent}");
                assert_eq!(sent.len(), PARENT.len(), "{sent}");
            }
        });
    }

    #[test]
    fn a_tracestate_with_bytes_outside_printable_ascii_is_dropped() {
        traced(|| {
            let span = tracing::info_span!("call");
            continue_from(&span, PARENT, Some("vendor=1\r\nx-injected: yes"));
            let headers = headers(&span);
            assert!(traceparent(&headers).is_some_and(|t| t.contains("4bf92f3577b34da6")), "the trace continues: {headers:?}");
            assert!(!headers.iter().any(|(name, _)| name == "tracestate"), "{headers:?}");
        });
    }

    #[test]
    fn with_logs_but_no_exporter_no_trace_context_goes_out() {
        let logs = tracing_subscriber::fmt::layer().with_writer(std::io::sink);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(logs), || {
            let span = tracing::info_span!("call");
            assert!(!span.is_disabled(), "the span exists, for the logs");
            continue_from(&span, PARENT, None);
            assert!(headers(&span).is_empty());
        });
    }
}
