//! `cargo xtask importtime LOG | - | -- CMD...`: render an `-X importtime`
//! log, or a live command's, in one of several formats.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use harness::importlog;
use importguard::firstparty;
use importguard::importtime::ImportLog;
use report::importtime::{SnapshotOptions, SnapshotTimes, View};

/// Output formats of `importtime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Indented tree with cumulative and self times and shares.
    Tree,
    /// Top modules by self and cumulative time, and top packages.
    Top,
    /// JSON tree (`name`, `self_us`, `cumulative_us`, `children`) and warnings.
    Json,
    /// Collapsed stacks (`a;b;c self_us`) for flame graph tools.
    Collapsed,
    /// Flame graph SVG (open it in a browser; click to zoom).
    Svg,
    /// speedscope JSON (open it at speedscope.app).
    Speedscope,
    /// Deterministic text for snapshot tests: no times, stdlib and
    /// third-party subtrees collapsed.
    Snapshot,
}

/// The rendering's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The log to read (`-` for stdin); omit it to run the command given after `--`.
    pub log: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Tree)]
    pub format: Format,
    /// Show only the subtrees of this package (`torch` matches `torch.nn`, not `torchvision`).
    #[arg(long, value_name = "PKG")]
    pub focus: Option<String>,
    /// Hide modules whose cumulative time is below this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0.0)]
    pub min_ms: f64,
    /// Show this many levels below each top-level module.
    #[arg(long)]
    pub depth: Option<usize>,
    /// Which interpreter's part of the log: a 0-based session number or `all`.
    #[arg(long, value_name = "N|all", default_value = "all")]
    pub session: String,
    /// Top-level names of first-party packages (comma separated), shown in
    /// full by the snapshot format [default: the project's own packages and
    /// modules in the current folder, its `src/` and the `PYTHONPATH`
    /// entries below it].
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub first_party: Vec<String>,
    /// Rows per table in the top format.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// What the snapshot format shows in full instead of one line:
    /// `startup` (the interpreter start-up block), `stdlib`, `third-party`.
    #[arg(long, value_name = "PARTS", value_delimiter = ',', value_parser = ["startup", "stdlib", "third-party"])]
    pub expand: Vec<String>,
    /// Show times in coarse buckets in the snapshot format instead of none.
    #[arg(long)]
    pub bucket_times: bool,
    /// Print every warning instead of the first 20.
    #[arg(long)]
    pub all_warnings: bool,
    /// Write the output here instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// A command to run with `PYTHONPROFILEIMPORTTIME=1`; its stderr is the log.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

const WARNINGS_SHOWN: usize = 20;

/// Renders the log.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (log, source) = read_log(&args)?;
    if !log.is_importtime() {
        eprintln!(
            "error: {source} is not an importtime log: none of its {} lines is an `import time:` header or entry; \
             produce one with `python -X importtime ...` or PYTHONPROFILEIMPORTTIME=1",
            log.line_count()
        );
        return Ok(ExitCode::from(2));
    }
    print_warnings(&log, &source, args.all_warnings);
    let view = View::new(&log, session(&args, &log)?, args.focus.as_deref())
        .with_min_ms(args.min_ms)
        .with_max_depth(args.depth);
    if let Some(pkg) = &args.focus
        && view.roots.is_empty()
    {
        bail!(
            "no module of package `{pkg}` in this log; check the name (matching is exact per dotted part)"
        );
    }
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => {
            Box::new(File::create(path).with_context(|| format!("creating {}", path.display()))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    // The renderers buffer their own output (in optimised code).
    render(&args, &log, &view, &source, &mut out).context("writing the output")?;
    out.flush().context("writing the output")?;
    Ok(ExitCode::SUCCESS)
}

/// The log and what to call it: a file, stdin, or the stderr of the
/// command after `--` (run with `PYTHONPROFILEIMPORTTIME=1`).
fn read_log(args: &Args) -> anyhow::Result<(ImportLog, String)> {
    Ok(match (&args.log, args.command.is_empty()) {
        (Some(_), false) => bail!("give either a log file or a command after `--`, not both"),
        (None, true) => bail!(
            "give a log file, `-` for stdin, or a command after `--` (for example `-- python3 -c 'import json'`)"
        ),
        (Some(path), true) if path.as_os_str() == "-" => {
            (importlog::read_stdin()?, "stdin".to_owned())
        }
        (Some(path), true) => (importlog::read_file(path)?, path.display().to_string()),
        (None, false) => {
            let ran = importlog::run_command(&args.command)?;
            if !ran.status.success() {
                eprintln!(
                    "warning: `{}` exited with {}; rendering the log it wrote",
                    args.command.join(" "),
                    ran.status
                );
            }
            (ran.log, args.command.join(" "))
        }
    })
}

/// `--session`: `None` for all, else a session the log has.
fn session(args: &Args, log: &ImportLog) -> anyhow::Result<Option<usize>> {
    let s = args.session.as_str();
    if s == "all" {
        return Ok(None);
    }
    let n: usize = s
        .parse()
        .with_context(|| format!("--session takes a number or `all`, not `{s}`"))?;
    if n >= log.sessions().len() {
        bail!(
            "session {n} does not exist: the log has {} session(s), numbered from 0",
            log.sessions().len()
        );
    }
    Ok(Some(n))
}

/// The view written in `args.format`.
fn render(
    args: &Args,
    log: &ImportLog,
    view: &View,
    source: &str,
    w: &mut dyn Write,
) -> std::io::Result<()> {
    let title = format!("importtime: {source}");
    match args.format {
        Format::Tree => report::importtime::tree_text(log, view, w),
        Format::Top => report::importtime::top_table(log, view, args.top, w),
        Format::Json => report::importtime::json_tree(log, view, w),
        Format::Collapsed => report::importtime::collapsed(log, view, w),
        Format::Svg => report::importtime::flamegraph_svg(log, view, &title, w),
        Format::Speedscope => report::importtime::speedscope(log, view, &title, w),
        Format::Snapshot => {
            let expanded = |part: &str| args.expand.iter().any(|e| e == part);
            let opts = SnapshotOptions {
                first_party: if args.first_party.is_empty() {
                    own_packages()
                } else {
                    args.first_party.clone()
                },
                collapse_startup: !expanded("startup"),
                collapse_stdlib: !expanded("stdlib"),
                collapse_third_party: !expanded("third-party"),
                times: if args.bucket_times {
                    SnapshotTimes::Bucketed
                } else {
                    SnapshotTimes::Redacted
                },
                ..SnapshotOptions::default()
            };
            report::importtime::snapshot(log, view, &opts, w)
        }
    }
}

/// The first-party top-level names of the project in the current folder,
/// by the one rule ([`importguard::firstparty`]).
fn own_packages() -> Vec<String> {
    let Ok(cwd) = std::env::current_dir() else {
        return Vec::new();
    };
    let pythonpath = std::env::var_os("PYTHONPATH");
    let dirs = firstparty::source_dirs(&cwd, pythonpath.as_deref(), &cwd);
    firstparty::top_level_names(dirs, &cwd)
}

fn print_warnings(log: &ImportLog, source: &str, all: bool) {
    let warnings = log.warnings();
    let shown = if all {
        warnings.len()
    } else {
        warnings.len().min(WARNINGS_SHOWN)
    };
    let stderr = std::io::stderr();
    let mut e = stderr.lock();
    for w in &warnings[..shown] {
        let _ = writeln!(e, "warning: {source}: {w}");
    }
    if shown < warnings.len() {
        let _ = writeln!(
            e,
            "warning: {source}: {} more warnings not shown (--all-warnings shows them; --format json lists them)",
            warnings.len() - shown
        );
    }
}
