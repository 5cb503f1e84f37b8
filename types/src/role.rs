//! A caller's tracker role, resolved by the host from the hire ledger and
//! never taken from a caller's arguments. On disk and on the wire it is the
//! lowercase name.

crate::closed_set! {
    /// A caller's tracker role, resolved by the host (never from arguments).
    pub enum Role as clankie_proto::common::v1::Role {
        Owner = "owner" => Owner,
        Lead = "lead" => Lead,
        Reviewer = "reviewer" => Reviewer,
        Worker = "worker" => Worker,
    }
}

impl Role {
    /// Reviewers and workers get the limited profile.
    pub fn limited(self) -> bool {
        matches!(self, Role::Reviewer | Role::Worker)
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
