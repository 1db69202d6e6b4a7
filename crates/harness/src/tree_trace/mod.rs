//! `coldstart trace`: the whole process tree on one timeline. A parent
//! (any language) and every Python process below it sampled on one clock
//! (`pystacks`'s sampler: the parent natively with
//! [`LiveOptions::native`], each Python descendant's Python frames), the
//! processes watched beside it a few times a tenth of a second (their CPU
//! and RSS, the parent's thread names, and the parent's waits on a worker
//! that `/proc` proves: [`pystacks::proven_waits`]), all of it turned into
//! a [`::trace::Trace`] that the `trace` crate writes.
//!
//! A wait is drawn only where it was proven: a parent thread blocked
//! reading a pipe whose write end a worker holds gets a slice `waiting on
//! worker PID` and a flow to what that worker was doing; a thread blocked
//! on anything else (a socket, a futex, a pipe of no worker) gets nothing.
//! A span the command exports over OTLP that says its thread
//! (`thread.name`, naming one thread of its process) flows to the worker
//! that thread was proven waiting on while the span was open: the request
//! drawn to the worker it waited for. A span whose thread is parked in
//! `epoll_wait` (a tokio task awaiting a reply) proves nothing, and gets
//! no flow.
//!
//! The rooms: `launch` (the command and its process group), `watch` (what
//! is read beside the sampler), `build` (the trace assembled), `waits` (proven
//! waits as slices and flows), `spans` (OTLP spans on their tracks).

use std::process::ExitStatus;
use std::time::Duration;

use ::trace::{Slice, Trace};
use pystacks::{Profile, Sampler, SamplingEnd};

use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::live::LiveOptions;
use crate::otlp::Receiver;

mod build;
mod launch;
mod spans;
#[cfg(test)]
mod tests;
mod waits;
mod watch;

use build::build;
pub use launch::Launched;
use spans::{add_spans, span_flows};
use watch::Watch;

/// How often the processes are watched (CPU, RSS, thread names, waits).
pub const WATCH_PERIOD: Duration = Duration::from_millis(50);

/// How long the sampler waits for a first process it can read: a
/// command's workers may take a while to start.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(30);

/// The category of a proven wait's slice.
pub const WAIT_CATEGORY: &str = "wait";

/// The category of a span received over OTLP.
pub const SPAN_CATEGORY: &str = "span";

/// How to trace.
#[derive(Debug, Clone, Default)]
pub struct TraceOptions {
    /// How to read (subprocesses are always followed).
    pub live: LiveOptions,
    /// Stop after this long (else when every process exits, or at an
    /// interrupt).
    pub duration: Option<Duration>,
}

/// A finished trace.
#[derive(Debug)]
pub struct TreeTrace {
    /// The trace, ready for a writer.
    pub trace: Trace,
    /// What the sampler read.
    pub profile: Profile,
    /// Why it ended ([`SamplingEnd::Stopped`] on an interrupt).
    pub ended: SamplingEnd,
    /// The proven waits drawn.
    pub waits: usize,
    /// The spans received over OTLP and drawn.
    pub spans: usize,
    /// The OTLP export requests received (0: the exporter never sent).
    pub span_requests: usize,
    /// The tracks that hold those spans (beside the threads' own).
    pub span_tracks: usize,
    /// The flows from a span to the worker its thread was proven waiting
    /// on while it was open.
    pub span_flows: usize,
    /// The launched command's exit status, for `trace -- CMD`.
    pub exit: Option<ExitStatus>,
}

/// A trace in progress: the sampler and the watcher running.
#[derive(Debug)]
pub struct TreeTracer {
    root: u32,
    sampler: Sampler,
    watch: Watch,
    launched: Option<Launched>,
    spans: Option<Receiver>,
}

impl TreeTracer {
    /// Starts tracing `pid` (and what `launched` started, when it is that
    /// command; with the spans `spans` receives, when the command was told
    /// its endpoint); returns once a first process is read.
    pub fn start(
        pid: u32,
        options: &TraceOptions,
        launched: Option<Launched>,
        spans: Option<Receiver>,
    ) -> Result<TreeTracer> {
        let live = LiveOptions {
            subprocesses: true,
            ..options.live.clone()
        };
        let sampler_options = pystacks::SamplerOptions {
            attach_timeout: ATTACH_TIMEOUT,
            lines: pystacks::Lines::Function,
            ..live.sampler(options.duration)?
        };
        let watch = Watch::start(pid);
        let sampler = match Sampler::start(pid, sampler_options) {
            Ok(s) => s,
            Err(e) => {
                watch.stop();
                if let Some(l) = launched {
                    let _ = l.end();
                }
                return Err(Error::Stacks(e));
            }
        };
        Ok(TreeTracer {
            root: pid,
            sampler,
            watch,
            launched,
            spans,
        })
    }

    /// Traces until the duration ends, every process exits, or
    /// `interrupt` is pressed; then builds the trace, in every one of
    /// those cases. A launched command still running is ended.
    pub fn finish(self, interrupt: &Interrupt) -> Result<TreeTrace> {
        let (profile, ended) = crate::live::sample_until(self.sampler, interrupt);
        let watched = self.watch.stop();
        let exit = self.launched.map(Launched::end).transpose()?;
        let spans = self.spans.map(Receiver::stop).unwrap_or_default();
        let mut trace = build(self.root, &profile, &watched);
        let tracks = add_spans(&mut trace, self.root, &spans.spans);
        let span_flows = span_flows(&mut trace, &tracks);
        trace.check().map_err(Error::Trace)?;
        let waits = wait_slices(&trace, self.root).len();
        Ok(TreeTrace {
            trace,
            profile,
            ended,
            waits,
            spans: spans.spans.len(),
            span_requests: spans.requests,
            span_tracks: tracks.len(),
            span_flows,
            exit,
        })
    }
}

/// The slices of `trace` on the root's threads that are proven waits.
pub fn wait_slices(trace: &Trace, root: u32) -> Vec<&Slice> {
    trace
        .processes
        .iter()
        .filter(|p| p.pid == root)
        .flat_map(|p| p.threads.iter().flat_map(|t| &t.slices))
        .filter(|s| s.category == WAIT_CATEGORY)
        .collect()
}
