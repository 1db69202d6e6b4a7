//! How a task shows its steps: each printed as it starts (`==> ...` on
//! stderr), its command run with inherited streams and its failure said.

use std::process::{Command, Stdio};

use anyhow::{Context, Result};

/// Prints a step as it starts (`==> text`, on stderr).
pub fn step(text: &str) {
    eprintln!("==> {text}");
}

/// Prints the step, runs it with inherited streams; `Ok(false)` when it ran
/// and failed.
pub fn run_step(label: &str, mut cmd: Command) -> Result<bool> {
    step(label);
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {cmd:?}: is it installed and on PATH?"))?;
    if !status.success() {
        eprintln!("==> {label}: failed ({status})");
    }
    Ok(status.success())
}
