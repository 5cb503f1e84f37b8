//! Console sign-ins: a random cookie for a browser that presented the owner
//! credential once.
//!
//! The cookie is HttpOnly (no script on any page reads it), SameSite=Strict
//! (no other site's page sends it) and scoped to `/console`. The gateway
//! keeps only the cookie's SHA-256, so a memory dump of the table names no
//! live cookie; beside it, the owner clients the sign-in holds, which carry
//! the credential to the services that check it (the gateway decides
//! nothing for the owner). Sign-ins end after [`LIFETIME`], at sign-out, or
//! when more than [`MAX_SIGN_INS`] are open (the oldest goes first).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use clankie_runtime::clients;
use clankie_runtime::grpc::Meta;
use clankie_runtime::owner::{random_token, token_hash};
use clankie_runtime::paths::StatePaths;
use parking_lot::Mutex;

/// The cookie's name.
pub(crate) const COOKIE: &str = "clankie_console";
/// How long a sign-in lasts, however active.
pub(crate) const LIFETIME: Duration = Duration::from_secs(8 * 60 * 60);
/// The most sign-ins open at once.
pub(crate) const MAX_SIGN_INS: usize = 16;

/// The services, as the owner who signed in.
#[derive(Clone)]
pub(crate) struct OwnerClients {
    pub(crate) admission: clients::AdmissionClient,
    pub(crate) mcp: clients::McpHostClient,
    pub(crate) mailbox: clients::MailboxClient,
    pub(crate) auto: clients::AutoClient,
}

impl OwnerClients {
    fn new(paths: &StatePaths, token: &str) -> OwnerClients {
        OwnerClients {
            admission: clients::admission(paths, Meta::owner(token)),
            mcp: clients::mcp_host(paths, Meta::owner(token)),
            mailbox: clients::mailbox(paths, Meta::owner(token)),
            auto: clients::auto(paths, Meta::owner(token)),
        }
    }
}

struct SignIn {
    started: Instant,
    clients: OwnerClients,
}

/// The open sign-ins, by the SHA-256 of their cookie.
#[derive(Default)]
pub(crate) struct SignIns {
    open: Mutex<HashMap<String, SignIn>>,
}

impl SignIns {
    /// Opens a sign-in for a verified owner `token`; answers the cookie
    /// value, which is never stored.
    pub(crate) fn open(&self, paths: &StatePaths, token: &str) -> String {
        let cookie = random_token("clkc");
        let mut open = self.open.lock();
        open.retain(|_, s| s.started.elapsed() < LIFETIME);
        while open.len() >= MAX_SIGN_INS {
            let oldest = open
                .iter()
                .min_by_key(|(_, s)| s.started)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => open.remove(&k),
                None => break,
            };
        }
        open.insert(
            token_hash(&cookie),
            SignIn {
                started: Instant::now(),
                clients: OwnerClients::new(paths, token),
            },
        );
        cookie
    }

    /// The owner clients of the sign-in `headers` carry, if it is open.
    pub(crate) fn find(&self, headers: &http::HeaderMap) -> Option<OwnerClients> {
        let key = token_hash(&presented(headers)?);
        let mut open = self.open.lock();
        match open.get(&key) {
            Some(s) if s.started.elapsed() < LIFETIME => Some(s.clients.clone()),
            Some(_) => {
                open.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Ends the sign-in `headers` carry; true when one was open.
    pub(crate) fn close(&self, headers: &http::HeaderMap) -> bool {
        presented(headers)
            .map(|c| self.open.lock().remove(&token_hash(&c)).is_some())
            .unwrap_or(false)
    }

    /// Whether the sign-in `headers` carry is still open (the live stream
    /// checks between snapshots, so a sign-out ends it).
    pub(crate) fn is_open(&self, headers: &http::HeaderMap) -> bool {
        self.find(headers).is_some()
    }
}

/// The console cookie a request presents, if any.
fn presented(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The `Set-Cookie` value that opens a sign-in.
pub(crate) fn set_cookie(value: &str) -> String {
    format!(
        "{COOKIE}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}",
        LIFETIME.as_secs()
    )
}

/// The `Set-Cookie` value that ends one.
pub(crate) fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_cookie(line: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(http::header::COOKIE, line.parse().expect("cookie"));
        h
    }

    #[test]
    fn the_cookie_is_found_among_others_and_nothing_else_passes() {
        assert_eq!(
            presented(&with_cookie("a=1; clankie_console=abc ; b=2")).as_deref(),
            Some("abc")
        );
        assert_eq!(presented(&with_cookie("clankie_console=")), None);
        assert_eq!(presented(&with_cookie("xclankie_console=abc")), None);
        assert_eq!(presented(&http::HeaderMap::new()), None);
    }

    #[tokio::test]
    async fn a_sign_in_opens_closes_and_the_oldest_gives_way() {
        // The clients connect lazily: no socket is reached here.
        let paths = StatePaths::new("/nonexistent");
        let ins = SignIns::default();
        let first = ins.open(&paths, "owner");
        let h = with_cookie(&format!("{COOKIE}={first}"));
        assert!(ins.is_open(&h));
        assert!(!ins.is_open(&with_cookie(&format!("{COOKIE}={first}x"))));
        for _ in 0..MAX_SIGN_INS {
            ins.open(&paths, "owner");
        }
        assert!(!ins.is_open(&h), "the oldest sign-in gave way");
        let last = ins.open(&paths, "owner");
        let h = with_cookie(&format!("{COOKIE}={last}"));
        assert!(ins.close(&h));
        assert!(!ins.is_open(&h));
        assert!(!ins.close(&h));
    }
}
