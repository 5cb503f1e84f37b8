//! A caller's tracker role, resolved by the host from the hire ledger and
//! never taken from a caller's arguments. On disk and on the wire it is the
//! lowercase name.

/// A caller's tracker role, resolved by the host (never from arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Lead,
    Reviewer,
    Worker,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Lead => "lead",
            Role::Reviewer => "reviewer",
            Role::Worker => "worker",
        }
    }

    /// Reviewers and workers get the limited profile.
    pub fn limited(self) -> bool {
        matches!(self, Role::Reviewer | Role::Worker)
    }

    /// Parses the lowercase name.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "owner" => Some(Role::Owner),
            "lead" => Some(Role::Lead),
            "reviewer" => Some(Role::Reviewer),
            "worker" => Some(Role::Worker),
            _ => None,
        }
    }
}

impl Role {
    /// The role as `common.v1.Role`.
    pub fn wire(self) -> i32 {
        use clankie_proto::common::v1::Role as W;
        (match self {
            Role::Owner => W::Owner,
            Role::Lead => W::Lead,
            Role::Reviewer => W::Reviewer,
            Role::Worker => W::Worker,
        }) as i32
    }

    /// The role a wire value names; unspecified or unknown is none.
    pub fn from_wire(value: i32) -> Option<Role> {
        use clankie_proto::common::v1::Role as W;
        match W::try_from(value).ok()? {
            W::Owner => Some(Role::Owner),
            W::Lead => Some(Role::Lead),
            W::Reviewer => Some(Role::Reviewer),
            W::Worker => Some(Role::Worker),
            W::Unspecified => None,
        }
    }

    /// An optional role on the wire: none is unspecified.
    pub fn wire_or_unspecified(role: Option<Role>) -> i32 {
        role.map_or(0, Role::wire)
    }

    /// The word a view shows for a wire role: empty when unspecified.
    pub fn wire_word(value: i32) -> &'static str {
        Role::from_wire(value).map_or("", Role::as_str)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_crosses_the_wire_and_back() {
        for r in [Role::Owner, Role::Lead, Role::Reviewer, Role::Worker] {
            assert_eq!(Role::from_wire(r.wire()), Some(r));
            assert_eq!(Role::wire_word(r.wire()), r.as_str());
        }
        assert_eq!(Role::from_wire(0), None);
        assert_eq!(Role::wire_word(0), "");
        assert_eq!(Role::wire_or_unspecified(None), 0);
    }

    #[test]
    fn the_names_on_disk_are_the_lowercase_strings() {
        for r in [Role::Owner, Role::Lead, Role::Reviewer, Role::Worker] {
            let json = serde_json::to_string(&r).expect("json");
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(serde_json::from_str::<Role>(&json).ok(), Some(r));
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("admin"), None);
    }
}
