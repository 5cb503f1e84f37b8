//! Liveness and readiness, as tonic-health reports them.
//!
//! - The empty service name `""` is liveness: the process serves requests.
//!   `clankie up` waits for it before starting the next service.
//! - The service's own name is readiness: SERVING only while its state is
//!   readable and it can do its job (for mcp-host: the receipt store is
//!   sound and the catalog has loaded). `/readyz` and `clankie status` read
//!   this one, so neither says "ready" over corrupt state.
//!
//! A service gives a check that names its current problem, if any; it is
//! polled, so problems that appear at run time (a receipt store found
//! damaged) are reported without plumbing an event to the health server.

use std::sync::Arc;
use std::time::Duration;

/// How often a service's readiness check runs.
pub const POLL: Duration = Duration::from_millis(250);

type Check = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// What keeps a service from being ready, asked on demand.
#[derive(Clone)]
pub struct Readiness(Check);

impl Readiness {
    /// A service that is ready whenever it serves.
    pub fn always() -> Self {
        Readiness(Arc::new(|| None))
    }

    /// A service whose `check` names its problem (None: ready).
    pub fn check(check: impl Fn() -> Option<String> + Send + Sync + 'static) -> Self {
        Readiness(Arc::new(check))
    }

    /// The current problem, if any.
    pub fn problem(&self) -> Option<String> {
        (self.0)()
    }
}
