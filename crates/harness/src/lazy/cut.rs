//! One violation's cuts tried: each verified on its own patched copy,
//! best first, and the first that passes measured.

use answers::lazy::{LazyAlternative, LazyCut};
use importguard::verdict::Violation;
use suggest::{Cut, Suggester, Suggestion};

use super::LazyOptions;
use super::price::judging;
use super::saving::saving;
use crate::check::verify::{LateEnd, on_copy};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::target::Target;

/// How many cuts of one statement are verified, best first (its scopes,
/// narrowest first, and PEP 810 `lazy` on 3.15).
const ATTEMPTS: usize = 3;

/// Why a cut was rejected, in `lazy`'s words: a remaining violation is the
/// module still imported at start-up.
fn rejected(reason: &suggest::RejectReason) -> String {
    match reason {
        suggest::RejectReason::ViolationRemains { chain } => format!(
            "start-up still imports it on the patched copy (the recorder's evidence): {}",
            chain.join(" -> ")
        ),
        other => other.to_string(),
    }
}

pub(super) fn lazy_cut(cut: &Cut) -> LazyCut {
    LazyCut {
        kind: cut.kind.to_string(),
        summary: cut.summary.clone(),
        diff: cut.diff.clone(),
        at: format!("{}:{}", cut.file, cut.line),
    }
}

/// What trying one violation's cuts gave.
pub(super) enum Attempt {
    /// No cut of the links asked for applies.
    NoCut,
    /// Every cut tried was rejected on its patched copy.
    Unsafe {
        /// The best cut tried.
        first: Cut,
        /// Each rejection, in `lazy`'s words.
        why: String,
    },
    /// A cut passed the verification; its saving measured.
    Verified {
        /// The cut.
        cut: Cut,
        /// Its patched copy's ready time against the original's.
        saving: Option<phases::compare::Comparison>,
        /// The other cuts tried, each with its own verification.
        others: Vec<LazyAlternative>,
    },
}

/// How a row's search tries its cuts.
#[derive(Clone, Copy)]
pub(super) struct Search<'a> {
    /// The module whose start-up import the cuts must remove.
    pub(super) module: &'a str,
    /// Whether a worker ending late on the copy fails a cut.
    pub(super) late: LateEnd,
    /// Verify every cut tried, not only up to the first that passes (the
    /// row's own statement: its other cuts are listed with their own
    /// verification).
    pub(super) each: bool,
}

impl Attempt {
    /// Verified and measured faster.
    pub(super) fn is_safe(&self) -> bool {
        matches!(self, Attempt::Verified { saving: Some(c), .. } if c.verdict == phases::compare::Verdict::Faster)
    }
}

/// The suggester's search on one violation `v`, kept to the cuts `keep`
/// takes: each verified on a patched copy judging `search.module` (ready,
/// health, the recorder's evidence that the module is gone from start-up,
/// the target's model path), best first (a statement's narrowest scope
/// first: a cut unsafe at one scope is tried at the next before the row
/// says unsafe), and the first that passes measured; with `search.each`
/// the rest are verified too, each on its own copy. The suggestion is
/// returned too, for what it says of links that cannot be cut.
pub(super) fn attempt(
    t: &Target,
    s: &Suggester,
    v: &Violation,
    search: Search<'_>,
    keep: &dyn Fn(&Cut) -> bool,
    opts: &LazyOptions,
    interrupt: &Interrupt,
) -> Result<(Attempt, Suggestion)> {
    let sug = s
        .suggest(v)
        .map_err(|e| Error::Invalid(format!("could not suggest a cut for {}: {e}", v.module)))?;
    let cuts: Vec<Cut> = sug
        .cuts()
        .filter(|c| keep(c))
        .take(ATTEMPTS)
        .cloned()
        .collect();
    let Some(first) = cuts.first().cloned() else {
        return Ok((Attempt::NoCut, sug));
    };
    let judged = judging(t, &[search.module.to_owned()]);
    let mut passed = None;
    let mut others = Vec::new();
    let mut why = Vec::new();
    for cut in cuts {
        if passed.is_some() && !search.each {
            break;
        }
        let reason = s
            .verify_cut(&sug, &cut, |copy| {
                on_copy(&judged, copy, search.late).map_err(|e| Box::new(e) as suggest::CheckError)
            })
            .map_err(|e| Error::Invalid(format!("could not verify a cut: {e}")))?;
        let said = reason.as_ref().map(rejected);
        if let Some(w) = &said {
            why.push(format!("{}:{} ({}): {w}", cut.file, cut.line, cut.kind));
        }
        if reason.is_none() && passed.is_none() {
            passed = Some(cut);
        } else {
            others.push(LazyAlternative {
                cut: lazy_cut(&cut),
                verified: reason.is_none(),
                why: said,
            });
        }
    }
    let out = match passed {
        Some(cut) => Attempt::Verified {
            saving: saving(t, s, &cut, opts, interrupt)?,
            cut,
            others,
        },
        None => Attempt::Unsafe {
            first,
            why: why.join("; "),
        },
    };
    Ok((out, sug))
}
