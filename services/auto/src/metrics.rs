//! What the auto-scheduler measures: rounds by result, and the leads woken.

use std::sync::OnceLock;

use opentelemetry::KeyValue;
use opentelemetry::metrics::Counter;

struct Metrics {
    rounds: Counter<u64>,
    wakes: Counter<u64>,
}

fn get() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(|| {
        let meter = clankie_runtime::telemetry::metrics::meter();
        Metrics {
            rounds: meter
                .u64_counter("clankie.auto.rounds")
                .with_description("Auto rounds finished, by result (woke, quiet, skipped).")
                .with_unit("{round}")
                .build(),
            wakes: meter
                .u64_counter("clankie.auto.wakes")
                .with_description("Leads a round woke.")
                .with_unit("{wake}")
                .build(),
        }
    })
}

/// One finished round.
pub(crate) fn round(woken: u32, skipped: bool) {
    let m = get();
    let result = match (skipped, woken) {
        (true, _) => "skipped",
        (false, 0) => "quiet",
        (false, _) => "woke",
    };
    m.rounds.add(1, &[KeyValue::new("result", result)]);
    m.wakes.add(u64::from(woken), &[]);
}
