//! The pure books behind the mailbox, each unit-tested on its own:
//! [`store`] (projects, conversations, hires, transcripts: `state.json`),
//! [`seats`] (seats, deliveries, peer messages: `seats.json`),
//! [`reviews`] (landing review candidates: `reviews.json`),
//! [`report_fences`] (inbound report fences: `report-fences.json`) and
//! [`codex_seats`] (hired Codex seats' registrations:
//! `local-codex-seats.json` in the state folder). [`bridges`] (what each
//! seat's bridge was seen doing) is kept in memory only.

pub mod bridges;
pub mod codex_seats;
pub mod legacy_head;
pub mod report_fences;
pub mod reviews;
pub mod seats;
pub mod store;
