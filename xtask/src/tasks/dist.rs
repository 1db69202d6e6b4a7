//! `cargo xtask dist`: the `coldstart` wheel, built by maturin with
//! `bindings = "bin"` (`crates/coldstart/pyproject.toml`), so Python users
//! `pip install` the command. maturin comes from the test venv that `cargo
//! xtask test` provisions (pinned in `tests/requirements.txt`), or PATH.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};

use super::project_root;

/// The wheel's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the wheel goes [default: target/wheels].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Build the binary in the dev profile (fast, for tests) instead of release.
    #[arg(long)]
    dev: bool,
}

/// Builds the wheel and prints its path.
pub fn run(args: Args) -> Result<ExitCode> {
    let root = project_root();
    let venv = root.join(".venv").join("bin").join("maturin");
    let maturin = if venv.is_file() {
        venv
    } else {
        PathBuf::from("maturin")
    };
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
    eprintln!("==> dist: {cmd:?}");
    let status = cmd.status().with_context(|| {
        format!(
            "could not run {}: run `cargo xtask test` once (it provisions .venv with maturin) or `pip install maturin==1.16.0`",
            maturin.display()
        )
    })?;
    if !status.success() {
        bail!("maturin failed ({status}); its output is above");
    }
    println!("wheel in {}", out.display());
    Ok(ExitCode::SUCCESS)
}
