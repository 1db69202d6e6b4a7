//! `coldstart trace`: a parent and every Python process below it on one
//! timeline, written as a Perfetto trace and/or Chrome Trace Event JSON
//! (`--output FORMAT=PATH`, the convention of check and diff). The work is
//! `harness::tree_trace`'s, the writing the `trace` crate's.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use harness::OnPress;
use harness::live::SamplingEnd;
use harness::otlp::Receiver;
use harness::tree_trace::{Launched, TraceOptions, TreeTracer};
use report::plural;

use crate::live::ReadArgs;
use crate::outputs::Output;

/// The formats of `coldstart trace`'s files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Perfetto's protobuf trace (ui.perfetto.dev, trace_processor).
    Perfetto,
    /// Chrome's Trace Event JSON (chrome://tracing, speedscope's import).
    ChromeJson,
}

/// `coldstart trace`'s flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A running process to attach to (else the command after `--` is
    /// started and traced).
    #[arg(value_name = "PID")]
    pid: Option<u32>,
    /// The command to start and trace, after `--`; its environment gets
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (a loopback port coldstart listens on)
    /// and `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`, so its own spans
    /// land on the trace.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
    /// Stop after this many seconds (default: when every process exits,
    /// or on Ctrl-C; the files are written in every case). A command
    /// coldstart started and that still runs then is sent SIGTERM.
    #[arg(long, value_name = "SECONDS", value_parser = crate::args::parse_secs)]
    duration: Option<Duration>,
    /// Samples per second (default 100, lowered on a process too large to
    /// read that often).
    #[arg(long)]
    rate: Option<u32>,
    /// Sample idle threads too (a thread blocked in a read then shows the
    /// call it waits in).
    #[arg(long)]
    idle: bool,
    /// A file to write, `FORMAT=PATH`, repeatable: `perfetto=trace.pb`,
    /// `chrome-json=trace.json`.
    #[arg(long, value_name = "FORMAT=PATH", value_parser = crate::outputs::parse::<Format>, required = true)]
    output: Vec<Output<Format>>,
    #[command(flatten)]
    read: ReadArgs,
}

/// Runs `coldstart trace`.
pub fn run(args: Args) -> Result<ExitCode> {
    let options = TraceOptions {
        live: args.read.options(true, args.rate, args.idle),
        duration: args.duration,
    };
    let interrupt = crate::signals::interrupt(OnPress::StopOnly)?;
    let (pid, launched, spans) = started(&args)?;
    let tracer = TreeTracer::start(pid, &options, launched, spans)
        .with_context(|| format!("could not trace process {pid}"))?;
    announce(pid, &options);
    let done = tracer
        .finish(&interrupt)
        .with_context(|| format!("could not trace process {pid}"))?;
    write_files(&args.output, &done.trace)?;
    print_summary(&args.output, &done, &interrupt)?;
    Ok(ExitCode::SUCCESS)
}

/// What is traced: the PID given, or the command after `--` started with
/// the OTLP receiver's variables (and the receiver).
fn started(args: &Args) -> Result<(u32, Option<Launched>, Option<Receiver>)> {
    Ok(match (args.pid, args.command.is_empty()) {
        (Some(pid), true) => (pid, None, None),
        (None, false) => {
            if args.read.native() && !harness::live::NATIVE {
                // Said before the command starts, not after it is stopped.
                bail!("--native: {}", harness::live::NATIVE_UNAVAILABLE);
            }
            let spans = Receiver::start()?;
            let l = Launched::start(&args.command, &spans.env())?;
            (l.pid, Some(l), Some(spans))
        }
        (Some(_), false) => bail!("name a PID or a command after `--`, not both"),
        (None, true) => bail!("name a PID to attach to, or a command after `--` to start"),
    })
}

/// On stderr, once the tracer reads the tree: what is traced, how, and
/// that Ctrl-C writes the trace.
fn announce(pid: u32, options: &TraceOptions) {
    eprintln!(
        "tracing process {pid} and its subprocesses at {} Hz{}{}; Ctrl-C writes the trace and stops",
        options.live.rate_hz(),
        options
            .duration
            .map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64())),
        if options.live.native {
            " (--native: each process is stopped while it is unwound)"
        } else {
            ""
        },
    );
}

/// Each `--output` written in its format.
fn write_files(outputs: &[Output<Format>], trace: &::trace::Trace) -> Result<()> {
    crate::outputs::write_all(outputs, |f| {
        Ok(match f {
            Format::Perfetto => ::trace::perfetto::to_protobuf(trace)?,
            Format::ChromeJson => ::trace::chrome::to_json(trace)?.into_bytes(),
        })
    })
}

/// On stdout: what the trace holds, why it ended, where it went, and the
/// started command's end with the spans received.
fn print_summary(
    outputs: &[Output<Format>],
    done: &harness::tree_trace::TreeTrace,
    interrupt: &harness::Interrupt,
) -> Result<()> {
    let why = match done.ended {
        SamplingEnd::Deadline => "the duration passed".to_owned(),
        SamplingEnd::Exited => "the processes exited".to_owned(),
        SamplingEnd::Stopped => format!("stopped by {}", crate::signals::signal_name(interrupt)),
        _ => "stopped".to_owned(),
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", traced_line(outputs, done, &why))?;
    if let Some(line) = sampled_line(&done.profile) {
        writeln!(stdout, "{line}")?;
    }
    if let Some(status) = &done.exit {
        writeln!(
            stdout,
            "the command ended: {status}; {}",
            spans_clause(done)
        )?;
    }
    Ok(())
}

/// `traced N processes, N threads, N slices, N proven waits on a worker
/// over S s (WHY): FILES`.
fn traced_line(
    outputs: &[Output<Format>],
    done: &harness::tree_trace::TreeTrace,
    why: &str,
) -> String {
    let t = &done.trace;
    let processes = t.processes.len();
    let threads = t.processes.iter().map(|p| p.threads.len()).sum::<usize>() - done.span_tracks;
    let slices = t
        .processes
        .iter()
        .flat_map(|p| &p.threads)
        .map(|th| th.slices.len())
        .sum::<usize>();
    format!(
        "traced {processes} process{}, {threads} thread{}, {slices} slice{}, {} proven wait{} on a worker over {:.1} s ({why}): {}",
        plural(processes, "es"),
        plural(threads, "s"),
        plural(slices, "s"),
        done.waits,
        plural(done.waits, "s"),
        done.profile.cost.wall_ns() as f64 / 1e9,
        outputs
            .iter()
            .map(|o| o.path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// What was read, not what was asked: a native read of a large process
/// takes long, and the rate is lowered to keep reading under its share.
/// None when no time passed.
fn sampled_line(p: &harness::live::Profile) -> Option<String> {
    let secs = p.cost.wall_ns() as f64 / 1e9;
    (secs > 0.0).then(|| {
        let achieved = p.ticks as f64 / secs;
        format!(
            "sampled {} rounds, {achieved:.0} a second (asked {} Hz{}), {} late",
            p.ticks,
            p.rate_hz,
            p.adapted_rate_hz
                .filter(|&r| r < f64::from(p.rate_hz) - 0.5)
                .map_or(String::new(), |r| format!(
                    ", lowered to {r:.0} Hz at times so reading stays under its share"
                )),
            p.late_ticks
        )
    })
}

/// The spans the started command exported over OTLP, and how many flow to
/// a worker.
fn spans_clause(done: &harness::tree_trace::TreeTrace) -> String {
    match (done.spans, done.span_requests) {
        (_, 0) => "no OTLP export request arrived".to_owned(),
        (n, r) => format!(
            "{n} span{} received over OTLP in {r} export request{}, drawn on {} track{}{}",
            plural(n, "s"),
            plural(r, "s"),
            done.span_tracks,
            plural(done.span_tracks, "s"),
            match done.span_flows {
                0 => String::new(),
                1 => "; 1 of them flows to the worker its thread was proven waiting on".to_owned(),
                f => format!("; {f} of them flow to the worker their thread was proven waiting on"),
            }
        ),
    }
}
