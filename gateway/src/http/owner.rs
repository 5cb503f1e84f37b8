//! The owner credential on the gateway's own owner pages (`/metrics`, the
//! console): the gateway holds only its hash, loaded at start; a gateway
//! that could not load it refuses every owner page.

use clankie_runtime::owner::OwnerCheck;

/// The bearer token an HTTP request presents, if any.
pub(crate) fn presented(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Whether `headers` carry the owner bearer `owner` checks (none loaded:
/// never).
pub(crate) fn matches(owner: Option<&OwnerCheck>, headers: &http::HeaderMap) -> bool {
    owner.is_some_and(|o| o.matches_headers(headers))
}
