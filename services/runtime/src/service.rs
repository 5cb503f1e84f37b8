//! The table of the stack's processes: each one's name, socket, health name
//! and place in the start order. `clankie up`, the gateway's `/readyz`, the
//! clients and the shared main read it here, so no service name is spelled
//! as a string anywhere else.

use std::path::PathBuf;

use clankie_proto as proto;

use crate::paths::StatePaths;

/// One process of the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Service {
    Admission,
    Tracker,
    McpHost,
    Mailbox,
    Auto,
    Gateway,
}

impl Service {
    /// The order `clankie up` starts them in: each one's dependencies come
    /// before it (the gateway fronts them all, so it is last).
    pub const START_ORDER: [Service; 6] = [
        Service::Admission,
        Service::Tracker,
        Service::McpHost,
        Service::Mailbox,
        Service::Auto,
        Service::Gateway,
    ];

    /// The gRPC services behind the gateway: what `/readyz` checks.
    pub const BACKENDS: [Service; 5] = [
        Service::Admission,
        Service::Tracker,
        Service::McpHost,
        Service::Mailbox,
        Service::Auto,
    ];

    /// The short name: its socket is `run/NAME.sock`, its binary
    /// `clankie-NAME`, its logs `logs/NAME.log`.
    pub const fn name(self) -> &'static str {
        match self {
            Service::Admission => "admission",
            Service::Tracker => "tracker",
            Service::McpHost => "mcp-host",
            Service::Mailbox => "mailbox",
            Service::Auto => "auto",
            Service::Gateway => "gateway",
        }
    }

    /// The binary `clankie up` runs.
    pub const fn binary(self) -> &'static str {
        match self {
            Service::Admission => "clankie-admission",
            Service::Tracker => "clankie-tracker",
            Service::McpHost => "clankie-mcp-host",
            Service::Mailbox => "clankie-mailbox",
            Service::Auto => "clankie-auto",
            Service::Gateway => "clankie-gateway",
        }
    }

    /// The fully qualified gRPC name its readiness is reported under, taken
    /// from the generated server (the gateway serves no gRPC API of its own,
    /// only health, so it has a name of its own).
    pub const fn health_name(self) -> &'static str {
        match self {
            Service::Admission => proto::admission::v1::admission_server::SERVICE_NAME,
            Service::Tracker => proto::tracker::v1::tracker_server::SERVICE_NAME,
            Service::McpHost => proto::mcphost::v1::mcp_host_server::SERVICE_NAME,
            Service::Mailbox => proto::mailbox::v1::mailbox_server::SERVICE_NAME,
            Service::Auto => proto::auto::v1::auto_server::SERVICE_NAME,
            Service::Gateway => "clankie.gateway.v1.Gateway",
        }
    }

    /// The name its refusals are logged under (`{log_name}.refused`).
    pub const fn log_name(self) -> &'static str {
        match self {
            Service::Admission => "fleet.admission",
            Service::Tracker => "tracker",
            Service::McpHost => "mcp_host",
            Service::Mailbox => "mailbox",
            Service::Auto => "auto",
            Service::Gateway => "gateway",
        }
    }

    /// Its gRPC socket in `paths`.
    pub fn socket(self, paths: &StatePaths) -> PathBuf {
        paths.socket(self.name())
    }

    /// Looks a service up by its short name.
    pub fn from_name(name: &str) -> Option<Service> {
        Service::START_ORDER.into_iter().find(|s| s.name() == name)
    }
}

impl std::fmt::Display for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for s in Service::START_ORDER {
            assert!(seen.insert(s.name()), "{s} twice");
            assert_eq!(Service::from_name(s.name()), Some(s));
            assert_eq!(s.binary(), format!("clankie-{}", s.name()));
        }
        assert_eq!(Service::from_name("nope"), None);
    }

    #[test]
    fn health_names_are_the_generated_service_names() {
        assert_eq!(
            Service::Admission.health_name(),
            "clankie.admission.v1.Admission"
        );
        assert_eq!(Service::McpHost.health_name(), "clankie.mcphost.v1.McpHost");
        assert_eq!(Service::Mailbox.health_name(), "clankie.mailbox.v1.Mailbox");
        assert_eq!(Service::Tracker.health_name(), "clankie.tracker.v1.Tracker");
        assert_eq!(Service::Auto.health_name(), "clankie.auto.v1.Auto");
    }

    #[test]
    fn the_gateway_starts_last_and_is_no_backend() {
        assert_eq!(Service::START_ORDER.last(), Some(&Service::Gateway));
        assert!(!Service::BACKENDS.contains(&Service::Gateway));
        assert_eq!(Service::BACKENDS.len() + 1, Service::START_ORDER.len());
    }
}
