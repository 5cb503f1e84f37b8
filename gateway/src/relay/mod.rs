//! The relay listener: where remote machines of a fleet reach this (the
//! main) stack, over TLS, as gRPC.
//!
//! A machine is known by the key its TLS connection proves (see
//! `clankie_runtime::relay_tls`): the handshake gives the certificate's
//! fingerprint, which rides on every request of that connection as
//! [`MachineKey`]; nothing the machine sends can name another key.
//! Admission owns the machines file: enrolment spends a secret there, and
//! binds that fingerprint.

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
    pub(crate) shared: std::sync::Arc<crate::Shared>,
}

impl RelayFace {
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
fn passed_on(e: ClankieError) -> Status {
    e.into_status()
}

#[tonic::async_trait]
impl relay_pb::relay_server::Relay for RelayFace {
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
