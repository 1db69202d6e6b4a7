//! `cargo xtask dist`: the `coldstart` wheel, built by maturin with
//! `bindings = "bin"` (`crates/coldstart/pyproject.toml`), so Python users
//! `pip install` the command. maturin comes from the test venv (pinned in
//! `tests/requirements.txt`), which this task provisions first exactly as
//! `cargo xtask test` does ([`super::venv`]), so it runs on a fresh clone.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};

use super::project_root;
use super::steps::step;
use super::venv;

/// The wheel's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the wheel goes [default: target/wheels].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Build the binary in the dev profile (fast, for tests) instead of release.
    #[arg(long)]
    dev: bool,
    /// Do not create or refresh the test venv (.venv); use its maturin as it
    /// is, or the one on PATH.
    #[arg(long)]
    no_provision: bool,
}

/// Builds the wheel and prints its path.
pub fn run(args: Args) -> Result<ExitCode> {
    let root = project_root();
    let maturin = maturin(&root, !args.no_provision)?;
    let out = args
        .out
        .unwrap_or_else(|| root.join("target").join("wheels"));
    let mut cmd = Command::new(&maturin);
    cmd.args(["build", "--manifest-path"])
        .arg(root.join("crates/coldstart/Cargo.toml"))
        .arg("--out")
        .arg(&out)
        .current_dir(&root);
    if !args.dev {
        cmd.arg("--release");
    }
    step(&format!("dist: {cmd:?}"));
    let status = cmd.status().with_context(|| {
        format!(
            "could not run {}: drop --no-provision (the task then provisions .venv with maturin) or `pip install maturin==1.16.0`",
            maturin.display()
        )
    })?;
    if !status.success() {
        bail!("maturin failed ({status}); its output is above");
    }
    println!("wheel in {}", out.display());
    Ok(ExitCode::SUCCESS)
}

/// The maturin to run: the test venv's, once [`venv::provision`] made the
/// venv up to date (when `provision`), else the venv's if it has one, else
/// the one on PATH.
fn maturin(root: &Path, provision: bool) -> Result<PathBuf> {
    if provision {
        venv::provision(root)?;
    }
    let in_venv = root.join(venv::VENV).join("bin").join("maturin");
    Ok(if provision || in_venv.is_file() {
        in_venv
    } else {
        PathBuf::from("maturin")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a root without a venv (a fresh clone), the task makes the venv
    /// from the root's requirements before it looks for maturin.
    #[test]
    fn a_fresh_root_gets_its_venv_before_maturin_is_looked_for() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("tests")).unwrap();
        // No pins: pip has nothing to fetch, the venv is made offline.
        std::fs::write(root.path().join(venv::REQUIREMENTS), "# nothing\n").unwrap();
        let found = maturin(root.path(), true).unwrap();
        assert_eq!(found, root.path().join(".venv/bin/maturin"));
        assert!(root.path().join(".venv/bin/python").is_file());
        assert!(root.path().join(".venv").join(venv::STAMP).is_file());
        // Without provisioning, a root without a venv falls back to PATH.
        let bare = tempfile::tempdir().unwrap();
        assert_eq!(
            maturin(bare.path(), false).unwrap(),
            PathBuf::from("maturin")
        );
    }
}
