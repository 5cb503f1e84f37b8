//! Metrics: one OpenTelemetry meter provider per process, read two ways: a
//! Prometheus registry (encoded as text by this process's `Scrape` RPC, and
//! merged by the gateway into `GET /metrics`), and OTLP when configured.
//! Every series carries `service_name`, so the merged page keeps them apart.

use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

use opentelemetry::metrics::Meter;
use opentelemetry_sdk::metrics::SdkMeterProvider;

use super::export::{self, Signal};

static REGISTRY: OnceLock<prometheus::Registry> = OnceLock::new();
static PROVIDER: OnceLock<SdkMeterProvider> = OnceLock::new();

/// The instrumentation scope every instrument is created under.
pub const SCOPE: &str = "clankie";

pub(super) fn init(resource: opentelemetry_sdk::Resource, service: &str) {
    let registry = prometheus::Registry::new();
    let mut builder = SdkMeterProvider::builder().with_resource(resource);
    let keys: HashSet<opentelemetry::Key> = [opentelemetry::Key::from_static_str("service.name")]
        .into_iter()
        .collect();
    match opentelemetry_prometheus::exporter()
        .with_registry(registry.clone())
        .with_resource_selector(keys)
        .without_target_info()
        .scope_info_enabled(false)
        .build()
    {
        Ok(reader) => builder = builder.with_reader(reader),
        Err(e) => eprintln!("clankie-{service}: prometheus reader disabled: {e}"),
    }
    if export::enabled(Signal::Metrics) {
        match export::metric_exporter() {
            Ok(exporter) => builder = builder.with_periodic_exporter(exporter),
            Err(e) => eprintln!("clankie-{service}: otlp metrics disabled: {e}"),
        }
    }
    let provider = builder.build();
    opentelemetry::global::set_meter_provider(provider.clone());
    let _ = REGISTRY.set(registry);
    let _ = PROVIDER.set(provider);
}

/// The meter instruments are made from.
pub fn meter() -> Meter {
    opentelemetry::global::meter(SCOPE)
}

/// This process's metrics in the Prometheus text format.
pub fn exposition() -> String {
    let Some(registry) = REGISTRY.get() else {
        return String::new();
    };
    prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap_or_default()
}

pub(super) fn shutdown() {
    if let Some(p) = PROVIDER.get() {
        let _ = p.shutdown();
    }
}

/// Merges several processes' text pages into one: a metric family named
/// by more than one keeps its first `HELP`/`TYPE` lines and gathers every
/// process's samples under them (each sample is labelled with its service,
/// so none collide).
pub fn merge_expositions<'a>(pages: impl IntoIterator<Item = &'a str>) -> String {
    #[derive(Default)]
    struct Family {
        header: Vec<&'static str>,
        head: Vec<String>,
        samples: Vec<String>,
    }
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for page in pages {
        let mut current: Option<String> = None;
        for line in page.lines() {
            if let Some(rest) = line
                .strip_prefix("# HELP ")
                .or_else(|| line.strip_prefix("# TYPE "))
            {
                let name = rest.split(' ').next().unwrap_or_default().to_owned();
                let kind = if line.starts_with("# HELP") {
                    "help"
                } else {
                    "type"
                };
                let f = families.entry(name.clone()).or_default();
                if !f.header.contains(&kind) {
                    f.header.push(kind);
                    f.head.push(line.to_owned());
                }
                current = Some(name);
            } else if line.starts_with('#') || line.trim().is_empty() {
                continue;
            } else if let Some(name) = &current {
                families
                    .entry(name.clone())
                    .or_default()
                    .samples
                    .push(line.to_owned());
            }
        }
    }
    let mut out = String::new();
    for f in families.into_values() {
        for l in f.head.iter().chain(&f.samples) {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::merge_expositions;

    #[test]
    fn a_family_two_services_report_is_written_once_with_both_samples() {
        let a = "# HELP x_total Calls.\n# TYPE x_total counter\nx_total{service_name=\"a\"} 1\n";
        let b = "# HELP x_total Calls.\n# TYPE x_total counter\nx_total{service_name=\"b\"} 2\n# HELP y Depth.\n# TYPE y gauge\ny{service_name=\"b\"} 0\n";
        let merged = merge_expositions([a, b]);
        assert_eq!(merged.matches("# TYPE x_total").count(), 1, "{merged}");
        assert!(merged.contains("x_total{service_name=\"a\"} 1\nx_total{service_name=\"b\"} 2\n"));
        assert!(merged.contains("# TYPE y gauge\ny{service_name=\"b\"} 0\n"));
    }
}
