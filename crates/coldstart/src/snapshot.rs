//! `coldstart snapshot`: each target's start-up import tree under review
//! in the user's repository, in `.coldstart/snapshots/<target>.snap`
//! (insta's `.snap` format, so `cargo insta review` works on them too).
//!
//! The trees, their files and their comparison are `harness::snapshot`'s;
//! this is the flags in and the lines out. `snapshot` writes the trees;
//! `--check` exits 1 on drift with a unified diff and leaves the new tree
//! as `<target>.snap.new` beside the old one; `--accept` takes the new
//! trees.

use std::process::ExitCode;

use anyhow::Result;
use harness::snapshot::{self, Drift, Mode};
use settings::Project;

/// The snapshot's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which worker: `--target NAME` or `-- CMD...`.
    #[command(flatten)]
    target: crate::args::TargetArgs,
    /// Compare with the stored trees instead of writing them: exit 1 and
    /// print a diff when one drifted.
    #[arg(long, conflicts_with = "accept")]
    check: bool,
    /// Take the new trees (and remove pending `.snap.new` files).
    #[arg(long)]
    accept: bool,
}

/// Runs the snapshot: one `harness::snapshot::review`, its lines printed.
pub fn run(args: Args, project: &Project) -> Result<ExitCode> {
    let targets = args.target.targets(project)?;
    let mode = if args.check { Mode::Check } else { Mode::Write };
    let reviewed = snapshot::review(&project.root, &targets, mode)?;
    for r in &reviewed {
        let shown = r
            .path
            .strip_prefix(&project.root)
            .unwrap_or(&r.path)
            .display()
            .to_string();
        match (&r.drift, mode) {
            (Drift::Same, _) => println!("{shown}: unchanged"),
            (Drift::New, Mode::Check) => println!(
                "{shown}: no stored tree; the new one is in {shown}.new (run `coldstart snapshot --accept`)"
            ),
            (Drift::Changed(diff), Mode::Check) => {
                println!("{shown}: the start-up import tree drifted:\n{diff}");
                println!(
                    "review it: `coldstart snapshot --accept` takes it, or `cargo insta review`"
                );
            }
            _ => println!("{shown}: written"),
        }
    }
    Ok(if reviewed.iter().any(|r| r.failed(mode)) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
