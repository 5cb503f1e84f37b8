//! What mcp-host measures: connected calls by account, tool and outcome
//! with their duration, receipt commits with theirs, and budget refusals.

use std::sync::OnceLock;
use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram};

struct Metrics {
    calls: Counter<u64>,
    call_duration: Histogram<f64>,
    commits: Counter<u64>,
    commit_duration: Histogram<f64>,
    budget_refusals: Counter<u64>,
}

/// Bucket bounds (seconds) for an upstream call: a local tool answers in
/// milliseconds, a remote one in seconds, the budget ends at 30 s.
const CALL_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Bucket bounds (seconds) for one durable write.
const COMMIT_BUCKETS: [f64; 10] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

fn get() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(|| {
        let meter = clankie_runtime::telemetry::metrics::meter();
        Metrics {
            calls: meter
                .u64_counter("clankie.mcp.calls")
                .with_description("Connected tool calls dispatched, by account, tool and outcome.")
                .with_unit("{call}")
                .build(),
            call_duration: meter
                .f64_histogram("clankie.mcp.call.duration")
                .with_description("From dispatch to settled outcome of a connected call.")
                .with_unit("s")
                .with_boundaries(CALL_BUCKETS.to_vec())
                .build(),
            commits: meter
                .u64_counter("clankie.receipts.commits")
                .with_description("Durable receipt writes, by step (begin, settle) and result.")
                .with_unit("{commit}")
                .build(),
            commit_duration: meter
                .f64_histogram("clankie.receipts.commit.duration")
                .with_description("Time to make one receipt write durable.")
                .with_unit("s")
                .with_boundaries(COMMIT_BUCKETS.to_vec())
                .build(),
            budget_refusals: meter
                .u64_counter("clankie.budget.refusals")
                .with_description("Calls refused by a request budget, by budget class.")
                .with_unit("{refusal}")
                .build(),
        }
    })
}

/// One settled connected call.
pub(crate) fn call(account: &str, tool: &str, outcome: &'static str, started: Instant) {
    let m = get();
    let attrs = [
        KeyValue::new("account", account.to_owned()),
        KeyValue::new("tool", tool.to_owned()),
        KeyValue::new("outcome", outcome),
    ];
    m.calls.add(1, &attrs);
    m.call_duration
        .record(started.elapsed().as_secs_f64(), &attrs);
}

/// One receipt write: `step` is `begin` or `settle`.
pub(crate) fn commit(step: &'static str, ok: bool, started: Instant) {
    let m = get();
    let attrs = [
        KeyValue::new("step", step),
        KeyValue::new("result", if ok { "durable" } else { "failed" }),
    ];
    m.commits.add(1, &attrs);
    m.commit_duration
        .record(started.elapsed().as_secs_f64(), &attrs);
}

/// One call a request budget refused.
pub(crate) fn budget_refused(class: &'static str) {
    get()
        .budget_refusals
        .add(1, &[KeyValue::new("class", class)]);
}
