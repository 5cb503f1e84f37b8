//! The global head is named as the seed names it, `global-default`. Books
//! written before were keyed `global`: on open, the head's transcript file
//! is renamed first and then every record naming the head is renamed in one
//! state write, so a crash between the two only repeats the (idempotent)
//! rename. A request naming `global` still reaches the head.

use std::path::Path;

use clankie_runtime::state::Guarded;

use super::store::{HEAD, StateFile};

pub use clankie_types::leads::{LEGACY_HEAD, head_named as named};

/// Renames a legacy head in `state` and its transcript under `dir`.
pub fn migrate(dir: &Path, state: &mut Guarded<StateFile>) -> std::io::Result<()> {
    if state.unreadable().is_some()
        || !state
            .conversations
            .iter()
            .any(|c| c.conversation_id == LEGACY_HEAD)
    {
        return Ok(());
    }
    let transcripts = dir.join("transcripts");
    let old = transcripts.join(format!("{LEGACY_HEAD}.jsonl"));
    let new = transcripts.join(format!("{HEAD}.jsonl"));
    if old.exists() {
        if new.exists() {
            // Never merged by guesswork: the owner decides.
            return Err(std::io::Error::other(format!(
                "both {} and {} exist; the head cannot be renamed until one is removed",
                old.display(),
                new.display()
            )));
        }
        std::fs::rename(&old, &new)?;
        std::fs::File::open(&transcripts)?.sync_all()?;
    }
    let rename = |id: &mut String| {
        if id == LEGACY_HEAD {
            *id = HEAD.to_string();
        }
    };
    state
        .update(|s| {
            s.conversations.retain(|c| {
                c.conversation_id != HEAD
                    || c.kind != clankie_types::transcript::ConversationKind::Head
            });
            for c in &mut s.conversations {
                rename(&mut c.conversation_id);
            }
            for h in &mut s.hires {
                rename(&mut h.conversation_id);
            }
            for p in &mut s.projects {
                rename(&mut p.lead_conversation_id);
            }
        })
        .map_err(std::io::Error::other)?;
    tracing::info!("mailbox.head.renamed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn a_legacy_head_is_renamed_with_its_transcript_and_its_hires() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("mailbox");
        std::fs::create_dir_all(root.join("transcripts")).expect("dirs");
        let state = serde_json::json!({
            "version": 1, "projects": [{
                "projectId": "p", "name": "alpha", "workspaces": [], "leadConversationId": "global",
                "workerCap": 1, "revision": 1, "createdAtMs": 1 }],
            "conversations": [{ "conversationId": "global", "kind": "head", "title": "Clankie",
                "createdAtMs": 1 }],
            "hires": [{ "hireId": "h1", "conversationId": "global", "projectId": "p",
                "role": "worker", "linkId": "l", "fleet": "f", "paneId": "%1", "workspace": "/w",
                "command": ["x"], "createdAtMs": 1 }],
        });
        std::fs::write(root.join("state.json"), state.to_string()).expect("state");
        std::fs::write(
            root.join("transcripts/global.jsonl"),
            "{\"seq\":1,\"kind\":\"message\",\"role\":\"agent\",\"text\":\"hi\",\"source\":\"hire:h1\",\"untrusted\":true,\"atMs\":1,\"receiptId\":\"rpt_1\",\"hireId\":\"h1\"}\n",
        )
        .expect("transcript");
        let store = Store::open(root.clone()).expect("open");
        assert_eq!(store.state.conversations.len(), 1);
        assert_eq!(store.state.conversations[0].conversation_id, HEAD);
        assert_eq!(store.state.hires[0].conversation_id, HEAD);
        assert_eq!(store.state.projects[0].lead_conversation_id, HEAD);
        assert_eq!(
            store.receipt("rpt_1").map(|a| a.conversation_id.clone()),
            Some(HEAD.to_string())
        );
        assert_eq!(store.entries(HEAD, 0, 10).len(), 1);
        assert!(!root.join("transcripts/global.jsonl").exists());
        drop(store);
        // Reopened, nothing changes again.
        let again = Store::open(root).expect("reopen");
        assert_eq!(again.entries(HEAD, 0, 10).len(), 1);
        assert_eq!(named("global"), HEAD);
        assert_eq!(named("conv_1"), "conv_1");
    }
}
