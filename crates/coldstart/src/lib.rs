//! coldstart: the command line. Owns clap, printing and exit codes; the
//! config found where the user stands and the targets a task runs are the
//! `settings` crate's ([`Project`]), everything it runs is the `harness`
//! crate's, everything it prints is rendered by `report`.
//!
//! The same command line serves two front doors: the installed `coldstart`
//! binary, whose project is found from the current folder upward, and
//! `cargo xtask` in the coldstart workspace (and in a user's own xtask that
//! embeds this crate), whose project is the workspace root with the
//! reference worker as its built-in default.
//!
//! Exit codes: 0 success, 1 a check found a violation (or a comparison
//! found a regression where asked, or a snapshot drifted), 2 the tool could
//! not do its job (bad input, a worker that could not be checked, a process
//! whose stacks could not be read, an I/O error), 128 + the signal when one
//! cut it short (130 SIGINT, 143 SIGTERM, 129 SIGHUP). `record`, `trace`
//! and `top` end normally (0) on a signal: it is how they are stopped, and
//! `record` and `trace` write what they sampled first.

#![warn(missing_docs)]

pub mod args;
pub mod bench;
pub mod bisect;
pub mod check;
pub mod cli;
pub mod compare;
pub mod diff;
pub mod history;
pub mod importtime;
pub mod lazy;
pub mod live;
pub mod outputs;
pub mod profile;
pub mod progress;
pub mod signals;
pub mod snapshot;
pub mod trace;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use settings::Project;

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
    /// Benchmark a worker's start-up and shutdown over repeated fresh trials.
    Bench(Box<bench::Args>),
    /// Render an importtime log, or a live command's, as a tree, top list,
    /// JSON, collapsed stacks, flame graph, speedscope or snapshot.
    Importtime(importtime::Args),
    /// Compare two saved bench runs phase by phase.
    Compare(compare::Args),
    /// Compare the working tree's workers with a git revision's (default:
    /// the merge base with the upstream branch): start-up time on CPU time,
    /// interleaved, and the import trees; fails CI on a slowdown.
    Diff(diff::Args),
    /// The start-up history: `history record [REV_RANGE]` measures each
    /// commit in its own checkout and stores it (SQLite, or PostgreSQL);
    /// `history show` finds its changes and confirms each by re-measuring.
    #[command(subcommand)]
    History(history::HistoryCommand),
    /// The first commit between GOOD and BAD whose start-up is slower than
    /// GOOD's by more than --threshold, and the import that arrived there;
    /// `--run` is a `git bisect run` script.
    Bisect(bisect::Args),
    /// Profile a worker's start-up with py-spy while driving it over the protocol.
    Profile(profile::Args),
    /// Keep each target's start-up import tree under review in
    /// `.coldstart/snapshots/` (insta's `.snap` format); `--check` in CI.
    Snapshot(snapshot::Args),
    /// Every thread's Python stack of running processes, once: a Python
    /// process, or any process (the Rust service, a shell) whose Python
    /// descendants are found and labelled with their parent chain.
    Dump(live::DumpArgs),
    /// A live view of the functions on CPU in a running process (own and
    /// total share, refreshed each second); `-n N` prints N refreshes.
    Top(live::TopArgs),
    /// Sample a running process (and its subprocesses) into a flame graph,
    /// speedscope file or collapsed stacks, until --duration, its exit, or
    /// Ctrl-C.
    Record(live::RecordArgs),
    /// Trace a parent (any language) and every Python process below it on
    /// one timeline: a running PID, or a command after `--`; written as a
    /// Perfetto trace and/or Chrome Trace Event JSON (`--output
    /// perfetto=PATH`, `--output chrome-json=PATH`).
    Trace(trace::Args),
    /// Price every costly start-up import of the project's own code, with
    /// the cut that defers it, verified on a patched copy and its saving
    /// measured: safe, no-win or unsafe; `--fix` writes the safe cuts.
    Lazy(lazy::Args),
    /// Write a commented starter `coldstart.toml` in the current folder.
    Init,
}

/// Runs one subcommand in `project`.
pub fn run(command: Command, project: &Project) -> Result<ExitCode> {
    match command {
        Command::Check(args) => check::run(args, project),
        Command::Importtime(args) => importtime::run(args),
        Command::Bench(args) => bench::run(*args, project),
        Command::Compare(args) => compare::run(args),
        Command::Diff(args) => diff::run(args, project),
        Command::History(command) => history::run(command, project),
        Command::Bisect(args) => bisect::run(args, project),
        Command::Profile(args) => profile::run(args, project),
        Command::Snapshot(args) => snapshot::run(args, project),
        Command::Dump(args) => live::dump(args),
        Command::Top(args) => live::top(args),
        Command::Record(args) => live::record(args),
        Command::Trace(args) => trace::run(args),
        Command::Lazy(args) => lazy::run(args, project),
        Command::Init => init(&project.cwd),
    }
}

/// `coldstart init`: a commented starter config in `dir`, never over an
/// existing one.
fn init(dir: &Path) -> Result<ExitCode> {
    let path = dir.join(settings::CONFIG_FILE);
    if path.exists() {
        bail!(
            "{} exists already; edit it, or remove it to start again",
            path.display()
        );
    }
    std::fs::write(&path, settings::STARTER)
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
