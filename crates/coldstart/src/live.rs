//! `coldstart dump`, `top` and `record`: the Python stacks of processes
//! coldstart did not start (a hung worker, the Rust service above the
//! workers), read from outside through `harness::live`, rendered by
//! `report`. The processes read are never signalled nor stopped (unless
//! `--blocking`, or `--native`, which must stop them to unwind).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use harness::OnPress;
use harness::live::{self, Format, LiveOptions, RecordOptions, SamplingEnd};

/// How to read, shared by the three commands.
#[derive(Debug, clap::Args)]
pub struct ReadArgs {
    /// Native (C/C++) frames under the Python ones, and the native stacks
    /// of a process that is not Python (the Rust service above the
    /// workers), symbolized from its binary (a build with the `native`
    /// feature; the processes are stopped while they are unwound).
    #[arg(long)]
    native: bool,
    /// Pause each process while it is read, so no stack is read
    /// half-changed (py-spy's default); off: the processes run on.
    #[arg(long)]
    blocking: bool,
}

/// `coldstart dump`'s flags.
#[derive(Debug, clap::Args)]
pub struct DumpArgs {
    /// The processes: a Python process, or any process (a shell, the Rust
    /// service) whose Python descendants are dumped.
    #[arg(value_name = "PID")]
    pids: Vec<u32>,
    /// Also every process whose command line matches this regular
    /// expression (what `pgrep -f` is for).
    #[arg(long = "match", value_name = "PATTERN")]
    pattern: Option<String>,
    /// `--format text` or `--format json` (`--json` is kept as an alias).
    #[command(flatten)]
    output: crate::args::TextOrJsonArgs,
    /// Seconds a dump may take before it is abandoned.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = crate::args::parse_secs)]
    timeout: Duration,
    #[command(flatten)]
    read: ReadArgs,
}

/// `coldstart top`'s flags.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// The process (a non-Python one's Python descendants with --subprocesses).
    #[arg(value_name = "PID")]
    pid: u32,
    /// Also sample the process's descendants, as they appear.
    #[arg(long)]
    subprocesses: bool,
    /// Print this many refreshes as plain text and exit (for scripts).
    #[arg(short = 'n', value_name = "N")]
    refreshes: Option<u32>,
    /// Samples per second (default 100, lowered on a process too large to
    /// read that often).
    #[arg(long)]
    rate: Option<u32>,
    /// Count idle threads too.
    #[arg(long)]
    idle: bool,
    /// How many functions each refresh lists.
    #[arg(long, default_value_t = 20)]
    rows: usize,
    #[command(flatten)]
    read: ReadArgs,
}

/// The format of `coldstart record`'s file.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum RecordFormat {
    /// A flame graph SVG.
    Flamegraph,
    /// A speedscope JSON file (speedscope.app).
    Speedscope,
    /// Collapsed stacks, `frame;frame;frame count` (py-spy's raw format).
    Collapsed,
}

/// `coldstart record`'s flags.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The process (a non-Python one's Python descendants with --subprocesses).
    #[arg(value_name = "PID")]
    pid: u32,
    /// Stop after this many seconds (default: when the process exits or on
    /// Ctrl-C; what was sampled is written in every case).
    #[arg(long, value_name = "SECONDS", value_parser = crate::args::parse_secs)]
    duration: Option<Duration>,
    /// Samples per second (default 100, lowered on a process too large to
    /// read that often).
    #[arg(long)]
    rate: Option<u32>,
    /// Also sample the process's descendants, as they appear (forks and
    /// spawned workers), each stack rooted in its process.
    #[arg(long)]
    subprocesses: bool,
    /// Count idle threads too.
    #[arg(long)]
    idle: bool,
    /// What to write.
    #[arg(long, value_enum, default_value = "flamegraph")]
    format: RecordFormat,
    /// The file (default: coldstart-PID.svg, .speedscope.json or .txt).
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    read: ReadArgs,
}

impl ReadArgs {
    /// Whether `--native` was given.
    pub(crate) fn native(&self) -> bool {
        self.native
    }

    pub(crate) fn options(&self, subprocesses: bool, rate: Option<u32>, idle: bool) -> LiveOptions {
        LiveOptions {
            subprocesses,
            native: self.native,
            blocking: self.blocking,
            rate,
            idle,
        }
    }
}

/// Runs `coldstart dump`.
pub fn dump(args: DumpArgs) -> Result<ExitCode> {
    let pids = live::select(&args.pids, args.pattern.as_deref())?;
    let options = args.read.options(true, None, false);
    let mut dumps = Vec::new();
    let mut failed = Vec::new();
    for pid in pids {
        match live::dump(pid, &options, args.timeout) {
            Ok(d) => dumps.push(d),
            Err(e) => failed.push((pid, e)),
        }
    }
    let mut stdout = std::io::stdout().lock();
    if args.output.format() == crate::args::TextOrJson::Json {
        let doc = live::dump_answer(&dumps, &failed);
        serde_json::to_writer_pretty(&mut stdout, &doc)?;
        writeln!(stdout)?;
    } else {
        for (i, d) in dumps.iter().enumerate() {
            if i > 0 {
                writeln!(stdout)?;
            }
            write!(stdout, "{d}")?;
        }
    }
    for (pid, e) in &failed {
        // Most errors name the process themselves.
        let text = e.to_string();
        if text.starts_with(&format!("process {pid} ")) {
            eprintln!("error: {text}");
        } else {
            eprintln!("error: process {pid}: {text}");
        }
    }
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// Runs `coldstart top`.
pub fn top(args: TopArgs) -> Result<ExitCode> {
    let options = args.read.options(args.subprocesses, args.rate, args.idle);
    let interrupt = crate::signals::interrupt(OnPress::StopOnly)?;
    let sampler = live::sample(args.pid, &options)
        .map_err(|e| could_not(e, "read", args.pid, args.subprocesses))?;
    let mut stdout = std::io::stdout().lock();
    let redraw = args.refreshes.is_none() && stdout.is_terminal();
    let every = Duration::from_secs(1);
    let mut shown = 0u32;
    let mut next = Instant::now() + every;
    loop {
        wait_until(next, || interrupt.is_set() || sampler.is_finished());
        let started = next - every;
        next += every;
        if interrupt.is_set() {
            break;
        }
        let window = sampler.take_window();
        let seconds = Instant::now().duration_since(started).as_secs_f64();
        let mut frame = Vec::new();
        top_frame(&args, &options, &window, seconds, &mut frame)?;
        show(&mut stdout, &frame, redraw, shown == 0)?;
        shown += 1;
        if sampler.is_finished() {
            writeln!(stdout, "process {} exited", args.pid)?;
            break;
        }
        if args.refreshes.is_some_and(|n| shown >= n) {
            break;
        }
    }
    drop(sampler);
    Ok(ExitCode::SUCCESS)
}

/// Writes one refresh of `top`: on a terminal over the last one (home and
/// clear, a plain redraw), else after a blank line but for the first.
fn show(stdout: &mut dyn Write, frame: &[u8], redraw: bool, first: bool) -> Result<()> {
    if redraw {
        stdout.write_all(b"\x1b[H\x1b[2J")?;
    } else if !first {
        writeln!(stdout)?;
    }
    stdout.write_all(frame)?;
    stdout.flush()?;
    Ok(())
}

/// Waits out the time to `next`, looking every 50 ms whether `ended`
/// (the interrupt, the process's exit) cuts it short.
fn wait_until(next: Instant, ended: impl Fn() -> bool) {
    while Instant::now() < next && !ended() {
        std::thread::sleep(
            next.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(50)),
        );
    }
}

/// One refresh: a header, then the functions on CPU by own share.
fn top_frame(
    args: &TopArgs,
    options: &LiveOptions,
    window: &live::SampleWindow,
    seconds: f64,
    w: &mut dyn Write,
) -> Result<()> {
    writeln!(
        w,
        "coldstart top: process {}{} - {:.1} s, {} rounds, {} failed reads{}",
        args.pid,
        if options.subprocesses {
            " and its subprocesses"
        } else {
            ""
        },
        seconds,
        window.ticks,
        window.errors,
        if options.native {
            " (--native: each process stopped while it is unwound)"
        } else {
            ""
        },
    )?;
    let top = live::top_frames(&window.stacks, args.rows);
    let rows: Vec<(&str, u64, u64)> = top
        .iter()
        .map(|f| (f.frame.as_str(), f.self_samples, f.total_samples))
        .collect();
    let summary = live::sample_summary(&window.time, window.ticks, seconds, window.kernel_cpu_ns);
    report::profile::top_table(&rows, &summary, w)?;
    Ok(())
}

/// The context of an error of `top` or `record`: which process, and the
/// way to its Python descendants when they were not followed.
fn could_not(e: harness::Error, what: &str, pid: u32, subprocesses: bool) -> anyhow::Error {
    let hint = if e.is_not_python() && !subprocesses {
        " (for the Python processes below one that is not Python, such as the service above the workers, add --subprocesses; for its own native stacks, --native)"
    } else {
        ""
    };
    anyhow::Error::new(e).context(format!("could not {what} process {pid}{hint}"))
}

/// Runs `coldstart record`.
pub fn record(args: RecordArgs) -> Result<ExitCode> {
    let options = args.read.options(args.subprocesses, args.rate, args.idle);
    let (format, ext) = match args.format {
        RecordFormat::Flamegraph => (Format::Flamegraph, "svg"),
        RecordFormat::Speedscope => (Format::Speedscope, "speedscope.json"),
        RecordFormat::Collapsed => (Format::Collapsed, "txt"),
    };
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("coldstart-{}.{ext}", args.pid)));
    let duration = args.duration;
    let interrupt = crate::signals::interrupt(OnPress::StopOnly)?;
    let recorder = live::StackRecorder::start(
        args.pid,
        &RecordOptions {
            live: options.clone(),
            duration,
            format,
            out,
        },
    )
    .map_err(|e| could_not(e, "record", args.pid, args.subprocesses))?;
    // Said once the sampler reads the process: a signal from here on
    // writes what was sampled.
    announce(&args, &options, duration);
    let rec = recorder
        .finish(&interrupt)
        .with_context(|| format!("could not record process {}", args.pid))?;
    let mut stdout = std::io::stdout().lock();
    let why = match rec.ended {
        SamplingEnd::Deadline => "the duration passed".to_owned(),
        SamplingEnd::Exited => "the process exited".to_owned(),
        SamplingEnd::Stopped => format!("stopped by {}", crate::signals::signal_name(&interrupt)),
        _ => "stopped".to_owned(),
    };
    print_recording(&args, &options, &rec, &why, &mut stdout)?;
    refuse_empty(&rec, &options, args.pid)?;
    Ok(ExitCode::SUCCESS)
}

/// On stderr, once the sampler reads the process: what is recorded, how,
/// and that Ctrl-C writes what was sampled.
fn announce(args: &RecordArgs, options: &LiveOptions, duration: Option<Duration>) {
    eprintln!(
        "recording process {}{} at {} Hz{}{}; Ctrl-C writes what was sampled and stops",
        args.pid,
        if args.subprocesses {
            " and its subprocesses"
        } else {
            ""
        },
        options.rate_hz(),
        duration.map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64())),
        if options.native {
            " (--native: each process is stopped while it is unwound)"
        } else {
            ""
        },
    );
}

/// A recording without a sample is an error that says why (the file is
/// still written, empty).
fn refuse_empty(rec: &live::StackRecording, options: &LiveOptions, pid: u32) -> Result<()> {
    let p = &rec.profile;
    if p.sample_count() > 0 {
        return Ok(());
    }
    let read = what_was_read(p, pid);
    if options.idle {
        bail!(
            "no sample was taken: {read} exited before the first round; {} was written empty",
            rec.out.display()
        );
    }
    bail!(
        "no sample was taken: every thread read ({read}) was idle at each round (--idle counts idle threads) or they exited at once; {} was written empty",
        rec.out.display()
    );
}

/// What `record` says of a finished recording: the samples and the rate
/// used, the sampler's cost, the processes read natively or not at all,
/// then the top frames with the CPU time of the samples on CPU.
fn print_recording(
    args: &RecordArgs,
    options: &LiveOptions,
    rec: &live::StackRecording,
    why: &str,
    stdout: &mut dyn Write,
) -> Result<()> {
    let p = &rec.profile;
    let seconds = p.cost.wall_ns() as f64 / 1e9;
    writeln!(
        stdout,
        "recorded {} samples in {} rounds over {seconds:.1} s, {:.1} Hz used ({why}): {}",
        p.sample_count(),
        p.ticks,
        p.rounds_per_second(),
        rec.out.display()
    )?;
    writeln!(
        stdout,
        "sampler: {} rounds, {} late, {} failed reads, {:.1}% of the time spent reading",
        p.ticks,
        p.late_ticks,
        p.errors,
        p.cost.reading_share() * 100.0
    )?;
    if let Some(line) = rate_note(options, p) {
        writeln!(stdout, "{line}")?;
    }
    for line in process_notes(args, options, p) {
        writeln!(stdout, "{line}")?;
    }
    writeln!(stdout)?;
    print_top_frames(rec, seconds, stdout)
}

/// The recording's ten widest frames, with the CPU time of the samples on
/// CPU over `seconds`.
fn print_top_frames(
    rec: &live::StackRecording,
    seconds: f64,
    stdout: &mut dyn Write,
) -> Result<()> {
    let p = &rec.profile;
    let top = live::top_frames(&rec.stacks, 10);
    let rows: Vec<(&str, u64, u64)> = top
        .iter()
        .map(|f| (f.frame.as_str(), f.self_samples, f.total_samples))
        .collect();
    let summary = live::sample_summary(&p.time_where(|_| true), p.ticks, seconds, p.kernel_cpu_ns);
    report::profile::top_table(&rows, &summary, stdout)?;
    Ok(())
}

/// A note when the rate was lowered to keep reading under its share, or a
/// warning when a rate the user set made reading cost more than it.
fn rate_note(options: &LiveOptions, p: &live::Profile) -> Option<String> {
    if let Some(rate) = p.adapted_rate_hz {
        Some(format!(
            "note: the rate was lowered to {rate:.0} Hz at times so reading stays under {:.0}% of the time (a large process); --rate sets it",
            live::MAX_READING_SHARE * 100.0
        ))
    } else if options.rate.is_some() && p.cost.reading_share() > live::MAX_READING_SHARE {
        Some(format!(
            "warning: reading took {:.0}% of the time at {} Hz; a lower --rate (or none: it adapts) keeps the cost small",
            p.cost.reading_share() * 100.0,
            options.rate_hz()
        ))
    } else {
        None
    }
}

/// One line for each process read for its native stacks, and for each
/// process below the one asked for that could not be sampled, with why.
fn process_notes(args: &RecordArgs, options: &LiveOptions, p: &live::Profile) -> Vec<String> {
    let native = p.processes.iter().filter(|sp| sp.native).map(|sp| {
        let samples = p.samples.iter().filter(|s| s.pid == sp.pid).count();
        format!(
            "native: process {} ({}) sampled for its native stacks, a root of its own: {samples} samples{}",
            sp.pid,
            sp.command,
            if options.idle {
                ""
            } else {
                " of running threads (--idle also keeps where its threads wait)"
            }
        )
    });
    let unread = p
        .processes
        .iter()
        .filter(|sp| sp.python_version.is_none() && sp.pid != args.pid)
        .filter_map(|sp| {
            let why = sp.not_sampled.as_ref()?;
            Some(format!(
                "not sampled: process {} ({}): {why}",
                sp.pid, sp.command
            ))
        });
    native.chain(unread).collect()
}

/// The threads a recording read, in words: a process read natively (the
/// Rust service) has its own threads read, a Python process its Python
/// threads; a process that was neither had none read.
fn what_was_read(p: &live::Profile, pid: u32) -> String {
    let pids = |keep: &dyn Fn(&live::SampledProcess) -> bool| -> Vec<String> {
        p.processes
            .iter()
            .filter(|sp| keep(sp))
            .map(|sp| sp.pid.to_string())
            .collect()
    };
    let native = pids(&|sp| sp.native);
    let python = pids(&|sp| sp.python_version.is_some());
    let mut parts = Vec::new();
    if !native.is_empty() {
        parts.push(format!(
            "the native threads of process {}",
            native.join(", ")
        ));
    }
    match python.len() {
        0 => {}
        1 => parts.push(format!("the Python threads of process {}", python[0])),
        _ => parts.push(format!(
            "the Python threads of processes {}",
            python.join(", ")
        )),
    }
    if parts.is_empty() {
        return format!("no thread of process {pid} or below it");
    }
    parts.join(" and ")
}
