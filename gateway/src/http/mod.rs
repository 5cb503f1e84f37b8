//! The HTTP face: the seat routes a seat's bridge polls and posts to, the
//! owner's operator routes, and health. Every refusal leaves as one JSON
//! body, [`refusal`] (`refusal.rs`, shared with the doors and the intake).

pub(crate) mod edges;
pub(crate) mod health;
pub(crate) mod measure;
pub(crate) mod metrics;
pub(crate) mod operator;
pub(crate) mod owner;
pub(crate) mod seats;

use axum::response::{IntoResponse, Response};
use clankie_runtime::ClankieError;

pub use crate::refusal::refusal;

/// An answer as JSON, or its refusal.
pub(crate) fn json_or_refusal<T: serde::Serialize>(r: Result<T, ClankieError>) -> Response {
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => refusal(&e),
    }
}
