//! `clankie transcript`: a conversation's entries after a sequence number,
//! with an optional long poll.

use std::process::ExitCode;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::paths::StatePaths;
use clankie_types::transcript::{EntryKind, EntryRole};
use serde_json::json;

use crate::support::clients::{self, refused};
use crate::support::output::print_json;

pub async fn transcript(
    paths: StatePaths,
    conversation: String,
    after: u64,
    wait_ms: u32,
) -> anyhow::Result<ExitCode> {
    let resp = clients::mailbox(&paths)?
        .read_transcript(mailbox_pb::ReadTranscriptRequest {
            conversation_id: conversation,
            after,
            wait_ms,
        })
        .await
        .map_err(refused)?
        .into_inner();
    print_json(&json!({
        "lastSeq": resp.last_seq,
        "entries": resp.entries.iter().map(|e| json!({
            "seq": e.seq,
            "kind": EntryKind::wire_word(e.kind),
            "role": EntryRole::wire_word(e.role),
            "text": e.text,
            "source": e.source,
            "untrusted": e.untrusted,
            "receiptId": e.receipt_id,
        })).collect::<Vec<_>>(),
    }));
    Ok(ExitCode::SUCCESS)
}
