//! `coldstart compare A B`'s answer: two saved bench
//! runs compared phase by phase, each phase's statistics of both runs and
//! their unpaired ratio B/A, and the exit rule of `--fail-if-slower`.
//!
//! # JSON schema (`"schema": "coldstart.compare/1"`)
//! ```text
//! { "schema": "coldstart.compare/1", "a": str, "b": str,   // the two run folders
//!   "variant": "A" | "B",                                  // the variant taken from each
//!   "unpaired": true,                                      // the runs share no pairing
//!   "phases": { "<phase>": { "unit": "ms", "a": Series | null, "b": Series | null,
//!                            "ratio": Comparison | null } } }
//! ```
//! A phase's entry is `phases::summary::PhaseSummary`, as in
//! `coldstart.bench-summary/1`.

use std::collections::BTreeMap;
use std::path::Path;

use phases::Phase;
use phases::compare::Verdict;
use phases::phase::PhaseSummary;
use serde::Serialize;
use timeline::Variant;

/// The `schema` of the JSON answer.
pub const SCHEMA: &str = "coldstart.compare/1";

/// The whole answer.
#[derive(Debug, Clone, Serialize)]
pub struct CompareJson<'a> {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The baseline run's folder.
    pub a: &'a Path,
    /// The candidate run's folder.
    pub b: &'a Path,
    /// The variant taken from each run.
    pub variant: Variant,
    /// Always true: two runs made apart share no pairing, so machine drift
    /// between them is in these ratios.
    pub unpaired: bool,
    /// Each phase by name.
    pub phases: BTreeMap<&'static str, &'a PhaseSummary>,
}

impl<'a> CompareJson<'a> {
    /// The answer for the runs in `a` and `b` compared as `phases`.
    pub fn new(a: &'a Path, b: &'a Path, variant: Variant, phases: &'a [PhaseSummary]) -> Self {
        CompareJson {
            schema: SCHEMA,
            a,
            b,
            variant,
            unpaired: true,
            phases: phases.iter().map(|p| (p.phase().name(), p)).collect(),
        }
    }
}

/// B's ready or total time is slower than A's (the interval wholly above
/// the noise band).
pub fn slower(phases: &[PhaseSummary]) -> bool {
    phases.iter().any(|p| {
        matches!(p.phase(), Phase::Ready | Phase::Total)
            && p.ratio
                .as_ref()
                .is_some_and(|c| c.verdict == Verdict::Slower)
    })
}

/// The exit code: 1 with `fail_if_slower` when [`slower`], else 0.
pub fn exit_code(phases: &[PhaseSummary], fail_if_slower: bool) -> u8 {
    u8::from(fail_if_slower && slower(phases))
}
