//! The relay listener: where remote machines of a fleet reach this (the
//! main) stack, over TLS, as gRPC.
//!
//! A machine is known by the key its TLS connection proves (see
//! `clankie_runtime::relay_tls`): the handshake gives the certificate's
//! fingerprint, which rides on every request of that connection as
//! [`MachineKey`]; nothing the machine sends can name another key.
//! Admission owns the machines file: enrolment spends a secret there, and
//! binds that fingerprint.
//!
//! - `listen.rs`: the TLS listener (main stack);
//! - `link.rs`: an enrolled machine's long-lived stream, and the requests
//!   it relays.
//!
//! The machine's side of the stream is `uplink/`.

mod link;
mod listen;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::relay::v1 as relay_pb;
use clankie_runtime::clients::{Answer as _, Call, INTERNAL};
use clankie_runtime::{ClankieError, ErrorCode};
use tonic::{Request, Response, Status};

pub use listen::Bound;

/// The fingerprint of the certificate a relay connection's peer proved.
#[derive(Clone, Debug)]
pub struct MachineKey(pub String);

/// The relay's gRPC face.
pub(crate) struct RelayFace {
    shared: std::sync::Arc<crate::Shared>,
    /// Ends every link when the gateway stops.
    shutdown: tokio_util::sync::CancellationToken,
    /// Each machine's places for relayed requests, by key, shared by every
    /// link it opens: a machine that opens link after link gets no more.
    places: parking_lot::Mutex<
        std::collections::HashMap<String, std::sync::Arc<tokio::sync::Semaphore>>,
    >,
}

impl RelayFace {
    pub(crate) fn new(
        shared: std::sync::Arc<crate::Shared>,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> RelayFace {
        RelayFace {
            shared,
            shutdown,
            places: Default::default(),
        }
    }

    /// The places of the machine whose key is `key` (made on its first
    /// proven link, so only enrolled keys get one).
    fn places(&self, key: &str) -> std::sync::Arc<tokio::sync::Semaphore> {
        self.places
            .lock()
            .entry(key.to_string())
            .or_insert_with(|| std::sync::Arc::new(tokio::sync::Semaphore::new(link::MAX_RELAYED)))
            .clone()
    }

    /// The key of the connection `req` came on.
    fn key<T>(req: &Request<T>) -> Result<String, ClankieError> {
        req.extensions()
            .get::<MachineKey>()
            .map(|k| k.0.clone())
            .ok_or_else(|| {
                ErrorCode::MachineEnrolmentRefused
                    .err("a relay connection must present the machine's certificate")
            })
    }
}

/// Admission's verdict passed on as it came: admission logged it.
#[allow(
    clippy::disallowed_methods,
    reason = "a verdict admission logged, passed on"
)]
pub(crate) fn passed_on(e: ClankieError) -> Status {
    e.into_status()
}

#[tonic::async_trait]
impl relay_pb::relay_server::Relay for RelayFace {
    type LinkStream = link::Downs;

    async fn link(
        &self,
        request: Request<tonic::Streaming<relay_pb::Up>>,
    ) -> Result<Response<Self::LinkStream>, Status> {
        let key = Self::key(&request).map_err(clankie_runtime::refuse::gateway)?;
        let downs = link::open(
            &self.shared,
            key,
            request.into_inner(),
            self.shutdown.clone(),
            |key| self.places(key),
        )
        .await?;
        Ok(Response::new(downs))
    }

    async fn enrol(
        &self,
        request: Request<relay_pb::EnrolRequest>,
    ) -> Result<Response<relay_pb::EnrolResponse>, Status> {
        let key = Self::key(&request).map_err(clankie_runtime::refuse::gateway)?;
        let req = request.into_inner();
        let call = Call::new(admission_pb::EnrolMachineRequest {
            name: req.machine,
            secret: req.secret,
            key_sha256: key,
        })
        .timeout(INTERNAL)
        .request();
        let machine = self
            .shared
            .admission
            .clone()
            .enrol_machine(call)
            .await
            .answer()
            .map_err(passed_on)?;
        tracing::info!(fleet = %machine.fleet, machine = %machine.name, "relay.enrolled");
        Ok(Response::new(relay_pb::EnrolResponse {
            machine: machine.name,
            fleet: machine.fleet,
            enrolled_at_ms: machine.enrolled_at_ms,
        }))
    }
}
