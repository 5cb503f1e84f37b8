//! The machine's monotonic clock as a number two local services can
//! compare. `CLOCK_MONOTONIC` is one clock for every process of a boot in
//! one time namespace (all of a stack's services share theirs), unlike
//! `Instant`, whose value cannot leave its process.

/// Nanoseconds on `CLOCK_MONOTONIC`; none if the clock cannot be read,
/// which a caller must treat as "unknown", never as an early time.
pub fn monotonic_ns() -> Option<u64> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).ok()?;
    let secs = u64::try_from(t.tv_sec()).ok()?;
    let nanos = u64::try_from(t.tv_nsec()).ok()?;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_reads_and_never_goes_back() {
        let a = super::monotonic_ns().expect("clock");
        let b = super::monotonic_ns().expect("clock");
        assert!(b >= a);
    }
}
