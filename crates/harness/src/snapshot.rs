//! A target's start-up import tree kept under review in the project, in
//! `.coldstart/snapshots/<target>.snap` (insta's `.snap` format, so `cargo
//! insta review` works on them too): where a target's file lives, the
//! deterministic tree now, how it compares with the stored one, and
//! [`review`], the whole job for a set of targets (`coldstart snapshot`,
//! `--check`, and the gate `check` applies to targets with
//! `snapshot = true`).
//!
//! The tree is deterministic: first-party modules (the packages found in
//! the target's folder and in its `PYTHONPATH` entries inside the project)
//! shown in full, standard-library and third-party subtrees collapsed to
//! one line each, no times, no machine paths.

use std::path::{Path, PathBuf};

use importguard::firstparty;
use report::importtime::{SnapshotOptions, View};

use crate::error::{Error, Result};
use crate::target::Target;

/// Where a target's snapshot lives in the project at `root`.
pub fn path(root: &Path, target: &str) -> PathBuf {
    let safe: String = target
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    root.join(".coldstart")
        .join("snapshots")
        .join(format!("{safe}.snap"))
}

/// The top-level module names of the project's own code for `target`
/// ([`importguard::firstparty::top_level_names`] of its folder, its `src/`
/// and its `PYTHONPATH` entries inside the project).
pub fn first_party(target: &Target) -> Vec<String> {
    let pythonpath = target.env.get("PYTHONPATH").map(std::ffi::OsStr::new);
    let dirs = firstparty::source_dirs(&target.cwd, pythonpath, &target.root);
    firstparty::top_level_names(dirs, &target.root)
}

/// The deterministic start-up import tree of one target, from one fresh
/// instrumented lifecycle.
pub fn tree(target: &Target) -> Result<String> {
    let log = crate::check::startup_log(target).map_err(|e| {
        Error::Invalid(format!(
            "could not record the start-up of `{}`: {e}",
            target.name
        ))
    })?;
    let view = View::new(&log, Some(0), None);
    let opts = SnapshotOptions {
        first_party: first_party(target),
        ..SnapshotOptions::default()
    };
    let mut out = Vec::new();
    report::importtime::snapshot(&log, &view, &opts, &mut out).map_err(|e| {
        Error::Invalid(format!(
            "could not render the tree of `{}`: {e}",
            target.name
        ))
    })?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The text of a `.snap` file: insta's header, then the tree.
pub fn snap_file(target: &str, tree: &str) -> String {
    format!("---\nsource: coldstart\nexpression: start-up import tree of {target}\n---\n{tree}")
}

/// The tree stored in a `.snap` file (what follows its header).
fn stored_tree(text: &str) -> &str {
    text.strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"))
        .map_or(text, |(_, body)| body)
}

/// How a target's tree now compares with the stored one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// The stored tree is the same.
    Same,
    /// No tree was stored.
    New,
    /// It drifted: the unified diff, old to new.
    Changed(String),
}

/// Compares a target's new tree with the one stored at `path`.
pub fn drift(path: &Path, target: &str, new_tree: &str) -> Result<Drift> {
    let old = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Drift::New),
        Err(e) => return Err(Error::io("read", path, e)),
    };
    let old = stored_tree(&old);
    if old == new_tree {
        return Ok(Drift::Same);
    }
    let diff = similar::TextDiff::from_lines(old, new_tree)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{target}.snap (stored)"),
            &format!("{target}.snap (now)"),
        )
        .to_string();
    Ok(Drift::Changed(diff))
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
    }
    std::fs::write(path, text).map_err(|e| Error::io("write", path, e))
}

/// What [`review`] does with each target's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Store the new tree where it is new or drifted (`coldstart snapshot`,
    /// `--accept`), removing a pending `.snap.new`.
    Write,
    /// Store nothing: a new or drifted tree is left as `<target>.snap.new`
    /// beside the stored one (`--check`).
    Check,
    /// Compare only, write nothing (`check` on a `snapshot = true` target).
    Gate,
}

/// One target's review.
#[derive(Debug, Clone)]
pub struct Reviewed {
    /// The target's name.
    pub target: String,
    /// Its `.snap` file.
    pub path: PathBuf,
    /// How its tree compared with the stored one.
    pub drift: Drift,
    /// The file the new tree was written to, if any (the `.snap` itself,
    /// or the pending `.snap.new`).
    pub written: Option<PathBuf>,
}

impl Reviewed {
    /// Whether the review fails a `--check` or the gate: the tree drifted
    /// or none is stored, and it was not written over the stored one.
    pub fn failed(&self, mode: Mode) -> bool {
        mode != Mode::Write && self.drift != Drift::Same
    }
}

/// Records each target's tree and compares it with its stored one in the
/// project at `root`, writing as `mode` says.
pub fn review(root: &Path, targets: &[Target], mode: Mode) -> Result<Vec<Reviewed>> {
    let mut out = Vec::new();
    for t in targets {
        let path = path(root, &t.name);
        let pending = path.with_extension("snap.new");
        let new_tree = tree(t)?;
        let drift = drift(&path, &t.name, &new_tree)?;
        let written = match (&drift, mode) {
            (_, Mode::Gate) => None,
            (Drift::Same, _) => {
                let _ = std::fs::remove_file(&pending);
                None
            }
            (_, Mode::Check) => {
                write(&pending, &snap_file(&t.name, &new_tree))?;
                Some(pending)
            }
            (_, Mode::Write) => {
                write(&path, &snap_file(&t.name, &new_tree))?;
                let _ = std::fs::remove_file(&pending);
                Some(path.clone())
            }
        };
        out.push(Reviewed {
            target: t.name.clone(),
            path,
            drift,
            written,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snap_file_round_trips_and_drift_is_a_unified_diff() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path(), "w");
        assert_eq!(drift(&path, "w", "a\n").unwrap(), Drift::New);
        write(&path, &snap_file("w", "a\nb\n")).unwrap();
        assert_eq!(drift(&path, "w", "a\nb\n").unwrap(), Drift::Same);
        let Drift::Changed(diff) = drift(&path, "w", "a\nb\nc\n").unwrap() else {
            panic!("expected drift")
        };
        assert!(diff.contains("+c"), "{diff}");
        assert!(diff.contains("--- w.snap (stored)"), "{diff}");
    }

    #[test]
    fn a_target_name_becomes_a_safe_file_name() {
        let p = path(Path::new("/p"), "a b/c");
        assert_eq!(p, Path::new("/p/.coldstart/snapshots/a_b_c.snap"));
    }
}
