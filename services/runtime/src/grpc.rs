//! The tonic recipe every service uses, and the client side that matches it.
//!
//! Server: a trace span per request whose parent is the caller's W3C trace
//! context, tonic-health (the service reports SERVING, then NOT_SERVING when
//! draining) and reflection over the whole descriptor set, served on a Unix
//! listener until the shutdown token fires, then drained.
//!
//! Client: [`Meta`] injects the current trace context, and the owner bearer
//! when the caller holds it, into every outgoing request.

use std::path::Path;
use std::time::Duration;

use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Server};
use tonic_health::ServingStatus;

use crate::listener::{CallerLayer, StackRule};
use crate::telemetry;

/// How long in-flight requests may finish after shutdown begins.
pub const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// A service process's whole serving life: binds `run/NAME.sock`, serves
/// `routes` with health and reflection until shutdown, removes the socket.
/// Every connection passes the accept-time caller check: this stack's own
/// services, or the owner credential.
pub async fn serve_service(
    paths: &crate::paths::StatePaths,
    service: crate::Service,
    routes: Routes,
    ready: crate::readiness::Readiness,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let socket = service.socket(paths);
    let listener = crate::uds::bind(&socket).await?;
    let _guard = crate::uds::SocketGuard(socket);
    let guard = caller_guard(paths, service)?;
    // Every service answers the owner's metrics scrape beside its own RPCs.
    let owner = crate::owner::OwnerCheck::load(&paths.owner_credential())?;
    let routes = routes.add_service(telemetry::Scrape::server(service, owner));
    tracing::info!("{service} serving");
    serve(
        listener,
        guard,
        service.health_name(),
        Some(routes),
        ready,
        shutdown,
    )
    .await
}

/// The caller check for `service`: the stack, or the owner credential.
pub fn caller_guard(
    paths: &crate::paths::StatePaths,
    service: crate::Service,
) -> anyhow::Result<CallerLayer> {
    let owner = crate::owner::OwnerCheck::load(&paths.owner_credential())?;
    Ok(CallerLayer::new(service.name(), Some(owner)))
}

/// Serves `routes` (plus health and reflection) on `listener` until
/// `shutdown` fires, behind `guard`. `health_name` is the fully qualified
/// gRPC service name reported by tonic-health.
pub async fn serve(
    listener: UnixListener,
    guard: CallerLayer,
    health_name: &'static str,
    routes: Option<Routes>,
    ready: crate::readiness::Readiness,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let (reporter, health_service) = tonic_health::server::health_reporter();
    let problem = ready.problem();
    reporter
        .set_service_status(health_name, serving(&problem))
        .await;
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    // Readiness follows the service's check until the drain begins.
    {
        let reporter = reporter.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let mut last = problem;
            if let Some(p) = &last {
                tracing::warn!(problem = %p, "not ready");
            }
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(crate::readiness::POLL) => {}
                }
                let now = ready.problem();
                if now != last {
                    match &now {
                        Some(p) => tracing::warn!(problem = %p, "not ready"),
                        None => tracing::info!("ready"),
                    }
                    reporter
                        .set_service_status(health_name, serving(&now))
                        .await;
                    last = now;
                }
            }
        });
    }
    // Reflection lists what this socket serves (its service and health),
    // in both versions stock tools speak.
    let routes_served = routes.is_some();
    let reflection = || {
        let mut b = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(clankie_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .with_service_name("grpc.health.v1.Health");
        if routes_served {
            b = b
                .with_service_name(health_name)
                .with_service_name("clankie.telemetry.v1.Telemetry");
        }
        b
    };
    let reflection_v1 = reflection().build_v1()?;
    let reflection_v1alpha = reflection().build_v1alpha()?;

    let drain = {
        let shutdown = shutdown.clone();
        let reporter = reporter.clone();
        async move {
            shutdown.cancelled().await;
            reporter
                .set_service_status(health_name, ServingStatus::NotServing)
                .await;
            reporter
                .set_service_status("", ServingStatus::NotServing)
                .await;
        }
    };

    let mut builder = Server::builder()
        .trace_fn(|req| telemetry::server_span(req.uri().path(), req.headers()))
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .layer(guard);
    let router = match routes {
        Some(routes) => builder
            .add_routes(routes)
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha),
        None => builder
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha),
    };
    let incoming = crate::listener::incoming(listener, StackRule::current());
    let server = router.serve_with_incoming_shutdown(incoming, drain);
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => r?,
        _ = async { shutdown.cancelled().await; tokio::time::sleep(DRAIN_GRACE).await } => {
            tracing::warn!("drain grace elapsed with requests still open");
        }
    }
    Ok(())
}

fn serving(problem: &Option<String>) -> ServingStatus {
    if problem.is_some() {
        ServingStatus::NotServing
    } else {
        ServingStatus::Serving
    }
}

/// Adds trace context and optional credentials to outgoing requests.
#[derive(Clone, Default)]
pub struct Meta {
    owner: Option<MetadataValue<tonic::metadata::Ascii>>,
}

impl Meta {
    /// A client that acts for the owner.
    pub fn owner(token: &str) -> Self {
        Meta {
            owner: format!("Bearer {token}").parse().ok(),
        }
    }
}

impl tonic::service::Interceptor for Meta {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        telemetry::inject_context(req.metadata_mut());
        if let Some(owner) = &self.owner {
            req.metadata_mut()
                .insert(crate::owner::AUTHORIZATION, owner.clone());
        }
        Ok(req)
    }
}

/// A channel to a service's socket with [`Meta`] applied.
pub type Client = InterceptedService<Channel, Meta>;

/// Connects (lazily) to the socket at `path`.
pub fn client(path: &Path, meta: Meta) -> Client {
    InterceptedService::new(crate::uds::channel(path), meta)
}

/// Metadata key of the admission ticket a fleet request carries.
pub const TICKET_KEY: &str = "x-clankie-ticket";

/// Reads the admission ticket from request metadata.
pub fn ticket(metadata: &MetadataMap) -> Option<&str> {
    metadata.get(TICKET_KEY)?.to_str().ok()
}

/// Sets the admission ticket on a request.
pub fn set_ticket<T>(req: &mut tonic::Request<T>, ticket: &str) {
    if let Ok(v) = ticket.parse() {
        req.metadata_mut().insert(TICKET_KEY, v);
    }
}

/// Metadata key carrying a manual grant's bearer, in place of a ticket.
pub const GRANT_KEY: &str = "x-clankie-grant";

/// Reads a grant bearer from request metadata.
pub fn grant(metadata: &MetadataMap) -> Option<&str> {
    metadata.get(GRANT_KEY)?.to_str().ok()
}

/// Sets a grant bearer on a request.
pub fn set_grant<T>(req: &mut tonic::Request<T>, bearer: &str) {
    if let Ok(v) = bearer.parse() {
        req.metadata_mut().insert(GRANT_KEY, v);
    }
}

/// The caller's remaining budget, from the `grpc-timeout` header.
pub fn deadline(metadata: &MetadataMap) -> Option<Duration> {
    parse_grpc_timeout(metadata.get("grpc-timeout")?.to_str().ok()?)
}

/// Parses a `grpc-timeout` value (`<digits><unit>`, at most 8 digits).
pub fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_parses_units_and_rejects_garbage() {
        assert_eq!(parse_grpc_timeout("30S"), Some(Duration::from_secs(30)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout("S"), None);
        assert_eq!(parse_grpc_timeout("12x"), None);
        assert_eq!(parse_grpc_timeout("123456789S"), None);
        assert_eq!(parse_grpc_timeout("-1S"), None);
    }
}
