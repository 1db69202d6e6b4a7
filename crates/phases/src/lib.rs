//! phases: monotonic marks, phase durations, trial records and statistics.
//!
//! (statistics being built; the clock is here first because every other
//! crate stamps with it)

pub mod clock;
