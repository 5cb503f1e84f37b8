//! An MCP streamable-HTTP client that sends each request's trace context as
//! HTTP headers too. rmcp's transport sends from its own worker task, where
//! no caller span is current, so the context is read from the request's own
//! `_meta` (SEP-414), which the caller wrote under its span.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcMessage, MetaObject};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

use super::propagate::{TRACEPARENT, TRACESTATE};

/// Wraps an rmcp HTTP client (reqwest, or the Unix-socket one) so each
/// request carries `traceparent`/`tracestate` headers from its `_meta`.
#[derive(Clone)]
pub struct TraceHeaders<C>(pub C);

/// The `_meta` a request was sent with: its typed params' first, then the
/// extensions' (which rmcp lets win on conflict, so they are read last).
fn trace_of(message: &ClientJsonRpcMessage) -> Vec<(&'static str, String)> {
    let JsonRpcMessage::Request(r) = message else {
        return Vec::new();
    };
    let typed: Option<&MetaObject> = match &r.request {
        ClientRequest::CallToolRequest(c) => c.params.meta.as_deref(),
        _ => None,
    };
    let extension: &MetaObject = r.request.get_meta();
    [TRACEPARENT, TRACESTATE]
        .into_iter()
        .filter_map(|key| {
            let pick = |m: &MetaObject| m.0.get(key).and_then(|v| v.as_str()).map(str::to_owned);
            pick(extension)
                .or_else(|| typed.and_then(pick))
                .map(|v| (key, v))
        })
        .collect()
}

fn with_trace(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    for (key, value) in trace_of(message) {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(key), v);
        }
    }
    headers
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for TraceHeaders<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_trace(&message, custom_headers);
        self.0
            .post_message(uri, message, session_id, auth_header, headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_trace(&message, custom_headers);
        self.0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_trace(&message, custom_headers);
        self.0
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                limits,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// The reqwest client an MCP-over-HTTP transport is built on (wrap it in
/// [`TraceHeaders`]): no idle pool, as rmcp's own default (a reused
/// connection can stall on delayed ACKs), and no redirects, so a bearer
/// and a session id never follow one to another place.
pub fn mcp_http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

/// The same over the gateway's local Unix socket, keeping its connections
/// alive between requests: the gateway proves a local connection once from
/// kernel facts and rechecks it cheaply after, so a new connection per
/// request (rmcp's own Unix client) pays the whole proof every time. A Unix
/// socket has no delayed ACKs to stall a reused connection.
pub fn mcp_unix_client(socket: &std::path::Path) -> reqwest::Client {
    reqwest::Client::builder()
        .unix_socket(socket)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}
