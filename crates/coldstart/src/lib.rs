//! coldstart: the command line. Owns clap, finding the config where the
//! user stands ([`config`]), choosing targets ([`Project`]), printing and
//! exit codes; everything it runs is the `harness` crate's, everything it
//! prints is rendered by `report`.
//!
//! The same command line serves two front doors: the installed `coldstart`
//! binary, whose project is found from the current folder upward, and
//! `cargo xtask` in the coldstart workspace (and in a user's own xtask that
//! embeds this crate), whose project is the workspace root with the
//! reference worker as its built-in default.
//!
//! Exit codes: 0 success, 1 a check found a violation (or a comparison
//! found a regression where asked, or a snapshot drifted), 2 the tool could
//! not do its job (bad input, a worker that could not be checked, an I/O
//! error), 130 interrupted.

#![warn(missing_docs)]

pub mod bench;
pub mod check;
pub mod compare;
pub mod config;
pub mod importtime;
pub mod profile;
pub mod snapshot;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use harness::Target;

/// The version and the git revision it was built from, as `--version` prints them.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("COLDSTART_GIT_REV"),
    ")"
);

/// The subcommands every front door has.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check that workers never import forbidden modules (torch,
    /// transformers, stanza) at start-up, and say who did when they do.
    #[command(alias = "import-boundary")]
    Check(check::Args),
    /// Render an importtime log, or a live command's, as a tree, top list,
    /// JSON, collapsed stacks, flame graph, speedscope or snapshot.
    Importtime(importtime::Args),
    /// Benchmark a worker's start-up and shutdown over repeated fresh trials.
    Bench(bench::Args),
    /// Compare two saved bench runs phase by phase.
    Compare(compare::Args),
    /// Profile a worker's start-up with py-spy while driving it over the protocol.
    Profile(profile::Args),
    /// Keep each target's start-up import tree under review in
    /// `.coldstart/snapshots/` (insta's `.snap` format); `--check` in CI.
    Snapshot(snapshot::Args),
    /// Write a commented starter `coldstart.toml` in the current folder.
    Init,
}

/// Where the command runs: the project, its config if any, and what runs
/// when no target is named.
#[derive(Debug, Clone)]
pub struct Project {
    /// The project root: the config file's folder, or the workspace root.
    pub root: PathBuf,
    /// The config that was found or given.
    pub config: Option<config::Config>,
    /// What runs without a config and without `-- CMD`.
    pub default: Option<Target>,
    /// The current folder, where `-- CMD` runs.
    pub cwd: PathBuf,
}

impl Project {
    /// The project of a user standing in the current folder: `--config
    /// FILE`, else the nearest config upward; no built-in default.
    pub fn discover(config_file: Option<&Path>) -> Result<Project> {
        let cwd = std::env::current_dir().context("the current folder is not readable")?;
        let config = match config_file {
            Some(f) => Some(config::load(&cwd.join(f))?),
            None => config::discover(&cwd)?,
        };
        Ok(Project {
            root: config
                .as_ref()
                .map_or_else(|| cwd.clone(), |c| c.root.clone()),
            config,
            default: None,
            cwd,
        })
    }

    /// The coldstart workspace at `root`, as `cargo xtask` runs it: its
    /// `coldstart.toml` if it has one, else the reference worker.
    pub fn workspace(root: &Path) -> Result<Project> {
        let path = root.join(config::CONFIG_FILE);
        let config = if path.is_file() {
            Some(config::load(&path)?)
        } else {
            None
        };
        Ok(Project {
            root: root.to_path_buf(),
            config,
            default: Some(Target::reference_worker(root)),
            cwd: std::env::current_dir().context("the current folder is not readable")?,
        })
    }

    /// The targets a task runs: `-- CMD...` wins (run in the current
    /// folder), then `--target NAME` from the config, then every target of
    /// the config, then the built-in default.
    pub fn targets(&self, target: Option<&str>, command: &[String]) -> Result<Vec<Target>> {
        if !command.is_empty() {
            if target.is_some() {
                bail!("give either --target or a command after `--`, not both");
            }
            return Ok(vec![Target::ad_hoc(&self.cwd, command.to_vec(), "command")]);
        }
        match (target, &self.config, &self.default) {
            (Some(name), Some(c), _) => {
                let names: Vec<_> = c.targets.iter().map(|t| t.name.as_str()).collect();
                c.targets
                    .iter()
                    .find(|t| t.name == name)
                    .map(|t| vec![t.clone()])
                    .with_context(|| {
                        format!(
                            "no target `{name}` in {}; it has: {}",
                            c.path.display(),
                            names.join(", ")
                        )
                    })
            }
            (None, Some(c), _) => Ok(c.targets.clone()),
            (Some(name), None, Some(d)) if d.name == name => Ok(vec![d.clone()]),
            (Some(name), None, Some(d)) => bail!(
                "no {} at {}, so the only target is the built-in `{}`, not `{name}`; add a [[target]] named `{name}` or run a command after `--`",
                config::CONFIG_FILE,
                self.root.display(),
                d.name
            ),
            (None, None, Some(d)) => Ok(vec![d.clone()]),
            (_, None, None) => bail!(
                "no coldstart config found in {} or any folder above it, and no command given; \
                 run `coldstart check -- python3 -m yourworker`, or write a coldstart.toml (or a \
                 [tool.coldstart] table in pyproject.toml) such as:\n\n{}",
                self.cwd.display(),
                config::STARTER
            ),
        }
    }

    /// The one target a task takes (bench, profile): as [`Project::targets`],
    /// refusing a config with several unless one is named.
    pub fn one_target(&self, target: Option<&str>, command: &[String]) -> Result<Target> {
        let mut targets = self.targets(target, command)?;
        if targets.len() > 1 {
            let names: Vec<_> = targets.iter().map(|t| t.name.as_str()).collect();
            bail!(
                "the config has {} targets ({}); pick one with --target NAME",
                targets.len(),
                names.join(", ")
            );
        }
        Ok(targets.remove(0))
    }
}

/// Runs one subcommand in `project`.
pub fn run(command: Command, project: &Project) -> Result<ExitCode> {
    match command {
        Command::Check(args) => check::run(args, project),
        Command::Importtime(args) => importtime::run(args),
        Command::Bench(args) => bench::run(args, project),
        Command::Compare(args) => compare::run(args),
        Command::Profile(args) => profile::run(args, project),
        Command::Snapshot(args) => snapshot::run(args, project),
        Command::Init => init(&project.cwd),
    }
}

/// `coldstart init`: a commented starter config in `dir`, never over an
/// existing one.
fn init(dir: &Path) -> Result<ExitCode> {
    let path = dir.join(config::CONFIG_FILE);
    if path.exists() {
        bail!(
            "{} exists already; edit it, or remove it to start again",
            path.display()
        );
    }
    std::fs::write(&path, config::STARTER)
        .with_context(|| format!("could not write {}", path.display()))?;
    println!(
        "wrote {}: set the worker's command, then run `coldstart check`",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// What a front door's `main` does with a task's result: the exit code, or
/// the error printed as `error: ...` with its causes and exit 2 (a broken
/// pipe ends quietly, for `coldstart importtime big.log | head`).
pub fn finish(result: Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<harness::Error>()
                .is_some_and(harness::Error::is_broken_pipe)
    })
}

/// A positive number of seconds from a flag, or `None`.
pub(crate) fn secs(v: Option<f64>, flag: &str) -> Result<Option<std::time::Duration>> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Some(std::time::Duration::from_secs_f64(s))),
        Some(s) => bail!("{flag} must be a positive number of seconds, got {s}"),
    }
}
