//! One constructor per service, and one way to build and decode a call.
//!
//! Every client reaches its service over the service's Unix socket with
//! [`Meta`] applied (trace context, and the owner bearer when the caller
//! holds it), and accepts answers as large as that service may send.
//! [`Call`] builds a request with its deadline and admission ticket;
//! [`Answer::answer`] turns the reply into the message or the service's
//! reason, decoded once through [`ClankieError::from_status`];
//! [`Answer::verdict`] keeps a refusal apart from a lost answer.

use std::time::Duration;

use clankie_proto as proto;
use tonic::{Request, Response, Status};

use crate::grpc::{self, Client, Meta};
use crate::paths::StatePaths;
use crate::service::Service;
use crate::{ClankieError, limits};

/// The largest answer a catalog, receipt or tracker read may be.
pub const MAX_ANSWER: usize = 16 << 20;

/// The largest answer the mailbox sends (a review candidate's patch).
pub const MAX_MAILBOX_ANSWER: usize = if limits::MAX_CANDIDATE_MESSAGE > MAX_ANSWER {
    limits::MAX_CANDIDATE_MESSAGE
} else {
    MAX_ANSWER
};

pub type AdmissionClient = proto::admission::v1::admission_client::AdmissionClient<Client>;
pub type TrackerClient = proto::tracker::v1::tracker_client::TrackerClient<Client>;
pub type McpHostClient = proto::mcphost::v1::mcp_host_client::McpHostClient<Client>;
pub type MailboxClient = proto::mailbox::v1::mailbox_client::MailboxClient<Client>;
pub type AutoClient = proto::auto::v1::auto_client::AutoClient<Client>;

fn channel(paths: &StatePaths, service: Service, meta: Meta) -> Client {
    grpc::client(&service.socket(paths), meta)
}

/// Admission (lazily connected, like every client here).
pub fn admission(paths: &StatePaths, meta: Meta) -> AdmissionClient {
    AdmissionClient::new(channel(paths, Service::Admission, meta))
}

/// The built-in tracker.
pub fn tracker(paths: &StatePaths, meta: Meta) -> TrackerClient {
    TrackerClient::new(channel(paths, Service::Tracker, meta)).max_decoding_message_size(MAX_ANSWER)
}

/// The mcp-host.
pub fn mcp_host(paths: &StatePaths, meta: Meta) -> McpHostClient {
    McpHostClient::new(channel(paths, Service::McpHost, meta)).max_decoding_message_size(MAX_ANSWER)
}

/// The mailbox.
pub fn mailbox(paths: &StatePaths, meta: Meta) -> MailboxClient {
    MailboxClient::new(channel(paths, Service::Mailbox, meta))
        .max_decoding_message_size(MAX_MAILBOX_ANSWER)
}

/// The auto-scheduler.
pub fn auto(paths: &StatePaths, meta: Meta) -> AutoClient {
    AutoClient::new(channel(paths, Service::Auto, meta))
}

/// One service's metrics page (Prometheus text), asked with the owner
/// credential the caller presented (`bearer`, the token alone).
pub async fn scrape(paths: &StatePaths, service: Service, bearer: &str) -> Result<String, Status> {
    let mut client = proto::telemetry::v1::telemetry_client::TelemetryClient::new(channel(
        paths,
        service,
        Meta::owner(bearer),
    ))
    .max_decoding_message_size(MAX_ANSWER);
    let req = Call::new(proto::telemetry::v1::ScrapeRequest {})
        .timeout(INTERNAL)
        .request();
    Ok(client.scrape(req).await?.into_inner().text)
}

/// The budget of one internal call between services that answer from
/// their own state (a recheck, a status read, a lookup). Calls that wait on
/// the outside (an upstream tool, a pane) set their own.
pub const INTERNAL: Duration = Duration::from_secs(5);

/// A request on its way: the message, its deadline, its admission ticket.
pub struct Call<T> {
    request: Request<T>,
}

impl<T> Call<T> {
    pub fn new(message: T) -> Self {
        // The one place a request is built; everywhere else goes through here.
        #[allow(clippy::disallowed_methods)]
        let request = Request::new(message);
        Call { request }
    }

    /// The whole budget of the call; the service sees it as `grpc-timeout`.
    pub fn timeout(mut self, budget: Duration) -> Self {
        self.request.set_timeout(budget);
        self
    }

    /// The admission ticket of the fleet member the call is made for.
    pub fn ticket(mut self, ticket: &str) -> Self {
        grpc::set_ticket(&mut self.request, ticket);
        self
    }

    /// The bearer of the manual grant the call is made under.
    pub fn grant(mut self, bearer: &str) -> Self {
        grpc::set_grant(&mut self.request, bearer);
        self
    }

    /// The owner credential, for a service calling another on the owner's
    /// behalf (a token that is not header-safe is left off, and the callee
    /// then refuses the call).
    pub fn owner(mut self, token: &str) -> Self {
        if let Ok(v) = format!("Bearer {token}").parse() {
            self.request
                .metadata_mut()
                .insert(crate::owner::AUTHORIZATION, v);
        }
        self
    }

    /// The finished request, for the generated client method.
    pub fn request(self) -> Request<T> {
        self.request
    }
}

/// Checks a service's tonic-health status over its socket: its readiness
/// for its own name, its liveness for `""`. A caller outside the stack
/// passes the owner credential in `meta`.
pub async fn health(
    path: &std::path::Path,
    service: &str,
    meta: Meta,
) -> Result<bool, tonic::Status> {
    check(&mut HealthClient::new(grpc::client(path, meta)), service).await
}

pub type HealthClient = tonic_health::pb::health_client::HealthClient<Client>;

async fn check(client: &mut HealthClient, service: &str) -> Result<bool, tonic::Status> {
    let req = Call::new(tonic_health::pb::HealthCheckRequest {
        service: service.to_string(),
    })
    .timeout(Duration::from_secs(2))
    .request();
    let resp = client.check(req).await?;
    Ok(resp.into_inner().status
        == tonic_health::pb::health_check_response::ServingStatus::Serving as i32)
}

/// Every backend's health client, each connected once and reused, for a
/// caller that asks again and again (`/readyz`, the console).
#[derive(Clone)]
pub struct Health {
    clients: Vec<(Service, HealthClient)>,
}

impl Health {
    pub fn new(paths: &StatePaths, meta: Meta) -> Health {
        Health {
            clients: Service::BACKENDS
                .iter()
                .map(|&s| (s, HealthClient::new(channel(paths, s, meta.clone()))))
                .collect(),
        }
    }

    /// `service`'s readiness, then its liveness, as [`service_state`].
    pub async fn state(&self, service: Service) -> ServiceState {
        let Some((_, client)) = self.clients.iter().find(|(s, _)| *s == service) else {
            return ServiceState::Down;
        };
        let mut client = client.clone();
        if check(&mut client, service.health_name())
            .await
            .unwrap_or(false)
        {
            ServiceState::Serving
        } else if check(&mut client, "").await.unwrap_or(false) {
            ServiceState::NotReady
        } else {
            ServiceState::Down
        }
    }
}

/// A service as the stack sees it from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceState {
    /// Live and ready.
    Serving,
    /// Live, but its state is unreadable or still loading (its log says).
    NotReady,
    /// Not answering on its socket.
    Down,
}

impl ServiceState {
    /// The word `status` and `doctor` print.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Serving => "serving",
            ServiceState::NotReady => "not_ready",
            ServiceState::Down => "down",
        }
    }
}

/// Asks `service` for its readiness, then its liveness.
pub async fn service_state(
    paths: &crate::paths::StatePaths,
    service: crate::Service,
    meta: Meta,
) -> ServiceState {
    let socket = service.socket(paths);
    if health(&socket, service.health_name(), meta.clone())
        .await
        .unwrap_or(false)
    {
        ServiceState::Serving
    } else if health(&socket, "", meta).await.unwrap_or(false) {
        ServiceState::NotReady
    } else {
        ServiceState::Down
    }
}

pub use clankie_types::views::account_state_word;

/// The connected accounts that are not verified now, by name and state
/// word; None when the mcp-host does not answer. The RPC needs no
/// credential of its own, only the socket's (a stack process, or `meta`
/// with the owner's).
pub async fn degraded_accounts(
    paths: &crate::paths::StatePaths,
    meta: Meta,
) -> Option<Vec<(String, &'static str)>> {
    let req = Call::new(clankie_proto::mcphost::v1::DegradedRequest {}).request();
    let accounts = mcp_host(paths, meta)
        .degraded(req)
        .await
        .ok()?
        .into_inner()
        .accounts;
    Some(
        accounts
            .into_iter()
            .map(|a| (a.name, account_state_word(a.state)))
            .collect(),
    )
}

/// Decodes a reply: the message, or the reason the service gave (or the
/// transport's failure, never guessed into a domain reason).
pub trait Answer<R> {
    fn answer(self) -> Result<R, ClankieError>;

    /// For a request that may have acted before its answer was lost (a
    /// write forwarded to another service): the message, the service's
    /// verdict, or [`Unanswered::Lost`] when no verdict came back.
    fn verdict(self) -> Result<R, Unanswered>;
}

/// Why a forwarded request has no message.
#[derive(Debug)]
pub enum Unanswered {
    /// The service refused it, saying why: nothing was done.
    Verdict(ClankieError),
    /// No verdict came back (a reset, a timeout, the service dying): it
    /// may have acted. The status says only how the transport failed.
    Lost(Status),
}

impl Unanswered {
    /// As a refusal, whichever it was (a lost answer reads as the
    /// transport's failure).
    pub fn into_error(self) -> ClankieError {
        match self {
            Unanswered::Verdict(e) => e,
            Unanswered::Lost(s) => decode(&s),
        }
    }
}

impl<R> Answer<R> for Result<Response<R>, Status> {
    fn answer(self) -> Result<R, ClankieError> {
        self.map(Response::into_inner).map_err(|s| decode(&s))
    }

    fn verdict(self) -> Result<R, Unanswered> {
        match self {
            Ok(r) => Ok(r.into_inner()),
            Err(s) if ClankieError::is_verdict(&s) => Err(Unanswered::Verdict(decode(&s))),
            Err(s) => Err(Unanswered::Lost(s)),
        }
    }
}

/// The one decode of a status (the bans in `clippy.toml` keep it here).
#[allow(clippy::disallowed_methods, reason = "the one decode")]
fn decode(s: &Status) -> ClankieError {
    ClankieError::from_status(s)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "builds a refusal to decode")]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn a_call_carries_its_budget_and_ticket() {
        let req = Call::new(())
            .timeout(Duration::from_millis(1500))
            .ticket("t-1")
            .request();
        assert_eq!(grpc::ticket(req.metadata()), Some("t-1"));
        assert_eq!(
            grpc::deadline(req.metadata()),
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn an_answer_is_the_message_or_the_reason() {
        let ok: Result<Response<u8>, Status> = Ok(Response::new(7));
        assert_eq!(ok.answer().ok(), Some(7));
        let refused: Result<Response<u8>, Status> =
            Err(ErrorCode::UnknownTool.err("no such tool").into_status());
        assert_eq!(
            refused.answer().err().map(|e| e.code),
            Some(ErrorCode::UnknownTool)
        );
        let transport: Result<Response<u8>, Status> = Err(Status::unavailable("reset"));
        assert_eq!(
            transport.answer().err().map(|e| e.code),
            Some(ErrorCode::ServiceUnavailable)
        );
    }
}
