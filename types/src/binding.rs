//! The closed names a project and a fleet link are stored under: which
//! tracker a project's calls go to, and what kind of link admits a caller.
//! On disk and on the wire each is the lowercase string it always was
//! (`""` for an unbound tracker), so files written before these enums
//! existed still load.

use serde::{Deserialize, Serialize};

/// Where a project's (or a workspace's saved) tracker calls go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TrackerBinding {
    /// Not chosen yet: a project's calls then follow its workspaces'
    /// conventions, and are refused when those do not agree.
    #[default]
    #[serde(rename = "")]
    Unbound,
    /// The built-in tracker (a team key is required).
    #[serde(rename = "builtin")]
    Builtin,
    /// The connected Linear account.
    #[serde(rename = "linear")]
    Linear,
}

impl TrackerBinding {
    pub fn as_str(self) -> &'static str {
        match self {
            TrackerBinding::Unbound => "",
            TrackerBinding::Builtin => "builtin",
            TrackerBinding::Linear => "linear",
        }
    }

    /// Parses the stored name (`""`, `builtin` or `linear`).
    pub fn parse(s: &str) -> Option<TrackerBinding> {
        match s {
            "" => Some(TrackerBinding::Unbound),
            "builtin" => Some(TrackerBinding::Builtin),
            "linear" => Some(TrackerBinding::Linear),
            _ => None,
        }
    }
}

impl std::fmt::Display for TrackerBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of fleet link admits a caller: a bearer token, or a pane host
/// whose panes the kernel proves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// A fleet bearer (remote route): the token is the proof.
    Bearer,
    /// A tmux server's session (pane host).
    Tmux,
    /// A Herdr server (pane host).
    Herdr,
}

impl LinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Bearer => "bearer",
            LinkKind::Tmux => "tmux",
            LinkKind::Herdr => "herdr",
        }
    }

    pub fn parse(s: &str) -> Option<LinkKind> {
        match s {
            "bearer" => Some(LinkKind::Bearer),
            "tmux" => Some(LinkKind::Tmux),
            "herdr" => Some(LinkKind::Herdr),
            _ => None,
        }
    }

    /// The kind as `admission.v1.LinkKind`.
    pub fn wire(self) -> i32 {
        use clankie_proto::admission::v1::LinkKind as W;
        (match self {
            LinkKind::Bearer => W::Bearer,
            LinkKind::Tmux => W::Tmux,
            LinkKind::Herdr => W::Herdr,
        }) as i32
    }

    /// The kind a wire value names; unspecified or unknown is none.
    pub fn from_wire(value: i32) -> Option<LinkKind> {
        use clankie_proto::admission::v1::LinkKind as W;
        match W::try_from(value).ok()? {
            W::Bearer => Some(LinkKind::Bearer),
            W::Tmux => Some(LinkKind::Tmux),
            W::Herdr => Some(LinkKind::Herdr),
            W::Unspecified => None,
        }
    }

    /// The word a view shows for a wire kind: empty when unspecified.
    pub fn wire_word(value: i32) -> &'static str {
        LinkKind::from_wire(value).map_or("", LinkKind::as_str)
    }

    /// A pane host: its callers are proven by kernel facts.
    pub fn is_pane_host(self) -> bool {
        matches!(self, LinkKind::Tmux | LinkKind::Herdr)
    }
}

impl std::fmt::Display for LinkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_link_kind_crosses_the_wire_and_back() {
        for k in [LinkKind::Bearer, LinkKind::Tmux, LinkKind::Herdr] {
            assert_eq!(LinkKind::from_wire(k.wire()), Some(k));
            assert_eq!(LinkKind::wire_word(k.wire()), k.as_str());
        }
        assert_eq!(LinkKind::from_wire(0), None);
    }

    #[test]
    fn the_stored_names_are_the_strings_written_before() {
        for b in [
            TrackerBinding::Unbound,
            TrackerBinding::Builtin,
            TrackerBinding::Linear,
        ] {
            let json = serde_json::to_string(&b).expect("json");
            assert_eq!(json, format!("\"{}\"", b.as_str()));
            assert_eq!(serde_json::from_str::<TrackerBinding>(&json).ok(), Some(b));
            assert_eq!(TrackerBinding::parse(b.as_str()), Some(b));
        }
        for k in [LinkKind::Bearer, LinkKind::Tmux, LinkKind::Herdr] {
            let json = serde_json::to_string(&k).expect("json");
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(LinkKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(TrackerBinding::parse("jira"), None);
        assert_eq!(LinkKind::parse("ssh"), None);
        assert!(serde_json::from_str::<LinkKind>("\"ssh\"").is_err());
    }
}
