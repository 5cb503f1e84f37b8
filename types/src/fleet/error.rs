//! A refusal as the gateway answers it over HTTP:
//! `{"error": {"code", "message", "retryable", ...details}}`. The code is a
//! fixed reason (the runtime's `ErrorCode` names them all); a client reads
//! it from this body, never out of an error's text.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    /// Nothing was forwarded: the same request may be sent again.
    #[serde(default)]
    pub retryable: bool,
    /// Structured details beside the message (a receipt id, a wait).
    #[serde(flatten)]
    pub details: Map<String, Value>,
}

/// The whole answer: the body under `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    pub error: ErrorBody,
}

impl ErrorBody {
    /// The refusal in an answer, when it is one.
    pub fn read(answer: &Value) -> Option<ErrorBody> {
        serde_json::from_value::<Refusal>(answer.clone())
            .ok()
            .map(|r| r.error)
    }

    /// The answer that carries it.
    pub fn answer(self) -> Value {
        serde_json::to_value(Refusal { error: self }).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_golden_refusals_read_and_write_back_the_same() {
        let f = super::super::fixture("refusals.json");
        for case in f.as_array().expect("cases") {
            let body = ErrorBody::read(case).expect("a refusal");
            assert!(!body.code.is_empty());
            assert_eq!(&body.clone().answer(), case);
        }
        assert_eq!(ErrorBody::read(&serde_json::json!({"ok": true})), None);
    }
}
