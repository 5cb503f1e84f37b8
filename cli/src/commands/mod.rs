//! One file per user verb (or a verb and its inverse: `connect` holds
//! `disconnect`, `hire` holds `close`). `clankie mcp` is the bridge, in
//! `bridge/`.

pub mod access;
pub mod accounts;
pub mod auto;
pub mod claude;
pub mod config;
pub mod connect;
pub mod diagnostics;
pub mod doctor;
pub mod down;
pub mod fleet;
pub mod hire;
pub mod lead;
pub mod logs;
pub mod machine;
pub mod message;
pub mod ownership;
pub mod pi;
pub mod project;
pub mod review;
pub mod roster;
pub mod status;
pub mod tracker;
pub mod transcript;
pub mod up;
pub mod version;
pub mod work;
pub mod work_item;
