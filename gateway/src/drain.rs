//! Stopping without dropping answers. When the gateway is told to stop it
//! accepts nothing new (the listeners stop at once) and lets the calls in
//! flight finish for [`DRAIN`]. A call still open then is answered
//! `uncertain` with its receipt id, so its caller can reconcile it; only
//! after that, [`CLOSE_AFTER`] later, are the MCP sessions and their
//! streams closed. `docs/RELIABILITY.md` gives the numbers.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How long calls in flight may finish after the stop begins.
pub const DRAIN: Duration = Duration::from_secs(6);
/// How long the answers given at the end of the drain have to leave before
/// the sessions close.
pub const CLOSE_AFTER: Duration = Duration::from_secs(1);

/// The drain's two moments.
#[derive(Clone, Default)]
pub(crate) struct Drain {
    /// The stop has begun: what is not a call (the console's live feed)
    /// ends now.
    pub(crate) begun: CancellationToken,
    /// The drain is over: open calls answer `uncertain` now.
    pub(crate) over: CancellationToken,
    /// The sessions close.
    pub(crate) closed: CancellationToken,
}

impl Drain {
    /// A drain that begins when `shutdown` fires.
    pub(crate) fn after(shutdown: CancellationToken) -> Drain {
        let drain = Drain {
            begun: shutdown.clone(),
            ..Drain::default()
        };
        let (over, closed) = (drain.over.clone(), drain.closed.clone());
        tokio::spawn(async move {
            shutdown.cancelled().await;
            tokio::time::sleep(DRAIN).await;
            over.cancel();
            tokio::time::sleep(CLOSE_AFTER).await;
            closed.cancel();
        });
        drain
    }
}

/// What a call still open at the end of the drain says.
pub(crate) const STOPPED: &str = "the gateway stopped while this call ran: it may have applied; \
     reconcile with clankie_call({receiptId}) once the stack is back";
