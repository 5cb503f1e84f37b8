//! What the mailbox measures: deliveries queued to seats, by kind.

use std::sync::OnceLock;

use opentelemetry::KeyValue;
use opentelemetry::metrics::Counter;

fn deliveries() -> &'static Counter<u64> {
    static C: OnceLock<Counter<u64>> = OnceLock::new();
    C.get_or_init(|| {
        clankie_runtime::telemetry::metrics::meter()
            .u64_counter("clankie.mailbox.deliveries")
            .with_description("Deliveries saved for a seat's pane, by kind.")
            .with_unit("{delivery}")
            .build()
    })
}

/// One delivery saved for a pane.
pub(crate) fn queued(kind: &'static str) {
    deliveries().add(1, &[KeyValue::new("kind", kind)]);
}
