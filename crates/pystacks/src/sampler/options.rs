use std::time::Duration;

use crate::spy::Lines;

/// How to sample.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerOptions {
    /// Samples per second (per process).
    pub rate_hz: u32,
    /// Also sample the process's descendants (as they appear), each stack
    /// then rooted in `process PID:"command"` labels (`py-spy record
    /// --subprocesses`).
    pub subprocesses: bool,
    /// Keep samples of idle threads (py-spy's `--idle`); off by default,
    /// so a thread blocked reading its next request adds nothing.
    pub include_idle: bool,
    /// Which line a frame reports; [`Lines::Function`] by default, so a
    /// function is one frame (`py-spy record --function`).
    pub lines: Lines,
    /// Stop by itself this long after the start.
    pub deadline: Option<Duration>,
    /// How long [`Sampler::start`](crate::Sampler::start) waits for the first Python process to
    /// become readable (an interpreter still starting up, a launcher that
    /// has not yet started its Python child).
    pub attach_timeout: Duration,
    /// Pause each process (ptrace-stop every thread) while it is read, as
    /// `py-spy record` does by default, so no stack is read half-changed.
    /// Off by default (`py-spy --nonblocking`): a paused read costs the
    /// process several times the time of a plain one (see the `overhead`
    /// example), and a read of a running process without a pause only now
    /// and then fails (counted in [`Profile::errors`](crate::Profile::errors)).
    ///
    /// Children of this process are never paused, whatever this says:
    /// py-spy's pause waits on the process with `waitpid`, and when the
    /// process is a child of the reader and exits during a read, that wait
    /// collects its exit status, which the reader's own reaper (the
    /// harness's, through `spawn`) would then never see.
    pub pause: bool,
    /// Native (C/C++) frames merged under the Python ones (the `native`
    /// feature; [`Error::NativeUnavailable`](crate::Error::NativeUnavailable) without it). Unwinding needs
    /// the process stopped, so it implies [`pause`](Self::pause). The
    /// asked-for process, when it is not Python (the Rust service above
    /// its workers), is then sampled too, its native stacks unwound; with
    /// [`subprocesses`](Self::subprocesses) its stacks and each
    /// descendant's are rooted in their own `process PID:"command"` label
    /// (separate roots, not the workers under the service).
    pub native: bool,
    /// The most of the time the sampler may spend reading, e.g. `0.05`:
    /// when a round of reads takes longer than that share of the period
    /// (a large process: many threads, deep stacks, a big heap to search),
    /// the rate is lowered until it fits ([`Profile::adapted_rate_hz`](crate::Profile::adapted_rate_hz)).
    /// `None` (the default) keeps the asked rate whatever it costs.
    pub max_reading_share: Option<f64>,
}

impl Default for SamplerOptions {
    /// 100 Hz, subprocesses followed, idle threads left out, function
    /// lines, no deadline, 5 s to attach, no pausing.
    fn default() -> Self {
        SamplerOptions {
            rate_hz: 100,
            subprocesses: true,
            include_idle: false,
            lines: Lines::Function,
            deadline: None,
            attach_timeout: Duration::from_secs(5),
            pause: false,
            native: false,
            max_reading_share: None,
        }
    }
}

impl SamplerOptions {
    /// The defaults at another rate.
    pub fn at_rate(rate_hz: u32) -> Self {
        SamplerOptions {
            rate_hz,
            ..Self::default()
        }
    }
}
