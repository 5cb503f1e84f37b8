//! The pure books behind the mailbox, each unit-tested on its own:
//! [`store`] (projects, conversations, hires, transcripts: `state.json`),
//! [`seats`] (seats, deliveries, peer messages: `seats.json`) and
//! [`reviews`] (landing review candidates: `reviews.json`).

pub mod reviews;
pub mod seats;
pub mod store;
