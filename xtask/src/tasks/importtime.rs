//! `cargo xtask importtime LOG | - | -- CMD...`: render an `-X importtime`
//! log, or a live command's, in one of several formats.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;

use anyhow::{Context, bail};
use importguard::importtime::{self, ImportLog};
use report::importtime::{SnapshotOptions, SnapshotTimes, View};

/// Output formats.
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
    /// full by the snapshot format.
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

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (log, source) = match (&args.log, args.command.is_empty()) {
        (Some(_), false) => bail!("give either a log file or a command after `--`, not both"),
        (None, true) => bail!(
            "give a log file, `-` for stdin, or a command after `--` (for example `-- python3 -c 'import json'`)"
        ),
        (Some(path), true) if path.as_os_str() == "-" => {
            let mut buf = Vec::new();
            std::io::stdin()
                .lock()
                .read_to_end(&mut buf)
                .context("reading the log from stdin")?;
            (importtime::parse_owned(buf), "stdin".to_owned())
        }
        (Some(path), true) => (read_log(path)?, path.display().to_string()),
        (None, false) => (
            importtime::parse_owned(run_command(&args.command)?),
            args.command.join(" "),
        ),
    };
    if !log.is_importtime() {
        eprintln!(
            "error: {source} is not an importtime log: none of its {} lines is an `import time:` header or entry; \
             produce one with `python -X importtime ...` or PYTHONPROFILEIMPORTTIME=1",
            log.line_count()
        );
        return Ok(ExitCode::from(2));
    }
    print_warnings(&log, &source, args.all_warnings);

    let session = match args.session.as_str() {
        "all" => None,
        s => {
            let n: usize = s
                .parse()
                .with_context(|| format!("--session takes a number or `all`, not `{s}`"))?;
            if n >= log.sessions().len() {
                bail!(
                    "session {n} does not exist: the log has {} session(s), numbered from 0",
                    log.sessions().len()
                );
            }
            Some(n)
        }
    };
    let view = View::new(&log, session, args.focus.as_deref())
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
    let w = &mut out;
    let title = format!("importtime: {source}");
    match args.format {
        Format::Tree => report::importtime::tree_text(&log, &view, w),
        Format::Top => report::importtime::top_table(&log, &view, args.top, w),
        Format::Json => report::importtime::json_tree(&log, &view, w),
        Format::Collapsed => report::importtime::collapsed(&log, &view, w),
        Format::Svg => report::importtime::flamegraph_svg(&log, &view, &title, w),
        Format::Speedscope => report::importtime::speedscope(&log, &view, &title, w),
        Format::Snapshot => {
            let opts = SnapshotOptions {
                first_party: args.first_party.clone(),
                collapse_startup: !args.expand.iter().any(|e| e == "startup"),
                collapse_stdlib: !args.expand.iter().any(|e| e == "stdlib"),
                collapse_third_party: !args.expand.iter().any(|e| e == "third-party"),
                times: if args.bucket_times {
                    SnapshotTimes::Bucketed
                } else {
                    SnapshotTimes::Redacted
                },
                ..SnapshotOptions::default()
            };
            report::importtime::snapshot(&log, &view, &opts, w)
        }
    }
    .context("writing the output")?;
    w.flush().context("writing the output")?;
    Ok(ExitCode::SUCCESS)
}

/// Read and parse a log file: mapped into memory when it is a regular,
/// non-empty file (no copy, no allocation for the bytes), read otherwise.
fn read_log(path: &Path) -> anyhow::Result<ImportLog> {
    let file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
    if let Some(mapped) = Mapped::new(&file) {
        return Ok(importtime::parse_shared(Arc::new(mapped)));
    }
    let mut buf = Vec::new();
    (&file)
        .read_to_end(&mut buf)
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(importtime::parse_owned(buf))
}

/// A read-only private mapping of a whole file.
struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone.
unsafe impl Send for Mapped {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Mapped {}

impl Mapped {
    fn new(file: &File) -> Option<Mapped> {
        let meta = file.metadata().ok()?;
        let len = usize::try_from(meta.len()).ok()?;
        if !meta.is_file() || len == 0 {
            return None;
        }
        // SAFETY: a fresh read-only private mapping of an open file; the
        // result is checked. (Like every tool that maps files, this assumes
        // the log is not truncated while it is being read.)
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(Mapped { ptr, len })
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: ptr..ptr+len is a live mapping for as long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped, once.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
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

/// Run `cmd` with importtime on, stdin closed, its stdout passed to our
/// stderr (so it never mixes with the rendering) and its stderr captured
/// in a temporary file; returns the captured bytes.
fn run_command(cmd: &[String]) -> anyhow::Result<Vec<u8>> {
    let mut captured =
        tempfile::tempfile().context("creating a temporary file for the command's stderr")?;
    let stdout_to_stderr = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .context("duplicating stderr")?;
    let status = Command::new(&cmd[0])
        .args(&cmd[1..])
        .env("PYTHONPROFILEIMPORTTIME", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout_to_stderr))
        .stderr(Stdio::from(
            captured.try_clone().context("sharing the temporary file")?,
        ))
        .status()
        .with_context(|| format!("running `{}`; check that the program exists", cmd.join(" ")))?;
    if !status.success() {
        eprintln!(
            "warning: `{}` exited with {status}; rendering the log it wrote",
            cmd.join(" ")
        );
    }
    captured.rewind().context("rewinding the captured stderr")?;
    let mut buf = Vec::new();
    captured
        .read_to_end(&mut buf)
        .context("reading the captured stderr")?;
    Ok(buf)
}
