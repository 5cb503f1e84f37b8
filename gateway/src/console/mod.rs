//! The operator's web console at `/console`: the services and their health,
//! the accounts with their last error, the fleet switches, the seats and
//! hires, recent calls and uncertain receipts, and the projects on Auto,
//! live. Read-only but for `fleet.tools` and `fleet.peerMessages`.
//!
//! Behind the owner credential, given once to a sign-in form
//! (`session.rs`); the Host and Origin checks in front of every route
//! apply here as everywhere. Pages and assets are compiled into the binary
//! (`pages.rs`); the live feed is server-sent events (`events.rs`) of the
//! snapshot the services give the owner (`snapshot.rs`).

pub(crate) mod events;
pub(crate) mod pages;
pub(crate) mod session;
pub(crate) mod snapshot;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use tokio::sync::watch;

use crate::Shared;

/// The console's state in the gateway: who is signed in, and the nudge
/// that tells the live feeds to look again.
pub(crate) struct Console {
    pub(crate) sign_ins: session::SignIns,
    nudge: watch::Sender<u64>,
}

impl Default for Console {
    fn default() -> Self {
        Console {
            sign_ins: session::SignIns::default(),
            nudge: watch::channel(0).0,
        }
    }
}

impl Console {
    /// Something the console shows may have changed.
    pub(crate) fn changed(&self) {
        self.nudge.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.nudge.subscribe()
    }
}

/// The console's routes.
pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/console", get(pages::console))
        .route("/console/assets/{name}", get(pages::asset))
        .route("/console/login", post(pages::login))
        .route("/console/logout", post(pages::logout))
        .route("/console/state", get(pages::state))
        .route("/console/switch", post(pages::switch))
        .route("/console/events", get(events::events))
}
