//! Telemetry: `tracing` to a log, W3C trace context across every hop
//! (`propagate`), spans and metrics over OTLP when the standard `OTEL_*`
//! variables ask for it (`export`), and metrics as Prometheus text
//! (`metrics`).

mod export;
mod http_client;
pub mod metrics;
mod propagate;
mod scrape;

use std::sync::OnceLock;

use opentelemetry::trace::TracerProvider as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

static PROVIDER: OnceLock<opentelemetry_sdk::trace::SdkTracerProvider> = OnceLock::new();

pub use http_client::{TraceHeaders, mcp_http_client, mcp_unix_client};
pub use propagate::{
    TRACEPARENT, TRACESTATE, adopt_http_parent, adopt_map_parent, adopt_mcp_parent,
    adopt_meta_parent, current_trace_id, inject_context, inject_map, inject_meta, server_span,
};
pub use scrape::Scrape;

/// Installs the subscriber for a process named `service`. Logs go to stderr
/// (filter with `RUST_LOG`, default `info`). Spans always carry an
/// OpenTelemetry context so trace ids propagate even without an exporter.
pub fn init(service: &'static str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    init_with(service, Some(filter));
}

/// Installs the subscriber with log lines filtered by `logs`, or none at
/// all (a command whose stderr is its user's, `clankie status`); spans are
/// exported either way when OTLP is configured.
pub fn init_with(service: &'static str, logs: Option<EnvFilter>) {
    let fmt = logs.map(|filter| {
        let (writer, ansi) = log_writer();
        tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(ansi)
            .with_target(false)
            .with_filter(filter)
            .with_filter(no_session_ids())
    });

    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(format!("clankie-{service}"))
        .build();
    metrics::init(resource.clone(), service);
    let mut builder =
        opentelemetry_sdk::trace::SdkTracerProvider::builder().with_resource(resource);
    if export::enabled(export::Signal::Traces) {
        match export::span_exporter() {
            Ok(exporter) => builder = builder.with_batch_exporter(exporter),
            Err(e) => eprintln!("clankie-{service}: otlp traces disabled: {e}"),
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

/// Flushes pending spans and metrics (call before exit).
pub fn shutdown() {
    if let Some(p) = PROVIDER.get() {
        let _ = p.shutdown();
    }
    metrics::shutdown();
}
