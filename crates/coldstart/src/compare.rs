//! `coldstart compare A B`: two saved bench runs compared phase by phase.
//!
//! Each folder is a `coldstart bench` output (`summary.json` and
//! `trials.jsonl`). The samples are taken again from the records (variant A
//! of each run unless `--variant` says otherwise), and each phase gets the
//! ratio of medians B/A with an unpaired bootstrap interval and the same
//! verdict words as an interleaved run. Two runs made at different times
//! share no pairing, so this is weaker evidence than `bench --vs`: the
//! machine may have changed between them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use harness::trials::load_run;
use phases::summary::{RunSummary, compare_runs};
use timeline::Variant;

use crate::args::TextOrJson;

/// The comparison's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The baseline run's folder.
    a: PathBuf,
    /// The candidate run's folder.
    b: PathBuf,
    /// Which variant of each run to take (A, or B of a `--vs` run).
    #[arg(long, default_value = "A", value_parser = parse_variant)]
    variant: Variant,
    /// --noise-threshold, --resamples, --seed.
    #[command(flatten)]
    stats: crate::args::StatsArgs,
    /// `--format text` (a table) or `--format json` (`--json` is kept as
    /// an alias).
    #[command(flatten)]
    output: crate::args::TextOrJsonArgs,
    /// Exit 1 when B's ready or total time is slower.
    #[arg(long)]
    fail_if_slower: bool,
}

fn parse_variant(s: &str) -> Result<Variant, String> {
    match s {
        "A" | "a" => Ok(Variant::A),
        "B" | "b" => Ok(Variant::B),
        _ => Err(format!("`{s}` is not a variant: write A or B")),
    }
}

fn label(dir: &Path, s: &RunSummary, v: Variant) -> String {
    let t = s.environment.target(v);
    format!(
        "{} ({}, {}, git {})",
        dir.display(),
        t.map_or("?", |t| t.display.as_str()),
        s.environment.started_at,
        s.environment
            .tool
            .git_revision
            .as_deref()
            .map_or("unknown", |r| &r[..r.len().min(12)])
    )
}

/// Runs the comparison.
pub fn run(args: Args) -> Result<ExitCode> {
    let (a, b) = (load_run(&args.a)?, load_run(&args.b)?);
    for w in a.warnings.iter().chain(&b.warnings) {
        eprintln!("warning: {w}");
    }
    let (sa, ra, sb, rb) = (a.summary, a.records, b.summary, b.records);
    let boot = args.stats.resampling();
    let phases = compare_runs(&ra, &rb, args.variant, &boot, args.stats.noise_threshold)
        .context("could not compare the runs")?;
    if args.output.format() == TextOrJson::Json {
        let answer = answers::compare::CompareJson::new(&args.a, &args.b, args.variant, &phases);
        println!("{}", serde_json::to_string_pretty(&answer)?);
    } else {
        print!(
            "{}",
            report::bench::terminal::render_comparison(
                &label(&args.a, &sa, args.variant),
                &label(&args.b, &sb, args.variant),
                &phases
            )
        );
        println!(
            "\nunpaired: the runs were made apart, so machine drift between them is in these ratios; prefer `bench --vs` for a claim"
        );
    }
    Ok(ExitCode::from(answers::compare::exit_code(
        &phases,
        args.fail_if_slower,
    )))
}
