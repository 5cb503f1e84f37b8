//! The `Telemetry.Scrape` RPC every service serves beside its own: this
//! process's metrics as Prometheus text, for the owner only (the metrics
//! name accounts and tools). The gateway merges every process's page into
//! `GET /metrics`.

use clankie_proto::telemetry::v1 as pb;
use tonic::{Request, Response, Status};

use crate::owner::OwnerCheck;

/// Answers `Scrape` for the owner credential alone.
pub struct Scrape {
    service: crate::Service,
    owner: OwnerCheck,
}

impl Scrape {
    pub fn server(
        service: crate::Service,
        owner: OwnerCheck,
    ) -> pb::telemetry_server::TelemetryServer<Scrape> {
        pb::telemetry_server::TelemetryServer::new(Scrape { service, owner })
    }
}

#[tonic::async_trait]
impl pb::telemetry_server::Telemetry for Scrape {
    async fn scrape(
        &self,
        request: Request<pb::ScrapeRequest>,
    ) -> Result<Response<pb::ScrapeResponse>, Status> {
        self.owner
            .verify(request.metadata())
            .map_err(|e| crate::refuse::refusal(self.service, e))?;
        Ok(Response::new(pb::ScrapeResponse {
            text: super::metrics::exposition(),
        }))
    }
}
