//! `clankie message`: a lead's message to a hire's seat.

use std::process::ExitCode;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::paths::StatePaths;
use serde_json::json;

use crate::support::clients::{self, refused};
use crate::support::output::print_json;

pub async fn message(
    paths: StatePaths,
    hire_id: String,
    text: String,
    conversation: String,
) -> anyhow::Result<ExitCode> {
    let r = clients::mailbox(&paths)?
        .message_seat(mailbox_pb::MessageSeatRequest {
            hire_id,
            text,
            conversation_id: conversation,
        })
        .await
        .map_err(refused)?
        .into_inner();
    print_json(&json!({
        "deliveryId": r.delivery_id,
        "ownerConversationId": r.owner_conversation_id,
        "adopted": r.adopted,
    }));
    Ok(ExitCode::SUCCESS)
}
