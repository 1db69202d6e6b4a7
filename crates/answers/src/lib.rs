//! answers: every answer coldstart gives, as data.
//!
//! What it owns: the types of each answer a command prints or writes
//! ([`check`], [`diff`], [`bisect`], [`history`], [`lazy`], [`dump`], [`compare`], [`importtime`]'s
//! schema, [`bench`](mod@bench)'s exit rule), the schema id
//! each JSON carries (all `coldstart.<answer>/<version>`; the bench
//! summary's is [`BENCH_SUMMARY_SCHEMA`]), the rules that turn an answer
//! into an exit code, the budgets a diff is held to, and the words an
//! answer's own sentences use ([`words`]: durations, ratios, verdicts).
//!
//! What it deliberately does not own: running anything (`harness` runs
//! the commands and fills these in), computing statistics (`phases`:
//! the bench summary, [`phases::summary::RunSummary`], is built where its
//! statistics are), and laying anything out for people or CI (`report`
//! renders these types). It sits below both, so a renderer reads the data
//! without owning it and `settings` reads a budget without a renderer.
//!
//! Every schema only ever gains fields; a change in meaning bumps its
//! number.

#![warn(missing_docs)]

pub mod bench;
pub mod bisect;
pub mod check;
pub mod compare;
pub mod diff;
pub mod dump;
pub mod history;
pub mod importtime;
pub mod lazy;
pub mod words;

/// The schema id of the bench summary (`summary.json`, and a diff's
/// `time.summary`), whose type is [`phases::summary::RunSummary`].
pub const BENCH_SUMMARY_SCHEMA: &str = phases::summary::SCHEMA;
