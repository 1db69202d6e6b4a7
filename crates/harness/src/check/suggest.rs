//! `check --suggest`: for each violation, the smallest safe patch that keeps
//! the forbidden module out of start-up (`suggest` computes the cuts), each
//! verified before it is shown by re-running the check on a patched copy of
//! the project with every project path mapped into the copy, then the
//! target's model path there ([`crate::verify`]: its `verify` requests and
//! `verify_command`); `--fix` writes the verified cut and re-runs the check
//! on the project.

use std::path::{Path, PathBuf};

use check_model::{Status, TargetReport};
use suggest::{Suggester, Suggestion, Verification, VerifyOutcome};

use super::{CheckOptions, check_target};
use crate::env;
use crate::error::{Error, Result, invalid};
use crate::target::Target;
use crate::verify;

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

/// The interpreter that runs `t`'s worker, for reading its files with its
/// own grammar.
fn interpreter(t: &Target) -> Result<PathBuf> {
    let program = &t.command[0];
    if !env::looks_like_python(program) {
        invalid!(
            "--suggest reads the worker's files with the worker's own Python, but `{program}` does not look like a Python interpreter; start the worker as `python -m ...` in the target's command"
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

/// `t` with every path under its project root moved into `copy`
/// ([`Target::moved`], the mapping `diff` uses for its base checkout), the
/// copy's tree first on PYTHONPATH, one process.
fn in_copy(t: &Target, copy: &Path) -> Target {
    let mut m = t.moved(&t.root, copy);
    let moved = m.pythonpath().unwrap_or_default();
    let mut entries: Vec<String> = vec![copy.display().to_string()];
    entries.extend(
        std::env::split_paths(&moved)
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| p.display().to_string()),
    );
    m.env.insert("PYTHONPATH".to_owned(), entries.join(":"));
    m.processes = 1;
    m
}

/// Suggests, verifies and (with `fix`) applies a cut for every violation
/// of `report`, a check of `t`.
pub fn suggest(t: &Target, report: &TargetReport, fix: bool) -> Result<Suggested> {
    let python = interpreter(t)?;
    let s = Suggester::new(&t.root, &python)
        .map_err(|e| Error::Invalid(format!("could not suggest a cut: {e}")))?
        .with_cwd(&t.cwd);
    let mut out = Suggested {
        suggestions: Vec::new(),
        written: Vec::new(),
    };
    for v in &report.violations {
        let mut sug = s.suggest(&v.first).map_err(|e| {
            Error::Invalid(format!(
                "could not suggest a cut for {}: {e}",
                v.first.module
            ))
        })?;
        s.verify(&mut sug, ATTEMPTS, |copy| {
            let moved = in_copy(t, copy);
            let r = check_target(&moved, CheckOptions::default())
                .map_err(|e| Box::new(e) as suggest::CheckError)?;
            if r.status == Status::Error {
                let why = r
                    .processes
                    .iter()
                    .find_map(|p| p.error.clone())
                    .unwrap_or_else(|| "a worker could not be checked".to_owned());
                return Ok(VerifyOutcome::handshake_failed(why));
            }
            // The model path is only worth running once the violation is
            // gone from start-up: a cut that leaves it is rejected anyway.
            if r.violations.is_empty()
                && let Some(failed) =
                    verify::model_path(&moved).map_err(|e| Box::new(e) as suggest::CheckError)?
            {
                return Ok(VerifyOutcome::model_path_failed(
                    failed.step.to_string(),
                    failed.output,
                ));
            }
            Ok(VerifyOutcome::checked(
                r.violations.iter().map(|m| m.first.clone()).collect(),
            ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_paths_move_into_the_copy_and_others_stay() {
        let copy = tempfile::tempdir().unwrap();
        let c = copy.path();
        std::fs::write(c.join("run.py"), "").unwrap();
        let mut t = Target::ad_hoc(
            Path::new("/p"),
            vec!["python3".into(), "/p/run.py".into()],
            "w",
        );
        t.env.insert("PYTHONPATH".into(), "/p/src:/opt/lib".into());
        t.cwd = PathBuf::from("/p/sub");
        let m = in_copy(&t, c);
        assert_eq!(m.command[1], c.join("run.py").display().to_string());
        assert_eq!(m.cwd, c.join("sub"));
        assert_eq!(
            m.env["PYTHONPATH"],
            format!("{}:{}:/opt/lib", c.display(), c.join("src").display())
        );
        assert_eq!(m.processes, 1);
    }
}
