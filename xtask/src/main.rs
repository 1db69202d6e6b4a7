//! `cargo xtask`: coldstart's command line in its own workspace.
//!
//! The same subcommands as the installed `coldstart`, with the workspace
//! root as the project and the reference worker as the built-in default; plus the workspace-only tasks: `test`
//! (provision, lint, the whole suite), `bench-parser`, `probe-check` and
//! `check-cost` (the tool measured against itself), `dist` (the wheel) and
//! `modcycles` (no module cycle inside a crate), `dupnames` (no public
//! type name twice in a crate). Everything else
//! lives in the library crates (`coldstart` for the CLI, `harness` for
//! orchestration). Keep its dependency list short: it is built on every
//! call.

mod tasks;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "coldstart: keep Python worker start-up fast and honest",
    version = coldstart::VERSION
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Task {
    #[command(flatten)]
    Coldstart(coldstart::Command),
    /// Benchmark the importtime parser on a large log (throughput, peak memory).
    BenchParser(tasks::bench_parser::Args),
    /// What one native sample of a Python worker costs it, `coldstart
    /// record --native` beside `py-spy record --native` on the same process.
    BenchNative(tasks::bench_native::Args),
    /// The start-up history end to end on 40 generated commits with known
    /// changes, beside asv's and Apache Otava's change detectors.
    BenchHistory(tasks::bench_history::Args),
    /// Check bench against an independent Python probe on the same worker
    /// (alternating trials; both medians and their ratio).
    ProbeCheck(tasks::self_check::ProbeArgs),
    /// What the check costs: the whole check, the recorder alone and an
    /// instrumented lifecycle against one plain lifecycle, interleaved.
    CheckCost(tasks::self_check::CostArgs),
    /// Build the `coldstart` wheel (maturin, `bindings = "bin"`, with the pytest
    /// plugin; manylinux2014 through zig) and the man pages.
    Dist(tasks::dist::Args),
    /// Find module cycles inside the workspace's crates (exit 1 on one).
    Modcycles(tasks::modcycles::Args),
    /// Find public type names declared twice in one crate (exit 1 on one).
    Dupnames(tasks::dupnames::Args),
    /// Provision the test environment, then run fmt, clippy and the whole test suite.
    Test(tasks::test::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    coldstart::finish(match cli.task {
        Task::Coldstart(command) => settings::Project::workspace(&tasks::project_root())
            .map_err(anyhow::Error::from)
            .and_then(|project| coldstart::run(command, &project)),
        Task::BenchParser(args) => tasks::bench_parser::run(args),
        Task::BenchNative(args) => tasks::bench_native::run(args),
        Task::BenchHistory(args) => tasks::bench_history::run(args),
        Task::ProbeCheck(args) => tasks::self_check::probe_check(args),
        Task::CheckCost(args) => tasks::self_check::check_cost(args),
        Task::Dist(args) => tasks::dist::run(args),
        Task::Modcycles(args) => tasks::modcycles::run(args),
        Task::Dupnames(args) => tasks::dupnames::run(args),
        Task::Test(args) => tasks::test::run(args),
    })
}
