//! `coldstart snapshot`: each target's start-up import tree under review
//! in the user's repository, in `.coldstart/snapshots/<target>.snap`
//! (insta's `.snap` format, so `cargo insta review` works on them too).
//!
//! The tree is deterministic: first-party modules (the packages found in
//! the target's folder and in its `PYTHONPATH` entries inside the project)
//! shown in full, standard-library and third-party subtrees collapsed to
//! one line each, no times, no machine paths. `snapshot` writes the trees;
//! `--check` exits 1 on drift with a unified diff and leaves the new tree
//! as `<target>.snap.new` beside the old one; `--accept` takes the new
//! trees.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use harness::Target;
use importguard::firstparty;
use report::importtime::{SnapshotOptions, View};

use settings::Project;

/// The snapshot's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this target of the config.
    #[arg(long, value_name = "NAME")]
    target: Option<String>,
    /// Compare with the stored trees instead of writing them: exit 1 and
    /// print a diff when one drifted.
    #[arg(long, conflicts_with = "accept")]
    check: bool,
    /// Take the new trees (and remove pending `.snap.new` files).
    #[arg(long)]
    accept: bool,
    /// The worker command to snapshot instead of a configured target.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Where a target's snapshot lives in the project.
pub fn snapshot_path(root: &Path, target: &str) -> PathBuf {
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

/// The deterministic start-up import tree of one target.
pub fn tree(target: &Target) -> Result<String> {
    let log = harness::check::startup_log(target)
        .with_context(|| format!("could not record the start-up of `{}`", target.name))?;
    let view = View::new(&log, Some(0), None);
    let opts = SnapshotOptions {
        first_party: first_party(target),
        ..SnapshotOptions::default()
    };
    let mut out = Vec::new();
    report::importtime::snapshot(&log, &view, &opts, &mut out).context("rendering the tree")?;
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

/// What became of one target.
#[derive(Debug, PartialEq, Eq)]
pub enum Drift {
    /// The stored tree is the same.
    Same,
    /// No tree was stored.
    New,
    /// It drifted: the unified diff, old to new.
    Changed(String),
}

/// Compares a target's new tree with the stored one.
pub fn drift(path: &Path, target: &str, new_tree: &str) -> Result<Drift> {
    let old = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Drift::New),
        Err(e) => return Err(e).with_context(|| format!("could not read {}", path.display())),
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
        std::fs::create_dir_all(dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("could not write {}", path.display()))
}

/// Runs the snapshot.
pub fn run(args: Args, project: &Project) -> Result<ExitCode> {
    let targets = project.targets(args.target.as_deref(), &args.command)?;
    let mut drifted = 0;
    for t in &targets {
        let path = snapshot_path(&project.root, &t.name);
        let pending = path.with_extension("snap.new");
        let new_tree = tree(t)?;
        let shown = path
            .strip_prefix(&project.root)
            .unwrap_or(&path)
            .display()
            .to_string();
        match drift(&path, &t.name, &new_tree)? {
            Drift::Same => {
                println!("{shown}: unchanged");
                let _ = std::fs::remove_file(&pending);
            }
            Drift::New if args.check => {
                drifted += 1;
                write(&pending, &snap_file(&t.name, &new_tree))?;
                println!(
                    "{shown}: no stored tree; the new one is in {}.new (run `coldstart snapshot --accept`)",
                    shown
                );
            }
            Drift::Changed(diff) if args.check => {
                drifted += 1;
                write(&pending, &snap_file(&t.name, &new_tree))?;
                println!("{shown}: the start-up import tree drifted:\n{diff}");
                println!(
                    "review it: `coldstart snapshot --accept` takes it, or `cargo insta review`"
                );
            }
            Drift::New | Drift::Changed(_) => {
                write(&path, &snap_file(&t.name, &new_tree))?;
                let _ = std::fs::remove_file(&pending);
                println!("{shown}: written");
            }
        }
    }
    Ok(if drifted > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snap_file_round_trips_and_drift_is_a_unified_diff() {
        let dir = tempfile::tempdir().unwrap();
        let path = snapshot_path(dir.path(), "w");
        assert_eq!(drift(&path, "w", "a\n").unwrap(), Drift::New);
        write(&path, &snap_file("w", "a\nb\n")).unwrap();
        assert_eq!(drift(&path, "w", "a\nb\n").unwrap(), Drift::Same);
        let Drift::Changed(diff) = drift(&path, "w", "a\nb\nc\n").unwrap() else {
            panic!("expected drift")
        };
        assert!(diff.contains("+c"), "{diff}");
        assert!(diff.contains("--- w.snap (stored)"), "{diff}");
    }
}
