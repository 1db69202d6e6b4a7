//! How a task shows its steps: each printed as it starts (`==> ...` on
//! stderr), its command run with inherited streams and its failure said.

use std::fmt::Display;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};

/// Prints a step as it starts (`==> text`, on stderr).
pub fn step(text: &str) {
    eprintln!("==> {text}");
}

/// Prints the step, runs it with inherited streams, then how long it took
/// (`==> label: passed in 12.3 s`, so a slow CI run says which step was
/// slow); `Ok(false)` when it ran and failed.
pub fn run_step(label: &str, mut cmd: Command) -> Result<bool> {
    step(label);
    let started = Instant::now();
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {cmd:?}: is it installed and on PATH?"))?;
    let took = started.elapsed().as_secs_f64();
    if status.success() {
        eprintln!("==> {label}: passed in {took:.1} s");
    } else {
        eprintln!("==> {label}: failed ({status}) after {took:.1} s");
    }
    Ok(status.success())
}

/// A self-check's findings printed one a line, then, when there are any,
/// `error: N {what}` on stderr; `true` when there are none.
pub fn report_findings<T: Display>(found: &[T], what: &str) -> bool {
    for f in found {
        println!("{f}");
    }
    if !found.is_empty() {
        eprintln!("error: {} {what}", found.len());
    }
    found.is_empty()
}

/// A self-check's exit: 0 when it passed, 1 when it found something.
pub fn exit_of(passed: bool) -> ExitCode {
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
