//! One Host and Origin check in front of every route, on every listener,
//! as the MCP transport asks of local servers.
//!
//! A browser that a worker opens in its pane passes the kernel proof: its
//! connections are the pane's. A page it loads must still not act as that
//! seat. Through a rebound name (DNS rebinding) the page's requests carry
//! that name as their Host; from any other site they carry that site as
//! their Origin. Both are refused here, before admission, for the seat and
//! operator routes as for `/mcp` and the health routes. Clients that are not
//! browsers send no Origin and a loopback Host.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use clankie_runtime::{ClankieError, ErrorCode};
use http::HeaderMap;
use http::header::{HOST, ORIGIN};

/// The names a request may use for the gateway: loopback, and the extra
/// hosts the owner configured for remote bearer links (`NAME` for any
/// port, `NAME:PORT` for one).
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    extra: Vec<(String, Option<u16>)>,
}

fn normal(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let a = http::uri::Authority::try_from(text).ok()?;
    // userinfo has no place in a Host or an Origin.
    if a.as_str().contains('@') {
        return None;
    }
    Some((normal(a.host()), a.port_u16()))
}

impl Hosts {
    pub(crate) fn new(extra: &[String]) -> Hosts {
        Hosts {
            extra: extra.iter().filter_map(|h| authority(h.trim())).collect(),
        }
    }

    fn allowed(&self, host: &str, port: Option<u16>) -> bool {
        matches!(host, "localhost" | "127.0.0.1" | "::1")
            || self
                .extra
                .iter()
                .any(|(h, p)| h == host && p.is_none_or(|p| Some(p) == port))
    }

    /// The request's Host must name the gateway, and its Origin (when it
    /// has one) a page of the gateway's own names.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), ClankieError> {
        let host = headers
            .get(HOST)
            .and_then(|v| v.to_str().ok())
            .and_then(authority);
        match host {
            Some((h, p)) if self.allowed(&h, p) => {}
            _ => {
                return Err(ErrorCode::HostNotAllowed
                    .err("the request's Host does not name this gateway; nothing was forwarded"));
            }
        }
        let Some(origin) = headers.get(ORIGIN) else {
            return Ok(());
        };
        let origin = origin
            .to_str()
            .ok()
            .and_then(|o| o.parse::<http::Uri>().ok())
            .filter(|u| matches!(u.scheme_str(), Some("http" | "https")))
            .filter(|u| u.path_and_query().is_none_or(|p| p.as_str() == "/"))
            .and_then(|u| u.authority().and_then(|a| authority(a.as_str())));
        match origin {
            Some((h, p)) if self.allowed(&h, p) => Ok(()),
            _ => Err(ErrorCode::OriginNotAllowed.err(
                "requests from a web page of another origin are refused; nothing was forwarded",
            )),
        }
    }
}

/// The layer: a refused request never reaches admission or a handler.
pub(crate) async fn guard(State(hosts): State<Arc<Hosts>>, req: Request, next: Next) -> Response {
    match hosts.check(req.headers()) {
        Ok(()) => next.run(req).await,
        Err(e) => {
            tracing::info!(reason = e.code.as_str(), "gateway.request.refused");
            crate::intake::refuse_unread(req, &e).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: Option<&str>, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = host {
            h.insert(HOST, v.parse().expect("host"));
        }
        if let Some(v) = origin {
            h.insert(ORIGIN, v.parse().expect("origin"));
        }
        h
    }

    fn code(hosts: &Hosts, host: Option<&str>, origin: Option<&str>) -> Option<ErrorCode> {
        hosts.check(&headers(host, origin)).err().map(|e| e.code)
    }

    #[test]
    fn loopback_names_pass_with_any_port_and_no_origin() {
        let hosts = Hosts::new(&[]);
        for host in ["localhost", "127.0.0.1:7755", "[::1]:80", "LOCALHOST:1"] {
            assert_eq!(code(&hosts, Some(host), None), None, "{host}");
        }
        assert_eq!(
            code(&hosts, Some("localhost"), Some("http://127.0.0.1:7755")),
            None
        );
    }

    #[test]
    fn a_rebound_name_a_missing_host_and_userinfo_are_refused() {
        let hosts = Hosts::new(&[]);
        for host in [
            Some("evil.example:7755"),
            Some("127.0.0.1.evil.example"),
            Some("x@127.0.0.1"),
            Some(""),
            None,
        ] {
            assert_eq!(
                code(&hosts, host, None),
                Some(ErrorCode::HostNotAllowed),
                "{host:?}"
            );
        }
    }

    #[test]
    fn another_sites_origin_and_null_are_refused() {
        let hosts = Hosts::new(&[]);
        for origin in [
            "https://evil.example",
            "null",
            "file://",
            "http://localhost.evil.example",
            "chrome-extension://abc",
        ] {
            assert_eq!(
                code(&hosts, Some("127.0.0.1:7755"), Some(origin)),
                Some(ErrorCode::OriginNotAllowed),
                "{origin}"
            );
        }
    }

    #[test]
    fn configured_hosts_pass_with_their_port_or_any() {
        let hosts = Hosts::new(&["fleet.example".into(), "pinned.example:8443".into()]);
        assert_eq!(code(&hosts, Some("fleet.example:9"), None), None);
        assert_eq!(code(&hosts, Some("pinned.example:8443"), None), None);
        assert_eq!(
            code(&hosts, Some("pinned.example:8444"), None),
            Some(ErrorCode::HostNotAllowed)
        );
        assert_eq!(
            code(&hosts, Some("fleet.example"), Some("https://fleet.example")),
            None
        );
    }
}
