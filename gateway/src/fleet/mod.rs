//! The fleet operations: what an admitted member can ask, typed in and out.
//! Each one forwards to the service that owns it, with the admission ticket
//! and what is left of the request's budget as the gRPC deadline.
//!
//! Knows nothing of HTTP or MCP: the faces (`mcp/`, `http/`) parse their
//! requests into these arguments and shape these answers. A new fleet tool
//! is one operation here and one `FleetTool` arm in `mcp/dispatch.rs`.
//!
//! Once a write is forwarded, a lost verdict is never a refusal: the answer
//! is `uncertain` with its receipt id, to reconcile by, never to repeat.

pub(crate) mod call;
pub(crate) mod deliveries;
pub(crate) mod grant;
pub(crate) mod peers;
pub(crate) mod report;
pub(crate) mod reviews;
pub(crate) mod tools;
pub(crate) mod wakes;

use std::time::{Duration, Instant};

use clankie_runtime::clients::{Call, Unanswered};
use clankie_runtime::{ClankieError, ErrorCode};
use serde_json::json;

use crate::Shared;
use crate::doors::Admitted;

/// The start and the whole budget of one request.
#[derive(Clone, Copy)]
pub(crate) struct Budget {
    start: Instant,
    whole: Duration,
}

impl Budget {
    /// A budget of `whole`, starting now.
    pub(crate) fn start(whole: Duration) -> Budget {
        Budget {
            start: Instant::now(),
            whole,
        }
    }

    /// What is left of the budget, refused when too little is left for a
    /// forward to be worth it.
    pub(crate) fn left(&self) -> Result<Duration, ClankieError> {
        let left = self.whole.saturating_sub(self.start.elapsed());
        if left < Duration::from_millis(50) {
            return Err(ErrorCode::DeadlineExceeded.err("the request's budget is spent"));
        }
        Ok(left)
    }

    /// `msg` as a call for the member holding `ticket`, with what is left.
    pub(crate) fn request<T>(
        &self,
        msg: T,
        ticket: &str,
    ) -> Result<tonic::Request<T>, ClankieError> {
        Ok(Call::new(msg)
            .timeout(self.left()?)
            .ticket(ticket)
            .request())
    }
}

/// One operation's context: who asks, through which services, with how
/// much time.
pub(crate) struct Op<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) who: &'a Admitted,
    pub(crate) budget: Budget,
    /// Fired when the caller cancels (`notifications/cancelled`).
    pub(crate) cancelled: Option<tokio_util::sync::CancellationToken>,
}

impl<'a> Op<'a> {
    /// An operation for `who`, with the whole request budget.
    pub(crate) fn new(shared: &'a Shared, who: &'a Admitted) -> Op<'a> {
        Op::within(shared, who, Budget::start(shared.request_budget))
    }

    /// An operation for `who` under an already started `budget`.
    pub(crate) fn within(shared: &'a Shared, who: &'a Admitted, budget: Budget) -> Op<'a> {
        Op {
            shared,
            who,
            budget,
            cancelled: None,
        }
    }

    /// The same operation, stopped by `token` (the caller's cancel).
    pub(crate) fn cancelled_by(mut self, token: tokio_util::sync::CancellationToken) -> Self {
        self.cancelled = Some(token);
        self
    }

    /// `msg` as a call for this member, with what is left of the budget.
    pub(crate) fn request<T>(&self, msg: T) -> Result<tonic::Request<T>, ClankieError> {
        self.budget.request(msg, &self.who.ticket)
    }

    /// Seat operations need a native seat (a pane); bearer links have none.
    pub(crate) fn seat(&self, needs: &str) -> Result<(), ClankieError> {
        if self.who.is_seat() {
            Ok(())
        } else {
            Err(ErrorCode::NativeSeatRequired.err(format!("{needs}; bearer links have none")))
        }
    }
}

/// A request with no message, as the member reads it: the service's own
/// verdict, the deadline, or (the transport failing) that a fleet service
/// is unavailable.
pub(crate) fn unanswered(u: Unanswered) -> ClankieError {
    match u {
        Unanswered::Verdict(e) => e,
        Unanswered::Lost(s) if s.code() == tonic::Code::DeadlineExceeded => {
            ErrorCode::DeadlineExceeded.err(s.message().to_string())
        }
        Unanswered::Lost(_) => ErrorCode::ServiceUnavailable
            .err("a fleet service is unavailable right now; retry shortly"),
    }
}

/// A service's answer this build cannot read (a closed-set field it does
/// not know): an internal failure, never a guess.
pub(crate) fn unreadable(e: clankie_types::fleet::seat::Unspecified) -> ClankieError {
    ErrorCode::Internal.err(e.to_string())
}

/// A refusal that names the receipt id the request would have had: nothing
/// was dispatched under it, so the same id may be used again.
pub(crate) fn with_receipt(e: ClankieError, receipt_id: &str) -> ClankieError {
    let mut details = e.details_json().unwrap_or_else(|| json!({}));
    if let Some(d) = details.as_object_mut() {
        d.insert("receiptId".into(), json!(receipt_id));
    }
    e.with_details(details)
}
