//! Where spans and metrics go: OTLP over gRPC or HTTP, chosen and aimed by
//! the standard `OTEL_*` variables (the endpoint, headers and timeout are
//! read by the exporter itself; the protocol and the on/off switches here).

use opentelemetry_otlp::WithExportConfig as _;

/// One OpenTelemetry signal.
#[derive(Clone, Copy)]
pub(super) enum Signal {
    Traces,
    Metrics,
}

impl Signal {
    fn upper(self) -> &'static str {
        match self {
            Signal::Traces => "TRACES",
            Signal::Metrics => "METRICS",
        }
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Whether `signal` is exported: an OTLP endpoint is set (generic or for
/// the signal), the SDK is not disabled, and the signal's exporter is not
/// `none`.
pub(super) fn enabled(signal: Signal) -> bool {
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return false;
    }
    if var(&format!("OTEL_{}_EXPORTER", signal.upper())).is_some_and(|v| v == "none") {
        return false;
    }
    var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
        || var(&format!("OTEL_EXPORTER_OTLP_{}_ENDPOINT", signal.upper())).is_some()
}

/// OTLP's two transports.
#[derive(Debug, PartialEq)]
pub(super) enum Protocol {
    Grpc,
    HttpProtobuf,
}

/// The protocol for `signal`: its own variable, then the generic one;
/// gRPC when neither is set (what this stack has always sent).
pub(super) fn protocol(signal: Signal) -> Result<Protocol, String> {
    let chosen = var(&format!("OTEL_EXPORTER_OTLP_{}_PROTOCOL", signal.upper()))
        .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
    match chosen.as_deref() {
        None | Some("grpc") => Ok(Protocol::Grpc),
        Some("http/protobuf") => Ok(Protocol::HttpProtobuf),
        Some(other) => Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={other} is not supported; use grpc or http/protobuf"
        )),
    }
}

pub(super) fn span_exporter() -> Result<opentelemetry_otlp::SpanExporter, String> {
    let b = opentelemetry_otlp::SpanExporter::builder();
    match protocol(Signal::Traces)? {
        Protocol::Grpc => b.with_tonic().build(),
        Protocol::HttpProtobuf => b
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build(),
    }
    .map_err(|e| e.to_string())
}

pub(super) fn metric_exporter() -> Result<opentelemetry_otlp::MetricExporter, String> {
    let b = opentelemetry_otlp::MetricExporter::builder();
    match protocol(Signal::Metrics)? {
        Protocol::Grpc => b.with_tonic().build(),
        Protocol::HttpProtobuf => b
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build(),
    }
    .map_err(|e| e.to_string())
}
