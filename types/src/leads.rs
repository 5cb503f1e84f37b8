//! Which lead conversation a project belongs to: one rule for the Auto
//! round's routing and for hire source attribution.
//!
//! - A project's tracker references are its built-in team (when bound
//!   builtin) and its Linear project UUID.
//! - A lead chat owns a project when it names one of those references, or
//!   when the project names it as its lead. Explicit ownership wins
//!   regardless of workspace.
//! - Otherwise workspace matching may pick a lead chat with no configured
//!   projects whose folder is one of the project's workspaces, and only
//!   when exactly one matches: never another project's owner.
//! - Ambiguous or absent ownership falls back to the global head.

use clankie_proto::mailbox::v1 as mailbox_pb;

/// The global head's conversation id, as the seed names it (books written
/// before held `global`; the mailbox renames them on open).
pub const HEAD: &str = "global-default";

/// The head's id in files written before it was `global-default`.
pub const LEGACY_HEAD: &str = "global";

/// A lead conversation id as written: the legacy head's id is the head's.
pub fn head_named(id: &str) -> &str {
    if id == LEGACY_HEAD { HEAD } else { id }
}

/// A project's tracker references.
pub fn tracker_refs(p: &mailbox_pb::Project) -> Vec<&str> {
    let mut refs = Vec::new();
    if p.tracker == crate::TrackerBinding::Builtin.wire() && !p.tracker_team.is_empty() {
        refs.push(p.tracker_team.as_str());
    }
    if !p.linear_project_id.is_empty() {
        refs.push(p.linear_project_id.as_str());
    }
    refs
}

fn live_lead(c: &mailbox_pb::Conversation) -> bool {
    c.kind == crate::transcript::ConversationKind::Lead.wire() && !c.removed
}

/// Whether lead chat `c` explicitly owns project `p`.
pub fn owns(c: &mailbox_pb::Conversation, p: &mailbox_pb::Project) -> bool {
    live_lead(c)
        && (p.lead_conversation_id == c.conversation_id
            || tracker_refs(p)
                .iter()
                .any(|r| c.projects.iter().any(|o| o == r)))
}

/// Whether lead chat `c` has any configured project.
pub fn configured(c: &mailbox_pb::Conversation, projects: &[mailbox_pb::Project]) -> bool {
    !c.projects.is_empty() || projects.iter().any(|p| owns(c, p))
}

/// Where a project's Auto round goes, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeadRoute {
    pub conversation_id: String,
    /// "owner", "workspace", or why it fell back to the head.
    pub why: &'static str,
}

/// Routes projects to lead chats; built once per view, so routing every
/// project costs one pass over the conversations each.
pub struct Router<'a> {
    conversations: &'a [mailbox_pb::Conversation],
    /// Per conversation: it has configured projects.
    configured: Vec<bool>,
}

impl<'a> Router<'a> {
    pub fn new(
        conversations: &'a [mailbox_pb::Conversation],
        projects: &[mailbox_pb::Project],
    ) -> Self {
        Router {
            conversations,
            configured: conversations
                .iter()
                .map(|c| configured(c, projects))
                .collect(),
        }
    }

    /// Routes project `p` to its lead chat, or the global head.
    pub fn route(&self, p: &mailbox_pb::Project) -> LeadRoute {
        let owners: Vec<&mailbox_pb::Conversation> =
            self.conversations.iter().filter(|c| owns(c, p)).collect();
        match owners.as_slice() {
            [one] => {
                return LeadRoute {
                    conversation_id: one.conversation_id.clone(),
                    why: "owner",
                };
            }
            [_, _, ..] => {
                return LeadRoute {
                    conversation_id: HEAD.into(),
                    why: "ambiguous owners",
                };
            }
            [] => {}
        }
        let matching: Vec<&mailbox_pb::Conversation> = self
            .conversations
            .iter()
            .zip(&self.configured)
            .filter(|(c, configured)| live_lead(c) && !c.workspace.is_empty() && !**configured)
            .map(|(c, _)| c)
            .filter(|c| p.workspaces.iter().any(|w| w.path == c.workspace))
            .collect();
        match matching.as_slice() {
            [one] => LeadRoute {
                conversation_id: one.conversation_id.clone(),
                why: "workspace",
            },
            [] => LeadRoute {
                conversation_id: HEAD.into(),
                why: "no owner",
            },
            _ => LeadRoute {
                conversation_id: HEAD.into(),
                why: "ambiguous workspace",
            },
        }
    }
}

/// Routes project `p` to its lead chat, or the global head.
pub fn route(
    p: &mailbox_pb::Project,
    conversations: &[mailbox_pb::Conversation],
    projects: &[mailbox_pb::Project],
) -> LeadRoute {
    Router::new(conversations, projects).route(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(id: &str, team: &str, ws: &str) -> mailbox_pb::Project {
        mailbox_pb::Project {
            project_id: id.into(),
            name: id.into(),
            tracker: if team.is_empty() {
                crate::TrackerBinding::Unbound
            } else {
                crate::TrackerBinding::Builtin
            }
            .wire(),
            tracker_team: team.into(),
            workspaces: vec![mailbox_pb::Workspace {
                path: ws.into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn lead(id: &str, ws: &str, projects: &[&str]) -> mailbox_pb::Conversation {
        mailbox_pb::Conversation {
            conversation_id: id.into(),
            kind: crate::transcript::ConversationKind::Lead.wire(),
            workspace: ws.into(),
            projects: projects.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn explicit_ownership_beats_a_reversed_workspace() {
        // Each lead's folder is the other project's workspace.
        let work = project("work", "WORK", "/src/research");
        let research = project("research", "RES", "/src/clankie");
        let convs = [
            lead("c-work", "/src/clankie", &["WORK"]),
            lead("c-res", "/src/research", &["RES"]),
        ];
        let all = [work.clone(), research.clone()];
        assert_eq!(route(&work, &convs, &all).conversation_id, "c-work");
        assert_eq!(route(&research, &convs, &all).conversation_id, "c-res");
    }

    #[test]
    fn workspace_matching_only_picks_unconfigured_leads() {
        let p = project("p", "", "/src/p");
        let owner_elsewhere = lead("c-other", "/src/p", &["OTHER"]);
        let free = lead("c-free", "/src/p", &[]);
        let all = [p.clone()];
        assert_eq!(
            route(&p, std::slice::from_ref(&owner_elsewhere), &all).conversation_id,
            HEAD
        );
        assert_eq!(
            route(&p, &[owner_elsewhere, free.clone()], &all).conversation_id,
            "c-free"
        );
        let twin = lead("c-twin", "/src/p", &[]);
        assert_eq!(route(&p, &[free, twin], &all).why, "ambiguous workspace");
    }

    #[test]
    fn two_owners_fall_back_to_the_head() {
        let p = project("p", "ENG", "/src/p");
        let a = lead("a", "", &["ENG"]);
        let b = lead("b", "", &["ENG"]);
        assert_eq!(
            route(&p, &[a, b], std::slice::from_ref(&p)).why,
            "ambiguous owners"
        );
    }
}
