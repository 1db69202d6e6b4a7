//! What a caller is shown while a run goes: the [`Progress`] it implements,
//! the [`Event`]s announced beside the timed trials, and the live line.

use phases::Phase;
use phases::stats::{self, Resampling};
use timeline::{TrialRecord, Variant};

/// What the caller shows while the trials run.
pub trait Progress {
    /// Before the first trial: the most trials the run can take.
    fn start(&mut self, most_trials: u64);
    /// After each trial, with every record so far.
    fn trial(&mut self, records: &[TrialRecord], variants: &[Variant]);
    /// After the last trial.
    fn finish(&mut self);
    /// Before each step beside the timed trials starts (a serve phase, a
    /// memory view, a comparison's stages).
    fn announce(&mut self, event: &Event);
}

/// A step of a task beside its timed trials, as [`Progress::announce`]
/// announces it: an untimed step after them (a serve phase, a memory view),
/// or a stage of a comparison (`diff`'s instrumented processes, then its
/// timed rounds).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A serve phase of one side on a fresh worker.
    Serve {
        /// The side.
        variant: Variant,
        /// The load, described (`100 requests, closed loop`).
        load: String,
        /// The request, as configured.
        request: serde_json::Value,
    },
    /// A pool run of one side on fresh workers (`--pool`).
    Pool {
        /// The side.
        variant: Variant,
        /// The pool, described (`2 workers, one killed at 1 s and replaced`).
        pool: String,
        /// The load, described.
        load: String,
    },
    /// A memory view of one side on a separate untimed worker.
    Memory {
        /// The side.
        variant: Variant,
    },
    /// A comparison's untimed instrumented processes of one target, on
    /// both sides (importtime and the recorder).
    Instrumented {
        /// The target.
        target: String,
        /// Processes per side.
        processes: usize,
    },
    /// A comparison's timed rounds of one target: A (the base) and B (the
    /// working tree) interleaved until CPU time decides.
    Timed {
        /// The target.
        target: String,
    },
    /// The two revisions a comparison is about to run (a diff, a bisect
    /// step).
    Sides {
        /// Side A, described (`origin/main = 1a2b3c4d5e6f (given)`).
        base: String,
        /// Side B, described (`the working tree`, a commit).
        head: String,
    },
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Serve {
                variant,
                load,
                request,
            } => write!(f, "serve phase ({variant}): {load}, request {request}"),
            Event::Pool {
                variant,
                pool,
                load,
            } => write!(f, "pool run ({variant}): {pool}, {load}"),
            Event::Memory { variant } => write!(
                f,
                "memory view ({variant}): a separate untimed worker with tracemalloc"
            ),
            Event::Instrumented { target, processes } => write!(
                f,
                "{target}: {processes} instrumented processes per side (untimed: importtime and the recorder)"
            ),
            Event::Timed { target } => write!(
                f,
                "{target}: timed rounds, A (base) and B interleaved, until CPU time decides"
            ),
            Event::Sides { base, head } => write!(f, "base (A): {base}; B: {head}"),
        }
    }
}

/// A progress that shows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Progress for Quiet {
    fn start(&mut self, _: u64) {}
    fn trial(&mut self, _: &[TrialRecord], _: &[Variant]) {}
    fn finish(&mut self) {}
    fn announce(&mut self, _: &Event) {}
}

/// The live line: median ready time and its CI half-width per variant.
pub fn live_message(records: &[TrialRecord], variants: &[Variant]) -> String {
    let boot = Resampling {
        resamples: 2_000,
        ..Resampling::default()
    };
    let parts: Vec<String> = variants
        .iter()
        .filter_map(|&v| {
            let (vals, _) = phases::phase::series(records, Phase::Ready, v);
            let s = stats::summarize(&vals, &boot).ok()?;
            Some(if s.n < 2 {
                format!("{v} ready {}", report::bench::fmt_ms(s.median))
            } else {
                format!(
                    "{v} ready {} ± {}",
                    report::bench::fmt_ms(s.median),
                    report::bench::fmt_ms(s.median_ci.half_width())
                )
            })
        })
        .collect();
    let failed = records.iter().filter(|r| !r.outcome.is_correct()).count();
    let mut msg = parts.join(", ");
    if failed > 0 {
        msg.push_str(&format!(", {failed} failed"));
    }
    msg
}
