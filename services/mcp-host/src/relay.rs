//! What upstreams say while calls run: `notifications/progress` for a call
//! that asked for it, and `notifications/message` log lines.
//!
//! Every dispatched upstream call is registered here for as long as it is
//! in flight, under its receipt id. rmcp puts a progress token of its own
//! on each request it sends, and a call is bound to that token as soon as
//! the request has left ([`Registration::bind`]). A progress notification
//! reaches the call whose token it names on the account it came from:
//! tokens are counted per connection, so the account is part of the key.
//!
//! Log lines are not tied to a request on the wire, so who may read one is
//! a question of authority:
//!
//! - every line goes to the account-wide feed ([`Relay::logs`]), which the
//!   gateway hands to fleet sessions: a fleet member can call every tool of
//!   every connected account already;
//! - a grant holds only some tools of one account, so a grant call hears a
//!   line only while it is the one call in flight on that account. With two
//!   calls in flight a line cannot be placed, and no grant hears it.

use std::collections::HashMap;
use std::sync::Arc;

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::progress::Routes;
use clankie_types::log_level;
use parking_lot::Mutex;
use tokio::sync::{broadcast, mpsc};

/// Log lines buffered for a slow feed reader before it starts missing them.
const FEED_DEPTH: usize = 256;

/// Events buffered for one call's caller; past this a slow caller misses
/// progress and log lines, never the result (which travels apart).
pub const CALL_DEPTH: usize = 64;

/// What a call's caller wants to hear while it runs.
#[derive(Default, Clone)]
pub struct Listen {
    /// Where the events go; `None`: the caller hears only the result.
    pub events: Option<mpsc::Sender<mcphost_pb::CallEvent>>,
    pub progress: bool,
    /// An MCP level: the call hears its attributed log lines at this level
    /// or above (empty: none).
    pub log_level: String,
}

impl Listen {
    /// Whether the upstream should be asked for progress on this call.
    pub fn wants_progress(&self) -> bool {
        self.progress && self.events.is_some()
    }
}

struct Call {
    account: String,
    listen: Listen,
}

/// A progress token as one account's connection gave it.
type TokenKey = (String, String);

#[derive(Default)]
struct InFlight {
    /// By receipt id.
    calls: HashMap<String, Call>,
    /// Receipt ids in flight, by account.
    by_account: HashMap<String, Vec<String>>,
    /// Receipt ids by the progress token their request carried.
    progress: Routes<TokenKey, String, mcphost_pb::CallProgress>,
}

pub struct Relay {
    in_flight: Mutex<InFlight>,
    feed: broadcast::Sender<mcphost_pb::LogLine>,
}

/// A call's place in the relay; dropping it ends the call's registration.
pub struct Registration {
    relay: Arc<Relay>,
    receipt_id: String,
    /// Whether the call waits for a token to bind (it asked for progress).
    binding: bool,
    token: Option<TokenKey>,
}

impl Registration {
    /// The call's request left carrying `token`: its steps now reach it,
    /// with any that came first.
    pub fn bind(&mut self, token: String) {
        if !std::mem::take(&mut self.binding) {
            return;
        }
        let mut f = self.relay.in_flight.lock();
        let Some(call) = f.calls.get(&self.receipt_id) else {
            return;
        };
        let key = (call.account.clone(), token);
        let events = call.listen.events.clone();
        let early = f.progress.bind(key.clone(), self.receipt_id.clone());
        self.token = Some(key);
        if let Some(events) = events {
            for step in early {
                let _ = events.try_send(progress_event(step));
            }
        }
    }
}

fn progress_event(step: mcphost_pb::CallProgress) -> mcphost_pb::CallEvent {
    mcphost_pb::CallEvent {
        event: Some(mcphost_pb::call_event::Event::Progress(step)),
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut f = self.relay.in_flight.lock();
        if std::mem::take(&mut self.binding) {
            f.progress.abandon();
        }
        if let Some(key) = &self.token {
            f.progress.forget(key);
        }
        if let Some(call) = f.calls.remove(&self.receipt_id)
            && let Some(ids) = f.by_account.get_mut(&call.account)
        {
            ids.retain(|id| *id != self.receipt_id);
            if ids.is_empty() {
                f.by_account.remove(&call.account);
            }
        }
    }
}

impl Relay {
    pub fn new() -> Arc<Relay> {
        Arc::new(Relay {
            in_flight: Mutex::new(InFlight::default()),
            feed: broadcast::channel(FEED_DEPTH).0,
        })
    }

    /// Registers a call dispatched to `account` until the registration is
    /// dropped.
    pub fn open(self: &Arc<Self>, account: &str, receipt_id: &str, listen: Listen) -> Registration {
        let mut f = self.in_flight.lock();
        let binding = listen.wants_progress();
        if binding {
            f.progress.expect();
        }
        f.calls.insert(
            receipt_id.to_string(),
            Call {
                account: account.to_string(),
                listen,
            },
        );
        f.by_account
            .entry(account.to_string())
            .or_default()
            .push(receipt_id.to_string());
        Registration {
            relay: self.clone(),
            receipt_id: receipt_id.to_string(),
            binding,
            token: None,
        }
    }

    /// An upstream's progress notification, from `account`.
    pub fn progress(&self, account: &str, token: String, step: mcphost_pb::CallProgress) {
        let mut f = self.in_flight.lock();
        let Some((rid, step)) = f.progress.route((account.to_string(), token), step) else {
            return;
        };
        if let Some(events) = f.calls.get(&rid).and_then(|c| c.listen.events.as_ref()) {
            // A full queue drops this step: progress is advisory, and the
            // upstream must never wait on a slow caller.
            let _ = events.try_send(progress_event(step));
        }
    }

    /// An upstream's log line, from `account`: to the feed, and to the one
    /// call in flight there when there is exactly one and it listens.
    pub fn log(&self, line: mcphost_pb::LogLine) {
        {
            let f = self.in_flight.lock();
            if let Some([only]) = f.by_account.get(&line.account).map(Vec::as_slice)
                && let Some(call) = f.calls.get(only)
                && let Some(events) = &call.listen.events
                && log_level::reaches(&line.level, &call.listen.log_level)
            {
                let _ = events.try_send(mcphost_pb::CallEvent {
                    event: Some(mcphost_pb::call_event::Event::Log(line.clone())),
                });
            }
        }
        // No feed reader is not an error: nobody asked.
        let _ = self.feed.send(line);
    }

    /// What sees an account connection's incoming messages, in the order
    /// the upstream sent them: its progress steps and log lines.
    pub fn observer(self: &Arc<Self>, account: &str) -> clankie_runtime::mcp_tap::Observer {
        use rmcp::model::{JsonRpcMessage, ServerNotification};
        let relay = self.clone();
        let account = account.to_string();
        Arc::new(move |message| {
            let JsonRpcMessage::Notification(n) = message else {
                return;
            };
            match &n.notification {
                ServerNotification::ProgressNotification(p) => relay.progress(
                    &account,
                    token_key(&p.params.progress_token),
                    mcphost_pb::CallProgress {
                        progress: p.params.progress,
                        total: p.params.total,
                        message: p.params.message.clone().unwrap_or_default(),
                    },
                ),
                #[allow(deprecated, reason = "MCP logging is still what upstreams send")]
                ServerNotification::LoggingMessageNotification(l) => {
                    relay.log(mcphost_pb::LogLine {
                        account: account.clone(),
                        level: serde_json::to_value(l.params.level)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default(),
                        logger: l.params.logger.clone().unwrap_or_default(),
                        data_json: l.params.data.to_string(),
                    })
                }
                _ => {}
            }
        })
    }

    /// The account-wide log feed.
    pub fn logs(&self) -> broadcast::Receiver<mcphost_pb::LogLine> {
        self.feed.subscribe()
    }
}

/// A progress token as a key: numbers and strings never collide.
pub fn token_key(token: &rmcp::model::ProgressToken) -> String {
    match &token.0 {
        rmcp::model::NumberOrString::Number(n) => format!("n:{n}"),
        rmcp::model::NumberOrString::String(s) => format!("s:{s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(account: &str, level: &str) -> mcphost_pb::LogLine {
        mcphost_pb::LogLine {
            account: account.into(),
            level: level.into(),
            logger: String::new(),
            data_json: "\"x\"".into(),
        }
    }

    fn listening(level: &str) -> (Listen, mpsc::Receiver<mcphost_pb::CallEvent>) {
        let (tx, rx) = mpsc::channel(CALL_DEPTH);
        (
            Listen {
                events: Some(tx),
                progress: true,
                log_level: level.into(),
            },
            rx,
        )
    }

    fn logs(rx: &mut mpsc::Receiver<mcphost_pb::CallEvent>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(e) = rx.try_recv() {
            if let Some(mcphost_pb::call_event::Event::Log(l)) = e.event {
                out.push(l.level);
            }
        }
        out
    }

    #[test]
    fn a_lone_call_hears_its_accounts_lines_at_its_level() {
        let relay = Relay::new();
        let mut feed = relay.logs();
        let (listen, mut rx) = listening("warning");
        let reg = relay.open("everything", "rcpt_a", listen);
        relay.log(line("everything", "info"));
        relay.log(line("everything", "error"));
        relay.log(line("time", "error"));
        assert_eq!(logs(&mut rx), ["error"]);
        // The feed hears every line of every account.
        let fed: Vec<_> = std::iter::from_fn(|| feed.try_recv().ok())
            .map(|l| l.account)
            .collect();
        assert_eq!(fed, ["everything", "everything", "time"]);
        drop(reg);
        relay.log(line("everything", "error"));
        assert!(logs(&mut rx).is_empty(), "a settled call hears nothing");
    }

    #[test]
    fn two_calls_in_flight_on_one_account_hear_no_lines() {
        let relay = Relay::new();
        let (a, mut rx_a) = listening("debug");
        let (b, mut rx_b) = listening("debug");
        let _ra = relay.open("everything", "rcpt_a", a);
        let rb = relay.open("everything", "rcpt_b", b);
        relay.log(line("everything", "error"));
        assert!(logs(&mut rx_a).is_empty());
        assert!(logs(&mut rx_b).is_empty());
        drop(rb);
        relay.log(line("everything", "error"));
        assert_eq!(logs(&mut rx_a), ["error"]);
    }

    fn step(p: f64) -> mcphost_pb::CallProgress {
        mcphost_pb::CallProgress {
            progress: p,
            total: Some(4.0),
            message: String::new(),
        }
    }

    fn steps(rx: &mut mpsc::Receiver<mcphost_pb::CallEvent>) -> Vec<f64> {
        let mut seen = Vec::new();
        while let Ok(e) = rx.try_recv() {
            if let Some(mcphost_pb::call_event::Event::Progress(p)) = e.event {
                seen.push(p.progress);
            }
        }
        seen
    }

    #[test]
    fn progress_reaches_only_its_token_from_its_own_account() {
        let relay = Relay::new();
        let (listen, mut rx) = listening("");
        let mut r = relay.open("everything", "rcpt_a", listen);
        // A step that beats the bind still reaches the call.
        relay.progress("everything", "n:0".into(), step(1.0));
        r.bind("n:0".into());
        relay.progress("everything", "n:0".into(), step(2.0));
        // Another connection counts its tokens from zero too.
        relay.progress("time", "n:0".into(), step(3.0));
        relay.progress("everything", "n:1".into(), step(4.0));
        assert_eq!(steps(&mut rx), [1.0, 2.0]);
        drop(r);
        relay.progress("everything", "n:0".into(), step(5.0));
        assert!(steps(&mut rx).is_empty(), "a settled call hears nothing");
    }

    #[test]
    fn a_call_that_did_not_ask_for_progress_hears_none() {
        let relay = Relay::new();
        let (mut listen, mut rx) = listening("");
        listen.progress = false;
        let mut r = relay.open("everything", "rcpt_a", listen);
        r.bind("n:0".into());
        relay.progress("everything", "n:0".into(), step(1.0));
        assert!(rx.try_recv().is_err());
    }
}
