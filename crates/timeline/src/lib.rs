//! timeline: the one clock and the records of a worker's life on it.
//!
//! What it owns:
//! - the one [`Timeline`] of a worker's life (spawned, the ready line, each
//!   request and its reply, each step of the end), which `spawn` records
//!   and everything above reads.
//! - the one clock ([`monotonic_ns`]), CLOCK_MONOTONIC in nanoseconds, shared with
//!   Python's `time.monotonic_ns()`.
//! - one trial's records ([`TrialRecord`]): each worker's marks (spawned, ready
//!   read, the worker's ready stamp, each health round trip, shutdown sent,
//!   acknowledgement read, exited), the phase durations derived from them,
//!   CPU time and peak RSS from `wait4`, RSS at ready, how the process
//!   ended (its [`ExitStatus`] and [`Escalation`]) and the outcome (correct,
//!   or the stage it failed in). One [`TrialRecord`] is one line of a bench
//!   run's `trials.jsonl`.
//! - [`Stage`]: the one name for where in its life a worker was (start-up,
//!   a request, shutdown, ...), which errors, violations, memory readings
//!   and failed trials all use; [`Timeline::stage_at`] places a moment.
//! - [`Placement`]: where a run's processes ran (the CPU pinning done).
//! - [`Limits`]: the CPU quota and memory limit a worker ran under, and how
//!   a user writes them.
//! - behind the `test-support` feature, `testing`: a worker's records and
//!   a trial built for the tests of this crate and those above.
//!
//! What it deliberately does not own: starting or reading processes
//! (`spawn` fills these records), statistics, comparisons and summaries
//! (`phases`, above this crate), and rendering (`report`). It is the low
//! crate both `spawn` and `phases` (and `pystacks`, for the clock) build
//! on: plain data and the clock, nothing else.
//!
//! Every item is reached at the crate's root (`timeline::TrialRecord`).

#![warn(missing_docs)]

mod clock;
mod life;
mod limits;
mod placement;
mod record;
mod stage;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;

pub use clock::monotonic_ns;
pub use life::{EndMarks, ReadyMark, RequestMark, Timeline};
pub use limits::{LimitError, Limits, MIN_CPUS, MIN_MEMORY_BYTES, format_bytes};
pub use placement::Placement;
pub use record::{
    Escalation, ExitStatus, Marks, Outcome, PhaseDurations, RoundTrip, TrialKind, TrialRecord,
    Usage, Variant, WorkerRecord, signal_name,
};
pub use stage::Stage;
