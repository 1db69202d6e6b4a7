//! The memory view: Python-traced memory (tracemalloc) beside the process's
//! resident set at the same moments, and a one-line reading of the two.
//!
//! The view comes from a run of its own, never from a timed trial:
//! tracemalloc slows every allocation and its traces take memory of their
//! own (`tracemalloc_overhead_bytes`, resident but not traced).
//!
//! Definitions:
//! - **traced current / peak**: `tracemalloc.get_traced_memory()`, the bytes
//!   of live Python allocations (objects, buffers, anything through
//!   `PyMem_*`/`PyObject_*`) and the most there were since the previous
//!   reading (at ready: since tracing began, from interpreter start when the
//!   worker honoured `PYTHONTRACEMALLOC`).
//! - **top allocation sites**: listed by a forked copy of the worker, since
//!   listing allocates megabytes; where fork fails the worker lists them
//!   itself and what that left (`*_after_reading_bytes`) is the base of the
//!   next phase's growth.
//! - **RSS**: `VmRSS` of `/proc/self/status`, read by the worker in the same
//!   handler, right after the traced figures; **HWM** is `VmHWM`, the peak
//!   resident set so far. **peak RSS** is `ru_maxrss` from `wait4` on the
//!   worker, after its exit.
//! - **untraced**: `RSS - traced current - tracemalloc overhead`: the
//!   interpreter's own code and data, extension modules and C libraries,
//!   memory allocated natively (`malloc`, `mmap`), and freed memory the
//!   allocators keep.

use serde::{Deserialize, Serialize};

use timeline::{Stage, Variant};

/// The figures at one moment, all taken by the worker at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPoint {
    /// The stage of the worker's life these figures were read at:
    /// [`Stage::Ready`] right after the ready line was read,
    /// [`Stage::AfterServe`] after the serve phase's last reply,
    /// [`Stage::Exit`] at interpreter exit (atexit), after the shutdown op.
    pub at: Stage,
    /// The worker's monotonic stamp of the reading.
    pub t_ns: u64,
    /// Bytes of live Python allocations now (`tracemalloc.get_traced_memory()`'s current figure).
    pub traced_current_bytes: u64,
    /// The most traced memory since the previous reading (at the first,
    /// since tracing began).
    pub traced_peak_bytes: u64,
    /// What tracemalloc's own traces take (resident, not traced).
    pub tracemalloc_overhead_bytes: u64,
    /// `VmRSS`; `None` where `/proc` does not say.
    pub rss_bytes: Option<u64>,
    /// `VmHWM`, the resident peak so far.
    pub hwm_bytes: Option<u64>,
    /// Traced memory and `VmRSS` once the reading's own work (listing the
    /// allocation sites) was done: the base for what the next phase added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced_after_reading_bytes: Option<u64>,
    /// `VmRSS` after the worker listed the allocation sites itself; absent when a fork listed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_after_reading_bytes: Option<u64>,
}

impl MemoryPoint {
    /// `RSS - traced current - tracemalloc overhead`, at least 0.
    pub fn untraced_bytes(&self) -> Option<u64> {
        self.rss_bytes.map(|rss| {
            rss.saturating_sub(self.traced_current_bytes)
                .saturating_sub(self.tracemalloc_overhead_bytes)
        })
    }
}

/// Live Python allocations made at one source line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationSite {
    /// The source file of the allocating line, as tracemalloc reports it.
    pub file: String,
    /// The line number in `file`.
    pub line: u32,
    /// Total size of the live blocks allocated at this line, in bytes.
    pub size_bytes: u64,
    /// How many live blocks.
    pub count: u64,
}

/// The memory view of one worker: `summary.json`'s `memory` entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryView {
    /// The variant (A or B) whose worker this view is of.
    pub variant: Variant,
    /// Whether tracing began at interpreter start (`PYTHONTRACEMALLOC`) or
    /// only when the bootstrap ran (after `site`'s own imports).
    pub tracing_from_start: bool,
    /// In the order of the worker's life; a moment that could not be read
    /// is absent.
    pub points: Vec<MemoryPoint>,
    /// `ru_maxrss` from `wait4`.
    pub peak_rss_bytes: Option<u64>,
    /// The largest allocation sites alive at ready, largest first.
    pub top_at_ready: Vec<AllocationSite>,
    /// One line for a person; see [`reading`].
    pub reading: String,
    /// What could not be measured, and why.
    pub problems: Vec<String>,
}

impl MemoryView {
    /// The point taken at `at`, if any.
    pub fn point(&self, at: &Stage) -> Option<&MemoryPoint> {
        self.points.iter().find(|p| p.at == *at)
    }
}

/// Bytes as MiB with one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// The one-line reading of the points: what RSS is made of at ready, and
/// how both figures moved over the serve phase.
pub fn reading(points: &[MemoryPoint]) -> String {
    let Some(ready) = points.iter().find(|p| p.at == Stage::Ready) else {
        return "no reading at ready: the worker did not report its memory".to_owned();
    };
    let Some(rss) = ready.rss_bytes else {
        return format!(
            "traced memory at ready is {}; RSS is not available here to compare",
            mib(ready.traced_current_bytes)
        );
    };
    let traced = ready.traced_current_bytes;
    let overhead = ready.tracemalloc_overhead_bytes;
    let untraced = ready.untraced_bytes().unwrap_or(0);
    let mut line = if traced * 2 >= rss.saturating_sub(overhead) {
        format!(
            "at ready most of RSS is Python objects: {} traced of {} RSS ({} of it tracemalloc's own): the allocation sites below hold it",
            mib(traced),
            mib(rss),
            mib(overhead)
        )
    } else {
        format!(
            "RSS {} at ready while traced memory is {}: {} is native or allocator-held memory (interpreter, extension modules, C libraries, native buffers), not Python objects ({} is tracemalloc's own)",
            mib(rss),
            mib(traced),
            mib(untraced),
            mib(overhead)
        )
    };
    if let Some(after) = points.iter().find(|p| p.at == Stage::AfterServe)
        && let Some(rss_after) = after.rss_bytes
    {
        let base_rss = ready.rss_after_reading_bytes.unwrap_or(rss);
        let base_traced = ready.traced_after_reading_bytes.unwrap_or(traced);
        let d_rss = rss_after as i64 - base_rss as i64;
        let d_traced = after.traced_current_bytes as i64 - base_traced as i64;
        line.push_str(&format!(
            "; over the serve phase RSS moved {} and traced memory {}",
            signed_mib(d_rss),
            signed_mib(d_traced)
        ));
        if base_rss != rss {
            line.push_str(&format!(
                " (from after the ready reading, whose own site listing moved RSS {})",
                signed_mib(base_rss as i64 - rss as i64)
            ));
        }
    }
    line
}

fn signed_mib(bytes: i64) -> String {
    let sign = if bytes < 0 { "-" } else { "+" };
    format!("{sign}{}", mib(bytes.unsigned_abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    fn point(at: Stage, traced: u64, rss: Option<u64>) -> MemoryPoint {
        MemoryPoint {
            at,
            t_ns: 0,
            traced_current_bytes: traced,
            traced_peak_bytes: traced,
            tracemalloc_overhead_bytes: 2 * MIB,
            rss_bytes: rss,
            hwm_bytes: rss,
            traced_after_reading_bytes: None,
            rss_after_reading_bytes: None,
        }
    }

    #[test]
    fn native_memory_is_named_as_such() {
        let p = [point(Stage::Ready, 3 * MIB, Some(100 * MIB))];
        assert_eq!(p[0].untraced_bytes(), Some(95 * MIB));
        assert_eq!(
            reading(&p),
            "RSS 100.0 MiB at ready while traced memory is 3.0 MiB: 95.0 MiB is native or allocator-held memory (interpreter, extension modules, C libraries, native buffers), not Python objects (2.0 MiB is tracemalloc's own)"
        );
    }

    #[test]
    fn python_objects_are_named_as_such_and_the_serve_phase_is_read() {
        let p = [
            point(Stage::Ready, 60 * MIB, Some(100 * MIB)),
            point(Stage::AfterServe, 58 * MIB, Some(110 * MIB)),
        ];
        let r = reading(&p);
        assert!(
            r.starts_with(
                "at ready most of RSS is Python objects: 60.0 MiB traced of 100.0 MiB RSS"
            ),
            "{r}"
        );
        assert!(
            r.ends_with("; over the serve phase RSS moved +10.0 MiB and traced memory -2.0 MiB"),
            "{r}"
        );
    }

    #[test]
    fn the_serve_phase_grows_from_what_the_ready_reading_left() {
        let mut ready = point(Stage::Ready, 4 * MIB, Some(40 * MIB));
        ready.rss_after_reading_bytes = Some(46 * MIB);
        ready.traced_after_reading_bytes = Some(5 * MIB);
        let after = point(Stage::AfterServe, 5 * MIB, Some(47 * MIB));
        let r = reading(&[ready, after]);
        assert!(
            r.ends_with("; over the serve phase RSS moved +1.0 MiB and traced memory +0.0 MiB (from after the ready reading, whose own site listing moved RSS +6.0 MiB)"),
            "{r}"
        );
    }

    #[test]
    fn missing_figures_are_said() {
        assert!(reading(&[]).starts_with("no reading at ready"));
        let p = [point(Stage::Ready, MIB, None)];
        assert_eq!(p[0].untraced_bytes(), None);
        assert!(reading(&p).contains("RSS is not available"));
    }

    #[test]
    fn untraced_never_goes_below_zero() {
        let p = point(Stage::Exit, 10 * MIB, Some(5 * MIB));
        assert_eq!(p.untraced_bytes(), Some(0));
    }
}
