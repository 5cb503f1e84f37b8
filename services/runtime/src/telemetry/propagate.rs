//! W3C trace context in and out of a process: gRPC metadata, HTTP headers
//! and MCP `_meta` (SEP-414). A span adopts the caller's context; every
//! outgoing hop carries the current span's.

use std::sync::OnceLock;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rmcp::model::MetaObject;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `_meta` and header key of the W3C trace parent.
pub const TRACEPARENT: &str = "traceparent";
/// The `_meta` and header key of the W3C trace state.
pub const TRACESTATE: &str = "tracestate";

fn propagator() -> &'static TraceContextPropagator {
    static P: OnceLock<TraceContextPropagator> = OnceLock::new();
    P.get_or_init(TraceContextPropagator::new)
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

struct MetaExtract<'a>(&'a MetaObject);

impl Extractor for MetaExtract<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.0.get(key).and_then(|v| v.as_str())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.0.keys().map(String::as_str).collect()
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

struct MetaInject<'a>(&'a mut MetaObject);

impl Injector for MetaInject<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.0.insert(key.to_owned(), value.into());
    }
}

/// The span for one inbound gRPC request, parented on the caller's trace
/// context.
pub fn server_span(path: &str, headers: &http::HeaderMap) -> tracing::Span {
    let span = tracing::info_span!("grpc.request", rpc = %path, otel.kind = "server");
    adopt_http_parent(&span, headers);
    span
}

/// Parents `span` on the trace context in HTTP `headers`.
pub fn adopt_http_parent(span: &tracing::Span, headers: &http::HeaderMap) {
    if headers.contains_key(TRACEPARENT) {
        let _ = span.set_parent(propagator().extract(&HeaderExtract(headers)));
    }
}

/// Parents `span` on an MCP request's context: its `_meta.traceparent`
/// when it carries one (the caller's own span for this request), else the
/// HTTP request's headers. A session's requests each name their own
/// parent, so one call is one trace, never one session.
pub fn adopt_mcp_parent(span: &tracing::Span, meta: &MetaObject, headers: &http::HeaderMap) {
    if meta.get_traceparent().is_some() {
        let _ = span.set_parent(propagator().extract(&MetaExtract(meta)));
    } else {
        adopt_http_parent(span, headers);
    }
}

/// Parents `span` on the context in `meta` alone (a stdio hop has no
/// headers).
pub fn adopt_meta_parent(span: &tracing::Span, meta: &MetaObject) {
    if meta.get_traceparent().is_some() {
        let _ = span.set_parent(propagator().extract(&MetaExtract(meta)));
    }
}

/// Writes the current span's trace context into outgoing gRPC metadata.
pub fn inject_context(metadata: &mut tonic::metadata::MetadataMap) {
    let cx = tracing::Span::current().context();
    propagator().inject_context(&cx, &mut MetadataInject(metadata));
}

/// Writes `span`'s trace context into an outgoing MCP request's `_meta`,
/// replacing whatever context it carried.
pub fn inject_meta(span: &tracing::Span, meta: &mut MetaObject) {
    meta.0.remove(TRACEPARENT);
    meta.0.remove(TRACESTATE);
    propagator().inject_context(&span.context(), &mut MetaInject(meta));
}

/// Writes the current span's trace context into `carrier`: a message's own
/// map, for a hop that is neither HTTP nor gRPC metadata (a request relayed
/// inside a stream).
pub fn inject_map(carrier: &mut std::collections::HashMap<String, String>) {
    let cx = tracing::Span::current().context();
    propagator().inject_context(&cx, carrier);
}

/// Parents `span` on the trace context in `carrier`, when it holds one.
pub fn adopt_map_parent(span: &tracing::Span, carrier: &std::collections::HashMap<String, String>) {
    if carrier.contains_key(TRACEPARENT) {
        let _ = span.set_parent(propagator().extract(carrier));
    }
}

/// The current span's trace id (hex), when one is sampled.
pub fn current_trace_id() -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    let cx = tracing::Span::current().context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| sc.trace_id().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_in_meta_survives_a_round_trip_and_a_garbled_one_is_ignored() {
        let parent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";
        let mut meta = MetaObject::new();
        meta.set_traceparent(parent);
        let cx = propagator().extract(&MetaExtract(&meta));
        use opentelemetry::trace::TraceContextExt;
        assert_eq!(
            cx.span().span_context().trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        let mut out = MetaObject::new();
        propagator().inject_context(&cx, &mut MetaInject(&mut out));
        assert_eq!(out.get_traceparent(), Some(parent));

        let mut bad = MetaObject::new();
        bad.set_traceparent("00-zz-yy-01");
        let cx = propagator().extract(&MetaExtract(&bad));
        assert!(!cx.span().span_context().is_valid());
    }
}
