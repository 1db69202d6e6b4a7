//! phases: statistics, comparisons and summaries of the trial records.
//!
//! The clock and the per-trial records it reads are the `timeline` crate's
//! (below this one, shared with `spawn` and `pystacks`).
//!
//! What it owns:
//! - [`stats`]: median with a seeded bootstrap confidence interval, mean,
//!   standard deviation, min, max, p90, MAD, coefficient of variation, and
//!   outliers labelled (never removed); every definition is in that
//!   module's doc.
//! - [`compare`]: A against B as a ratio with an interval: for interleaved
//!   runs the Hodges-Lehmann estimate of the per-round ratios with its
//!   signed-rank interval (or their median with a bootstrap), for two saved
//!   runs the ratio of medians with an unpaired bootstrap; and one of four
//!   verdicts against a noise band: faster, slower, equivalent, or
//!   inconclusive with the smallest change the run could have detected.
//!   Its doc says why a run's answer rests on wall time by default, with
//!   CPU time compared beside it.
//! - [`sequential`]: the stopping rule an interleaved run follows, as a
//!   pure decision after every round (settled, round budget, time budget),
//!   guarded against optional stopping.
//! - [`changepoint`]: change points of a per-commit series (E-Divisive
//!   means with a permutation test) read as steps or drifts (Mann-Kendall
//!   over a flat-ramp-flat fit, the Theil-Sen rate), for a history of
//!   commits.
//! - [`simulate`]: synthetic interleaved runs (seeded noise, drift,
//!   outliers) played through the whole procedure, to check its error
//!   rates.
//! - [`Phase`] (a timed interval of a worker's life: spawn to ready, a
//!   round trip, shutdown, ...; its only path is `phases::Phase`) and
//!   [`Measure`] (what is compared: a phase's wall time or the workers' CPU
//!   time, one value per trial, paired by round).
//! - [`phase`]: the timed phases' samples per trial and one phase's
//!   statistics.
//! - [`run`]: the environment, placement, configuration and counts of a run.
//! - [`probe`]: startup-probe and request-timeout settings from the
//!   measured distributions (an upper bound of the p99, with a margin).
//! - [`summary`]: the run summary (`summary.json`): the above, per-phase
//!   statistics and ratios, the A/B analysis, resources, warnings, and the
//!   serve phases, pool runs and memory views of the run. It builds on `phase`, `run`
//!   and `warn`; `warn` builds on `phase` and `run` alone.
//! - [`warn`]: pyperf-style warnings about noisy or thin runs.
//! - [`jsonl`]: the one reader and writer of the records as JSON lines
//!   (`trials.jsonl`, `requests.jsonl`, `pool-requests.jsonl`).
//! - [`serve`]: the serve phase after ready: one record per request
//!   (latency from its scheduled send, outcome) and the statistics of a
//!   closed or open loop (throughput, latency percentiles with CIs,
//!   rejections, most in flight).
//! - [`pool`]: a pool's cold-start cost: an open loop through a
//!   dispatcher over a pool of workers, one killed and replaced, and the
//!   latency, queue wait and rejections of the requests that arrived
//!   before, during and after the replacement.
//! - [`memory`]: the memory view: Python-traced memory beside RSS at the
//!   same moments, allocation sites, and a one-line reading.
//!
//! What it deliberately does not own: the clock and the trial records
//! (`timeline`), starting processes or reading the protocol (`spawn`), reading `/proc` or asking an interpreter about
//! itself (`harness`), and rendering for people (`report`). Everything here is
//! pure data and arithmetic, so every figure can be recomputed from the
//! records by hand.

#![warn(missing_docs)]

pub mod changepoint;
pub mod compare;
pub mod jsonl;
mod measure;
pub mod memory;
pub mod phase;
pub mod pool;
pub mod probe;
pub mod run;
pub mod sequential;
pub mod serve;
pub mod simulate;
pub mod stats;
pub mod summary;
pub mod warn;

// Every item has one path: the modules' items are reached through their
// module (`phases::stats::Resampling`, `phases::compare::Comparison`); only
// the private `measure`'s are at the root.
pub use measure::{Measure, Phase, compare_measure, measure_pairs, ms};
