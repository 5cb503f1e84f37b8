//! What admission measures: proofs, reuses of a proof, refusals by reason,
//! and the census helper's queue depth.

use std::sync::OnceLock;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, ObservableGauge};

use crate::helper::HelperClient;

pub(crate) struct Metrics {
    proofs: Counter<u64>,
    reuses: Counter<u64>,
    refusals: Counter<u64>,
}

fn get() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(|| {
        let meter = clankie_runtime::telemetry::metrics::meter();
        Metrics {
            proofs: meter
                .u64_counter("clankie.admission.proofs")
                .with_description("Admissions proven, by door (local kernel facts, bearer).")
                .with_unit("{proof}")
                .build(),
            reuses: meter
                .u64_counter("clankie.admission.reuses")
                .with_description(
                    "Requests admitted by reusing a connection's proof after a recheck.",
                )
                .with_unit("{reuse}")
                .build(),
            refusals: meter
                .u64_counter("clankie.admission.refusals")
                .with_description("Admissions refused, by door and reason code.")
                .with_unit("{refusal}")
                .build(),
        }
    })
}

/// One admission proven at `door` (`local`: kernel facts; `bearer`: a
/// fleet link's token).
pub(crate) fn proved(door: &'static str) {
    get().proofs.add(1, &[KeyValue::new("door", door)]);
}

pub(crate) fn reused() {
    get().reuses.add(1, &[]);
}

pub(crate) fn refused(door: &'static str, reason: &'static str) {
    get().refusals.add(
        1,
        &[KeyValue::new("door", door), KeyValue::new("reason", reason)],
    );
}

/// How many remote machines have their link up, read at each collection;
/// keep the gauge.
pub(crate) fn links_up(
    links: std::sync::Arc<crate::machine_links::MachineLinks>,
) -> ObservableGauge<u64> {
    clankie_runtime::telemetry::metrics::meter()
        .u64_observable_gauge("clankie.relay.links.up")
        .with_description("Remote machines whose relay link is up now.")
        .with_unit("{link}")
        .with_callback(move |o| o.observe(links.up(), &[]))
        .build()
}

/// The helper queue's depth, read at each collection; keep the gauge.
pub(crate) fn helper_queue(helper: HelperClient) -> ObservableGauge<u64> {
    clankie_runtime::telemetry::metrics::meter()
        .u64_observable_gauge("clankie.helper.queue.depth")
        .with_description("Census jobs waiting for the helper.")
        .with_unit("{job}")
        .with_callback(move |o| o.observe(helper.depth(), &[]))
        .build()
}
