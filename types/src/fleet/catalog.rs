//! What a tool catalog's `_meta` says about the fleet settings it was
//! served under (`clankie/settings`): whether connected tools, peer
//! messages and the landing review are on. The gateway writes it on every
//! `tools/list`; a bridge reads it. A family the settings explicitly turn
//! off is removed from the bridge's catalog, verified or not, while a
//! catalog that says nothing (an older service) removes nothing; review
//! tools are offered only where it says `reviews: "on"`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Family, FleetTool};

/// The `_meta` key.
pub const SETTINGS: &str = "clankie/settings";

/// One setting's state, as `"on"` or `"off"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Switch {
    On,
    Off,
}

impl From<bool> for Switch {
    fn from(on: bool) -> Switch {
        if on { Switch::On } else { Switch::Off }
    }
}

/// The settings a catalog was served under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSettings {
    /// `clankie_tools` and `clankie_call` (fleet.tools connected).
    pub tools: Switch,
    /// `list_fleet_seats` and `message_peer`.
    pub peer_messages: Switch,
    /// `submit_for_review`, `review_candidate`, `review_verdict`: the
    /// seat's project names a standing reviewer.
    pub reviews: Switch,
}

impl CatalogSettings {
    /// Whether a tool of `family` may be in the catalog.
    pub fn offers(self, family: Family) -> bool {
        match family {
            Family::Meta => self.tools == Switch::On,
            Family::Peers => self.peer_messages == Switch::On,
            Family::Review => self.reviews == Switch::On,
            Family::Report | Family::Lead => true,
        }
    }

    /// Whether the named tool may stay: a fleet tool of a family switched
    /// off may not; anything else (a connected tool's own name) may.
    pub fn keeps(self, name: &str) -> bool {
        FleetTool::parse(name).is_none_or(|t| self.offers(t.family()))
    }

    pub fn write(&self, meta: &mut Map<String, Value>) {
        if let Ok(v) = serde_json::to_value(self) {
            meta.insert(SETTINGS.into(), v);
        }
    }

    /// The settings in a catalog's `_meta`, when it names them all.
    pub fn read(meta: &Map<String, Value>) -> Option<CatalogSettings> {
        serde_json::from_value(meta.get(SETTINGS)?.clone()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_golden_settings_read_back_and_switch_off_their_families() {
        let f = super::super::fixture("catalog_settings.json");
        let meta = f.as_object().expect("object");
        let s = CatalogSettings::read(meta).expect("settings");
        assert_eq!(
            s,
            CatalogSettings {
                tools: Switch::On,
                peer_messages: Switch::Off,
                reviews: Switch::On,
            }
        );
        let mut back = Map::new();
        s.write(&mut back);
        assert_eq!(&back, meta);
        assert!(s.keeps("clankie_call") && s.keeps("submit_for_review"));
        assert!(!s.keeps("message_peer") && !s.keeps("list_fleet_seats"));
        assert!(s.keeps("message_clankie") && s.keeps("time_get_current_time"));
        let mut partial = Map::new();
        partial.insert(SETTINGS.into(), serde_json::json!({ "reviews": "on" }));
        assert_eq!(CatalogSettings::read(&partial), None, "all or nothing");
    }
}
