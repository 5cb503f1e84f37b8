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

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
