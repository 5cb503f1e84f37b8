//! Telemetry: `tracing` to stderr, W3C trace context across every gRPC hop,
//! and OTLP export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

use std::sync::OnceLock;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

static PROVIDER: OnceLock<opentelemetry_sdk::trace::SdkTracerProvider> = OnceLock::new();

fn propagator() -> &'static TraceContextPropagator {
    static P: OnceLock<TraceContextPropagator> = OnceLock::new();
    P.get_or_init(TraceContextPropagator::new)
}

/// Installs the subscriber for a process named `service`. Logs go to stderr
/// (filter with `RUST_LOG`, default `info`). Spans always carry an
/// OpenTelemetry context so trace ids propagate even without an exporter.
pub fn init(service: &'static str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let (writer, ansi) = log_writer();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi)
        .with_target(false)
        .with_filter(filter)
        .with_filter(no_session_ids());

    let mut builder = opentelemetry_sdk::trace::SdkTracerProvider::builder().with_resource(
        opentelemetry_sdk::Resource::builder()
            .with_service_name(format!("clankie-{service}"))
            .build(),
    );
    let exporting = std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
    if exporting {
        match opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()
        {
            Ok(exporter) => builder = builder.with_batch_exporter(exporter),
            Err(e) => eprintln!("clankie-{service}: otlp exporter disabled: {e}"),
        }
    }
    let provider = builder.build();
    let tracer = provider.tracer(format!("clankie-{service}"));
    let _ = PROVIDER.set(provider);
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(EnvFilter::new("info"))
        .with_filter(no_session_ids());
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init();
}

/// The default cap of one log file before it rotates.
pub const LOG_MAX_BYTES: usize = 8 << 20;
/// Rotated log files kept beside the live one (`NAME.log.1`, `NAME.log.2`).
pub const LOG_KEEP: usize = 2;

/// Where log lines go: `CLANKIE_LOG_FILE` (set by `clankie up`) as a
/// size-capped file that rotates, so a long-running service never fills the
/// disk with its log; stderr otherwise. `CLANKIE_LOG_MAX_BYTES` sets the cap.
fn log_writer() -> (tracing_subscriber::fmt::writer::BoxMakeWriter, bool) {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    let Some(path) = std::env::var_os("CLANKIE_LOG_FILE").filter(|p| !p.is_empty()) else {
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        return (BoxMakeWriter::new(std::io::stderr), ansi);
    };
    let cap = std::env::var("CLANKIE_LOG_MAX_BYTES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(LOG_MAX_BYTES);
    let file = file_rotate::FileRotate::new(
        path,
        file_rotate::suffix::AppendCount::new(LOG_KEEP),
        file_rotate::ContentLimit::BytesSurpassed(cap),
        file_rotate::compression::Compression::None,
        Some(0o600),
    );
    // tracing-subscriber's MakeWriter is implemented for the std mutex only;
    // a panic while writing one log line is the one poisoning we accept.
    #[allow(clippy::disallowed_types)]
    let writer = std::sync::Mutex::new(file);
    (BoxMakeWriter::new(writer), false)
}

/// Drops rmcp's own events and spans, whatever the filter: they name MCP
/// session ids, which must never reach a log or an exporter.
fn no_session_ids() -> tracing_subscriber::filter::FilterFn<impl Fn(&tracing::Metadata<'_>) -> bool>
{
    tracing_subscriber::filter::filter_fn(|m| !m.target().starts_with("rmcp"))
}

/// Flushes pending spans (call before exit).
pub fn shutdown() {
    if let Some(p) = PROVIDER.get() {
        let _ = p.shutdown();
    }
}

struct HeaderExtract<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtract<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct MetadataInject<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInject<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            value.parse(),
        ) {
            self.0.insert(k, v);
        }
    }
}

/// The span for one inbound request, parented on the caller's trace context.
pub fn server_span(path: &str, headers: &http::HeaderMap) -> tracing::Span {
    let span = tracing::info_span!("grpc.request", rpc = %path, otel.kind = "server");
    let parent = propagator().extract(&HeaderExtract(headers));
    let _ = span.set_parent(parent);
    span
}

/// Parents `span` on the trace context in HTTP `headers` (gateway requests).
pub fn adopt_http_parent(span: &tracing::Span, headers: &http::HeaderMap) {
    let parent = propagator().extract(&HeaderExtract(headers));
    let _ = span.set_parent(parent);
}

/// Writes the current span's trace context into outgoing gRPC metadata.
pub fn inject_context(metadata: &mut tonic::metadata::MetadataMap) {
    let cx = tracing::Span::current().context();
    propagator().inject_context(&cx, &mut MetadataInject(metadata));
}

/// The current span's trace id (hex), when one is sampled.
pub fn current_trace_id() -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    let cx = tracing::Span::current().context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| sc.trace_id().to_string())
}
