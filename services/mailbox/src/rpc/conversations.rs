//! Conversations (the global head and lead chats) and their transcripts.

use std::time::Duration;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::transcript::ConversationKind;
use tonic::{Request, Response};

use crate::convert::*;
use crate::store;
use crate::store::{ConversationRec, HEAD, now_ms};
use crate::{MAX_REPORT, MAX_WAIT};
use crate::{MailboxService, short_id};

/// A transcript entry that carries its own receipt id: the id is 1 to 128
/// bytes, the text 1 byte to 32 KiB.
pub(crate) fn check_entry(what: &str, id: &str, text: &str) -> Result<(), ClankieError> {
    if id.is_empty() || id.len() > 128 {
        return Err(
            ErrorCode::InvalidArgument.err(format!("a {what} needs an id (at most 128 bytes)"))
        );
    }
    if text.trim().is_empty() || text.len() > MAX_REPORT {
        return Err(ErrorCode::InvalidArgument.err(format!("a {what} is 1 byte to 32 KiB of text")));
    }
    Ok(())
}
/// Whether the conversation exists and was not removed.
pub(crate) fn present(state: &store::StateFile, conversation_id: &str) -> bool {
    state
        .conversations
        .iter()
        .any(|c| c.conversation_id == conversation_id && !c.removed)
}
/// The calling conversation: the given one, or the global head.
pub(crate) fn caller(
    state: &store::StateFile,
    conversation_id: &str,
) -> Result<String, ClankieError> {
    let id = if conversation_id.is_empty() {
        HEAD
    } else {
        crate::legacy_head::named(conversation_id)
    };
    if !present(state, id) {
        return Err(ErrorCode::ConversationNotFound.err(format!("no conversation {id}")));
    }
    Ok(id.to_string())
}
impl MailboxService {
    pub(crate) async fn add_conversation(
        &self,
        request: Request<mailbox_pb::AddConversationRequest>,
    ) -> Result<Response<mailbox_pb::Conversation>, ClankieError> {
        self.owner(&request)?;
        let req = request.into_inner();
        if !req.workspace.is_empty() && !std::path::Path::new(&req.workspace).is_absolute() {
            return Err(ErrorCode::InvalidArgument.err("a lead's workspace is an absolute folder"));
        }
        if req.projects.len() > 64 || req.projects.iter().any(|p| p.is_empty() || p.len() > 64) {
            return Err(ErrorCode::InvalidArgument.err(
                "a lead owns at most 64 tracker projects, each a team key or a Linear project UUID",
            ));
        }
        let mut store = self.inner.store.lock().await;
        Self::writable(&store)?;
        let c = ConversationRec {
            conversation_id: short_id("conv"),
            kind: ConversationKind::Lead,
            title: req.title.chars().take(200).collect(),
            created_at_ms: now_ms(),
            removed: false,
            workspace: req.workspace,
            projects: req.projects,
        };
        store.change(|s| {
            s.conversations.push(c.clone());
            Ok(())
        })?;
        Ok(Response::new(conversation_pb(&c)))
    }

    pub(crate) async fn list_conversations(
        &self,
        request: Request<mailbox_pb::ListConversationsRequest>,
    ) -> Result<Response<mailbox_pb::ListConversationsResponse>, ClankieError> {
        self.owner(&request)?;
        let store = self.inner.store.lock().await;
        store.readable()?;
        Ok(Response::new(mailbox_pb::ListConversationsResponse {
            conversations: store
                .state
                .conversations
                .iter()
                .map(conversation_pb)
                .collect(),
        }))
    }

    pub(crate) async fn remove_conversation(
        &self,
        request: Request<mailbox_pb::RemoveConversationRequest>,
    ) -> Result<Response<mailbox_pb::Conversation>, ClankieError> {
        self.owner(&request)?;
        let mut req = request.into_inner();
        req.conversation_id = crate::legacy_head::named(&req.conversation_id).to_string();
        if req.conversation_id == HEAD {
            return Err(ErrorCode::InvalidArgument.err("the global head cannot be removed"));
        }
        let mut store = self.inner.store.lock().await;
        Self::writable(&store)?;
        let out = store.change(|s| {
            let c = s
                .conversations
                .iter_mut()
                .find(|c| c.conversation_id == req.conversation_id && !c.removed)
                .ok_or_else(|| {
                    ErrorCode::ConversationNotFound
                        .err(format!("no conversation {}", req.conversation_id))
                })?;
            c.removed = true;
            Ok(c.clone())
        })?;
        Ok(Response::new(conversation_pb(&out)))
    }

    pub(crate) async fn read_transcript(
        &self,
        request: Request<mailbox_pb::ReadTranscriptRequest>,
    ) -> Result<Response<mailbox_pb::ReadTranscriptResponse>, ClankieError> {
        self.owner(&request)?;
        let mut req = request.into_inner();
        req.conversation_id = crate::legacy_head::named(&req.conversation_id).to_string();
        let wait = Duration::from_millis(u64::from(req.wait_ms)).min(MAX_WAIT);
        let mut changes = self.inner.appended.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            {
                let store = self.inner.store.lock().await;
                if !store
                    .state
                    .conversations
                    .iter()
                    .any(|c| c.conversation_id == req.conversation_id)
                {
                    return Err(ErrorCode::ConversationNotFound
                        .err(format!("no conversation {}", req.conversation_id)));
                }
                let last = store.last_seq(&req.conversation_id);
                if last > req.after || tokio::time::Instant::now() >= deadline {
                    let entries = store.entries(&req.conversation_id, req.after, 500);
                    return Ok(Response::new(mailbox_pb::ReadTranscriptResponse {
                        entries: entries.into_iter().map(entry_pb).collect(),
                        last_seq: last,
                    }));
                }
            }
            let _ = tokio::time::timeout_at(deadline, changes.changed()).await;
        }
    }
}
