//! The closed names a project and a fleet link are stored under: which
//! tracker a project's calls go to, and what kind of link admits a caller.
//! On disk and on the wire each is the lowercase string it always was
//! (`""` for an unbound tracker), so files written before these enums
//! existed still load.

use serde::{Deserialize, Serialize};

crate::closed_set! {
    /// `fleet.tools`: whether the fleet is served its connected tools.
    pub enum FleetTools as clankie_proto::common::v1::FleetTools {
        /// Members see and call the connected accounts' tools.
        Connected = "connected" => Connected,
        /// Members see none; calls are refused (`fleet_tools_off`).
        Off = "off" => Off,
    }
}

impl FleetTools {
    /// The word for a wire value, `unknown` for one this build does not
    /// know (status views print it; the settings never hold it).
    pub fn word_or_unknown(value: i32) -> &'static str {
        match FleetTools::wire_word(value) {
            "" => "unknown",
            word => word,
        }
    }
}

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

impl TrackerBinding {
    /// The binding as `mailbox.v1.TrackerBinding`: unbound is zero, the
    /// proto default, so an unset field reads as not chosen yet.
    pub fn wire(self) -> i32 {
        use clankie_proto::mailbox::v1::TrackerBinding as W;
        (match self {
            TrackerBinding::Unbound => W::Unbound,
            TrackerBinding::Builtin => W::Builtin,
            TrackerBinding::Linear => W::Linear,
        }) as i32
    }

    /// The binding a wire value names; a value this build does not know is
    /// none.
    pub fn from_wire(value: i32) -> Option<TrackerBinding> {
        use clankie_proto::mailbox::v1::TrackerBinding as W;
        Some(match W::try_from(value).ok()? {
            W::Unbound => TrackerBinding::Unbound,
            W::Builtin => TrackerBinding::Builtin,
            W::Linear => TrackerBinding::Linear,
        })
    }

    /// The word a view shows for a wire binding (empty when unbound).
    pub fn wire_word(value: i32) -> &'static str {
        TrackerBinding::from_wire(value).map_or("", TrackerBinding::as_str)
    }
}

crate::closed_set! {
    /// Where a caller's unpinned tracker calls go, as the mailbox resolved
    /// it from the caller's hire.
    pub enum TrackerRoute as clankie_proto::mailbox::v1::TrackerRoute {
        /// The built-in tracker.
        Builtin = "builtin" => Builtin,
        /// The connected Linear account.
        Linear = "linear" => Linear,
        /// No confirmed project hire: the routing before projects had
        /// bindings.
        Legacy = "legacy" => Legacy,
    }
}

impl std::fmt::Display for TrackerBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

crate::closed_set! {
    /// What kind of fleet link admits a caller: a bearer token, or a pane
    /// host whose panes the kernel proves.
    pub enum LinkKind as clankie_proto::admission::v1::LinkKind {
        /// A fleet bearer (remote route): the token is the proof.
        Bearer = "bearer" => Bearer,
        /// A tmux server's session (pane host).
        Tmux = "tmux" => Tmux,
        /// A Herdr server (pane host).
        Herdr = "herdr" => Herdr,
    }
}

impl LinkKind {
    /// A pane host: its callers are proven by kernel facts.
    pub fn is_pane_host(self) -> bool {
        matches!(self, LinkKind::Tmux | LinkKind::Herdr)
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
    fn every_binding_crosses_the_wire_and_back_with_unbound_the_default() {
        for b in [
            TrackerBinding::Unbound,
            TrackerBinding::Builtin,
            TrackerBinding::Linear,
        ] {
            assert_eq!(TrackerBinding::from_wire(b.wire()), Some(b));
            assert_eq!(TrackerBinding::wire_word(b.wire()), b.as_str());
        }
        assert_eq!(TrackerBinding::from_wire(0), Some(TrackerBinding::Unbound));
        assert_eq!(TrackerBinding::from_wire(9), None);
        assert_eq!(TrackerRoute::WORDS, ["builtin", "linear", "legacy"]);
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
