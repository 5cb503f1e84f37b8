//! Every gRPC contract of the Clankie backbone.
//!
//! One package per service (`clankie.admission.v1`, `clankie.mcphost.v1`,
//! `clankie.mailbox.v1`, `clankie.tracker.v1`, `clankie.auto.v1`),
//! shared messages in `clankie.common.v1`, and the census helper's pipe frames
//! in `clankie.helper.v1`. Compiled by protox in `build.rs`; no protoc needed.
//! This crate owns no logic.
//!
//! Lints are relaxed only inside the generated modules (prost and tonic emit
//! code clippy would flag); anything written by hand here is linted as usual.

pub mod common {
    #[allow(clippy::all, clippy::pedantic)]
    pub mod v1 {
        tonic::include_proto!("clankie.common.v1");
    }
}

pub mod admission {
    #[allow(clippy::all, clippy::pedantic)]
    pub mod v1 {
        tonic::include_proto!("clankie.admission.v1");
    }
}

pub mod mcphost {
    #[allow(clippy::all, clippy::pedantic)]
    pub mod v1 {
        tonic::include_proto!("clankie.mcphost.v1");
    }
}

pub mod mailbox {
    #[allow(clippy::all, clippy::pedantic)]
    pub mod v1 {
        tonic::include_proto!("clankie.mailbox.v1");
    }
}

pub mod relay {
    #[allow(clippy::all, clippy::pedantic)]
    pub mod v1 {
        tonic::include_proto!("clankie.relay.v1");
    }
}

pub mod helper {
    #[allow(clippy::all, clippy::pedantic)]
    pub mod v1 {
        tonic::include_proto!("clankie.helper.v1");
    }
}

/// The encoded `FileDescriptorSet` of every package, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/clankie_descriptor.bin"));

pub mod tracker {
    #[allow(clippy::all, clippy::pedantic)]
    pub mod v1 {
        tonic::include_proto!("clankie.tracker.v1");
    }
}

pub mod auto {
    #[allow(clippy::all, clippy::pedantic)]
    pub mod v1 {
        tonic::include_proto!("clankie.auto.v1");
    }
}

pub mod telemetry {
    #[allow(clippy::all, clippy::pedantic)]
    pub mod v1 {
        tonic::include_proto!("clankie.telemetry.v1");
    }
}
