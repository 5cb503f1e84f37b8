//! What a round sees: the Auto projects, the lead each routes to, and each
//! lead's evidence (the wake's content and its fingerprint).

use std::path::{Path, PathBuf};

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_types::leads;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Projects, conversations and hires as read for one admission, with each
/// project's lead routed once.
pub struct View {
    pub projects: Vec<mailbox_pb::Project>,
    pub conversations: Vec<mailbox_pb::Conversation>,
    pub hires: Vec<mailbox_pb::HireRecord>,
    routes: Vec<leads::LeadRoute>,
}

/// One Auto project as a lead's wake names it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProjectEvidence {
    pub name: String,
    pub focus: String,
    /// The built-in team, when bound builtin.
    pub tracker_project: String,
    pub linear_project: String,
    /// Open hires in its workspaces: `hire (role, pane)`.
    pub workers: Vec<String>,
    /// Each workspace with its HEAD commit.
    pub workspaces: Vec<(String, String)>,
}

/// A lead's evidence: every Auto project routed to it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Evidence {
    pub projects: Vec<ProjectEvidence>,
}

impl Evidence {
    /// A hash of the evidence: unchanged evidence, unchanged fingerprint.
    pub fn fingerprint(&self) -> String {
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        hex::encode(&Sha256::digest(&bytes)[..16])
    }

    /// The wake's text: an ordinary message; it grants nothing.
    pub fn text(&self, round_id: &str) -> String {
        let mut t = format!(
            "Auto round {round_id}: {} project(s) on Auto for you. Work them within each project's cap and role policy; this wake grants no tool or authority.\n",
            self.projects.len()
        );
        for p in &self.projects {
            t.push_str(&format!("\n- {}", p.name));
            if !p.focus.is_empty() {
                t.push_str(&format!("\n  focus: {}", p.focus));
            }
            match (p.tracker_project.as_str(), p.linear_project.as_str()) {
                ("", "") => t.push_str("\n  tracker: none bound"),
                (b, "") => t.push_str(&format!("\n  tracker: built-in {b}")),
                ("", l) => t.push_str(&format!("\n  tracker: Linear project {l}")),
                (b, l) => t.push_str(&format!("\n  tracker: built-in {b}; Linear project {l}")),
            }
            if p.workers.is_empty() {
                t.push_str("\n  live workers: none");
            } else {
                t.push_str(&format!("\n  live workers: {}", p.workers.join(", ")));
            }
            for (path, head) in &p.workspaces {
                let short = &head[..head.len().min(12)];
                t.push_str(&format!("\n  workspace: {path} at {short}"));
            }
        }
        t
    }
}

impl View {
    pub fn new(
        projects: Vec<mailbox_pb::Project>,
        conversations: Vec<mailbox_pb::Conversation>,
        hires: Vec<mailbox_pb::HireRecord>,
    ) -> Self {
        let router = leads::Router::new(&conversations, &projects);
        let routes = projects.iter().map(|p| router.route(p)).collect();
        View {
            projects,
            conversations,
            hires,
            routes,
        }
    }

    pub fn auto_projects(&self) -> usize {
        self.projects.iter().filter(|p| p.auto).count()
    }

    pub fn lead_of(&self, p: &mailbox_pb::Project) -> leads::LeadRoute {
        self.projects
            .iter()
            .position(|q| q.project_id == p.project_id)
            .and_then(|i| self.routes.get(i).cloned())
            .unwrap_or_else(|| leads::route(p, &self.conversations, &self.projects))
    }

    fn lead_at(&self, i: usize) -> &str {
        self.routes
            .get(i)
            .map_or(leads::HEAD, |r| r.conversation_id.as_str())
    }

    /// Every lead an Auto project routes to, once each.
    pub fn leads(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .projects
            .iter()
            .enumerate()
            .filter(|(_, p)| p.auto)
            .map(|(i, _)| self.lead_at(i).to_string())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Open hires working in one of the project's workspaces (or under
    /// one: a worktree root inside it).
    pub fn live_workers(&self, p: &mailbox_pb::Project) -> Vec<&mailbox_pb::HireRecord> {
        self.hires
            .iter()
            .filter(|h| {
                clankie_types::hire::HireEnd::open(h.ended)
                    && h.role != clankie_types::Role::Lead.wire()
            })
            .filter(|h| {
                h.project_id == p.project_id
                    || p.workspaces
                        .iter()
                        .any(|w| Path::new(&h.workspace).starts_with(&w.path))
            })
            .collect()
    }

    /// The evidence of lead `lead`: its Auto projects, read now.
    pub fn evidence(&self, lead: &str) -> Evidence {
        let mut projects: Vec<ProjectEvidence> = self
            .projects
            .iter()
            .enumerate()
            .filter(|(i, p)| p.auto && self.lead_at(*i) == lead)
            .map(|(_, p)| {
                let mut workers: Vec<String> = self
                    .live_workers(p)
                    .iter()
                    .map(|h| {
                        let role = clankie_types::Role::wire_word(h.role);
                        format!("{} ({role}, pane {})", h.hire_id, h.pane_id)
                    })
                    .collect();
                workers.sort();
                ProjectEvidence {
                    name: p.name.clone(),
                    focus: p.focus.clone(),
                    tracker_project: if p.tracker == clankie_types::TrackerBinding::Builtin.wire() {
                        p.tracker_team.clone()
                    } else {
                        String::new()
                    },
                    linear_project: p.linear_project_id.clone(),
                    workers,
                    workspaces: p
                        .workspaces
                        .iter()
                        .map(|w| {
                            (
                                w.path.clone(),
                                head_of(Path::new(&w.path)).unwrap_or_default(),
                            )
                        })
                        .collect(),
                }
            })
            .collect();
        projects.sort_by(|a, b| a.name.cmp(&b.name));
        Evidence { projects }
    }
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The commit a workspace's HEAD names, read from its git files (a
/// worktree's `.git` file included); `None` outside git.
pub fn head_of(workspace: &Path) -> Option<String> {
    let dot = workspace.join(".git");
    let gitdir: PathBuf = if dot.is_dir() {
        dot
    } else {
        let link = read_trim(&dot)?;
        let target = PathBuf::from(link.strip_prefix("gitdir:")?.trim());
        if target.is_absolute() {
            target
        } else {
            workspace.join(target)
        }
    };
    let head = read_trim(&gitdir.join("HEAD"))?;
    let Some(reference) = head.strip_prefix("ref:").map(str::trim) else {
        return Some(head);
    };
    let common = read_trim(&gitdir.join("commondir"))
        .map(|c| gitdir.join(c))
        .unwrap_or_else(|| gitdir.clone());
    if let Some(sha) =
        read_trim(&gitdir.join(reference)).or_else(|| read_trim(&common.join(reference)))
    {
        return Some(sha);
    }
    let packed = std::fs::read_to_string(common.join("packed-refs")).ok()?;
    packed.lines().find_map(|l| {
        let (sha, name) = l.split_once(' ')?;
        (name == reference).then(|| sha.to_string())
    })
}

/// Commits on the workspace's fetched origin branch since local midnight.
pub async fn landed_since_midnight(workspace: &Path) -> u32 {
    for branch in ["origin/HEAD", "origin/main", "origin/master"] {
        let out = tokio::process::Command::new("git")
            .arg("-C")
            .arg(workspace)
            .args(["rev-list", "--count", "--since=midnight", branch])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .await;
        if let Ok(o) = out
            && o.status.success()
        {
            return String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse()
                .unwrap_or(0);
        }
    }
    0
}

/// The team key of an issue identifier (`ENG-3` → `ENG`, `LOCAL-VUH-1` → `VUH`).
pub fn team_of(identifier: &str) -> Option<&str> {
    let (key, n) = identifier.rsplit_once('-')?;
    n.parse::<u64>().ok()?;
    Some(key.strip_prefix("LOCAL-").unwrap_or(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(name: &str, auto: bool, ws: &str) -> mailbox_pb::Project {
        mailbox_pb::Project {
            project_id: format!("prj_{name}"),
            name: name.into(),
            auto,
            workspaces: vec![mailbox_pb::Workspace {
                path: ws.into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn evidence_changes_with_a_worker_and_not_otherwise() {
        let mut view = View::new(
            vec![
                project("a", true, "/nope/a"),
                project("b", false, "/nope/b"),
            ],
            vec![],
            vec![],
        );
        assert_eq!(view.leads(), [leads::HEAD]);
        let first = view.evidence(leads::HEAD);
        assert_eq!(first.projects.len(), 1, "only Auto projects");
        assert_eq!(
            first.fingerprint(),
            view.evidence(leads::HEAD).fingerprint()
        );
        view.hires.push(mailbox_pb::HireRecord {
            hire_id: "hire_1".into(),
            project_id: "prj_a".into(),
            role: clankie_types::Role::Worker.wire(),
            pane_id: "%3".into(),
            workspace: "/nope/a".into(),
            ..Default::default()
        });
        let second = view.evidence(leads::HEAD);
        assert_ne!(first.fingerprint(), second.fingerprint());
        assert!(second.text("r1").contains("hire_1 (worker, pane %3)"));
    }

    #[test]
    fn heads_are_read_from_git_files() {
        let dir = tempfile::tempdir().expect("tmp");
        let ws = dir.path();
        std::fs::create_dir_all(ws.join(".git/refs/heads")).expect("git");
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").expect("head");
        assert_eq!(head_of(ws), None, "no commit yet");
        std::fs::write(ws.join(".git/packed-refs"), "abc refs/heads/main\n").expect("packed");
        assert_eq!(head_of(ws).as_deref(), Some("abc"));
        std::fs::write(ws.join(".git/refs/heads/main"), "def\n").expect("loose");
        assert_eq!(head_of(ws).as_deref(), Some("def"));
        assert_eq!(team_of("LOCAL-VUH-4"), Some("VUH"));
        assert_eq!(team_of("ENG-12"), Some("ENG"));
        assert_eq!(team_of("nope"), None);
    }
}
