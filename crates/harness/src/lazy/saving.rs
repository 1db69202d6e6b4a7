//! The saving of a verified cut: the patched copy's ready time against
//! the original's, in the bench's interleaved rounds.

use phases::Phase;
use suggest::{Cut, Suggester};

use super::LazyOptions;
use crate::check::verify::in_copy;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::target::Target;
use crate::trials::{self, BenchOptions, Quiet};

/// The ready time of `t`'s patched copy (B) against `t` (A), interleaved
/// until the sequential rule decides or its budget runs out.
pub(super) fn saving(
    t: &Target,
    s: &Suggester,
    cut: &Cut,
    opts: &LazyOptions,
    interrupt: &Interrupt,
) -> Result<Option<phases::compare::Comparison>> {
    let copy = s
        .patched_copy(cut)
        .map_err(|e| Error::Invalid(format!("could not patch a copy: {e}")))?;
    let b = in_copy(t, copy.root());
    let out = crate::scratch::private_dir(crate::scratch::LAZY, "a lazy trial's bench files")?;
    let rule = phases::sequential::StopRule {
        max_rounds: opts.max_rounds,
        max_seconds: opts.max_seconds,
        ..Default::default()
    };
    let bench = BenchOptions::sequential(
        rule,
        1,
        phases::stats::Resampling::default(),
        out.path().to_path_buf(),
        opts.root.clone(),
    );
    let mut a = t.clone();
    a.processes = 1;
    let run = trials::run(a, Some(b), &bench, interrupt, &mut Quiet)?;
    // A trial that failed only at its end (the ack, the exit) still timed
    // its ready line, which is what is compared.
    if let Some((r, stage, message)) = run.first_failure().filter(|(_, s, _)| !s.at_end()) {
        return Err(Error::Invalid(format!(
            "the measurement's trial {} failed at {stage}: {message}",
            r.trial,
        )));
    }
    Ok(run
        .summary
        .phase(Phase::Ready)
        .and_then(|p| p.ratio.clone()))
}
