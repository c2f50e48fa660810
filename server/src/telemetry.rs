//! What the process reports about itself: log lines on stderr (filtered by
//! `RUST_LOG`), and, when an OTLP endpoint is set, the spans of requests,
//! MCP calls, tool runs and `$fetch`es as traces. Traces have their own
//! filter, so a quiet log does not thin them.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The spans a trace is made of: this server's crates and the HTTP layer, at `info`.
const TRACED: &str = "toolshed=info,toolshed_domain=info,toolshed_sandbox=info,tower_http=info";

/// Flushes the spans not yet exported when dropped (at the end of `main`).
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.traces.take() {
            if let Err(e) = provider.shutdown() {
                eprintln!("warning: the last traces were not exported: {e}");
            }
        }
    }
}

/// Installs the process's subscriber: logs, and traces to `otlp` if set.
/// Called outside the async runtime: the exporter's blocking HTTP client
/// (used from the batch exporter's own thread) must not be made inside one.
pub fn init(otlp: Option<&url::Url>) -> anyhow::Result<Telemetry> {
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,sqlx=warn,tower_sessions=warn".into()));
    let traces = otlp.map(exporter).transpose()?;
    let layer = traces
        .as_ref()
        .map(|provider| tracing_opentelemetry::layer().with_tracer(provider.tracer("toolshed")).with_filter(EnvFilter::new(TRACED)));
    tracing_subscriber::registry().with(logs).with(layer).init();
    Ok(Telemetry { traces })
}

/// Batches spans and posts them as OTLP/protobuf to `{endpoint}/v1/traces`.
fn exporter(endpoint: &url::Url) -> anyhow::Result<SdkTracerProvider> {
    let base = endpoint.as_str().trim_end_matches('/');
    let url = if base.ends_with("/v1/traces") { base.to_owned() } else { format!("{base}/v1/traces") };
    let exporter = opentelemetry_otlp::SpanExporter::builder().with_http().with_endpoint(url).build()?;
    let resource = opentelemetry_sdk::Resource::builder().with_service_name("toolshed").build();
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}

/// The span of one HTTP request, continuing the trace its `traceparent`
/// header names, if any. The path only (queries may hold codes and tokens),
/// and of the registry's, not the token in it.
pub fn request_span<B>(req: &axum::http::Request<B>) -> tracing::Span {
    let path = req.uri().path();
    let path = if path.starts_with("/registry/") { "/registry/{token}/…" } else { path };
    let span = tracing::info_span!(
        "request",
        http.request.method = %req.method(),
        url.path = path,
        http.response.status_code = tracing::field::Empty,
    );
    continue_from_headers(&span, req.headers());
    span
}

/// Records the answer's status on the request's span.
pub fn response_status<B>(res: &axum::http::Response<B>, _latency: std::time::Duration, span: &tracing::Span) {
    span.record("http.response.status_code", i64::from(res.status().as_u16()));
}

/// Makes `span` continue the trace `headers` carry (`traceparent`, `tracestate`).
pub fn continue_from_headers(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(traceparent) = header("traceparent") {
        toolshed_domain::sandbox::trace::continue_from(span, traceparent, header("tracestate"));
    }
}
