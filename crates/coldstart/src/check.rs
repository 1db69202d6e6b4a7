//! `coldstart check` (alias `import-boundary`): the import-boundary check
//! of every target, printed as text or JSON; `--bench N` measures what the
//! check costs instead. Exit codes: 0 every target holds; 1 a violation; 2
//! a worker could not be checked (crash, timeout, protocol error) or the
//! tool could not do its job; 130 interrupted.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use harness::check::{self, CheckOptions};
use harness::{Interrupt, OnPress};
use report::boundary::{JsonReport, exit_code};

use crate::Project;

/// The check's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Check only this target of the config (`refworker` in the coldstart workspace without one).
    #[arg(long, value_name = "NAME")]
    target: Option<String>,
    /// Forbidden package prefixes, comma separated (replaces the target's;
    /// default torch,transformers,stanza).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    forbid: Vec<String>,
    /// Check `import PKG` alone, in a fresh interpreter (`--python`).
    #[arg(long, value_name = "PKG", conflicts_with_all = ["log", "target"])]
    module: Option<String>,
    /// The interpreter for `--module`.
    #[arg(
        long,
        value_name = "EXE",
        default_value = "python3",
        requires = "module"
    )]
    python: String,
    /// Judge a recorded importtime log (stderr of `python -X importtime`);
    /// runs nothing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["target", "block"])]
    log: Option<PathBuf>,
    /// Make forbidden imports fail with an ImportError that names the policy.
    #[arg(long)]
    block: bool,
    /// Seconds to wait for the ready line (overrides the target's).
    #[arg(long, value_name = "SECS")]
    ready_timeout: Option<f64>,
    /// Seconds to wait for each reply (overrides the target's).
    #[arg(long, value_name = "SECS")]
    request_timeout: Option<f64>,
    /// Fresh processes per target, run concurrently (overrides the target's; default 3).
    #[arg(long, value_name = "N")]
    processes: Option<usize>,
    /// Print the machine-readable report (schema in `report::boundary`).
    #[arg(long)]
    json: bool,
    /// Also print the whole importtime tree of the first process.
    #[arg(long)]
    tree: bool,
    /// Instead of reporting, benchmark the check: N interleaved rounds of
    /// the whole check of the first target against one plain lifecycle of
    /// its worker (spawn, ready, health, shutdown; no importtime, no
    /// recorder) and one instrumented lifecycle; prints medians and ratios.
    #[arg(long, value_name = "N", conflicts_with_all = ["log", "json", "tree"])]
    bench: Option<usize>,
    /// The worker command to check, with the default policy.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Runs the check.
pub fn run(args: Args, project: &Project) -> Result<ExitCode> {
    let opts = CheckOptions {
        block: args.block,
        tree: args.tree,
    };
    let reports = if let Some(log) = &args.log {
        if !args.command.is_empty() || args.module.is_some() {
            bail!("--log judges a recorded log alone: give no command and no --module");
        }
        vec![check::judge_log(
            &project.cwd.join(log),
            &args.forbid,
            args.tree,
        )?]
    } else {
        let targets = targets(&args, project)?;
        if let Some(rounds) = args.bench {
            let cost = check::bench::bench(&targets[0], opts, rounds)?;
            let mut text = String::new();
            report::boundary::render_cost(&cost, &mut text);
            print!("{text}");
            return Ok(ExitCode::SUCCESS);
        }
        // Ctrl-C kills every worker at once; the check then ends with what
        // it has, and exits 130 without a verdict.
        let interrupt = Interrupt::ctrl_c(OnPress::KillNow).unwrap_or_default();
        let mut reports = Vec::new();
        for t in &targets {
            reports.push(check::check_target(t, opts)?);
            if interrupt.is_set() {
                return Ok(ExitCode::from(130));
            }
        }
        reports
    };

    let code = exit_code(&reports);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&JsonReport::new(&reports))?
        );
    } else {
        let mut text = String::new();
        for r in &reports {
            report::boundary::render(r, &project.cwd, &mut text);
        }
        print!("{text}");
    }
    Ok(ExitCode::from(code))
}

/// The targets to check, with the command line's overrides applied.
fn targets(args: &Args, project: &Project) -> Result<Vec<harness::Target>> {
    let mut targets = match &args.module {
        Some(pkg) => {
            if !args.command.is_empty() {
                bail!("give either --module or a command after `--`, not both");
            }
            // --module runs in the caller's folder, like `python -c` would.
            vec![check::module_target(pkg, &args.python, &project.cwd)?]
        }
        None => project.targets(args.target.as_deref(), &args.command)?,
    };
    let ready = crate::secs(args.ready_timeout, "--ready-timeout")?;
    let request = crate::secs(args.request_timeout, "--request-timeout")?;
    if args.processes == Some(0) {
        bail!("--processes must be at least 1");
    }
    for t in &mut targets {
        if !args.forbid.is_empty() {
            t.forbidden = args.forbid.iter().map(|s| s.trim().to_owned()).collect();
        }
        if let Some(d) = ready {
            t.ready_timeout = d;
        }
        if let Some(d) = request {
            t.request_timeout = d;
        }
        if let Some(n) = args.processes {
            t.processes = n;
        }
    }
    Ok(targets)
}
