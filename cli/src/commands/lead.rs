//! `clankie lead`: lead conversations (the global head always exists).

use std::process::ExitCode;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::paths::StatePaths;
use clankie_types::transcript::ConversationKind;
use clap::Subcommand;
use serde_json::json;

use crate::support::clients::{self, refused};
use crate::support::output::{field, print_json};

#[derive(Subcommand)]
pub enum LeadCommand {
    /// Start a lead conversation.
    Add {
        title: String,
        /// The lead chat's folder (workspace matching for Auto rounds).
        #[arg(long, default_value = "")]
        workspace: String,
        /// A tracker project it owns: a built-in team key or a Linear project UUID (repeatable).
        #[arg(long = "project")]
        projects: Vec<String>,
    },
    /// List the global head and lead conversations.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove a lead conversation; its hires report to the head until adopted.
    Remove { conversation_id: String },
}

pub async fn lead(paths: StatePaths, command: LeadCommand) -> anyhow::Result<ExitCode> {
    let mut c = clients::mailbox(&paths)?;
    let conv_json = |c: &mailbox_pb::Conversation| {
        json!({
            "conversationId": c.conversation_id,
            "kind": ConversationKind::wire_word(c.kind),
            "title": c.title,
            "removed": c.removed,
        })
    };
    match command {
        LeadCommand::Add {
            title,
            workspace,
            projects,
        } => {
            let workspace = if workspace.is_empty() {
                workspace
            } else {
                std::path::absolute(&workspace)?.display().to_string()
            };
            let conv = c
                .add_conversation(mailbox_pb::AddConversationRequest {
                    title,
                    workspace,
                    projects,
                })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&conv_json(&conv));
        }
        LeadCommand::List { json } => {
            let all = c
                .list_conversations(mailbox_pb::ListConversationsRequest {})
                .await
                .map_err(refused)?
                .into_inner()
                .conversations;
            if json {
                print_json(
                    &json!({ "conversations": all.iter().map(conv_json).collect::<Vec<_>>() }),
                );
            } else {
                for conv in all.iter().filter(|c| !c.removed) {
                    println!(
                        "{}  {}  {}",
                        field(&conv.conversation_id),
                        field(ConversationKind::wire_word(conv.kind)),
                        field(&conv.title)
                    );
                }
            }
        }
        LeadCommand::Remove { conversation_id } => {
            let conv = c
                .remove_conversation(mailbox_pb::RemoveConversationRequest { conversation_id })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&conv_json(&conv));
        }
    }
    Ok(ExitCode::SUCCESS)
}
