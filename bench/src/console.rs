//! The web console in a real headless Chromium: its first page load (from
//! navigation to the first snapshot drawn) beside loading the static
//! sign-in page, and how long after a call's answer its row is on screen,
//! beside the call itself.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clankie_tests::Stack;
use clankie_tests::browser::Browser;
use serde_json::json;

use crate::{line, summarize, us};

/// Milliseconds since the epoch, with the fraction (the browser's
/// `performance.timeOrigin + performance.now()` is on the same clock).
fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or_default()
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) / 1000.0)
}

/// Watches the calls table: the wall time each receipt id was first drawn.
const WATCH_CALLS: &str = "
window.benchSeen = {};
const body = document.querySelector('#calls tbody');
new MutationObserver(() => {
  const now = performance.timeOrigin + performance.now();
  for (const td of body.querySelectorAll('td.receipt')) {
    if (!(td.textContent in window.benchSeen)) window.benchSeen[td.textContent] = now;
  }
}).observe(body, { childList: true });
return true;";

pub(crate) async fn bench_console(rounds: usize) -> anyhow::Result<()> {
    println!("== web console: first page load, live update after a call (headless Chromium) ==");
    let stack = Stack::start().await?;
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let token = stack.token("bench");
    let bridge = stack.fleet_bridge(&token).await?;
    clankie_tests::wait_tool(&bridge, "time_get_current_time").await;
    let owner = std::fs::read_to_string(stack.paths().owner_credential())?;
    let b = Browser::start().await?;
    b.sign_in_console(&stack.url, owner.trim()).await?;

    // What one look costs the gateway: the snapshot as JSON, beside
    // /healthz (one HTTP round trip).
    let cookie = b.client.get_named_cookie("clankie_console").await?;
    let cookie = format!("clankie_console={}", cookie.value());
    let (mut state, mut health) = (Vec::new(), Vec::new());
    for _ in 0..rounds.min(100) {
        let (url, cookie) = (format!("{}/console/state", stack.url), cookie.clone());
        let h = format!("{}/healthz", stack.url);
        let (s, hz) = tokio::task::spawn_blocking(move || {
            let t = Instant::now();
            let (status, _) = clankie_tests::http(&url, "GET", &[("Cookie", &cookie)], "");
            let s = t.elapsed();
            let t = Instant::now();
            clankie_tests::http(&h, "GET", &[], "");
            (status, s, t.elapsed())
        })
        .await
        .map(|(status, s, hz)| (status == 200).then_some((s, hz)))?
        .ok_or_else(|| anyhow::anyhow!("GET /console/state refused"))?;
        state.push(s);
        health.push(hz);
    }
    let (st, hz) = (summarize(state), summarize(health));
    line("/healthz", &hz);
    line("GET /console/state (one snapshot)", &st);
    println!(
        "  snapshot vs /healthz: p50 x{:.2}, p99 x{:.2}",
        us(st.p50) / us(hz.p50).max(1e-9),
        us(st.p99) / us(hz.p99).max(1e-9)
    );

    // First page load: navigation start to the first snapshot drawn, beside
    // the static sign-in page's load (a fresh browser context each time
    // would measure Chromium, not the console).
    let (mut console, mut static_page) = (Vec::new(), Vec::new());
    for _ in 0..rounds.min(50) {
        b.client.goto(&format!("{}/console", stack.url)).await?;
        let first = b
            .wait_js(
                "return window.consoleDrawn && window.consoleDrawn.first;",
                Duration::from_secs(30),
            )
            .await
            .and_then(|v| v.as_f64())
            .ok_or_else(|| anyhow::anyhow!("the console drew nothing"))?;
        console.push(ms(first));
        // The sign-in page, as a signed-out browser sees it.
        let cookie = b.client.get_named_cookie("clankie_console").await?;
        b.client.delete_cookie("clankie_console").await?;
        b.client.goto(&format!("{}/console", stack.url)).await?;
        let loaded = b
            .wait_js(
                "const n = performance.getEntriesByType('navigation')[0]; return n && n.loadEventEnd > 0 && document.getElementById('token') ? n.loadEventEnd : null;",
                Duration::from_secs(30),
            )
            .await
            .and_then(|v| v.as_f64())
            .ok_or_else(|| anyhow::anyhow!("the sign-in page did not load"))?;
        static_page.push(ms(loaded));
        b.client.add_cookie(cookie).await?;
    }
    let (c, s) = (summarize(console), summarize(static_page));
    line("sign-in page load (static)", &s);
    line("console first page load (first snapshot drawn)", &c);
    println!(
        "  console first load vs static page: p50 x{:.2}, p99 x{:.2}",
        us(c.p50) / us(s.p50).max(1e-9),
        us(c.p99) / us(s.p99).max(1e-9)
    );

    // Live update: from the call's answer to its row drawn.
    b.client.goto(&format!("{}/console", stack.url)).await?;
    b.wait_js(
        "return window.consoleDrawn && window.consoleDrawn.first;",
        Duration::from_secs(30),
    )
    .await
    .ok_or_else(|| anyhow::anyhow!("the console drew nothing"))?;
    b.js(WATCH_CALLS).await;
    let (mut calls, mut updates) = (Vec::new(), Vec::new());
    for _ in 0..rounds.min(100) {
        // Calls a person watches, not a flood: the feed looks at most every
        // 100 ms, and a call right after the last look would wait that out.
        tokio::time::sleep(Duration::from_millis(250)).await;
        let sent = wall_ms();
        let answer = clankie_tests::utc_now(&bridge).await?;
        let answered = wall_ms();
        let receipt = answer["receiptId"].as_str().unwrap_or_default().to_owned();
        let drawn = b
            .wait_js(
                &format!("return window.benchSeen[{}];", json!(receipt)),
                Duration::from_secs(30),
            )
            .await
            .and_then(|v| v.as_f64())
            .ok_or_else(|| anyhow::anyhow!("call {receipt} never showed"))?;
        calls.push(ms(answered - sent));
        updates.push(ms(drawn - answered));
    }
    let (c, u) = (summarize(calls), summarize(updates));
    line("clankie_call through the bridge", &c);
    line("console row drawn after the answer", &u);
    println!(
        "  live update vs the call itself: p50 x{:.2}, p99 x{:.2} (unnudged, the feed looks every 2 s)",
        us(u.p50) / us(c.p50).max(1e-9),
        us(u.p99) / us(c.p99).max(1e-9),
    );
    Ok(())
}
