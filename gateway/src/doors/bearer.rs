//! A fleet link's bearer: admission says whose it is (a remote member of a
//! linked fleet) on every request; the gateway keeps nothing of it.

use clankie_proto::admission::v1 as admission_pb;
use clankie_runtime::ClankieError;
use clankie_runtime::clients::{Call, INTERNAL};

use super::{Admitted, admission_refusal};
use crate::Shared;

/// Admits a request carrying a fleet bearer.
pub(crate) async fn admit(shared: &Shared, bearer: &str) -> Result<Admitted, ClankieError> {
    let call = Call::new(admission_pb::AdmitRequest {
        bearer: bearer.to_string(),
    })
    .timeout(INTERNAL)
    .request();
    let resp = shared.admission.clone().admit(call).await.map_err(|s| {
        admission_refusal(
            &s,
            "fleet admission is unavailable right now; nothing was forwarded, retry shortly",
        )
    })?;
    Ok(Admitted::from_admission(resp.into_inner()))
}
