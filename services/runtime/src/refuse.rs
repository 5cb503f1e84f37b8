//! The one way a service turns a refusal into a gRPC status: logged once,
//! where it is handled, as `{service}.refused` with its reason code and
//! nothing the caller sent. Each service imports its own function, for
//! example `use clankie_runtime::refuse::mailbox as refuse;`, and writes
//! `.map_err(refuse)?`.

use tonic::Status;

use crate::ClankieError;
use crate::service::Service;

/// Logs and converts a refusal of `service`.
#[allow(clippy::disallowed_methods, reason = "the one logged conversion")]
pub fn refusal(service: Service, e: ClankieError) -> Status {
    tracing::info!(reason = e.code.as_str(), "{}.refused", service.log_name());
    e.into_status()
}

macro_rules! refusers {
    ($($name:ident => $service:ident),* $(,)?) => {
        $(
            #[doc = concat!("Refuses for ", stringify!($service), "; see [`refusal`].")]
            pub fn $name(e: ClankieError) -> Status {
                refusal(Service::$service, e)
            }
        )*
    };
}

refusers!(
    admission => Admission,
    tracker => Tracker,
    mcp_host => McpHost,
    mailbox => Mailbox,
    auto => Auto,
    gateway => Gateway,
);

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "reads back the reason a refusal carries"
)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn a_refusal_keeps_its_reason() {
        let status = mailbox(ErrorCode::NativeSeatRequired.err("not a native seat"));
        assert_eq!(
            ClankieError::from_status(&status).code,
            ErrorCode::NativeSeatRequired
        );
    }
}
