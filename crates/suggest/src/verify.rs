//! Verification on a temporary copy of the first-party tree, and `--fix`.
//!
//! The copy recreates the project's folders and copies its `.py` files (the
//! ones a cut may change); every other file, and every folder that is not
//! first-party code (a virtual environment, `site-packages`,
//! `node_modules`, `target`), is a symbolic link to the original, so a large
//! project costs little and data files stay where the worker expects them.
//! Version-control folders and `__pycache__` are left out.

use std::path::{Path, PathBuf};

use importguard::verdict::Violation;

use crate::error::{CheckError, SuggestError};
use crate::{Cut, RejectReason, Rejection, Suggester, Suggestion, Verification};

/// What the caller's check said about a patched copy.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum VerifyOutcome {
    /// The check ran its workers on the copy; these are the violations it
    /// found (empty: it passed).
    Checked {
        /// The violations, as [`importguard::verdict::judge`] gives them
        /// (for merged results, each `MergedViolation::first`).
        violations: Vec<Violation>,
    },
    /// A worker on the copy did not complete its handshake (crashed, timed
    /// out, broke the protocol).
    HandshakeFailed {
        /// What happened, for the report.
        detail: String,
    },
    /// The workers completed their handshake, but the target's model path
    /// failed on the copy (a request the caller sent after ready got an
    /// error reply, or the user's own command failed).
    ModelPathFailed {
        /// The step that failed, in words (`verify request 1 (`load`)`).
        step: String,
        /// What it said: the failing reply, or the command's output.
        output: String,
    },
}

impl VerifyOutcome {
    /// The check ran and found these violations.
    pub fn checked(violations: Vec<Violation>) -> Self {
        VerifyOutcome::Checked { violations }
    }

    /// The model path failed at `step` with `output`.
    pub fn model_path_failed(step: impl Into<String>, output: impl Into<String>) -> Self {
        VerifyOutcome::ModelPathFailed {
            step: step.into(),
            output: output.into(),
        }
    }

    /// A worker failed its handshake.
    pub fn handshake_failed(detail: impl Into<String>) -> Self {
        VerifyOutcome::HandshakeFailed {
            detail: detail.into(),
        }
    }
}

/// A temporary copy of the project, with one cut applied or none, removed
/// on drop.
#[derive(Debug)]
pub struct PatchedCopy {
    root: PathBuf,
    _dir: tempfile::TempDir,
}

impl PatchedCopy {
    /// The copy's root: the same relative layout as the project root (and
    /// the same folder name), so a path `P` under the project is
    /// `root().join(P relative to the project root)` here.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// Folders copied as links besides those that are never first party
/// ([`importguard::firstparty::excluded_dir`]): possibly large, no Python
/// of the project.
const LINKED_DIRS: &[&str] = &["node_modules", "target", ".tox", ".nox"];
/// Folders left out.
const SKIPPED_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
];

fn copy_tree(from: &Path, to: &Path) -> Result<(), SuggestError> {
    std::fs::create_dir_all(to).map_err(|e| SuggestError::io("create", to, e))?;
    let entries = std::fs::read_dir(from).map_err(|e| SuggestError::io("read", from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| SuggestError::io("read", from, e))?;
        let name = entry.file_name();
        let src = entry.path();
        let dst = to.join(&name);
        let ty = entry
            .file_type()
            .map_err(|e| SuggestError::io("read", &src, e))?;
        let name = name.to_string_lossy();
        if ty.is_dir() {
            if SKIPPED_DIRS.contains(&name.as_ref()) {
                continue;
            }
            if LINKED_DIRS.contains(&name.as_ref()) || importguard::firstparty::excluded_dir(&src) {
                link(&src, &dst)?;
            } else {
                copy_tree(&src, &dst)?;
            }
        } else if ty.is_file() && name.ends_with(".py") {
            std::fs::copy(&src, &dst).map_err(|e| SuggestError::io("copy", &src, e))?;
        } else {
            // Other files, and symbolic links, point at what the original
            // points at.
            let target = std::fs::canonicalize(&src).unwrap_or(src.clone());
            link(&target, &dst)?;
        }
    }
    Ok(())
}

/// The prefix of a patched copy's temporary folder.
pub const COPY_PREFIX: &str = "coldstart-suggest-";

fn link(target: &Path, at: &Path) -> Result<(), SuggestError> {
    std::os::unix::fs::symlink(target, at).map_err(|e| SuggestError::io("link", at, e))
}

fn still_there(s: &Suggestion, violations: &[Violation]) -> Option<Vec<String>> {
    violations
        .iter()
        .find(|v| v.module == s.module || (!s.pattern.is_empty() && v.pattern == s.pattern))
        .map(|v| v.chain.clone())
}

impl Suggester {
    /// A temporary copy of the project with `cut` applied.
    pub fn patched_copy(&self, cut: &Cut) -> Result<PatchedCopy, SuggestError> {
        let copy = self.copy()?;
        let path = copy.root.join(&cut.file);
        if std::fs::read(&path).ok().as_deref() != Some(cut.original()) {
            return Err(SuggestError::Changed {
                path: self.root.join(&cut.file),
            });
        }
        std::fs::write(&path, cut.patched()).map_err(|e| SuggestError::io("write", &path, e))?;
        Ok(copy)
    }

    /// A temporary copy of the project as it is, no cut applied: the
    /// control that tells a copy which cannot run at all from a cut that
    /// breaks it.
    pub fn copy(&self) -> Result<PatchedCopy, SuggestError> {
        // Copies left by a run that was killed are removed first.
        for o in spawn::owned::sweep(COPY_PREFIX) {
            let _ = spawn::owned::remove(&o);
        }
        let dir = spawn::owned::tempdir(COPY_PREFIX, "a patched copy")
            .map_err(|e| SuggestError::io("create", std::env::temp_dir(), e))?;
        let name = self
            .root
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_else(|| "project".into());
        let root = dir.path().join(name);
        copy_tree(&self.root, &root)?;
        Ok(PatchedCopy { root, _dir: dir })
    }

    /// Verifies the suggestion's cuts, best first, at most `max_attempts`
    /// of them (0: the suggestion stays as it is, not verified): each is applied to a fresh copy of the project and `check`
    /// re-runs the check there (the copy's root is its argument; run the
    /// worker with every project path mapped into the copy, the copy first
    /// on `PYTHONPATH`). The first cut after which the violation is gone
    /// and the workers complete their handshake becomes `suggestion.cut`
    /// ([`Verification::Verified`]); rejected cuts move to
    /// `suggestion.rejections`; if none passes, no cut is offered
    /// ([`Verification::Rejected`]). An error of `check` itself (it could
    /// not run at all) ends the verification with that error.
    pub fn verify<F>(
        &self,
        suggestion: &mut Suggestion,
        max_attempts: usize,
        mut check: F,
    ) -> Result<(), SuggestError>
    where
        F: FnMut(&Path) -> Result<VerifyOutcome, CheckError>,
    {
        if max_attempts == 0 {
            return Ok(());
        }
        let mut queue: Vec<Cut> = suggestion.cut.take().into_iter().collect();
        queue.append(&mut suggestion.candidates);
        if queue.is_empty() {
            suggestion.verification = Verification::NoCandidate;
            return Ok(());
        }
        let mut untried = queue.split_off(max_attempts.min(queue.len()));
        let mut queue = queue.into_iter();
        for cut in queue.by_ref() {
            match self.verify_cut(suggestion, &cut, &mut check)? {
                None => {
                    suggestion.cut = Some(cut);
                    break;
                }
                Some(reason) => suggestion.rejections.push(Rejection {
                    file: cut.file.clone(),
                    line: cut.line,
                    kind: cut.kind,
                    summary: cut.summary.clone(),
                    reason,
                }),
            }
        }
        // Cuts not tried stay listed, unverified, best first.
        untried.extend(queue);
        untried.sort_by_key(Cut::sort_key);
        suggestion.candidates = untried;
        suggestion.verification = if suggestion.cut.is_some() {
            Verification::Verified
        } else {
            Verification::Rejected
        };
        Ok(())
    }

    /// Verifies one cut of `suggestion` on a fresh patched copy, as
    /// [`Suggester::verify`] does each: `None` when it passed, else why it
    /// was rejected. For a caller that wants each cut's own verification
    /// (`lazy` lists the other cuts of a statement with theirs).
    pub fn verify_cut<F>(
        &self,
        suggestion: &Suggestion,
        cut: &Cut,
        mut check: F,
    ) -> Result<Option<RejectReason>, SuggestError>
    where
        F: FnMut(&Path) -> Result<VerifyOutcome, CheckError>,
    {
        let copy = self.patched_copy(cut)?;
        let outcome = check(copy.root()).map_err(|source| SuggestError::Check { source })?;
        Ok(match outcome {
            VerifyOutcome::Checked { violations } => still_there(suggestion, &violations)
                .map(|chain| RejectReason::ViolationRemains { chain }),
            VerifyOutcome::HandshakeFailed { detail } => {
                Some(RejectReason::HandshakeFailed { detail })
            }
            VerifyOutcome::ModelPathFailed { step, output } => {
                Some(RejectReason::ModelPathFailed { step, output })
            }
        })
    }

    /// Writes `cut` to the project (`--fix`): only if the file is still
    /// what the cut was computed from. Returns the files written.
    pub fn apply(&self, cut: &Cut) -> Result<Vec<PathBuf>, SuggestError> {
        let path = self.root.join(&cut.file);
        let now = std::fs::read(&path).map_err(|e| SuggestError::io("read", &path, e))?;
        if now != cut.original() {
            return Err(SuggestError::Changed { path });
        }
        let dir = path.parent().unwrap_or(&self.root);
        let mut tmp = tempfile::Builder::new()
            .prefix(".coldstart-fix-")
            .tempfile_in(dir)
            .map_err(|e| SuggestError::io("write", dir, e))?;
        std::io::Write::write_all(&mut tmp, cut.patched())
            .map_err(|e| SuggestError::io("write", tmp.path().to_path_buf(), e))?;
        let perms = std::fs::metadata(&path)
            .map_err(|e| SuggestError::io("read", &path, e))?
            .permissions();
        std::fs::set_permissions(tmp.path(), perms)
            .map_err(|e| SuggestError::io("write", tmp.path().to_path_buf(), e))?;
        tmp.persist(&path)
            .map_err(|e| SuggestError::io("write", &path, e.error))?;
        Ok(vec![path])
    }
}
