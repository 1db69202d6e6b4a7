//! What went wrong, in which stage, and what to do about it.

use std::fmt;
use std::io;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

pub use timeline::Stage;
use worker_proto::FrameError;

use crate::{Escalation, ExitStatus, Finished, NoiseLine};

/// What kind of failure it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The process could not be started (or the stderr file not created).
    #[error("could not start the worker: {0}")]
    SpawnFailed(#[source] io::Error),
    /// The expected line did not come in time.
    #[error("no answer within {}", fmt_duration(*after))]
    Timeout {
        /// How long the harness waited.
        after: Duration,
    },
    /// stdout ended (the worker exited or closed it) before the expected line.
    #[error("the worker closed its stdout before answering")]
    ExitedEarly,
    /// stdout ended in the middle of a line (no final `\n`).
    #[error("the worker's stdout ended in the middle of a line that starts `{prefix}`")]
    PartialLine {
        /// The start of the unfinished line, escaped for display.
        prefix: String,
    },
    /// A line that is not a protocol line: malformed JSON after `{`, not
    /// UTF-8, or longer than the cap.
    #[error(transparent)]
    Protocol(#[from] FrameError),
    /// A well-formed message, but not the one expected now.
    #[error("the worker sent `{got}`")]
    UnexpectedReply {
        /// The message that came instead, described and cut for quoting.
        got: String,
    },
    /// More noise lines on stdout than the command's bound.
    #[error("the worker wrote more than {limit} non-protocol lines on stdout")]
    TooMuchNoise {
        /// The command's bound on noise lines ([`crate::Command::max_noise_lines`]).
        limit: usize,
    },
    /// Reading from or writing to the worker's pipes failed.
    #[error("talking to the worker failed: {0}")]
    Io(#[source] io::Error),
    /// The worker acknowledged shutdown but did not exit with code 0.
    #[error("the worker did not exit with code 0 after its shutdown ack")]
    FailedExit,
    /// The worker had already ended when it was asked for something.
    #[error("the worker has already ended")]
    NotRunning,
    /// A tcp worker's ready line named no usable loopback address, or the
    /// connection to it was refused or did not open in time.
    #[error("could not connect to the worker at {to}: {cause}")]
    Connect {
        /// The address, or the ready line's words when it named none.
        to: String,
        /// What went wrong.
        #[source]
        cause: io::Error,
    },
    /// A tcp worker's connection closed (or was reset) before the expected
    /// line, or in the middle of one.
    #[error("the worker closed the connection before answering{}", partial.as_ref().map(|p| format!(", in the middle of a line that starts `{p}`")).unwrap_or_default())]
    Disconnected {
        /// The start of an unfinished line, escaped for display.
        partial: Option<String>,
    },
}

impl ErrorKind {
    /// A stable short name of the kind (`"timeout"`, `"protocol"`, ...), for
    /// records and reports.
    pub fn name(&self) -> &'static str {
        match self {
            ErrorKind::SpawnFailed(_) => "spawn_failed",
            ErrorKind::Timeout { .. } => "timeout",
            ErrorKind::ExitedEarly => "exited_early",
            ErrorKind::PartialLine { .. } => "partial_line",
            ErrorKind::Protocol(_) => "protocol",
            ErrorKind::UnexpectedReply { .. } => "unexpected_reply",
            ErrorKind::TooMuchNoise { .. } => "too_much_noise",
            ErrorKind::Io(_) => "io",
            ErrorKind::FailedExit => "failed_exit",
            ErrorKind::NotRunning => "not_running",
            ErrorKind::Connect { .. } => "connect_failed",
            ErrorKind::Disconnected { .. } => "disconnected",
        }
    }
}

/// The details of an [`Error`]; reached through `Deref` (`err.kind`,
/// `err.stage`, ...).
#[derive(Debug)]
#[non_exhaustive]
pub struct ErrorDetail {
    /// What kind of failure it was.
    pub kind: ErrorKind,
    /// The stage of the worker's life in which it failed.
    pub stage: Stage,
    /// The command as a person would type it ([`crate::Command::display`]).
    pub command: String,
    /// What the tool ran beside it, through variables of its own left out
    /// of `command` ([`crate::Command::instrument`]).
    pub instruments: Vec<String>,
    /// What the harness was waiting for.
    pub expected: String,
    /// How the worker ended, when it had ended and was reaped. Whether it
    /// ended on its own or was ended by the harness is in
    /// `finished.escalation`.
    pub status: Option<ExitStatus>,
    /// Noise lines seen on stdout up to the error.
    pub noise: Vec<NoiseLine>,
    /// The last bytes of stderr (lossy UTF-8).
    pub stderr_tail: String,
    /// The worker's pid (0 when it never started).
    pub pid: u32,
    /// Extra text: the `on_timeout` hook's output, and anything a caller adds.
    pub diagnostics: Vec<String>,
    /// The worker's end: every error after spawn ends the worker (its group
    /// is killed and reaped before the error is returned), and this is the
    /// record of that end (status, rusage, timeline, escalation).
    pub finished: Option<Box<Finished>>,
}

/// A failure of a worker's life, with everything needed to understand it.
/// Small (one box) so it travels cheaply in `Result`s.
pub struct Error(Box<ErrorDetail>);

impl Error {
    pub(crate) fn new(detail: ErrorDetail) -> Self {
        Error(Box::new(detail))
    }

    /// The details, owned.
    pub fn into_detail(self) -> ErrorDetail {
        *self.0
    }

    /// Adds a diagnostic text (shown in the message).
    pub fn add_diagnostic(&mut self, text: impl Into<String>) {
        self.0.diagnostics.push(text.into());
    }

    /// When the kernel's OOM killer ended the worker at its memory limit:
    /// that, with the limit and the peaks read.
    pub fn oom_kill(&self) -> Option<String> {
        let fin = self.0.finished.as_deref()?;
        let c = fin.confinement.as_ref().filter(|c| c.oom_killed())?;
        let limit = c
            .limits
            .memory_bytes
            .map(timeline::format_bytes)
            .unwrap_or_else(|| "?".into());
        let mut peaks = Vec::new();
        if let Some(p) = c.memory_peak_bytes {
            peaks.push(format!("the cgroup's peak {}", timeline::format_bytes(p)));
        }
        if let Some(r) = &fin.rusage {
            peaks.push(format!(
                "the worker's peak RSS {}",
                timeline::format_bytes(r.max_rss_bytes)
            ));
        }
        Some(format!(
            "OOM-killed: the kernel's OOM killer ended the worker at its memory limit of {limit}{}",
            if peaks.is_empty() {
                String::new()
            } else {
                format!(" ({})", peaks.join(", "))
            }
        ))
    }

    fn hint(&self) -> String {
        let d = &self.0;
        if self.oom_kill().is_some() {
            return "the worker needs more memory than its limit at this stage: raise the memory limit above the peak shown, or defer what it loads (`coldstart lazy` finds imports to defer)".into();
        }
        match (&d.kind, &d.stage) {
            (ErrorKind::SpawnFailed(e), _)
                if e
                    .get_ref()
                    .is_some_and(|inner| inner.is::<crate::cgroup::CgroupError>()) =>
            {
                "the worker's limits need a writable cgroup (see above), or run without them".into()
            }
            (ErrorKind::SpawnFailed(e), _)
                if e
                    .get_ref()
                    .is_some_and(|inner| inner.is::<crate::affinity::AffinityError>()) =>
            {
                "start the worker on CPUs this process may use (`taskset -pc $$` lists them), or without a CPU set".into()
            }
            (ErrorKind::SpawnFailed(_), _) => {
                "check that the program exists and is executable, that the working directory exists, and that the stderr file's folder is writable".into()
            }
            // The stream the ready line is awaited on is the transport's:
            // stdout over stdio, stderr over TCP.
            (ErrorKind::Timeout { .. }, Stage::Startup) => format!(
                "the worker did not write its ready line in time: read its stderr above; if it is only slow, raise the ready timeout; make sure it prints {} and flushes it",
                d.expected
            ),
            (ErrorKind::Timeout { .. }, Stage::Request { op, .. }) => format!(
                "the worker did not answer `{op}` in time: read its stderr and diagnostics above; if it is only slow, raise the request timeout"
            ),
            (ErrorKind::Timeout { .. }, Stage::Shutdown) => {
                "the worker did not acknowledge {\"op\": \"shutdown\"}: make it answer the shutdown op, then exit 0".into()
            }
            (ErrorKind::Timeout { .. }, _) => {
                "the worker acknowledged shutdown but did not exit: make it leave promptly after the ack (stop threads, close resources)".into()
            }
            // Exit 0 at start-up, nothing else on stdout: a script that
            // ran and ended, not a worker that went wrong.
            (ErrorKind::ExitedEarly, Stage::Startup)
                if d.status == Some(ExitStatus::Code(0)) && d.noise.is_empty() =>
            {
                format!(
                    "the command ran to its end (exit code 0) without a ready line: it looks like a script, not a worker; give a command that starts a worker, which prints {} and then answers requests until shutdown",
                    d.expected
                )
            }
            (ErrorKind::ExitedEarly | ErrorKind::PartialLine { .. }, _) => {
                "the worker ended before answering: read its stderr above for the cause; every protocol line must end with a newline and be flushed".into()
            }
            (ErrorKind::Protocol(_), _) => {
                "fix the worker so stdout carries only protocol lines (one UTF-8 JSON object per line, at most 1 MiB); send logs to stderr".into()
            }
            (ErrorKind::UnexpectedReply { .. }, _) => format!(
                "the worker must answer with {}; check that it answers requests in order, one reply each",
                d.expected
            ),
            (ErrorKind::TooMuchNoise { .. }, _) => {
                "send prints and logs to stderr (print(..., file=sys.stderr), logging to stderr), or raise the noise bound".into()
            }
            (ErrorKind::Io(_), _) => {
                "the pipes to the worker broke: read its stderr above".into()
            }
            (ErrorKind::FailedExit, _) => {
                "the worker must exit with code 0 after acknowledging shutdown: read its stderr above".into()
            }
            (ErrorKind::NotRunning, _) => "spawn a new worker".into(),
            (ErrorKind::Connect { .. }, _) => {
                "the worker's ready line on stderr must name the loopback host and port it listens on ({\"host\": \"127.0.0.1\", \"port\": P}), and it must listen before it prints the line: read its stderr above".into()
            }
            (ErrorKind::Disconnected { .. }, _) => {
                "the worker closed its connection: read its stderr above for the cause; it must answer every request with one whole line on the connection and keep it open until shutdown".into()
            }
        }
    }
}

impl Deref for Error {
    type Target = ErrorDetail;
    fn deref(&self) -> &ErrorDetail {
        &self.0
    }
}

impl DerefMut for Error {
    fn deref_mut(&mut self) -> &mut ErrorDetail {
        &mut self.0
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// How many lines of stderr and noise the message shows at most.
const SHOWN_STDERR_LINES: usize = 30;
const SHOWN_NOISE_LINES: usize = 10;
const SHOWN_LINE_CHARS: usize = 300;

fn clip(line: &str) -> String {
    if line.chars().count() <= SHOWN_LINE_CHARS {
        line.to_owned()
    } else {
        let mut s: String = line.chars().take(SHOWN_LINE_CHARS).collect();
        s.push('…');
        s
    }
}

fn fmt_duration(d: Duration) -> String {
    if d.as_secs() >= 1 && d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else if d.as_millis() >= 1 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{d:?}")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.0;
        match self.oom_kill() {
            Some(oom) => writeln!(f, "worker failed at {}: {oom}", d.stage)?,
            None => writeln!(f, "worker failed at {}: {}", d.stage, d.kind)?,
        }
        writeln!(f, "  expected: {}", d.expected)?;
        writeln!(f, "  command: {}", d.command)?;
        if !d.instruments.is_empty() {
            writeln!(
                f,
                "  run under (the tool's own environment, not shown above): {}",
                d.instruments.join(", ")
            )?;
        }
        if d.pid != 0 {
            let how = match (&d.status, d.finished.as_deref().map(|x| x.escalation)) {
                (Some(s), _) if self.oom_kill().is_some() => {
                    format!("{s} from the kernel's OOM killer")
                }
                (Some(s), Some(Escalation::None) | None) => format!("ended on its own, {s}"),
                (Some(s), Some(Escalation::Term)) => {
                    format!("ended after the harness sent SIGTERM to its group, {s}")
                }
                (Some(s), Some(Escalation::Kill)) => {
                    format!("still running, so the harness killed its group, {s}")
                }
                (None, _) => "no exit status".to_owned(),
            };
            writeln!(f, "  pid: {} ({how})", d.pid)?;
        }
        if let Some(c) = d.finished.as_deref().and_then(|x| x.confinement.as_ref()) {
            writeln!(f, "  limits: {} ({})", c.limits, c.version.name())?;
        }
        if !d.noise.is_empty() {
            let skip = d.noise.len().saturating_sub(SHOWN_NOISE_LINES);
            writeln!(
                f,
                "  stdout noise: {} line(s){}",
                d.noise.len(),
                if skip > 0 { ", the last ones:" } else { ":" }
            )?;
            for n in &d.noise[skip..] {
                writeln!(f, "    | {}", clip(&n.text))?;
            }
        }
        let tail = d.stderr_tail.trim_end();
        if tail.is_empty() {
            writeln!(f, "  stderr: (empty)")?;
        } else {
            let lines: Vec<&str> = tail.lines().collect();
            let skip = lines.len().saturating_sub(SHOWN_STDERR_LINES);
            writeln!(
                f,
                "  stderr{}:",
                if skip > 0 { ", the last lines" } else { "" }
            )?;
            for l in &lines[skip..] {
                writeln!(f, "    | {}", clip(l))?;
            }
        }
        for diag in &d.diagnostics {
            writeln!(f, "  diagnostics:")?;
            for l in diag.trim_end().lines() {
                writeln!(f, "    | {l}")?;
            }
        }
        write!(f, "  what to do: {}", self.hint())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0.kind {
            ErrorKind::SpawnFailed(e) | ErrorKind::Io(e) => Some(e),
            ErrorKind::Connect { cause, .. } => Some(cause),
            ErrorKind::Protocol(e) => Some(e),
            _ => None,
        }
    }
}
