//! The operator's web console in a real headless Chromium: sign in with the
//! owner credential, watch a hire and a call appear live, turn fleet tools
//! off from the page and see calls refused; and what a hostile page, a
//! fleet member or a wrong credential gets instead.

use std::time::Duration;

use clankie_tests::browser::Browser;
use clankie_tests::seat::Seat;
use clankie_tests::{Stack, http, http_response, structured, utc_now, wait_tool};
use serde_json::{Value, json};

const LIVE: Duration = Duration::from_secs(30);

/// The cookie a sign-in set, read by the driver (the page's own script
/// cannot: it is HttpOnly).
async fn console_cookie(b: &Browser) -> fantoccini::cookies::Cookie<'static> {
    b.client
        .get_named_cookie("clankie_console")
        .await
        .expect("the sign-in set its cookie")
}

/// The console's snapshot as a signed-in client with `cookie` reads it.
fn state(stack: &Stack, cookie: &str) -> (u16, Value) {
    let (status, body) = http(
        &format!("{}/console/state", stack.url),
        "GET",
        &[("Cookie", cookie)],
        "",
    );
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn fleet_tools(stack: &Stack) -> String {
    let out = stack.clankie_ok(&["fleet", "status", "--json"]);
    let v: Value = serde_json::from_str(&out).expect("fleet status JSON");
    v["tools"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_signs_in_shows_a_hire_and_a_call_live_and_turns_fleet_tools_off() {
    let stack = Stack::start().await.expect("stack");
    let _tmux = stack.link_tmux("work");
    let _ws = stack.add_project("alpha", &[]);
    let lead = stack.add_lead("Lead");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    // An upstream that prints markup as it dies: the console must show it
    // as text, never run it.
    let dir = tempfile::tempdir().expect("dir");
    let loud = dir.path().join("loud-server");
    std::fs::write(
        &loud,
        "#!/bin/sh\necho '<img id=injected src=x onerror=\"document.title=1\">' >&2\nexit 1\n",
    )
    .expect("script");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&loud, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let _ = stack.clankie(&[
        "connect",
        "loud",
        "--wait",
        "1",
        "--",
        loud.to_str().expect("utf8"),
    ]);
    let token = stack.token("remote");
    let bridge = stack.fleet_bridge(&token).await.expect("bridge");
    wait_tool(&bridge, "time_get_current_time").await;
    let owner = std::fs::read_to_string(stack.state.path().join("owner.token"))
        .expect("owner token")
        .trim()
        .to_owned();

    // Nobody reads the console without signing in: not a stranger, not a
    // fleet member with its bearer.
    for headers in [vec![], vec![("Authorization", format!("Bearer {token}"))]] {
        let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (status, body) = http(&format!("{}/console/state", stack.url), "GET", &h, "");
        assert_eq!(status, 401, "{body}");
        assert!(body.contains("owner_credential_required"), "{body}");
    }
    // A wrong credential (the fleet bearer) opens nothing.
    let (status, headers, body) = http_response(
        &format!("{}/console/login", stack.url),
        "POST",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &format!("token={token}"),
    );
    assert_eq!(status, 403, "{body}");
    assert!(
        headers.iter().all(|(k, _)| k != "set-cookie"),
        "{headers:?}"
    );

    // Sign in as a person would.
    let b = Browser::start().await.expect("headless chromium");
    b.sign_in_console(&stack.url, &owner)
        .await
        .expect("signed in");
    let cookie = console_cookie(&b).await;
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(
        cookie.same_site().map(|s| s.to_string()).as_deref(),
        Some("Strict")
    );
    assert_eq!(b.js("return document.cookie;").await, json!(""));

    // Every service serving; the broken account named with its own words,
    // as text.
    let services = b
        .wait_js(
            "const c = [...document.querySelectorAll('#services tbody tr')].map(r => r.textContent); return c.length === 6 && c.every(t => t.endsWith('serving')) ? c : null;",
            LIVE,
        )
        .await;
    assert!(services.is_some(), "{}", b.text_of("services").await);
    let shown = b
        .wait_js(
            "const r = [...document.querySelectorAll('#accounts tbody tr')].find(r => r.textContent.includes('loud')); return r && r.textContent.includes('<img id=injected') ? r.textContent : null;",
            LIVE,
        )
        .await;
    assert!(shown.is_some(), "{}", b.text_of("accounts").await);
    assert_eq!(
        b.js("return document.getElementById('injected') === null && document.title;")
            .await,
        json!("Clankie console"),
        "the upstream's markup ran"
    );

    // A hire appears live.
    let workdir = tempfile::tempdir().expect("dir");
    let worker = Seat::hire(&stack, workdir.path(), "w", &lead).await;
    let hire_id = worker.hire["hireId"].as_str().expect("hire id").to_owned();
    let seen = b
        .wait_js(
            &format!(
                "return document.getElementById('hires').textContent.includes({});",
                json!(hire_id)
            ),
            LIVE,
        )
        .await;
    assert!(seen.is_some(), "{}", b.text_of("hires").await);

    // A call through the bridge appears live with its outcome and receipt.
    let called = utc_now(&bridge).await.expect("call");
    let receipt = called["receiptId"].as_str().expect("receipt").to_owned();
    let row = b
        .wait_js(
            &format!(
                "const r = [...document.querySelectorAll('#calls tbody tr')].find(r => r.textContent.includes({})); return r ? r.textContent : null;",
                json!(receipt)
            ),
            LIVE,
        )
        .await;
    let row = row.unwrap_or_default();
    assert!(
        row.as_str()
            .is_some_and(|t| t.contains("time_get_current_time") && t.contains("ok")),
        "{row}"
    );

    // A page of another origin cannot turn a switch, even with the cookie;
    // nor can a request without the page's header.
    let cookie_line = format!("clankie_console={}", cookie.value());
    for headers in [
        vec![
            ("Cookie", cookie_line.as_str()),
            ("Origin", "http://evil.example"),
            ("x-clankie-console", "1"),
            ("Content-Type", "application/json"),
        ],
        vec![
            ("Cookie", cookie_line.as_str()),
            ("Content-Type", "application/json"),
        ],
    ] {
        let (status, body) = http(
            &format!("{}/console/switch", stack.url),
            "POST",
            &headers,
            r#"{"fleetTools":"off"}"#,
        );
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("origin_not_allowed"), "{body}");
    }
    assert_eq!(fleet_tools(&stack), "connected", "nothing was turned");

    // Turned off from the page: the settings say so, and calls are refused.
    b.client
        .find(fantoccini::Locator::Id("toggle-tools"))
        .await
        .expect("the switch")
        .click()
        .await
        .expect("turn fleet tools off");
    let off = b
        .wait_js(
            "return document.getElementById('fleet-tools').textContent === 'off';",
            LIVE,
        )
        .await;
    assert!(off.is_some(), "{}", b.text_of("fleet-section").await);
    assert_eq!(fleet_tools(&stack), "off");
    let refused = clankie_tests::call(
        &bridge,
        "clankie_call",
        json!({"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}}),
    )
    .await;
    let refused = match refused {
        Ok(r) => {
            assert_eq!(r.is_error, Some(true), "{r:?}");
            structured(&r).to_string()
        }
        Err(e) => e.to_string(),
    };
    assert!(refused.contains("fleet_tools_off"), "{refused}");

    // Signing out ends the sign-in: the old cookie reads nothing.
    let (status, _) = state(&stack, &cookie_line);
    assert_eq!(status, 200);
    b.js("document.querySelector('header form').submit(); return true;")
        .await;
    let login = b
        .wait_js("return document.getElementById('token') !== null;", LIVE)
        .await;
    assert!(login.is_some(), "back at the sign-in page");
    let (status, body) = state(&stack, &cookie_line);
    assert_eq!(status, 401, "{body}");
}
