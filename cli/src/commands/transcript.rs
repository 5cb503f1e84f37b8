//! `clankie transcript`: a conversation's entries after a sequence number,
//! with an optional long poll.

use std::process::ExitCode;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::paths::StatePaths;
use clankie_types::transcript::{EntryKind, EntryRole};
use serde_json::json;

use crate::support::clients::{self, refused};
use crate::support::output::{field, print_json};

pub async fn transcript(
    paths: StatePaths,
    conversation: String,
    after: u64,
    wait_ms: u32,
    json: bool,
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
    if !json {
        for e in &resp.entries {
            println!(
                "#{} {} {}{}{}",
                e.seq,
                EntryKind::wire_word(e.kind),
                EntryRole::wire_word(e.role),
                if e.source.is_empty() {
                    String::new()
                } else {
                    format!(" from {}", field(&e.source))
                },
                if e.untrusted { " (untrusted)" } else { "" },
            );
            // Agent words: each line shown, never a control sent.
            for l in e.text.lines() {
                println!("    {}", field(l));
            }
            if !e.receipt_id.is_empty() {
                println!("    receipt {}", field(&e.receipt_id));
            }
        }
        println!("last seq {}", resp.last_seq);
        return Ok(ExitCode::SUCCESS);
    }
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
