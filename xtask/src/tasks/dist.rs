//! `cargo xtask dist`: the `coldstart` wheel, built by maturin with
//! `bindings = "bin"` (`crates/coldstart/pyproject.toml`), so Python users
//! `pip install` the command and its pytest plugin (`coldstart_pytest`,
//! packed beside the binary), and the man pages (clap_mangen) beside it.
//! maturin and zig (the `ziglang` package) come from the test venv (pinned in
//! `tests/requirements.txt`), which this task provisions first exactly as
//! `cargo xtask test` does ([`super::venv`]), so it runs on a fresh clone.
//!
//! The wheel's tag is portable: maturin links with zig against glibc 2.17
//! (`--zig --compatibility manylinux2014`) and its own auditwheel check
//! refuses a binary that needs a newer symbol, so the wheel installs on any
//! manylinux2014 system, not only on the glibc of the machine that built it.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use clap::CommandFactory;

use super::project_root;
use super::steps::step;
use super::venv;

/// The platform tag the wheel is built for (and checked against by maturin).
pub const COMPATIBILITY: &str = "manylinux2014";

/// The wheel's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the wheel goes [default: target/wheels].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Build the binary in the dev profile (fast, for tests) instead of release.
    #[arg(long, conflicts_with = "profile")]
    dev: bool,
    /// Build the binary in this cargo profile instead of release (the suite
    /// uses `wheel-test`: no optimisation, the quickest whole build for the
    /// zig target).
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Link against this machine's glibc instead of glibc 2.17 through zig:
    /// the tag is this machine's (`manylinux_2_<its glibc>`), so the wheel
    /// only installs where glibc is as new; with `--dev` the build reuses
    /// `target/debug` instead of a build of its own for the zig target.
    #[arg(long)]
    native: bool,
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
    cmd.arg("build");
    if !args.native {
        cmd.args(["--zig", "--compatibility", COMPATIBILITY]);
    }
    cmd.arg("--manifest-path")
        .arg(root.join("crates/coldstart/Cargo.toml"))
        .arg("--out")
        .arg(&out)
        .current_dir(&root);
    // maturin runs zig as `python3 -m ziglang`: the venv's python3 first.
    if let Some(bin) = maturin.parent().filter(|d| d.join("python3").exists()) {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let joined = std::env::join_paths(
            std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&path)),
        )
        .context("the venv's folder cannot go on PATH")?;
        cmd.env("PATH", joined);
    }
    match (&args.profile, args.dev) {
        (Some(profile), _) => {
            cmd.args(["--profile", profile]);
        }
        (None, true) => {}
        (None, false) => {
            cmd.arg("--release");
        }
    }
    step(&format!("dist: {cmd:?}"));
    let status = cmd.status().with_context(|| {
        format!(
            "could not run {}: drop --no-provision (the task then provisions .venv with maturin) or `pip install maturin==1.16.0 ziglang==0.17.1`",
            maturin.display()
        )
    })?;
    if !status.success() {
        bail!("maturin failed ({status}); its output is above");
    }
    let man = out.join("man");
    std::fs::create_dir_all(&man).with_context(|| format!("could not create {}", man.display()))?;
    clap_mangen::generate_to(coldstart::cli::Cli::command(), &man)
        .with_context(|| format!("could not write the man pages into {}", man.display()))?;
    println!("wheel in {}", out.display());
    println!(
        "man pages in {} (man -l {})",
        man.display(),
        man.join("coldstart.1").display()
    );
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
