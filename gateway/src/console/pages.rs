//! The console's pages: sign-in and sign-out, the page and its assets
//! (compiled into the binary; nothing is fetched at run time), the
//! snapshot as JSON, and the two fleet switches.
//!
//! Every page is sent with a content security policy that allows only the
//! gateway's own script and style, no framing, and no caching.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use clankie_proto::admission::v1 as admission_pb;
use clankie_runtime::clients::{Answer as _, Call, INTERNAL};
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::FleetTools;
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;

use super::session::{self, OwnerClients};
use crate::Shared;
use crate::http::refusal;

const LOGIN: &str = include_str!("assets/login.html");
const CONSOLE: &str = include_str!("assets/console.html");
const SCRIPT: &str = include_str!("assets/console.js");
const STYLE: &str = include_str!("assets/console.css");

/// What the console's own page is allowed to load and do.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The header the page's own switch requests carry: a form on another site
/// cannot send it, and a script there cannot without the gateway's leave.
pub(crate) const PAGE_HEADER: &str = "x-clankie-console";

fn page(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: under it a browser sends `Origin: null` with the
    // page's own form posts, which the Origin check refuses.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn html(status: StatusCode, body: String) -> Response {
    page(status, "text/html; charset=utf-8", body)
}

/// The sign-in page, with `problem` shown when there is one. The text is
/// fixed here, never taken from the request.
fn login_page(status: StatusCode, problem: &'static str) -> Response {
    html(status, LOGIN.replace("<!--problem-->", problem))
}

fn redirect_to_console(cookie: String) -> Response {
    let mut resp = page(
        StatusCode::SEE_OTHER,
        "text/plain; charset=utf-8",
        String::new(),
    );
    let h = resp.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static("/console"));
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        h.insert(header::SET_COOKIE, v);
    }
    resp
}

/// The refusal a request without an open sign-in gets.
pub(crate) fn signed_out() -> Response {
    refusal(
        &ErrorCode::OwnerCredentialRequired
            .err("sign in to the console first: open /console and give the owner credential"),
    )
}

/// `GET /console`: the console for a signed-in browser, else the sign-in.
pub(crate) async fn console(
    State(shared): State<Arc<Shared>>,
    headers: http::HeaderMap,
) -> Response {
    if shared.console.sign_ins.is_open(&headers) {
        html(StatusCode::OK, CONSOLE.to_owned())
    } else {
        login_page(StatusCode::OK, "")
    }
}

/// `GET /console/assets/NAME`: the page's script and style.
pub(crate) async fn asset(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "console.js" => page(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            SCRIPT.to_owned(),
        ),
        "console.css" => page(StatusCode::OK, "text/css; charset=utf-8", STYLE.to_owned()),
        _ => crate::http::edges::not_found(&format!("/console/assets/{name}")),
    }
}

#[derive(Deserialize)]
struct SignInForm {
    token: String,
}

/// `POST /console/login`: the owner credential, as the sign-in form posts
/// it, opens a sign-in.
pub(crate) async fn login(State(shared): State<Arc<Shared>>, body: axum::body::Bytes) -> Response {
    let token = match form_token(&body) {
        Some(t) => t,
        None => {
            return login_page(
                StatusCode::BAD_REQUEST,
                "Give the owner credential in the form.",
            );
        }
    };
    match shared.owner.as_ref() {
        None => login_page(
            StatusCode::SERVICE_UNAVAILABLE,
            "The gateway could not read the owner credential when it started, so no one can sign in; restart the stack.",
        ),
        Some(owner) if owner.matches_token(&token) => {
            let cookie = shared.console.sign_ins.open(&shared.paths, &token);
            tracing::info!("console.signed_in");
            redirect_to_console(session::set_cookie(&cookie))
        }
        Some(_) => {
            tracing::info!(
                reason = "owner_credential_invalid",
                "console.sign_in.refused"
            );
            login_page(StatusCode::FORBIDDEN, "That is not the owner credential.")
        }
    }
}

/// The token an `application/x-www-form-urlencoded` body names.
fn form_token(body: &[u8]) -> Option<String> {
    let form: SignInForm = serde_urlencoded::from_bytes(body).ok()?;
    let token = form.token.trim();
    (!token.is_empty()).then(|| token.to_owned())
}

/// `POST /console/logout`: ends the sign-in and clears the cookie.
pub(crate) async fn logout(
    State(shared): State<Arc<Shared>>,
    headers: http::HeaderMap,
) -> Response {
    if shared.console.sign_ins.close(&headers) {
        tracing::info!("console.signed_out");
    }
    shared.console.changed();
    redirect_to_console(session::clear_cookie())
}

/// `GET /console/state`: the snapshot the page draws, as JSON.
pub(crate) async fn state(State(shared): State<Arc<Shared>>, headers: http::HeaderMap) -> Response {
    let Some(owner) = shared.console.sign_ins.find(&headers) else {
        return signed_out();
    };
    let snap = super::snapshot::snapshot(&shared.health, &owner).await;
    let mut resp = axum::Json(snap).into_response();
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The two switches the console may turn (anything else is refused).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Switches {
    fleet_tools: Option<String>,
    peer_messages: Option<bool>,
}

/// `POST /console/switch`: turns `fleet.tools` or `fleet.peerMessages`,
/// as the owner who signed in, from the console's own page only.
pub(crate) async fn switch(
    State(shared): State<Arc<Shared>>,
    headers: http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some(owner) = shared.console.sign_ins.find(&headers) else {
        return signed_out();
    };
    if headers
        .get(PAGE_HEADER)
        .is_none_or(|v| v.as_bytes() != b"1")
    {
        return refusal(&ErrorCode::OriginNotAllowed.err(format!(
            "the console's switches are turned from its own page only (it sends {PAGE_HEADER}: 1); nothing was changed"
        )));
    }
    let result = set_switches(owner, &body).await;
    shared.console.changed();
    match result {
        Ok(settings) => axum::Json(serde_json::json!({
            "tools": FleetTools::wire_word(settings.tools),
            "peerMessages": settings.peer_messages,
            "revision": settings.revision,
        }))
        .into_response(),
        Err(e) => refusal(&e),
    }
}

async fn set_switches(
    mut owner: OwnerClients,
    body: &[u8],
) -> Result<admission_pb::FleetSettings, ClankieError> {
    let s: Switches = serde_json::from_slice(body).map_err(|e| {
        ErrorCode::InvalidArgument.err(format!(
            "expected {{fleetTools: \"connected\"|\"off\", peerMessages: true|false}}: {e}"
        ))
    })?;
    let tools = match s.fleet_tools.as_deref() {
        None => FleetTools::wire_or_unspecified(None),
        Some(word) => FleetTools::parse(word)
            .ok_or_else(|| {
                ErrorCode::InvalidArgument.err("fleetTools is \"connected\" or \"off\"")
            })?
            .wire(),
    };
    if s.fleet_tools.is_none() && s.peer_messages.is_none() {
        return Err(
            ErrorCode::InvalidArgument.err("nothing to turn: give fleetTools or peerMessages")
        );
    }
    let req = Call::new(admission_pb::SetFleetSettingsRequest {
        tools,
        peer_messages: s.peer_messages,
        worker_sandbox: None,
    })
    .timeout(INTERNAL)
    .request();
    let status = owner.admission.set_fleet_settings(req).await.answer()?;
    tracing::info!("console.switch.turned");
    Ok(status.settings.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sign_in_form_gives_its_token_and_nothing_else_passes() {
        assert_eq!(form_token(b"token=clko_abc").as_deref(), Some("clko_abc"));
        assert_eq!(
            form_token(b"token=%20clko_abc%20").as_deref(),
            Some("clko_abc")
        );
        assert_eq!(form_token(b"token="), None);
        assert_eq!(form_token(b"other=1"), None);
        assert_eq!(form_token(b"\xff\xfe"), None);
    }

    #[test]
    fn the_sign_in_page_shows_only_fixed_text() {
        let body = login_page(StatusCode::FORBIDDEN, "That is not the owner credential.");
        assert_eq!(body.status(), StatusCode::FORBIDDEN);
        assert!(
            body.headers()[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap_or_default()
                .contains("frame-ancestors 'none'")
        );
    }
}
