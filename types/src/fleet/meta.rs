//! The call's account in a result's `_meta`: which receipt it is, how it
//! ended, which tool ran, whether the answer was read back from an earlier
//! receipt. The gateway writes it ([`CallMeta::write`]); bridges and test
//! clients read it ([`CallMeta::read`]). Harnesses drop `_meta` before
//! their model sees a result, so bridges also restate the receipt where the
//! model reads it.

use serde_json::{Map, Value};

use super::Outcome;

/// What every key of clankie's own starts with.
pub const PREFIX: &str = "clankie/";
pub const RECEIPT: &str = "clankie/receiptId";
pub const OUTCOME: &str = "clankie/outcome";
pub const NAME: &str = "clankie/name";
pub const FROM_RECEIPT: &str = "clankie/fromReceipt";
pub const DETAIL: &str = "clankie/detail";
pub const TRIMMED: &str = "clankie/trimmed";
/// Set when there is no upstream result to pass on, so the structured
/// content is clankie's own account (receipt, outcome, detail).
pub const ENVELOPE: &str = "clankie/envelope";
/// The catalog revision a tool list was served at.
pub const CATALOG_REVISION: &str = "clankie/catalogRevision";

/// One call's account.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallMeta {
    pub receipt_id: String,
    /// `None` when the writer named no outcome this reader knows.
    pub outcome: Option<Outcome>,
    pub name: String,
    pub from_receipt: bool,
    pub detail: String,
    pub trimmed: bool,
    pub envelope: bool,
}

impl CallMeta {
    /// Adds this account to a result's `_meta`. Empty and false fields are
    /// left out, except the receipt, outcome, name and `fromReceipt`, which
    /// are always written.
    pub fn write(&self, meta: &mut Map<String, Value>) {
        meta.insert(RECEIPT.into(), Value::from(self.receipt_id.as_str()));
        meta.insert(
            OUTCOME.into(),
            Value::from(self.outcome.map_or("", Outcome::as_str)),
        );
        meta.insert(NAME.into(), Value::from(self.name.as_str()));
        meta.insert(FROM_RECEIPT.into(), Value::from(self.from_receipt));
        if !self.detail.is_empty() {
            meta.insert(DETAIL.into(), Value::from(self.detail.as_str()));
        }
        if self.trimmed {
            meta.insert(TRIMMED.into(), Value::from(true));
        }
        if self.envelope {
            meta.insert(ENVELOPE.into(), Value::from(true));
        }
    }

    /// The account in a result's `_meta`, when it has a receipt.
    pub fn read(meta: &Map<String, Value>) -> Option<CallMeta> {
        let text = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or_default();
        let flag = |k: &str| meta.get(k).and_then(Value::as_bool).unwrap_or(false);
        let receipt_id = meta.get(RECEIPT)?.as_str()?.to_string();
        Some(CallMeta {
            receipt_id,
            outcome: Outcome::parse(text(OUTCOME)),
            name: text(NAME).to_string(),
            from_receipt: flag(FROM_RECEIPT),
            detail: text(DETAIL).to_string(),
            trimmed: flag(TRIMMED),
            envelope: flag(ENVELOPE),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_are_the_golden_ones() {
        let f = super::super::fixture("meta_keys.json");
        for (field, key) in [
            ("prefix", PREFIX),
            ("receiptId", RECEIPT),
            ("outcome", OUTCOME),
            ("name", NAME),
            ("fromReceipt", FROM_RECEIPT),
            ("detail", DETAIL),
            ("trimmed", TRIMMED),
            ("envelope", ENVELOPE),
            ("catalogRevision", CATALOG_REVISION),
            ("settings", super::super::catalog::SETTINGS),
        ] {
            assert_eq!(f[field], key, "{field}");
        }
        assert_eq!(f.as_object().expect("object").len(), 10);
    }

    #[test]
    fn the_golden_meta_reads_and_writes_back_the_same() {
        let f = super::super::fixture("call_meta.json");
        for case in f.as_array().expect("cases") {
            let meta = case["_meta"].as_object().expect("meta");
            let read = CallMeta::read(meta).expect("has a receipt");
            assert_eq!(read.receipt_id, case["receiptId"]);
            assert_eq!(read.outcome.map(Outcome::as_str), case["outcome"].as_str());
            let mut written = Map::new();
            read.write(&mut written);
            assert_eq!(&written, meta, "written back exactly");
        }
        assert_eq!(CallMeta::read(&Map::new()), None);
    }
}
