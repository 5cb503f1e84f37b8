//! A lead seat's wakes: read the autonomy switch and its schedule, and
//! schedule a self-wake. The auto-scheduler decides whose schedule it is
//! from the seat's proof.

use clankie_proto::auto::v1 as auto_pb;
use clankie_runtime::ClankieError;
use clankie_types::fleet::args::ScheduleWakeArgs;
use serde::Serialize;

use super::{Op, unanswered};
use clankie_runtime::clients::Answer as _;

/// What a lead seat can see of its wakes.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Wakes {
    switch_on: bool,
    conversation_id: String,
    next_round_ms: Option<i64>,
    last_wake_at_ms: Option<i64>,
    scheduled: Vec<Wake>,
}

/// One scheduled self-wake.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Wake {
    wake_id: String,
    at_ms: i64,
    note: String,
}

/// A self-wake just scheduled.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Scheduled {
    wake_id: String,
    conversation_id: String,
    at_ms: i64,
    note: String,
}

/// What a wake needs to be asked for.
pub(crate) const WAKE_SEAT: &str = "the wake tools need a native lead seat";

impl Op<'_> {
    pub(crate) async fn get_wake(&self) -> Result<Wakes, ClankieError> {
        self.seat(WAKE_SEAT)?;
        let req = self.request(auto_pb::GetWakeRequest {})?;
        let w = self
            .shared
            .auto
            .clone()
            .get_wake(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        Ok(Wakes {
            switch_on: w.switch_on,
            conversation_id: w.conversation_id,
            next_round_ms: (w.next_round_ms > 0).then_some(w.next_round_ms),
            last_wake_at_ms: (w.last_wake_at_ms > 0).then_some(w.last_wake_at_ms),
            scheduled: w
                .scheduled
                .into_iter()
                .map(|s| Wake {
                    wake_id: s.wake_id,
                    at_ms: s.at_ms,
                    note: s.note,
                })
                .collect(),
        })
    }

    pub(crate) async fn schedule_wake(
        &self,
        args: ScheduleWakeArgs,
    ) -> Result<Scheduled, ClankieError> {
        self.seat(WAKE_SEAT)?;
        let req = self.request(auto_pb::ScheduleWakeRequest {
            at_ms: args.at_ms,
            note: args.note,
        })?;
        let w = self
            .shared
            .auto
            .clone()
            .schedule_wake(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        Ok(Scheduled {
            wake_id: w.wake_id,
            conversation_id: w.conversation_id,
            at_ms: w.at_ms,
            note: w.note,
        })
    }
}
