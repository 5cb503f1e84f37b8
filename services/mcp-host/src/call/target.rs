//! The account/configuration fence, and what a dispatch reaches: an
//! upstream account's live session, or the built-in tracker's store.

use clankie_proto::tracker::v1 as tracker_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use serde_json::Value;

use super::Plan;
use crate::{McpHost, accounts, catalog, tracker};

/// What a dispatch reaches.
pub(crate) enum Target {
    /// An upstream session, held in flight until the call settles.
    Upstream(rmcp::Peer<rmcp::RoleClient>, accounts::InflightGuard),
    /// The built-in tracker, as the caller's actor and role.
    Store(tracker_pb::InvokeRequest),
}

impl McpHost {
    /// The fence: the entry must be exactly what was checked (an account
    /// that changed while the call was checked refuses), and the account
    /// generation the catalog listed must still be the live one.
    pub(crate) fn fence(
        &self,
        entry: &catalog::Entry,
        plan: Option<&Plan>,
        args: &Value,
    ) -> Result<Target, ClankieError> {
        if self
            .catalog()
            .grant_entry(&entry.account, &entry.tool)
            .map(|e| e.definition_sha256.clone())
            .as_ref()
            != Some(&entry.definition_sha256)
        {
            return Err(ErrorCode::AccountChanged.err(format!(
                "{} changed while the call was being checked; describe it again",
                entry.qualified
            )));
        }
        Ok(match plan {
            None => {
                let (peer, guard) = self
                    .inner
                    .accounts
                    .dispatch_handle(&entry.account, entry.generation)?;
                Target::Upstream(peer, guard)
            }
            Some(Plan {
                backend: tracker::Backend::Linear { .. },
                ..
            }) => {
                let generation = self
                    .inner
                    .accounts
                    .verified_generation(tracker::ACCOUNT)
                    .ok_or_else(|| {
                        ErrorCode::AccountUnavailable.err(
                            "this call's tracker is Linear, and no verified Linear account is connected",
                        )
                    })?;
                let (peer, guard) = self
                    .inner
                    .accounts
                    .dispatch_handle(tracker::ACCOUNT, generation)?;
                Target::Upstream(peer, guard)
            }
            Some(p) => Target::Store(tracker_pb::InvokeRequest {
                tool: entry.tool.clone(),
                arguments_json: args.to_string(),
                actor: p.caller.actor.clone(),
                role: p.caller.role.wire(),
                scope_team: p.scope_team.clone(),
                linear_route: p.linear_route.clone(),
            }),
        })
    }
}
