//! The one clock: CLOCK_MONOTONIC in nanoseconds.
//!
//! Python's `time.monotonic_ns()` reads the same clock on Linux, so a stamp
//! a worker writes (the ready line's `t_ns`, the import recorder's records)
//! can be placed exactly on the harness's timeline.

/// CLOCK_MONOTONIC now, in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) cannot fail");
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_goes_back() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
    }

    #[test]
    fn agrees_with_python_monotonic_ns_scale() {
        // Same clock as std's Instant on Linux: the difference over a short
        // span is of the same size.
        let t0 = std::time::Instant::now();
        let a = monotonic_ns();
        std::thread::yield_now();
        let b = monotonic_ns();
        let span = t0.elapsed().as_nanos() as u64;
        assert!(b - a <= span + 1_000_000);
    }
}
