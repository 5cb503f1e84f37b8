//! The one table of refusal reasons.
//!
//! Every refusal in the system carries one [`ErrorCode`]. The code travels on
//! gRPC as the `x-clankie-reason` metadata entry beside the status, and the
//! gateway maps it back to HTTP. Both maps are exhaustive matches with no
//! catch-all arm, so a new code forces every edge to decide.

use std::fmt;

use http::StatusCode;
use tonic::Code;

/// Metadata key carrying the reason code on gRPC statuses.
pub const REASON_KEY: &str = "x-clankie-reason";
/// Metadata key carrying a refusal's structured details (a JSON object),
/// e.g. `retryAt` and `retryAfterMs` of a budget refusal.
pub const DETAILS_KEY: &str = "x-clankie-details";

macro_rules! codes {
    ($($variant:ident => $text:literal,)*) => {
        /// A fixed refusal reason, spelled as the seeds spell it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode { $($variant,)* }

        impl ErrorCode {
            /// Every code, for tables and tests.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The wire spelling (`fleet_tools_off`, ...).
            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $text,)* }
            }

            /// Parses the wire spelling.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some(ErrorCode::$variant),)* _ => None }
            }
        }
    };
}

codes! {
    InvalidArgument => "invalid_argument",
    MalformedRequest => "malformed_request",
    PayloadTooLarge => "payload_too_large",
    UnknownTool => "unknown_tool",
    ArgumentsInvalid => "arguments_invalid",
    FleetCredentialRequired => "fleet_credential_required",
    FleetCredentialInvalid => "fleet_credential_invalid",
    LocalProcessMembershipRequired => "local_process_membership_required",
    FleetAdmissionUnavailable => "fleet_admission_unavailable",
    FleetAdmissionRevoked => "fleet_admission_revoked",
    FleetToolsOff => "fleet_tools_off",
    OwnerCredentialRequired => "owner_credential_required",
    OwnerCredentialInvalid => "owner_credential_invalid",
    InternalCallerRefused => "internal_caller_refused",
    WorkerSandboxUnavailable => "worker_sandbox_unavailable",
    HarnessNotInstalled => "harness_not_installed",
    HarnessReleaseUnsupported => "harness_release_unsupported",
    HarnessProbeFailed => "harness_probe_failed",
    HarnessNotReady => "harness_not_ready",
    SessionNotFound => "session_not_found",
    TooManySessions => "too_many_sessions",
    TooManyConnections => "too_many_connections",
    NotOwner => "not_owner",
    RoleNotAllowed => "role_not_allowed",
    AccountNotFound => "account_not_found",
    AccountUnavailable => "account_unavailable",
    AccountChanged => "account_changed",
    AccountExists => "account_exists",
    MachineExists => "machine_exists",
    MachineNotFound => "machine_not_found",
    MachineEnrolmentRefused => "machine_enrolment_refused",
    RelayCertificateMismatch => "relay_certificate_mismatch",
    RelayLinkDown => "relay_link_down",
    ReceiptNotFound => "receipt_not_found",
    GrantInvalid => "grant_invalid",
    GrantExpired => "grant_expired",
    GrantRevoked => "grant_revoked",
    GrantNotFound => "grant_not_found",
    ToolNotGranted => "tool_not_granted",
    GrantArgumentMismatch => "grant_argument_mismatch",
    GrantArgumentForbidden => "grant_argument_forbidden",
    ReceiptConflict => "receipt_conflict",
    ReceiptStoreCorrupt => "receipt_store_corrupt",
    ReceiptStoreUnavailable => "receipt_store_unavailable",
    UpstreamError => "upstream_error",
    DeadlineExceeded => "deadline_exceeded",
    RequestBudget => "tracker_request_budget",
    ProjectNotFound => "project_not_found",
    ProjectExists => "project_exists",
    StaleRevision => "stale_revision",
    ConversationNotFound => "conversation_not_found",
    HireNotFound => "hire_not_found",
    WorkerCapReached => "worker_cap_reached",
    NoLinkedSession => "no_linked_session",
    PeerMessagesOff => "peer_messages_off",
    RecipientUnknown => "recipient_unknown",
    NativeSeatRequired => "native_seat_required",
    HarnessProcessRequired => "harness_process_required",
    LauncherMismatch => "launcher_mismatch",
    CodexSeatUnverified => "codex_seat_unverified",
    HostNotAllowed => "host_not_allowed",
    OriginNotAllowed => "origin_not_allowed",
    ReviewNotConfigured => "review_not_configured",
    NoReviewer => "no_reviewer",
    CandidateNotFound => "candidate_not_found",
    PatchMismatch => "patch_mismatch",
    ReviewQuota => "review_quota",
    NotReviewer => "not_reviewer",
    TrackerNotFound => "tracker_not_found",
    RouteNotFound => "route_not_found",
    TrackerConflict => "tracker_conflict",
    TrackerRouteUnavailable => "tracker_route_unavailable",
    TrackerCutOver => "tracker_cut_over",
    TrackerOutOfScope => "tracker_out_of_scope",
    ProposeOnly => "propose_only",
    AutoStateUnreadable => "auto_state_unreadable",
    ServiceUnavailable => "service_unavailable",
    SettingsUnreadable => "settings_unreadable",
    StateUnreadable => "state_unreadable",
    ShuttingDown => "shutting_down",
    Internal => "internal",
}

impl ErrorCode {
    /// The gRPC status code for this reason.
    pub fn grpc(self) -> Code {
        match self {
            ErrorCode::InvalidArgument
            | ErrorCode::MalformedRequest
            | ErrorCode::UnknownTool
            | ErrorCode::ArgumentsInvalid => Code::InvalidArgument,
            ErrorCode::PayloadTooLarge => Code::OutOfRange,
            ErrorCode::FleetCredentialRequired
            | ErrorCode::FleetCredentialInvalid
            | ErrorCode::MachineEnrolmentRefused
            | ErrorCode::RelayCertificateMismatch
            | ErrorCode::OwnerCredentialRequired
            | ErrorCode::GrantInvalid
            | ErrorCode::GrantExpired => Code::Unauthenticated,
            ErrorCode::LocalProcessMembershipRequired
            | ErrorCode::FleetAdmissionRevoked
            | ErrorCode::FleetToolsOff
            | ErrorCode::OwnerCredentialInvalid
            | ErrorCode::InternalCallerRefused
            | ErrorCode::NotOwner
            | ErrorCode::RoleNotAllowed
            | ErrorCode::PeerMessagesOff
            | ErrorCode::NativeSeatRequired
            | ErrorCode::HarnessProcessRequired
            | ErrorCode::LauncherMismatch
            | ErrorCode::CodexSeatUnverified
            | ErrorCode::HostNotAllowed
            | ErrorCode::OriginNotAllowed
            | ErrorCode::NotReviewer
            | ErrorCode::TrackerOutOfScope
            | ErrorCode::GrantRevoked
            | ErrorCode::ToolNotGranted
            | ErrorCode::GrantArgumentMismatch
            | ErrorCode::GrantArgumentForbidden
            | ErrorCode::ProposeOnly => Code::PermissionDenied,
            ErrorCode::AccountNotFound
            | ErrorCode::ReceiptNotFound
            | ErrorCode::ProjectNotFound
            | ErrorCode::ConversationNotFound
            | ErrorCode::HireNotFound
            | ErrorCode::RecipientUnknown
            | ErrorCode::CandidateNotFound
            | ErrorCode::SessionNotFound
            | ErrorCode::GrantNotFound
            | ErrorCode::TrackerNotFound
            | ErrorCode::RouteNotFound
            | ErrorCode::MachineNotFound => Code::NotFound,
            ErrorCode::AccountExists | ErrorCode::ProjectExists | ErrorCode::MachineExists => {
                Code::AlreadyExists
            }
            ErrorCode::AccountChanged
            | ErrorCode::ReceiptConflict
            | ErrorCode::StaleRevision
            | ErrorCode::TrackerConflict => Code::Aborted,
            ErrorCode::WorkerCapReached
            | ErrorCode::NoLinkedSession
            | ErrorCode::ReviewNotConfigured
            | ErrorCode::NoReviewer
            | ErrorCode::PatchMismatch
            | ErrorCode::TrackerRouteUnavailable
            | ErrorCode::TrackerCutOver
            | ErrorCode::WorkerSandboxUnavailable
            | ErrorCode::HarnessNotInstalled
            | ErrorCode::HarnessReleaseUnsupported
            | ErrorCode::HarnessProbeFailed
            | ErrorCode::HarnessNotReady
            | ErrorCode::AutoStateUnreadable => Code::FailedPrecondition,
            ErrorCode::ReceiptStoreCorrupt => Code::DataLoss,
            ErrorCode::FleetAdmissionUnavailable
            | ErrorCode::AccountUnavailable
            | ErrorCode::ReceiptStoreUnavailable
            | ErrorCode::ServiceUnavailable
            | ErrorCode::RelayLinkDown
            | ErrorCode::SettingsUnreadable
            | ErrorCode::StateUnreadable
            | ErrorCode::ShuttingDown => Code::Unavailable,
            ErrorCode::UpstreamError => Code::Unknown,
            ErrorCode::DeadlineExceeded => Code::DeadlineExceeded,
            ErrorCode::RequestBudget
            | ErrorCode::ReviewQuota
            | ErrorCode::TooManySessions
            | ErrorCode::TooManyConnections => Code::ResourceExhausted,
            ErrorCode::Internal => Code::Internal,
        }
    }

    /// The HTTP status for this reason.
    pub fn http(self) -> StatusCode {
        match self {
            ErrorCode::InvalidArgument
            | ErrorCode::MalformedRequest
            | ErrorCode::UnknownTool
            | ErrorCode::ArgumentsInvalid => StatusCode::BAD_REQUEST,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::FleetCredentialRequired
            | ErrorCode::FleetCredentialInvalid
            | ErrorCode::MachineEnrolmentRefused
            | ErrorCode::RelayCertificateMismatch
            | ErrorCode::OwnerCredentialRequired
            | ErrorCode::GrantInvalid
            | ErrorCode::GrantExpired => StatusCode::UNAUTHORIZED,
            ErrorCode::LocalProcessMembershipRequired
            | ErrorCode::FleetAdmissionRevoked
            | ErrorCode::FleetToolsOff
            | ErrorCode::OwnerCredentialInvalid
            | ErrorCode::InternalCallerRefused
            | ErrorCode::NotOwner
            | ErrorCode::RoleNotAllowed
            | ErrorCode::PeerMessagesOff
            | ErrorCode::NativeSeatRequired
            | ErrorCode::HarnessProcessRequired
            | ErrorCode::LauncherMismatch
            | ErrorCode::CodexSeatUnverified
            | ErrorCode::HostNotAllowed
            | ErrorCode::OriginNotAllowed
            | ErrorCode::NotReviewer
            | ErrorCode::TrackerOutOfScope
            | ErrorCode::GrantRevoked
            | ErrorCode::ToolNotGranted
            | ErrorCode::GrantArgumentMismatch
            | ErrorCode::GrantArgumentForbidden
            | ErrorCode::ProposeOnly => StatusCode::FORBIDDEN,
            ErrorCode::AccountNotFound
            | ErrorCode::ReceiptNotFound
            | ErrorCode::ProjectNotFound
            | ErrorCode::ConversationNotFound
            | ErrorCode::HireNotFound
            | ErrorCode::RecipientUnknown
            | ErrorCode::CandidateNotFound
            | ErrorCode::SessionNotFound
            | ErrorCode::GrantNotFound
            | ErrorCode::TrackerNotFound
            | ErrorCode::RouteNotFound
            | ErrorCode::MachineNotFound => StatusCode::NOT_FOUND,
            ErrorCode::AccountExists
            | ErrorCode::MachineExists
            | ErrorCode::AccountChanged
            | ErrorCode::ReceiptConflict
            | ErrorCode::ProjectExists
            | ErrorCode::StaleRevision
            | ErrorCode::WorkerCapReached
            | ErrorCode::NoLinkedSession
            | ErrorCode::ReviewNotConfigured
            | ErrorCode::NoReviewer
            | ErrorCode::PatchMismatch
            | ErrorCode::TrackerConflict
            | ErrorCode::TrackerRouteUnavailable
            | ErrorCode::TrackerCutOver
            | ErrorCode::WorkerSandboxUnavailable
            | ErrorCode::HarnessNotInstalled
            | ErrorCode::HarnessReleaseUnsupported
            | ErrorCode::HarnessProbeFailed
            | ErrorCode::HarnessNotReady
            | ErrorCode::AutoStateUnreadable => StatusCode::CONFLICT,
            ErrorCode::ReceiptStoreCorrupt | ErrorCode::Internal => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            ErrorCode::FleetAdmissionUnavailable
            | ErrorCode::AccountUnavailable
            | ErrorCode::ReceiptStoreUnavailable
            | ErrorCode::ServiceUnavailable
            | ErrorCode::RelayLinkDown
            | ErrorCode::SettingsUnreadable
            | ErrorCode::StateUnreadable
            | ErrorCode::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::UpstreamError => StatusCode::BAD_GATEWAY,
            ErrorCode::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::RequestBudget
            | ErrorCode::ReviewQuota
            | ErrorCode::TooManySessions
            | ErrorCode::TooManyConnections => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// True when nothing was forwarded and the same request may be retried.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::FleetAdmissionUnavailable
                | ErrorCode::ServiceUnavailable
                | ErrorCode::RelayLinkDown
                | ErrorCode::ShuttingDown
                | ErrorCode::AccountUnavailable
                | ErrorCode::TooManyConnections
        )
    }

    /// Builds the error with a message.
    pub fn err(self, message: impl Into<String>) -> ClankieError {
        ClankieError {
            code: self,
            message: message.into(),
            details: None,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal: a fixed reason and a human message (no PIDs, paths or argv).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ClankieError {
    pub code: ErrorCode,
    pub message: String,
    /// Structured fields beside the message (a JSON object as text).
    pub details: Option<String>,
}

impl ClankieError {
    /// Adds structured details (a JSON object) to the refusal.
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details.to_string());
        self
    }

    /// The refusal as a JSON error object: `code`, `message`, `retryable`
    /// and any structured details; the one spelling every edge uses.
    pub fn body(&self) -> serde_json::Value {
        let mut details = match self.details_json() {
            Some(serde_json::Value::Object(extra)) => extra,
            _ => serde_json::Map::new(),
        };
        // The fixed fields win over a detail of the same name.
        for k in ["code", "message", "retryable"] {
            details.remove(k);
        }
        let body = clankie_types::fleet::ErrorBody {
            code: self.code.as_str().into(),
            message: self.message.clone(),
            retryable: self.code.retryable(),
            details,
        };
        serde_json::to_value(body).unwrap_or(serde_json::Value::Null)
    }

    /// The structured details, when any.
    pub fn details_json(&self) -> Option<serde_json::Value> {
        self.details
            .as_deref()
            .and_then(|d| serde_json::from_str(d).ok())
    }

    /// True when a service gave this status as a verdict (a reason rode
    /// on it). Anything else came from the transport: the request may or
    /// may not have reached the service.
    pub fn is_verdict(status: &tonic::Status) -> bool {
        status.metadata().contains_key(REASON_KEY)
    }

    /// Recovers the reason from a gRPC status. A status without one never
    /// becomes a domain reason: it is the transport failing (a service
    /// down, killed mid-request, or a connection reset), which is
    /// `service_unavailable`, or the deadline passing.
    pub fn from_status(status: &tonic::Status) -> Self {
        let code = status
            .metadata()
            .get(REASON_KEY)
            .and_then(|v| v.to_str().ok())
            .and_then(ErrorCode::parse)
            .unwrap_or(match status.code() {
                Code::DeadlineExceeded => ErrorCode::DeadlineExceeded,
                Code::Unavailable
                | Code::Cancelled
                | Code::Unknown
                | Code::Internal
                | Code::Aborted => ErrorCode::ServiceUnavailable,
                _ => ErrorCode::Internal,
            });
        ClankieError {
            code,
            message: status.message().to_string(),
            details: status
                .metadata()
                .get(DETAILS_KEY)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        }
    }
}

/// A receipt id outside the rule is the caller's mistake.
impl From<clankie_types::fleet::receipt::ReceiptIdRejected> for ClankieError {
    fn from(e: clankie_types::fleet::receipt::ReceiptIdRejected) -> Self {
        ErrorCode::InvalidArgument.err(e.to_string())
    }
}

impl ClankieError {
    /// The refusal as a gRPC status, unlogged. A service refuses through
    /// `refuse.rs`, which logs it once; `clippy.toml` keeps this there.
    pub fn into_status(self) -> tonic::Status {
        let e = self;
        // Messages may quote caller text: bounded, so a status never grows
        // past what an HTTP/2 peer accepts in its trailers.
        let message = crate::limits::clip(&e.message, crate::limits::MAX_STATUS_MESSAGE);
        let mut status = tonic::Status::new(e.code.grpc(), message.into_owned());
        status.metadata_mut().insert(
            REASON_KEY,
            tonic::metadata::MetadataValue::from_static(e.code.as_str()),
        );
        if let Some(v) = e
            .details
            .as_deref()
            .filter(|d| d.len() <= crate::limits::MAX_STATUS_DETAILS)
            .and_then(|d| tonic::metadata::MetadataValue::try_from(d).ok())
        {
            status.metadata_mut().insert(DETAILS_KEY, v);
        }
        status
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "the decode's own round-trip tests"
)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_grpc() {
        for &code in ErrorCode::ALL {
            let status = code.err("m").into_status();
            let back = ClankieError::from_status(&status);
            assert_eq!(back.code, code);
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            assert!(code.http().is_client_error() || code.http().is_server_error());
        }
    }

    #[test]
    fn a_transport_failure_is_never_a_domain_reason() {
        for code in [Code::NotFound, Code::PermissionDenied, Code::DataLoss] {
            let e = ClankieError::from_status(&tonic::Status::new(code, "x"));
            assert_eq!(e.code, ErrorCode::Internal, "{code:?}");
        }
        let reset = tonic::Status::unknown("h2 protocol error: connection reset");
        assert_eq!(
            ClankieError::from_status(&reset).code,
            ErrorCode::ServiceUnavailable
        );
        assert!(!ClankieError::is_verdict(&reset));
    }

    #[test]
    fn a_status_never_carries_unbounded_caller_text() {
        let long = "x".repeat(70_000);
        let status: tonic::Status = ErrorCode::UnknownTool
            .err(format!("no tool {long}"))
            .with_details(serde_json::json!({ "name": long }))
            .into_status();
        assert!(status.message().len() <= crate::limits::MAX_STATUS_MESSAGE);
        assert!(status.metadata().get(DETAILS_KEY).is_none());
        assert_eq!(
            ClankieError::from_status(&status).code,
            ErrorCode::UnknownTool
        );
    }

    #[test]
    fn refusal_statuses_are_distinct_for_auth() {
        assert_eq!(ErrorCode::FleetCredentialRequired.http(), 401);
        assert_eq!(ErrorCode::LocalProcessMembershipRequired.http(), 403);
        assert_eq!(ErrorCode::FleetAdmissionUnavailable.http(), 503);
    }
}
