//! `check --suggest`: for each violation, the smallest safe patch that keeps
//! the forbidden module out of start-up (`suggest` computes the cuts), each
//! verified before it is shown by re-running the check on a patched copy of
//! the project with every project path mapped into the copy, then the
//! target's model path there ([`verify`]: its `verify` requests and
//! `verify_command`); `--fix` writes the verified cut and re-runs the check
//! on the project.

use std::path::PathBuf;

use answers::check::TargetReport;
use suggest::{Suggester, Suggestion, Verification};

use super::verify;
use crate::env;
use crate::error::{Error, Result, invalid};
use crate::target::Target;

/// What of `t`'s model path a verified cut was held to, in words; `None`
/// when the target names none.
fn model_path_words(t: &Target) -> Option<String> {
    let mut parts = Vec::new();
    if !t.verify.is_empty() {
        let ops: Vec<&str> = t
            .verify
            .iter()
            .filter_map(|r| r.get("op").and_then(serde_json::Value::as_str))
            .collect();
        parts.push(format!(
            "the verify request(s) {} got replies that are not errors",
            ops.join(", ")
        ));
    }
    if !t.verify_command.is_empty() {
        parts.push(format!(
            "`{}` passed",
            crate::target::display_argv(&t.verify_command)
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// How many cuts are verified per violation, best first.
const ATTEMPTS: usize = 3;

/// What suggesting found for one target.
#[derive(Debug)]
pub struct Suggested {
    /// One per violation of the report, in its order.
    pub suggestions: Vec<Suggestion>,
    /// With `fix`: the files written.
    pub written: Vec<PathBuf>,
}

/// The Python a launcher started (`uv run`, a shell) for `report`'s
/// worker, as the evidence of the process that answered names it.
pub(crate) fn launched_python(report: &TargetReport) -> Option<&str> {
    report
        .processes
        .iter()
        .find_map(|p| p.verdict.answered.as_ref()?.executable.as_deref())
}

/// The interpreter that runs `t`'s worker, for reading its files with its
/// own grammar: the target's program, or when that is a launcher the
/// Python below it that answered (`launched`, from [`launched_python`]).
pub(crate) fn interpreter(t: &Target, launched: Option<&str>) -> Result<PathBuf> {
    let program = &t.command[0];
    if !env::looks_like_python(program) {
        if let Some(exe) = launched {
            return Ok(PathBuf::from(exe));
        }
        invalid!(
            "--suggest reads the worker's files with the worker's own Python, but `{program}` does not look like a Python interpreter and no Python process below it answered the protocol with the recorder's evidence; start the worker as `python -m ...` (or through a launcher such as `uv run python -m ...`) in the target's command"
        );
    }
    let info = env::python_info(program, &t.env, &t.cwd);
    match info.executable {
        Some(exe) => Ok(PathBuf::from(exe)),
        None => invalid!(
            "could not ask `{program}` which interpreter it is: {}",
            info.note.unwrap_or_default()
        ),
    }
}

/// Suggests, verifies and (with `fix`) applies a cut for every violation
/// of `report`, a check of `t`.
pub fn suggest(t: &Target, report: &TargetReport, fix: bool) -> Result<Suggested> {
    let python = interpreter(t, launched_python(report))?;
    let s = Suggester::new(&t.root, &python)
        .map_err(|e| Error::Invalid(format!("could not suggest a cut: {e}")))?
        .with_cwd(&t.cwd);
    let mut out = Suggested {
        suggestions: Vec::new(),
        written: Vec::new(),
    };
    // The original's own late end is not held against a cut.
    let late = verify::LateEnd::of(&report.processes);
    for v in &report.violations {
        let mut sug = s.suggest(&v.first).map_err(|e| {
            Error::Invalid(format!(
                "could not suggest a cut for {}: {e}",
                v.first.module
            ))
        })?;
        s.verify(&mut sug, ATTEMPTS, |copy| {
            verify::on_copy(t, copy, late).map_err(|e| Box::new(e) as suggest::CheckError)
        })
        .map_err(|e| Error::Invalid(format!("could not verify a cut: {e}")))?;
        if sug.cut.is_some() && sug.verification == Verification::Verified {
            sug.model_path = model_path_words(t);
        }
        if fix && let Some(cut) = &sug.cut {
            out.written.extend(
                s.apply(cut)
                    .map_err(|e| Error::Invalid(format!("could not write the cut: {e}")))?,
            );
        }
        out.suggestions.push(sug);
    }
    Ok(out)
}
