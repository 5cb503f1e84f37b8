//! Every gRPC contract of the Clankie backbone.
//!
//! One package per service (`clankie.admission.v1`, `clankie.mcphost.v1`),
//! shared messages in `clankie.common.v1`, and the census helper's pipe frames
//! in `clankie.helper.v1`. Compiled by protox in `build.rs`; no protoc needed.
//! This crate owns no logic.

#![allow(clippy::all)]

pub mod common {
    pub mod v1 {
        tonic::include_proto!("clankie.common.v1");
    }
}

pub mod admission {
    pub mod v1 {
        tonic::include_proto!("clankie.admission.v1");
    }
}

pub mod mcphost {
    pub mod v1 {
        tonic::include_proto!("clankie.mcphost.v1");
    }
}

pub mod mailbox {
    pub mod v1 {
        tonic::include_proto!("clankie.mailbox.v1");
    }
}

pub mod helper {
    pub mod v1 {
        tonic::include_proto!("clankie.helper.v1");
    }
}

/// The encoded `FileDescriptorSet` of every package, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/clankie_descriptor.bin"));

pub mod tracker {
    pub mod v1 {
        tonic::include_proto!("clankie.tracker.v1");
    }
}

pub mod auto {
    pub mod v1 {
        tonic::include_proto!("clankie.auto.v1");
    }
}
