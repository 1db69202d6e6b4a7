//! `cargo xtask`: coldstart's command line.
//!
//! Owns the CLI (clap), the `coldstart.toml` config and the orchestration of
//! runs: it wires `spawn`, `importguard`, `phases` and `report` together and
//! is the only crate that knows about flags, files on disk and exit codes.
//! It deliberately holds no parsing, statistics or rendering logic of its
//! own; those live in the library crates, where they are tested beside the
//! code. Keep its dependency list short: it is built on every call.
//!
//! Exit codes: 0 success, 1 a check found a violation (or a comparison found
//! a regression where asked), 2 the tool could not do its job (bad input, a
//! worker that could not be checked, an I/O error).

mod config;
mod pyspy;
mod serve;
mod tasks;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "coldstart: keep Python worker start-up fast and honest",
    version
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Check that workers never import forbidden modules (torch, transformers,
    /// stanza) at start-up, and say who did when they do.
    ImportBoundary(tasks::boundary::Args),
    /// Render an importtime log, or a live command's, as a tree, top list,
    /// JSON, collapsed stacks, flame graph, speedscope or snapshot.
    Importtime(tasks::importtime::Args),
    /// Benchmark a worker's start-up and shutdown over repeated fresh trials.
    Bench(tasks::bench::Args),
    /// Compare two saved bench runs phase by phase.
    Compare(tasks::compare::Args),
    /// Benchmark the importtime parser on a large log (throughput, peak memory).
    BenchParser(tasks::bench_parser::Args),
    /// Profile a worker's start-up with py-spy while driving it over the protocol.
    Profile(tasks::profile::Args),
    /// Provision the test environment, then run fmt, clippy and the whole test suite.
    Test(tasks::test::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::ImportBoundary(args) => tasks::boundary::run(args),
        Task::Importtime(args) => tasks::importtime::run(args),
        Task::Bench(args) => tasks::bench::run(args),
        Task::Compare(args) => tasks::compare::run(args),
        Task::BenchParser(args) => tasks::bench_parser::run(args),
        Task::Profile(args) => tasks::profile::run(args),
        Task::Test(args) => tasks::test::run(args),
    };
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

/// `cargo xtask importtime big.log | head` must end quietly.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
