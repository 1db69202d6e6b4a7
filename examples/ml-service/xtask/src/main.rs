//! `cargo xtask check`: the service's workers must not import
//! torch, transformers or stanza before a model is requested. The targets
//! come from `[tool.coldstart]` in this project's `pyproject.toml` (the
//! same table the installed `coldstart check` reads, through `settings`);
//! the check runs through `harness` (one call), the report through `report`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use harness::Interrupt;
use harness::check_run::{RunOptions, run as check};

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode> {
    let task = std::env::args().nth(1).unwrap_or_default();
    if task != "check" {
        bail!("usage: cargo xtask check");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask lives one level below the project root")?;
    let config = settings::load(&root.join("pyproject.toml"))?;
    let outcome = check(
        &config.targets,
        RunOptions::default(),
        &[],
        root,
        &Interrupt::new(),
    )?;
    let mut text = String::new();
    for c in &outcome.checked {
        report::check::render(&c.report, root, &mut text);
    }
    print!("{text}");
    Ok(ExitCode::from(outcome.exit_code()))
}
